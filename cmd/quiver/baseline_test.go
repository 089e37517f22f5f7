package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/transfer"
)

// startFileServer runs Quiver's file server in process on loopback and
// returns its address; it stops when the test ends.
func startFileServer(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "index.html"), []byte(strings.Repeat("quiver ", 600)), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := transfer.Listen(transfer.ServerConfig{Addr: "127.0.0.1:0", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return srv.Addr().String()
}

// TestTestBaseline is what a CI job does: record a baseline once, then
// run against it. Unchanged verdicts exit 0; an expectation the run does
// not meet exits 1 and names the scenario; a broken baseline exits 2.
func TestTestBaseline(t *testing.T) {
	addr := startFileServer(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "baseline.txt")
	const pinned = "hs-v1-basic,hs-server-tp-valid"

	out, errOut, code := quiver(t, "test", "--scenarios", pinned, "--write-baseline", base, addr)
	if code != 0 {
		t.Fatalf("--write-baseline exited %d\n%s%s", code, out, errOut)
	}
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nhs-server-tp-valid pass\nhs-v1-basic pass\n") {
		t.Fatalf("baseline written:\n%s", b)
	}

	// Unchanged: exit 0. Without --scenarios the baseline's own scenarios run.
	junit := filepath.Join(dir, "junit.xml")
	out, errOut, code = quiver(t, "test", "--baseline", base, "--junit", junit, addr)
	if code != 0 || !strings.Contains(out, "All 2 verdicts as the baseline") {
		t.Fatalf("unchanged verdicts exited %d\n%s%s", code, out, errOut)
	}
	if x, err := os.ReadFile(junit); err != nil || !strings.Contains(string(x), "hs-v1-basic") {
		t.Errorf("JUnit report: %v\n%s", err, x)
	}

	// A changed verdict: the baseline now expects hs-v1-basic to fail.
	edited := strings.Replace(string(b), "hs-v1-basic pass", "hs-v1-basic fail", 1)
	if err := os.WriteFile(base, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = quiver(t, "test", "--baseline", base, addr)
	if code != 1 || !strings.Contains(out, "hs-v1-basic: expected fail, got pass") || strings.Contains(out, "hs-server-tp-valid:") {
		t.Fatalf("a changed verdict exited %d (want 1, naming hs-v1-basic only)\n%s%s", code, out, errOut)
	}

	// A baseline that does not parse is the user's to fix: exit 2, before any run.
	if err := os.WriteFile(base, []byte("hs-v1-basic passed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code = quiver(t, "test", "--baseline", base, addr); code != 2 || !strings.Contains(errOut, `unknown verdict "passed"`) {
		t.Fatalf("a bad baseline exited %d, want 2\n%s%s", code, out, errOut)
	}
	if out, errOut, code = quiver(t, "test", "--baseline", filepath.Join(dir, "missing.txt"), addr); code != 2 {
		t.Fatalf("a missing baseline exited %d, want 2\n%s%s", code, out, errOut)
	}
}

// TestTestUnreachable: a server that is not up is not a pass. Every
// verdict would be inconclusive, which exits 0 without a baseline; the
// run says so and exits 2 instead, after writing its reports.
func TestTestUnreachable(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close() // nothing listens there now
	report := filepath.Join(t.TempDir(), "r.json")
	out, errOut, code := quiver(t, "test", "--scenarios", "hs-v1-basic", "--json", report, addr)
	if code != 2 || !strings.Contains(errOut, "answered no discovery handshake") {
		t.Fatalf("exit %d, want 2 with the reason\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(report); err != nil {
		t.Errorf("no report left behind: %v", err)
	}
}
