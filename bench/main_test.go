package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/peers"
)

// testBins is the quiver binary built from this tree for the tests (a
// stale bin/quiver would lack the bench's hidden endpoints) and the
// peers' folder.
var testBins Bins

// TestMain builds quiver, runs the tests, removes the build and then
// applies the leak check of internal/leakcheck (leakcheck.Main would exit
// before the build is removed).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "quiver-bench-test-")
	if err != nil {
		panic(err)
	}
	testBins.Quiver = filepath.Join(dir, "quiver")
	if out, err := exec.Command("go", "build", "-o", testBins.Quiver, "github.com/quiver-quic/quiver/cmd/quiver").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "build quiver: %v\n%s", err, out)
		os.Exit(1)
	}
	if pd, err := peers.BinDir(); err == nil {
		testBins.Peers = pd
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if leaks := leakcheck.Find(5 * time.Second); len(leaks) > 0 {
			fmt.Fprintf(os.Stderr, "leakcheck: %d goroutine(s) outlived the tests:\n\n%s\n", len(leaks), strings.Join(leaks, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// needPeer skips a test whose peer binary is missing, or fails it when
// QUIVER_REQUIRE_PEERS=1 (CI).
func needPeer(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("QUIVER_REQUIRE_PEERS") == "1" {
			t.Fatalf("%s missing and QUIVER_REQUIRE_PEERS=1: run %s", path, peers.InstallCommand)
		}
		t.Skipf("%s missing: run %s", path, peers.InstallCommand)
	}
}
