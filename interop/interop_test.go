package interop

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/netem"
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

// needNamespaces skips a test where the namespace engine cannot run, and
// fails it instead with QUIVER_REQUIRE_PEERS=1 (CI runs as root).
func needNamespaces(t *testing.T) {
	t.Helper()
	if err := netem.NamespacesAvailable(); err != nil {
		if os.Getenv("QUIVER_REQUIRE_PEERS") == "1" {
			t.Fatalf("QUIVER_REQUIRE_PEERS=1 but %v", err)
		}
		t.Skip(err)
	}
}

// TestCellNamespaces runs a short crosstraffic cell, Quiver server ←
// quic-go client, in network namespaces: the endpoints in their own
// namespaces, the relay and a 10 Mbit/s tbf in the router, and a TCP
// Cubic flow through the same bottleneck, delayed like the QUIC flow: the
// cell succeeds, its link record names the namespaces and the kernel rate,
// and the TCP flow carried bytes through the 15 ms delay line.
func TestCellNamespaces(t *testing.T) {
	needNamespaces(t)
	server, client := impl(t, "quiver"), impl(t, "quic-go")
	tc := *testCase(t, "crosstraffic")
	tc.Files = files(1, 2*mib, "crosstraffic-2MiB")
	tc.Repetitions = 1
	r := &Runner{Dir: t.TempDir(), Seed: 3}
	res := r.RunCell(t.Context(), server, client, &tc)
	b, _ := json.MarshalIndent(res, "", "  ")
	if res.Result != Succeeded || len(res.Values) != 1 {
		t.Fatalf("result %s: %s\n%s", res.Result, res.Detail, b)
	}
	// The repetition's link record says where it ran.
	lb, err := os.ReadFile(filepath.Join(r.Dir, res.Values[0].Artifacts, "sim", "link.json"))
	if err != nil {
		t.Fatal(err)
	}
	var link LinkRecord
	if err := json.Unmarshal(lb, &link); err != nil {
		t.Fatal(err)
	}
	if link.Engine != EngineNS || len(link.Namespaces) != 3 || link.KernelRateToClient != 10_000_000 || link.ToClient.Rate != 0 {
		t.Errorf("link record: engine %q, namespaces %v, kernel rate %d, relay rate to client %d", link.Engine, link.Namespaces, link.KernelRateToClient, link.ToClient.Rate)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range link.Namespaces {
		if strings.Contains(string(out), ns) {
			t.Errorf("namespace %s left behind", ns)
		}
	}
	m := res.Values[0]
	if m.Cross == nil || m.Cross.Bytes == 0 || m.Cross.DelayMs != 15 {
		t.Fatalf("cross traffic recorded: %+v, want bytes and a 15 ms delay line", m.Cross)
	}
	// The goodputs are logged, not judged: a test does not assert a
	// measured rate (`quiver interop --tests crosstraffic` measures it).
	t.Logf("QUIC %.2f Mbit/s (data span), TCP %s %.2f Mbit/s over its whole life", m.DataSpan/1000, m.Cross.CC, m.Cross.Mbps)
}

// TestCellConnectionMigration runs connectionmigration in namespaces: the
// Quiver server offers its own address on a second port, the router takes
// what the client sends there into the relay (so it crosses the link and
// shows in both traces), and the Quiver client moves there. The quic-go
// client (v0.65.0) ignores preferred_address, RFC 9000 §9.6.1's SHOULD, so
// its cell must fail on the client's checks.
func TestCellConnectionMigration(t *testing.T) {
	needNamespaces(t)
	server := impl(t, "quiver")
	for _, x := range []struct {
		client, want, failed string
	}{
		{"quiver", Succeeded, ""},
		{"quic-go", FailedRes, "client-validated-preferred"},
	} {
		r := &Runner{Dir: t.TempDir(), Seed: 5}
		res := r.RunCell(t.Context(), server, impl(t, x.client), testCase(t, "connectionmigration"))
		b, _ := json.MarshalIndent(res, "", "  ")
		if res.Result != x.want || !strings.Contains(res.Detail, x.failed) {
			t.Errorf("quiver ← %s: %s (%s), want %s with %q\n%s", x.client, res.Result, res.Detail, x.want, x.failed, b)
			continue
		}
		if res.Scenario == nil || len(res.Scenario.Alternates) != 1 || res.Scenario.Alternates[0].Addr() != netem.NSServerAddr {
			t.Errorf("quiver ← %s: link record %+v, want one alternate on the server's address", x.client, res.Scenario)
		}
	}
}
