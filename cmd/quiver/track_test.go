package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/observatory/dataset"
	"github.com/quiver-quic/quiver/observatory/store"
)

// fakeTrackSuite stands in for the conformance suite: each target's
// verdicts come from the version in its targets file, so that two runs with
// different files show changes.
func fakeTrackSuite(t *testing.T) {
	t.Helper()
	oldRun, oldSel := suiteRun, selectScenarios
	t.Cleanup(func() { suiteRun, selectScenarios = oldRun, oldSel })
	selectScenarios = func(p []string) ([]string, error) {
		if len(p) == 1 && p[0] == "bogus" {
			return nil, os.ErrNotExist
		}
		return []string{"hs-basic", "ack-frequency"}, nil
	}
	suiteRun = func(ctx context.Context, tg conformance.Target, o conformance.Options) (*conformance.Report, error) {
		rep := &conformance.Report{Target: tg}
		for _, id := range o.Scenarios {
			v := conformance.Pass
			if id == "ack-frequency" && tg.Version == "v1" {
				v = conformance.Unsupported
			}
			res := conformance.Result{Scenario: id, Verdict: v, Sentence: tg.Name + " " + string(v)}
			if id == "hs-basic" {
				// max_datagram_frame_size 1200 at v1, 16383 after (varints).
				dgram := "44b0"
				if tg.Version != "v1" {
					dgram = "7fff"
				}
				res.Facts = []conformance.Fact{conformance.NewFact("tp", map[string]string{"max_datagram_frame_size": dgram, "max_udp_payload_size": "45c0"})}
			}
			rep.Results = append(rep.Results, res)
		}
		return rep, nil
	}
}

func quiver(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestTrackCommands(t *testing.T) {
	fakeTrackSuite(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "q.db")
	writeTargets := func(name, version string) string {
		f := filepath.Join(dir, name)
		b, _ := json.Marshal(map[string]any{"targets": []map[string]any{
			{"name": "alpha", "address": "127.0.0.1:4433", "implementation": "quic-go", "version": version},
		}})
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	v1, v2 := writeTargets("v1.json", "v1"), writeTargets("v2.json", "v2")

	if _, errs, code := quiver(t, "track", "list", "--db", db); code != 1 || !strings.Contains(errs, "run a campaign first") {
		t.Errorf("list on a missing store: exit %d, stderr %q", code, errs)
	}
	out, errs, code := quiver(t, "track", "--db", db, "run", "--artifacts", "", v1)
	if code != 0 {
		t.Fatalf("track run: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"run 1: 2 results", "ack-frequency", "unsupported", "alpha: 1 pass, 1 unsupported"} {
		if !strings.Contains(out, want) {
			t.Errorf("track run output lacks %q:\n%s", want, out)
		}
	}
	if _, _, code := quiver(t, "track", "run", "--db", db, "--artifacts", "", "--targets", v2); code != 0 {
		t.Fatalf("second track run: exit %d", code)
	}

	out, _, code = quiver(t, "track", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "v1.json") || !strings.Contains(out, "v2.json") {
		t.Errorf("track list: exit %d\n%s", code, out)
	}
	out, _, code = quiver(t, "track", "show", "--db", db, "1")
	if code != 0 || !strings.Contains(out, "alpha unsupported") {
		t.Errorf("track show 1: exit %d\n%s", code, out)
	}
	out, _, code = quiver(t, "track", "diff", "--db", db)
	if code != 0 || !strings.Contains(out, "ack-frequency") || strings.Contains(out, "hs-basic") {
		t.Errorf("track diff: exit %d\n%s", code, out)
	}
	out, _, code = quiver(t, "track", "changes", "--db", db)
	if code != 0 || !strings.Contains(out, "arrived") || !strings.Contains(out, "unsupported (v1)") ||
		!strings.Contains(out, "quic-go v2: tp.max_datagram_frame_size 1200 → 16383 bytes") {
		t.Errorf("track changes: exit %d\n%s", code, out)
	}
	out, _, code = quiver(t, "track", "facts", "--db", db, "1")
	if code != 0 || !strings.Contains(out, "tp.max_datagram_frame_size  int   1200 bytes") || !strings.Contains(out, "tp.max_udp_payload_size") {
		t.Errorf("track facts 1: exit %d\n%s", code, out)
	}
	out, _, code = quiver(t, "track", "changes", "--db", db, "--json")
	var chj struct {
		Changes     []map[string]any `json:"changes"`
		FactChanges []map[string]any `json:"fact_changes"`
	}
	err := json.Unmarshal([]byte(out), &chj)
	if ch := chj.Changes; code != 0 || err != nil || len(ch) != 1 || ch[0]["kind"] != "arrived" ||
		len(chj.FactChanges) != 1 || chj.FactChanges[0]["to"] != "16383" {
		t.Errorf("track changes --json: exit %d\n%s", code, out)
	}

	for _, bad := range [][]string{
		{"track", "frob", "--db", db},
		{"track", "run", "--db", db},
		{"track", "run", "--db", db, "--scenarios", "bogus", v1},
		{"track", "show", "--db", db, "x"},
		{"track", "diff", "--db", db, "1"},
		{"track", "sweep", "--db", db},
		{"track", "run", "--queue", "--db", db, v1},
		{"track", "sweep", "--db", db, "--impl", "msquic", "--since", "v1.0.0"},
		{"track", "sweep", "--db", db, "--impl", "quic-go"},
		{"track", "sweep", "--db", db, "--impl", "quic-go", "--since", "v0.40.0", "--versions", "v0.41.0"},
	} {
		if _, errs, code := quiver(t, bad...); code != 2 {
			t.Errorf("quiver %s: exit %d, want 2 (stderr %q)", strings.Join(bad, " "), code, errs)
		}
	}
}

// The demo end to end on Quiver's own in-process server with the real
// suite (one scenario, to stay quick): it stores the result and prints the
// grid.
func TestDemoNoWeb(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := quiver(t, "demo", "--no-web", "--impls", "quiver", "--scenarios", "hs-v1-basic",
		"--db", filepath.Join(dir, "q.db"), "--artifacts", filepath.Join(dir, "art"))
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"started quiver", "run 1: 1 results", "hs-v1-basic", "quiver: 1 pass"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = quiver(t, "track", "show", "--db", filepath.Join(dir, "q.db"), "--json", "1")
	if code != 0 || !strings.Contains(out, `"artifacts"`) {
		t.Errorf("the demo's result names no artifacts:\n%s", out)
	}
	// The release history kept in the repository came with it.
	if !strings.Contains(errs, "runs of release history") {
		t.Errorf("demo did not import the release history:\n%s", errs)
	}
	out, _, code = quiver(t, "track", "changes", "--db", filepath.Join(dir, "q.db"), "--target", "quic-go releases")
	if code != 0 || !strings.Contains(out, "quic-go v0.41.0: tp.max_datagram_frame_size 1200 → 16383 bytes") {
		t.Errorf("track changes over the imported history:\n%s", out)
	}
}

// TestBenchStoreAndImport records an RPC bench run with --store, writes
// its JSON with --out, and imports that file again into a second store.
func TestBenchStoreAndImport(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "q.db")
	out := filepath.Join(dir, "out")
	stdout, stderr, code := quiver(t, "bench", "rpc", "--transports", "tcp", "--conc", "1", "--sizes", "64", "--duration", "200ms", "--repeats", "2", "--out", out, "--store", db)
	if code != 0 {
		t.Fatalf("bench rpc: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "recorded as benchmark run 1 (rpc)") {
		t.Errorf("stderr lacks the record line:\n%s", stderr)
	}
	file := filepath.Join(out, "rpc.json")
	db2 := filepath.Join(dir, "q2.db")
	stdout, stderr, code = quiver(t, "track", "import", "--db", db2, file)
	if code != 0 || !strings.Contains(stdout, "benchmark run 1 (rpc, 1 rows)") {
		t.Fatalf("track import: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// A second import of the same file adds nothing.
	stdout, _, code = quiver(t, "track", "import", "--db", db2, file)
	if code != 0 || !strings.Contains(stdout, "already recorded") {
		t.Errorf("second import: exit %d, %q", code, stdout)
	}
	// Not a bench file: refused with a reason.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"targets": []}`), 0o644)
	if _, stderr, code = quiver(t, "track", "import", "--db", db2, bad); code == 0 || !strings.Contains(stderr, "no kind") {
		t.Errorf("import of a non-bench file: exit %d, %q", code, stderr)
	}
	st, err := store.Open(context.Background(), db2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.BenchRuns(context.Background(), 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %+v, %v", runs, err)
	}
	r := runs[0]
	if r.Kind != "rpc" || !strings.HasPrefix(r.Command, "quiver bench rpc --transports tcp") || len(r.Summary) != 1 ||
		r.Summary[0].Subject != "quiver/tcp" || r.Summary[0].Metric != "calls/s" || r.Summary[0].Runs != 2 ||
		!(r.Summary[0].Min > 0 && r.Summary[0].Min <= r.Summary[0].Median && r.Summary[0].Median <= r.Summary[0].Max) {
		t.Errorf("recorded run %+v", r)
	}
}

// TestTrackExportMerge: export --merge adds a measurement at the same
// commit, refuses one at another commit (the file stays as it was), and
// keeps it with --mixed-commits, which the dataset then records.
func TestTrackExportMerge(t *testing.T) {
	fakeTrackSuite(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "q.db")
	targets := filepath.Join(dir, "v1.json")
	b, _ := json.Marshal(map[string]any{"targets": []map[string]any{
		{"name": "alpha", "address": "127.0.0.1:4433", "implementation": "quic-go", "version": "v1"},
	}})
	if err := os.WriteFile(targets, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := quiver(t, "track", "run", "--db", db, "--artifacts", "", targets); code != 0 {
		t.Fatalf("track run: exit %d\n%s%s", code, out, errs)
	}
	file := filepath.Join(dir, "alpha.json.gz")
	export := func(commit string, extra ...string) (string, int) {
		args := append([]string{"track", "export", "--db", db, "--target", "alpha", "--command", "sweep at " + commit, "--commit", commit}, extra...)
		_, errs, code := quiver(t, append(args, file)...)
		return errs, code
	}
	read := func() *dataset.Dataset {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ds, err := dataset.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	const full = "7b3f39a8ab21f571d04dea6bcdadba2f6f19df37"
	if errs, code := export(full); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	if errs, code := export(full[:7], "--merge"); code != 0 {
		t.Fatalf("export --merge at the same commit: exit %d: %s", code, errs)
	}
	// The file holds a result the next measurement does not repeat
	// (only-old), so merging one at another commit would mix two.
	old := read()
	old.Runs[0].Results = append(old.Runs[0].Results, dataset.Result{Scenario: "only-old", Verdict: "pass"})
	var buf bytes.Buffer
	if err := dataset.Write(&buf, old); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	before := buf.Bytes()
	errs, code := export("1111111", "--merge")
	if code == 0 || !strings.Contains(errs, "different Quiver commits") || !strings.Contains(errs, "--mixed-commits") {
		t.Errorf("export --merge of another commit: exit %d, stderr %q", code, errs)
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(after, before) {
		t.Error("a refused merge changed the dataset file")
	}
	if errs, code := export("1111111", "--merge", "--mixed-commits"); code != 0 {
		t.Fatalf("export --merge --mixed-commits: exit %d: %s", code, errs)
	}
	if ds := read(); !ds.MixedCommits || len(ds.Commits()) != 2 {
		t.Errorf("merged with --mixed-commits: mixed %v, commits %q", ds.MixedCommits, ds.Commits())
	}
}
