package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/bench"
	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/store"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// hostile is what a malicious target puts in its CONNECTION_CLOSE reason
// phrase; the suite quotes it in its sentences.
const hostile = `<script>document.title="pwned"</script><img src=x onerror=alert(1)>`

// fixture is a store with two runs over two targets, one of them hostile,
// and an artifacts folder with one real artifact, one that climbs out and
// one symbolic link that leads out.
type fixture struct {
	st        store.Store
	artifacts string
	secret    string
	hostileID int64   // the result whose reason holds the markup
	traversal int64   // the result whose artifacts try to leave the folder
	benchIDs  []int64 // benchmark runs, oldest first
}

// addBenchRuns records two benchmark runs made as quiver bench makes
// them: a goodput run, then a sweep whose configuration name carries
// markup.
func (f *fixture) addBenchRuns(t *testing.T) {
	t.Helper()
	mk := func(kind, cfg string, started time.Time, pairs map[string][3]float64) []byte {
		res := bench.Result{Kind: kind, Command: "quiver bench " + kind + " --runs 3 --values '" + cfg + "'", Started: started,
			Host: bench.HostInfo{CPU: "Test CPU", CPUs: 2, Kernel: "6.18", GoVersion: "go1.26.8"}}
		res.Options.Configs = []bench.Config{{Name: cfg}}
		for _, name := range []string{"quiver", "quic-go", "tcp"} {
			v, ok := pairs[name]
			if !ok {
				continue
			}
			res.Summaries = append(res.Summaries, bench.Summary{Config: cfg, Pair: bench.Pair{Server: name, Client: name},
				Rate: bench.Stat{N: 3, Median: v[0], Min: v[1], Max: v[2]}, ServerCPU: bench.Stat{N: 3, Median: 3}, ClientCPU: bench.Stat{N: 3, Median: 4}})
		}
		// The ratios summarize computes, against the baselines present.
		for i := range res.Summaries {
			for _, base := range res.Summaries {
				if base.Pair.Server == "quic-go" || base.Pair.Server == "tcp" {
					if res.Summaries[i].Ratios == nil {
						res.Summaries[i].Ratios = map[string]float64{}
					}
					res.Summaries[i].Ratios[base.Pair.String()] = res.Summaries[i].Rate.Median / base.Rate.Median
				}
			}
		}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, doc := range [][]byte{
		mk("goodput", "default", time.Date(2026, 11, 30, 2, 40, 0, 0, time.UTC), map[string][3]float64{"quiver": {1786, 1504, 1881}, "quic-go": {1043, 987, 1157}, "tcp": {3717, 3215, 3842}}),
		mk("sweep", "gso="+hostile, time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), map[string][3]float64{"quiver": {1602, 1500, 1700}, "quic-go": {1017, 990, 1030}}),
	} {
		rec, err := observatory.BenchRecord(doc, "test")
		if err != nil {
			t.Fatal(err)
		}
		id, err := f.st.AddBenchRun(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		f.benchIDs = append(f.benchIDs, id)
	}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, artifacts: filepath.Join(dir, "artifacts"), secret: filepath.Join(dir, "secret.txt")}
	if err := os.MkdirAll(filepath.Join(f.artifacts, "run-1", "evil"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(f.secret, []byte("SECRET"), 0o644)
	os.WriteFile(filepath.Join(f.artifacts, "run-1", "evil", "keys.log"), []byte("CLIENT_RANDOM 00 11\n"), 0o644)
	if err := os.Symlink(f.secret, filepath.Join(f.artifacts, "run-1", "evil", "link.qlog")); err != nil {
		t.Fatal(err)
	}

	add := func(run int64, target, version, scenario string, v conformance.Verdict, sentence string, arts []store.Artifact) int64 {
		res := conformance.Result{
			Scenario: scenario, Title: "Title of " + scenario, Family: "A", Verdict: v, Sentence: sentence,
			Checks: []conformance.CheckResult{{
				Name: "close-reason", Verdict: v, Sentence: sentence,
				Requirement: &conformance.Requirement{Doc: "RFC 9000", Section: "10.2", Keyword: conformance.Must, Quote: "quoted text"},
				Events: []conformance.PacketEvent{{Direction: "received", PacketType: "1RTT", Number: 7, Size: 60,
					Frames: []string{"CONNECTION_CLOSE reason=" + hostile}}},
			}},
			Facts: []conformance.Fact{conformance.NewFact("close.reason", hostile)},
		}
		rec, err := observatory.RecordOf(run, "test", conformance.Target{Name: target, Address: "127.0.0.1:4433", Implementation: "impl", Version: version}, res, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		rec.Artifacts = arts
		id, err := st.AddResult(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	for i, version := range []string{"v1", "v2"} {
		run, err := st.CreateRun(ctx, store.NewRun{Campaign: "fixture", ToolVersion: "test", Started: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		v := conformance.Unsupported
		if i == 1 {
			v = conformance.Pass
		}
		add(run.ID, "good", version, "ack-frequency", v, "ACK_FREQUENCY is "+string(v), nil)
		add(run.ID, "good", version, "hs-basic", conformance.Pass, "The handshake completed.", nil)
		if i == 0 {
			f.hostileID = add(run.ID, hostile, version, "hs-basic", conformance.Fail, "The server closed with reason "+hostile,
				[]store.Artifact{{Kind: "keylog", Path: "run-1/evil/keys.log"}})
			f.traversal = add(run.ID, "traversal", version, "hs-basic", conformance.Fail, "x",
				[]store.Artifact{{Kind: "qlog", Path: "../secret.txt"}, {Kind: "qlog", Path: f.secret}, {Kind: "qlog", Path: "run-1/evil/link.qlog"}, {Kind: "keylog", Path: "run-1/evil"}})
		}
	}
	f.addBenchRuns(t)
	return f
}

func newServer(t *testing.T, f *fixture) *httptest.Server {
	t.Helper()
	app, err := New(f.st, f.artifacts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	app.RegisterOnMux(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestPagesRenderAndEscape(t *testing.T) {
	f := newFixture(t)
	srv := newServer(t, f)
	defer http.DefaultClient.CloseIdleConnections()
	pages := map[string][]string{
		"/targets":                         {"good", "127.0.0.1:4433"},
		"/target?name=good":                {"Target good", "<svg", "polyline", "run 1", "v2"},
		"/adoption":                        {"Feature adoption", "heatmap", "impl", "v1", "v2", "of 3 targets"},
		"/runs":                            {"fixture", `name="a"`},
		"/runs/1":                          {"Run 1", "hs-basic"},
		"/diff?a=1&b=2":                    {"ack-frequency", "unsupported", "pass"},
		"/changes":                         {"arrived", "good"},
		"/results/" + itoa(f.hostileID):    {"RFC 9000 §10.2", "quoted text", "close.reason", "CONNECTION_CLOSE", "keylog: run-1/evil/keys.log"},
		"/target?name=" + urlq(hostile):    {"Target "},
		"/changes?target=" + urlq(hostile): {"Changes"},
		"/static/style.css":                {".v-pass", ".bench-panel"},
		// The benchmark panel beside the grid: the newest run first, its
		// best row, its command and its chart.
		"/": {"Targets × scenarios", "ack-frequency", "The handshake completed.", "arrived",
			`id="benchmarks"`, "Benchmarks", "sweep-gso", "goodput", "tcp&lt;-tcp: 3717 goodput Mbit/s", "quiver bench sweep --runs 3", `class="chart bars"`, "1602", "/bench/" + itoa(f.benchIDs[1])},
		"/bench":                        {"Benchmark runs", "sweep-gso", "goodput", "quiver bench goodput --runs 3"},
		"/bench/" + itoa(f.benchIDs[0]): {"Benchmark run", "Test CPU, 2 CPUs", "1786.0", "1504.0–1881.0", "1.71× quic-go&lt;-quic-go", "0.48× tcp&lt;-tcp", "7.00 CPU s/GB", "<svg", "Whole result"},
		"/api/bench":                    {`"kind": "sweep-gso"`, `"median": 1786`},
	}
	for path, wants := range pages {
		resp, body := get(t, srv.URL+path)
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %s\n%s", path, resp.Status, body)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: page lacks %q", path, w)
			}
		}
		// The hostile markup must never appear raw, only escaped.
		if strings.Contains(body, "<script>") || strings.Contains(body, "<img src=x") {
			t.Errorf("GET %s: target markup reached the page unescaped", path)
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") &&
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("GET %s: no script-forbidding Content-Security-Policy", path)
		}
	}
	_, body := get(t, srv.URL+"/results/"+itoa(f.hostileID))
	if !strings.Contains(body, "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;") {
		t.Errorf("result page does not show the close reason as escaped text")
	}

	for path, code := range map[string]int{
		"/results/999":      404,
		"/results/x":        400,
		"/runs/999":         404,
		"/target?name=nope": 404,
		"/target":           400,
		"/diff?a=1":         400,
		"/no-such-page":     404,
		"/bench/999":        404,
		"/bench/x":          400,
	} {
		if resp, _ := get(t, srv.URL+path); resp.StatusCode != code {
			t.Errorf("GET %s: %s, want %d", path, resp.Status, code)
		}
	}
}

// TestBenchPanelEmpty: a store with conformance results but no
// benchmark runs says how to record one.
func TestBenchPanelEmpty(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := newServer(t, &fixture{st: st, artifacts: t.TempDir()})
	defer http.DefaultClient.CloseIdleConnections()
	_, body := get(t, srv.URL+"/")
	if !strings.Contains(body, "No benchmark runs recorded yet") || !strings.Contains(body, "quiver track import") {
		t.Errorf("empty panel lacks its hint:\n%s", body)
	}
	resp, body := get(t, srv.URL+"/api/bench")
	if resp.StatusCode != 200 || strings.TrimSpace(body) != "[]" {
		t.Errorf("/api/bench on an empty store: %s %q", resp.Status, body)
	}
}

func TestBenchChartLabels(t *testing.T) {
	b := store.BenchRun{Kind: "ackfreq", Summary: []store.BenchRow{
		{Config: "geo/1:2", Subject: "quiver<-quiver", Metric: "goodput Mbit/s", Median: 8, Min: 7, Max: 9, Runs: 2},
		{Config: "geo/1:10", Subject: "quiver<-quiver", Metric: "goodput Mbit/s", Median: 4, Min: 4, Max: 4, Runs: 2},
		{Config: "geo/1:64", Subject: "quiver<-quiver", Metric: "goodput Mbit/s", Runs: 0, Failed: 2},
	}}
	c := benchChart(&b, 400)
	// One subject: rows are named by configuration alone; widths follow
	// the medians (8 against 4); a row with no successful run has no bar.
	if len(c.Bars) != 3 || c.Bars[0].Label != "geo/1:2" || !c.Bars[2].Unmeasured {
		t.Fatalf("chart %+v", c)
	}
	if d := c.Bars[0].W - 2*c.Bars[1].W; d < -1 || d > 1 {
		t.Errorf("bar widths %d and %d, want 2:1", c.Bars[0].W, c.Bars[1].W)
	}
	if c.Bars[0].Lo >= c.Bars[0].Hi || c.Bars[0].Hi != c.Right {
		t.Errorf("whisker of the widest row %d–%d, want it to end at the right edge %d", c.Bars[0].Lo, c.Bars[0].Hi, c.Right)
	}
	b.Summary[1].Subject = "quic-go<-quic-go"
	if l := rowLabel(&b, b.Summary[0]); l != "geo/1:2 quiver<-quiver" {
		t.Errorf("label with two subjects %q", l)
	}
}

func TestAPIGrid(t *testing.T) {
	f := newFixture(t)
	srv := newServer(t, f)
	defer http.DefaultClient.CloseIdleConnections()
	resp, body := get(t, srv.URL+"/api/grid")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/grid: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	var g struct {
		Targets   []string     `json:"targets"`
		Scenarios []string     `json:"scenarios"`
		Cells     []store.Cell `json:"cells"`
	}
	if err := json.Unmarshal([]byte(body), &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Targets) != 3 || len(g.Scenarios) != 2 || len(g.Cells) != 4 {
		t.Errorf("grid: %d targets, %d scenarios, %d cells; want 3, 2, 4", len(g.Targets), len(g.Scenarios), len(g.Cells))
	}
	for _, c := range g.Cells {
		if c.Target.Name == "good" && c.Scenario == "ack-frequency" && c.Verdict != "pass" {
			t.Errorf("latest ack-frequency of good is %s, want pass (run 2)", c.Verdict)
		}
	}
}

func TestArtifactsStayInTheirFolder(t *testing.T) {
	f := newFixture(t)
	srv := newServer(t, f)
	defer http.DefaultClient.CloseIdleConnections()
	resp, body := get(t, srv.URL+"/results/"+itoa(f.hostileID)+"/artifacts/0")
	if resp.StatusCode != 200 || body != "CLIENT_RANDOM 00 11\n" {
		t.Errorf("artifact download: %s %q", resp.Status, body)
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment") || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("artifact served inline (%q, %q); it must be a download", cd, resp.Header.Get("Content-Type"))
	}
	// ../, an absolute path, a symbolic link out, a directory, and an
	// index past the row's list.
	for n := range 5 {
		resp, body := get(t, srv.URL+"/results/"+itoa(f.traversal)+"/artifacts/"+itoa(int64(n)))
		if resp.StatusCode != 404 || strings.Contains(body, "SECRET") {
			t.Errorf("artifact %d of the traversal result: %s %q, want 404", n, resp.Status, body)
		}
	}
	// Paths in the URL itself never name files.
	for _, p := range []string{"/results/1/artifacts/..%2f..%2fsecret.txt", "/results/1/artifacts/-1", "/static/../secret.txt"} {
		resp, body := get(t, srv.URL+p)
		if resp.StatusCode == 200 || strings.Contains(body, "SECRET") {
			t.Errorf("GET %s: %s", p, resp.Status)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func urlq(s string) string { return url.QueryEscape(s) }

// The adoption table puts released versions in release order, even when
// an older release was measured after a newer one.
func TestAdoptionReleaseOrder(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, version := range []string{"v0.10.0", "v0.9.1"} {
		run, err := st.CreateRun(ctx, store.NewRun{Campaign: "sweep", ToolVersion: "test", Started: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := observatory.RecordOf(run.ID, "test", conformance.Target{Name: "x releases", Address: "127.0.0.1:1", Implementation: "x", Version: version},
			conformance.Result{Scenario: "hs-basic", Verdict: conformance.Pass}, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddResult(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	srv := newServer(t, &fixture{st: st, artifacts: t.TempDir()})
	defer http.DefaultClient.CloseIdleConnections()
	_, body := get(t, srv.URL+"/adoption")
	older, newer := strings.Index(body, "v0.9.1"), strings.Index(body, "v0.10.0")
	if older < 0 || newer < 0 || older > newer {
		t.Errorf("v0.9.1 at %d, v0.10.0 at %d in the adoption page; want both, the older first", older, newer)
	}
}
