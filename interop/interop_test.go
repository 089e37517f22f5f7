package interop

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/peers"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// impl returns an installed peer, or skips the test (fails with
// QUIVER_REQUIRE_PEERS=1).
func impl(t *testing.T, name string) peers.Impl {
	t.Helper()
	im, err := peers.Find(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"server", "client"} {
		if _, err := im.Binary(role); err != nil {
			if errors.Is(err, peers.ErrUnsupported) {
				continue
			}
			if os.Getenv("QUIVER_REQUIRE_PEERS") == "1" {
				t.Fatalf("%s: %v", name, err)
			}
			t.Skipf("%s: %v", name, err)
		}
	}
	return im
}

func testCase(t *testing.T, name string) *TestCase {
	t.Helper()
	tcs, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return tcs[0]
}

func runCell(t *testing.T, server, client, test string) *CellResult {
	t.Helper()
	dir := t.TempDir()
	if d := os.Getenv("KEEPDIR"); d != "" {
		dir = d
	}
	r := &Runner{Dir: dir, Seed: 1, Probe: true}
	res := r.RunCell(context.Background(), impl(t, server), impl(t, client), testCase(t, test))
	b, _ := json.MarshalIndent(res, "", "  ")
	if res.Result != Succeeded {
		out, _ := os.ReadFile(r.Dir + "/" + res.Artifacts + "/output.txt")
		t.Logf("%s\n%s", b, out)
	}
	return res
}

func TestCellQuicGoHandshake(t *testing.T) {
	res := runCell(t, "quic-go", "quic-go", "handshake")
	if res.Result != Succeeded {
		t.Fatalf("result %s: %s", res.Result, res.Detail)
	}
}
