package interop

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/netem"
	"github.com/quiver-quic/quiver/peers"
)

// TestMatrix runs a representative subset on every push: quic-go and x/net
// against each other (handshake, transfer, retry) and quic-go against
// ngtcp2, which speaks only HTTP/3, so that its hq-interop cells must come
// out unsupported and its http3 cells succeed; and Quiver's endpoint with
// quic-go both ways on the cases that need session tickets (handshake,
// resumption, zerortt), which are short. QUIVER_INTEROP_FULL=1 runs every
// test case instead.
func TestMatrix(t *testing.T) {
	tests := "handshake,transfer,retry,http3"
	if os.Getenv("QUIVER_INTEROP_FULL") == "1" {
		tests = "all"
	}
	quiverTests := "handshake,resumption,zerortt,keyupdate,chacha20,ecn"
	if os.Getenv("QUIVER_INTEROP_FULL") == "1" {
		quiverTests = "all"
	}
	for _, run := range []struct {
		servers, clients []string
		tests            string
	}{
		{[]string{"quic-go", "go-x-net"}, []string{"quic-go", "go-x-net"}, tests},
		{[]string{"quic-go", "ngtcp2"}, []string{"ngtcp2"}, tests},
		{[]string{"ngtcp2"}, []string{"quic-go"}, tests},
		{[]string{"quiver", "quic-go"}, []string{"quiver"}, quiverTests},
		{[]string{"quiver"}, []string{"quic-go"}, quiverTests},
	} {
		tcs, err := Lookup(run.tests)
		if err != nil {
			t.Fatal(err)
		}
		var servers, clients []peers.Impl
		for _, n := range run.servers {
			servers = append(servers, impl(t, n))
		}
		for _, n := range run.clients {
			clients = append(clients, impl(t, n))
		}
		m := &Matrix{Servers: servers, Clients: clients, Tests: tcs, LogDir: t.TempDir(), Seed: 11, Version: "test"}
		res, dir, err := m.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		res.Summary(&sb)
		t.Logf("%s", sb.String())
		for ci, c := range res.Clients {
			for si, s := range res.Servers {
				for _, tc := range tcs {
					cr := res.Quiver.Cells[ci*len(res.Servers)+si][tc.Abbr]
					want := Succeeded
					if tc.Judge == nil || tc.NeedsNamespaces != "" && netem.NamespacesAvailable() != nil || !ok(servers[si], clients[ci], tc) {
						want = Unsupported
					}
					if cr == nil || cr.Result != want {
						t.Errorf("%s ← %s %s: %+v, want %s", s, c, tc.Name, cr, want)
					}
				}
			}
		}
		checkResultFile(t, dir, res)
	}
}

func ok(server, client peers.Impl, tc *TestCase) bool {
	o, _ := supported(server, client, tc)
	return o
}

// checkResultFile checks result.json against the established runner's format:
// the compatible keys, client-major indexing and a result per test.
func checkResultFile(t *testing.T, dir string, res *Result) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"servers", "clients", "log_dir", "start_time", "end_time", "quic_version", "urls", "tests", "results", "measurements", "quiver"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("result.json lacks %q", k)
		}
	}
	var results [][]struct {
		Abbr, Name string
		Result     *string
	}
	json.Unmarshal(raw["results"], &results)
	if len(results) != len(res.Servers)*len(res.Clients) {
		t.Errorf("results has %d pairs, want %d", len(results), len(res.Servers)*len(res.Clients))
	}
	for _, pair := range results {
		for _, r := range pair {
			if r.Result == nil || !slices.Contains([]string{Succeeded, FailedRes, Unsupported}, *r.Result) {
				t.Errorf("result %+v", r)
			}
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "trace_node_left.pcap") && strings.Contains(string(b), "trace_node_left.pcap") {
		t.Error("the matrix page does not link the traces")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "logs.json")); err != nil {
		t.Error(err)
	}
}

// TestMatrixPageEscapes checks that text from peers is escaped.
func TestMatrixPageEscapes(t *testing.T) {
	r := &Result{LogDir: "x", Servers: []string{"s"}, Clients: []string{"c"},
		Tests: map[string]TestDesc{"H": {Name: "handshake", Desc: "d"}}}
	bad := "<script>alert(1)</script>"
	r.Quiver.Cells = []map[string]*CellResult{{"H": {Result: FailedRes, Reason: "checks", Detail: bad,
		Paths: &CellPaths{Output: "s_c/handshake/output.txt"}}}}
	path := filepath.Join(t.TempDir(), "index.html")
	if err := writeHTML(path, r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), bad) || !strings.Contains(string(b), "&lt;script&gt;") {
		t.Errorf("peer text not escaped:\n%s", b)
	}
	if !strings.Contains(string(b), `href="s_c/handshake/output.txt"`) {
		t.Errorf("no link to the cell's log:\n%s", b)
	}
}

func TestLookup(t *testing.T) {
	tcs, err := Lookup("handshake,DC,L1")
	if err != nil || len(tcs) != 3 || tcs[1].Name != "transfer" || tcs[2].Name != "handshakeloss" {
		t.Fatalf("%v %v", tcs, err)
	}
	if _, err := Lookup("nope"); err == nil {
		t.Error("unknown test accepted")
	}
	all, _ := Lookup("all")
	seen := map[string]bool{}
	for _, tc := range all {
		if seen[tc.Abbr] {
			t.Errorf("duplicate abbreviation %s", tc.Abbr)
		}
		seen[tc.Abbr] = true
		if tc.NeedsNamespaces == "" && tc.Judge == nil {
			t.Errorf("%s has no checks", tc.Name)
		}
	}
}

func TestFilesByteExact(t *testing.T) {
	dir := t.TempDir()
	fs, err := writeFiles(filepath.Join(dir, "www"), 3, fileSpecs(3, 2, 1000, "f", false))
	if err != nil {
		t.Fatal(err)
	}
	dl := filepath.Join(dir, "dl")
	os.MkdirAll(dl, 0o755)
	if ok, d := compareDownloads(dl, fs); ok {
		t.Errorf("empty folder passes: %s", d)
	}
	for _, f := range fs {
		b, _ := os.ReadFile(filepath.Join(dir, "www", f.Name))
		os.WriteFile(filepath.Join(dl, f.Name), b, 0o644)
	}
	if ok, d := compareDownloads(dl, fs); !ok {
		t.Errorf("copies fail: %s", d)
	}
	b, _ := os.ReadFile(filepath.Join(dl, fs[0].Name))
	b[500] ^= 1
	os.WriteFile(filepath.Join(dl, fs[0].Name), b, 0o644)
	if ok, _ := compareDownloads(dl, fs); ok {
		t.Error("a flipped bit passes")
	}
	os.WriteFile(filepath.Join(dl, "extra"), nil, 0o644)
	if ok, d := compareDownloads(dl, fs); ok || !strings.Contains(d, "unexpected") {
		t.Errorf("extra file: %s", d)
	}
}
