package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/observatory/facts"
	"github.com/quiver-quic/quiver/observatory/internal/pgtest"
	"github.com/quiver-quic/quiver/observatory/store"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func forEachBackend(t *testing.T, f func(t *testing.T, dsn string)) {
	for _, b := range []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "quiver.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	} {
		t.Run(b.name, func(t *testing.T) { f(t, b.dsn(t)) })
	}
}

func open(t *testing.T, dsn string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// sweep stores two releases of a fake implementation, as a sweep does.
func sweep(t *testing.T, st store.Store) {
	t.Helper()
	ctx := context.Background()
	// v0.41.0 first: a release swept later still goes in release order.
	for _, v := range []string{"v0.41.0", "v0.40.1"} {
		i := map[string]int{"v0.40.1": 0, "v0.41.0": 1}[v]
		started := time.Date(2026, 12, 1, i, 0, 0, 0, time.UTC)
		run, err := st.CreateRun(ctx, store.NewRun{Campaign: "sweep quic-go " + v, ToolVersion: "test", Started: started})
		if err != nil {
			t.Fatal(err)
		}
		dgram := []string{"44b0", "7fff"}[i]
		for _, r := range []struct{ scenario, verdict, facts string }{
			{"hs-v1-basic", "pass", `[{"key":"tp","value":{"max_datagram_frame_size":"` + dgram + `"}}]`},
			{"pkt-duplicate-packet", []string{"pass", "inconclusive"}[i], ""},
		} {
			ev := fmt.Sprintf(`{"scenario":%q,"title":"T","verdict":%q,"checks":[{"name":"x","events":[1,2,3]}]`, r.scenario, r.verdict)
			if r.facts != "" {
				ev += `,"facts":` + r.facts
			}
			ev += "}"
			fs, _ := facts.FromEvidence([]byte(ev))
			if _, err := st.AddResult(ctx, store.Record{RunID: run.ID, ToolVersion: "test", Scenario: r.scenario, Verdict: r.verdict,
				Sentence: r.scenario + " " + r.verdict, Target: store.Target{Name: "quic-go releases", Implementation: "quic-go", Version: v},
				Evidence: json.RawMessage(ev), Facts: fs, Time: started}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.FinishRun(ctx, run.ID, started.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestExportImport(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		src := open(t, filepath.Join(t.TempDir(), "src.db"))
		sweep(t, src)
		// v0.40.1 swept again with one more scenario: one run in the dataset.
		again, err := src.CreateRun(ctx, store.NewRun{Campaign: "sweep quic-go v0.40.1", ToolVersion: "test", Started: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range []string{"hs-v1-basic", "tls-server-key-update"} {
			if _, err := src.AddResult(ctx, store.Record{RunID: again.ID, ToolVersion: "test", Scenario: sc, Verdict: "warn", Sentence: sc + " warn",
				Target:   store.Target{Name: "quic-go releases", Implementation: "quic-go", Version: "v0.40.1"},
				Evidence: json.RawMessage(`{"scenario":"` + sc + `","verdict":"warn"}`), Time: again.Started}); err != nil {
				t.Fatal(err)
			}
		}
		if err := src.FinishRun(ctx, again.ID, again.Started.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		// A sweep stopped in the middle of v0.42.0: its run is left out.
		cut, err := src.CreateRun(ctx, store.NewRun{Campaign: "sweep quic-go v0.42.0", ToolVersion: "test", Started: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.AddResult(ctx, store.Record{RunID: cut.ID, ToolVersion: "test", Scenario: "hs-v1-basic", Verdict: "pass", Sentence: "cut short",
			Target:   store.Target{Name: "quic-go releases", Implementation: "quic-go", Version: "v0.42.0"},
			Evidence: json.RawMessage(`{"scenario":"hs-v1-basic","verdict":"pass"}`), Time: cut.Started}); err != nil {
			t.Fatal(err)
		}
		ds, err := Export(ctx, src, "quic-go releases")
		if err != nil {
			t.Fatal(err)
		}
		ds.Command, ds.Commit = "quiver track sweep --impl quic-go", "abc1234"
		var buf bytes.Buffer
		if err := Write(&buf, ds); err != nil {
			t.Fatal(err)
		}
		back, err := Read(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "events") {
			t.Error("the dataset kept packet events")
		}
		dst := open(t, dsn)
		for i, want := range []int{2, 0} {
			n, err := Import(ctx, dst, back)
			if err != nil || n != want {
				t.Fatalf("import %d: %d runs, %v; want %d", i+1, n, err, want)
			}
		}
		cells, err := dst.History(ctx, "quic-go releases", "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range cells {
			got = append(got, c.Target.Version+" "+c.Scenario+" "+c.Verdict)
		}
		want := "[v0.40.1 hs-v1-basic pass v0.40.1 pkt-duplicate-packet pass v0.40.1 tls-server-key-update warn " +
			"v0.41.0 hs-v1-basic pass v0.41.0 pkt-duplicate-packet inconclusive]"
		if fmt.Sprint(got) != want {
			t.Errorf("imported cells %v", got)
		}
		fcells, err := dst.FactCells(ctx, store.FactFilter{Key: "tp.max_datagram_frame_size"})
		if err != nil {
			t.Fatal(err)
		}
		ch := facts.DetectChanges(fcells)
		if len(ch) != 1 || ch[0].String() != "quic-go v0.41.0: tp.max_datagram_frame_size 1200 → 16383 bytes" {
			t.Errorf("fact changes after the import: %v", ch)
		}
		runs, _ := dst.ListRuns(ctx)
		if len(runs) != 2 || runs[0].Finished.IsZero() || runs[1].Campaign != "sweep quic-go v0.40.1" {
			t.Errorf("imported runs %+v", runs)
		}
	})
}

func TestDecodeRejects(t *testing.T) {
	for _, bad := range []string{
		`{`, `{"schema":"other/1","name":"x"}`, `{"schema":"quiver-dataset/1"}`,
		`{"schema":"quiver-dataset/1","name":"x","runs":[{}]}`,
		`{"schema":"quiver-dataset/1","name":"x","runs":[{"version":"v1","results":[{"scenario":"s"}]}]}`,
		// A result naming a measurement the dataset does not list.
		`{"schema":"quiver-dataset/1","name":"x","runs":[{"version":"v1","results":[{"scenario":"s","verdict":"pass","source":1}]}]}`,
		// Results of two commits in one series, not marked as mixed.
		`{"schema":"quiver-dataset/1","name":"x","commit":"aaaa","sources":[{"command":"c","commit":"bbbb"}],` +
			`"runs":[{"version":"v1","results":[{"scenario":"s","verdict":"pass"},{"scenario":"t","verdict":"pass","source":1}]}]}`,
	} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s): no error", bad)
		}
	}
	mixed := `{"schema":"quiver-dataset/1","name":"x","commit":"aaaa","sources":[{"command":"c","commit":"bbbb"}],"mixed_commits":true,` +
		`"runs":[{"version":"v1","results":[{"scenario":"s","verdict":"pass"},{"scenario":"t","verdict":"pass","source":1}]}]}`
	if ds, err := Decode([]byte(mixed)); err != nil || fmt.Sprint(ds.Commits()) != "[aaaa bbbb]" {
		t.Errorf("a dataset that says it mixes two commits: %v", err)
	}
	if _, err := Read(strings.NewReader("not gzip")); err == nil {
		t.Error("Read of a file that is not gzip: no error")
	}
}

// Merge keeps each result's measurement: a release in both datasets takes
// the newer results of the scenarios measured again and keeps the others,
// a release only in one is kept, and the order is the releases'.
func TestMerge(t *testing.T) {
	res := func(sc, v string) Result { return Result{Scenario: sc, Verdict: v} }
	old := &Dataset{Schema: Schema, Name: "x releases", Command: "sweep A", Commit: "aaaa", Runs: []Run{
		{Version: "v0.2.0", Results: []Result{res("s1", "pass"), res("s2", "fail")}},
		{Version: "v0.10.0", Results: []Result{res("s1", "pass")}},
	}}
	older := &Dataset{Schema: Schema, Name: "x releases", Command: "sweep B", Commit: "bbbb", Runs: []Run{
		{Version: "v0.1.0", Results: []Result{res("s1", "fail")}},
	}}
	first, err := Merge(older, old, true)
	if err != nil {
		t.Fatal(err)
	}
	add := &Dataset{Schema: Schema, Name: "x releases", Command: "sweep C", Commit: "cccc", Runs: []Run{
		{Version: "v0.2.0", ToolVersion: "new", Results: []Result{res("s2", "pass"), res("s3", "pass")}},
		{Version: "v0.3.0", Results: []Result{res("s3", "pass")}},
	}}
	m, err := Merge(first, add, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range m.Runs {
		for _, x := range r.Results {
			src := m.SourceOf(x)
			got = append(got, fmt.Sprintf("%s %s %s by %q at %s", r.Version, x.Scenario, x.Verdict, src.Command, src.Commit))
		}
	}
	want := []string{
		`v0.1.0 s1 fail by "sweep B" at bbbb`,
		`v0.2.0 s1 pass by "sweep A" at aaaa`,
		`v0.2.0 s2 pass by "sweep C" at cccc`,
		`v0.2.0 s3 pass by "sweep C" at cccc`,
		`v0.3.0 s3 pass by "sweep C" at cccc`,
		`v0.10.0 s1 pass by "sweep A" at aaaa`,
	}
	if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
		t.Errorf("merged:\n%s\nwant:\n%s", g, w)
	}
	if m.Command != "sweep C" || m.Commit != "cccc" || len(m.Sources) != 2 {
		t.Errorf("merged measurement %q at %q, sources %+v", m.Command, m.Commit, m.Sources)
	}
	var buf bytes.Buffer
	if err := Write(&buf, m); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(&buf); err != nil {
		t.Errorf("the merged dataset does not read back: %v", err)
	}
	// Measured again in full, an older measurement is no longer named.
	again := &Dataset{Schema: Schema, Name: "x releases", Command: "sweep D", Commit: "dddd", Runs: []Run{
		{Version: "v0.1.0", Results: []Result{res("s1", "pass")}},
	}}
	if m2, err := Merge(m, again, true); err != nil || len(m2.Sources) != 2 || m2.SourceOf(m2.Runs[1].Results[0]).Commit != "aaaa" {
		t.Errorf("after measuring v0.1.0 again: sources %+v, %v", m2.Sources, err)
	}
	if !m.MixedCommits {
		t.Error("a dataset merged from three commits does not say so")
	}
	if _, err := Merge(old, &Dataset{Name: "y releases"}, true); err == nil {
		t.Error("datasets of two targets merged")
	}
}

// TestMergeRefusesMixedCommits: one target's series measured at two
// commits of the suite is refused unless asked for, and then recorded; a
// measurement at the same commit (abbreviated or not) merges, and one that
// replaces every result of another commit leaves a series of one commit.
func TestMergeRefusesMixedCommits(t *testing.T) {
	const full = "7b3f39a8ab21f571d04dea6bcdadba2f6f19df37"
	res := func(sc, v string) Result { return Result{Scenario: sc, Verdict: v} }
	ds := func(command, commit string, runs ...Run) *Dataset {
		return &Dataset{Schema: Schema, Name: "x releases", Command: command, Commit: commit, Runs: runs}
	}
	old := ds("sweep A", "1111111", Run{Version: "v0.1.0", Results: []Result{res("s1", "pass"), res("s2", "fail")}})
	other := ds("sweep B", full, Run{Version: "v0.2.0", Results: []Result{res("s1", "pass")}})

	if _, err := Merge(old, other, false); !errors.Is(err, ErrMixedCommits) {
		t.Fatalf("two commits in one series: %v, want ErrMixedCommits", err)
	}
	// Half of v0.1.0 measured again at the new commit still mixes.
	half := ds("sweep C", full, Run{Version: "v0.1.0", Results: []Result{res("s1", "pass")}})
	if _, err := Merge(old, half, false); !errors.Is(err, ErrMixedCommits) {
		t.Errorf("a release half measured again: %v, want ErrMixedCommits", err)
	}
	// An unknown commit is not known to be the same.
	if _, err := Merge(ds("sweep ?", "", old.Runs...), ds("sweep ??", "", other.Runs...), false); !errors.Is(err, ErrMixedCommits) {
		t.Errorf("unknown commits: %v, want ErrMixedCommits", err)
	}

	m, err := Merge(old, other, true)
	if err != nil {
		t.Fatal(err)
	}
	if !m.MixedCommits || len(m.Commits()) != 2 {
		t.Errorf("merged with --mixed-commits: mixed %v, commits %q", m.MixedCommits, m.Commits())
	}

	// The same commit, abbreviated in one of the two, is one series.
	same := ds("sweep D", full[:7], Run{Version: "v0.3.0", Results: []Result{res("s1", "fail")}})
	one, err := Merge(other, same, false)
	if err != nil {
		t.Fatalf("one commit, abbreviated once: %v", err)
	}
	if one.MixedCommits || len(one.Commits()) != 1 || one.Commits()[0] != full {
		t.Errorf("one commit: mixed %v, commits %q", one.MixedCommits, one.Commits())
	}

	// Every result of the old commit measured again: one commit again.
	all := ds("sweep E", full, Run{Version: "v0.1.0", Results: []Result{res("s1", "pass"), res("s2", "pass")}})
	again, err := Merge(m, all, false)
	if err != nil {
		t.Fatalf("everything measured again at one commit: %v", err)
	}
	if again.MixedCommits || len(again.Commits()) != 1 || len(again.Sources) != 1 {
		t.Errorf("measured again: mixed %v, commits %q, sources %+v", again.MixedCommits, again.Commits(), again.Sources)
	}
}

// TestEmbedded: the repository's datasets read, and the quic-go one holds
// the sweep the docs describe.
func TestEmbedded(t *testing.T) {
	dss, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ds := range dss {
		names = append(names, fmt.Sprintf("%s:%d", ds.Name, len(ds.Runs)))
		// The newest measurement names the full commit it ran at, so
		// that it can be checked out and run again.
		if ds.Command == "" || !fullCommit.MatchString(ds.Commit) {
			t.Errorf("dataset %s: measured by %q at commit %q; want the command and a full 40-character commit", ds.Name, ds.Command, ds.Commit)
		}
		for i, src := range ds.Sources {
			if src.Command == "" || src.Commit == "" {
				t.Errorf("dataset %s: source %d does not say how it was measured: %+v", ds.Name, i+1, src)
			}
		}
	}
	for _, want := range []string{"quic-go releases:", "go-x-net releases:", "quic-go clients:", "go-x-net clients:"} {
		if !strings.Contains(fmt.Sprint(names), want) {
			t.Errorf("embedded datasets %v lack %s", names, strings.TrimSuffix(want, ":"))
		}
	}
}

var fullCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"schema":"quiver-dataset/1","name":"x","runs":[{"version":"v1",` +
		`"results":[{"scenario":"s","verdict":"pass","facts":[{"key":"k","value":1}]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ds, err := Decode(b)
		if err != nil {
			return
		}
		for _, r := range ds.Runs {
			for _, res := range r.Results {
				if res.Scenario == "" || res.Verdict == "" {
					t.Fatal("a result without scenario or verdict was accepted")
				}
			}
		}
	})
}
