package observatory

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/observatory/store"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestParseTargets(t *testing.T) {
	good := `{"targets": [{"name": "a", "address": "127.0.0.1:4433", "sni": "localhost", "alpn": ["h3"], "implementation": "quic-go", "version": "v0.50.0"}]}`
	ts, err := ParseTargets([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].SNI != "localhost" || ts[0].ALPN[0] != "h3" || ts[0].Version != "v0.50.0" {
		t.Errorf("ParseTargets = %+v", ts)
	}
	if ts, err := ParseTargets([]byte(`[{"name": "b", "address": "[::1]:443"}]`)); err != nil || ts[0].Name != "b" {
		t.Errorf("bare array: %+v, %v", ts, err)
	}
	for _, bad := range []string{
		`{"targets": []}`,
		`{"targets": [{"address": "1.2.3.4:443"}]}`,
		`{"targets": [{"name": "a", "address": "1.2.3.4"}]}`,
		`{"targets": [{"name": "a", "address": "1.2.3.4:1"}, {"name": "a", "address": "1.2.3.4:2"}]}`,
		`{"targets": [{"name": "a", "adress": "1.2.3.4:1"}]}`,
		`not json`,
	} {
		if _, err := ParseTargets([]byte(bad)); err == nil {
			t.Errorf("ParseTargets(%s) succeeded", bad)
		}
	}
}

// fakeSuite answers each scenario with the verdict in its table, and
// records what it was asked.
type fakeSuite struct {
	verdicts map[string]conformance.Verdict // "target/scenario" → verdict
	calls    atomic.Int32
}

func (f *fakeSuite) run(ctx context.Context, t conformance.Target, o conformance.Options) (*conformance.Report, error) {
	f.calls.Add(1)
	rep := &conformance.Report{Schema: conformance.SchemaVersion, ToolVersion: "fake", Target: t}
	for _, id := range o.Scenarios {
		v, ok := f.verdicts[t.Name+"/"+id]
		if !ok {
			v = conformance.Inconclusive
		}
		res := conformance.Result{
			Scenario: id, Verdict: v, Sentence: fmt.Sprintf("%s said %s", t.Name, v),
			Checks: []conformance.CheckResult{{Name: "c", Verdict: v, Sentence: "checked"}},
		}
		if o.ArtifactsDir != "" {
			res.Artifacts = &conformance.Artifacts{Keylog: id + "/keys.log", Qlogs: []string{id + "/a.sqlog"}}
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

func openStore(t *testing.T) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRunCampaign(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	f := &fakeSuite{verdicts: map[string]conformance.Verdict{
		"a/s1": conformance.Pass, "a/s2": conformance.Fail, "b/s1": conformance.Unsupported, "b/s2": conformance.Pass,
	}}
	var progress []int
	r := &Runner{Store: s, Run: f.run, ToolVersion: "t1", ArtifactsDir: "/artifacts", Parallel: 3,
		Progress: func(done, total int, rec store.Record) { progress = append(progress, done) }}
	c := Campaign{Name: "test", Scenarios: []string{"s1", "s2"}, Targets: []conformance.Target{
		{Name: "a", Address: "127.0.0.1:1", Implementation: "x", Version: "v1"},
		{Name: "b", Address: "127.0.0.1:2"},
	}}
	run, err := r.RunCampaign(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if run.Finished.IsZero() || run.Results != 4 || run.Campaign != "test" {
		t.Errorf("run = %+v, want finished with 4 results", run)
	}
	if len(progress) != 4 {
		t.Errorf("progress called %d times, want 4", len(progress))
	}
	recs, err := s.Results(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, rec := range recs {
		got[rec.Target.Name+"/"+rec.Scenario] = rec.Verdict
		res, err := DecodeResult(rec)
		if err != nil || res.Scenario != rec.Scenario || len(res.Checks) != 1 {
			t.Errorf("evidence of %d does not decode to its result: %+v, %v", rec.ID, res, err)
		}
		wantKeylog := fmt.Sprintf("run-%d/%s/%s/keys.log", run.ID, rec.Target.Name, rec.Scenario)
		if len(rec.Artifacts) != 2 || rec.Artifacts[0] != (store.Artifact{Kind: "keylog", Path: wantKeylog}) {
			t.Errorf("artifacts of %s/%s = %+v, want keylog %s first", rec.Target.Name, rec.Scenario, rec.Artifacts, wantKeylog)
		}
		if rec.ToolVersion != "fake" {
			t.Errorf("tool version %q, want the report's", rec.ToolVersion)
		}
	}
	for k, v := range f.verdicts {
		if got[k] != string(v) {
			t.Errorf("%s: stored %q, want %q", k, got[k], v)
		}
	}

	// Executing a job again (a retry after a crash) runs nothing and adds
	// no row.
	calls := f.calls.Load()
	rec, err := r.Execute(ctx, Job{RunID: run.ID, Target: c.Targets[0], Scenario: "s2"})
	if err != nil || rec.Verdict != "fail" {
		t.Errorf("re-Execute = %+v, %v", rec, err)
	}
	if f.calls.Load() != calls {
		t.Error("re-Execute ran the suite again")
	}
	if cells, _ := s.Cells(ctx, store.Filter{RunID: run.ID}); len(cells) != 4 {
		t.Errorf("%d rows after the retry, want 4", len(cells))
	}
}

// An interrupted campaign keeps what the suite decided before the
// interruption, stores nothing for scenarios cut short, and leaves the run
// unfinished.
func TestRunCampaignInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := openStore(t)
	run := func(ctx context.Context, tg conformance.Target, o conformance.Options) (*conformance.Report, error) {
		first := conformance.Result{Scenario: o.Scenarios[0], Verdict: conformance.Pass, Started: time.Now()}
		o.Progress(1, len(o.Scenarios), first)
		cancel()
		<-ctx.Done()
		// The suite reports the scenarios cut short as inconclusive.
		rep := &conformance.Report{Results: []conformance.Result{first}}
		for _, id := range o.Scenarios[1:] {
			rep.Results = append(rep.Results, conformance.Result{Scenario: id, Verdict: conformance.Inconclusive, Started: time.Now()})
		}
		return rep, nil
	}
	r := &Runner{Store: s, Run: run}
	got, err := r.RunCampaign(ctx, Campaign{Scenarios: []string{"s1", "s2", "s3"}, Targets: []conformance.Target{{Name: "a", Address: "h:1"}}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if !got.Finished.IsZero() || got.Results != 1 {
		t.Errorf("run = %+v, want unfinished with 1 result", got)
	}
}

// A campaign runs the suite once per target with all its scenarios, stores
// each result as the suite reports it, and hands the suite a way to revive
// the targets it started.
func TestRunCampaignBatchesByTarget(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	var (
		mu      sync.Mutex
		asked   = map[string][]string{}
		revived []string
	)
	run := func(ctx context.Context, tg conformance.Target, o conformance.Options) (*conformance.Report, error) {
		mu.Lock()
		asked[tg.Name] = append(asked[tg.Name], o.Scenarios...)
		mu.Unlock()
		if o.Revive == nil {
			return nil, errors.New("no Revive passed to the suite")
		}
		if err := o.Revive(ctx); err != nil {
			return nil, err
		}
		rep := &conformance.Report{}
		for i, id := range o.Scenarios {
			res := conformance.Result{Scenario: id, Verdict: conformance.Pass, Started: time.Now()}
			o.Progress(i+1, len(o.Scenarios), res)
			rep.Results = append(rep.Results, res)
		}
		return rep, nil
	}
	var stored []string
	r := &Runner{Store: s, Run: run, ToolVersion: "t",
		Revive: func(ctx context.Context, tg conformance.Target) error {
			mu.Lock()
			revived = append(revived, tg.Name)
			mu.Unlock()
			return nil
		},
		Progress: func(done, total int, rec store.Record) {
			stored = append(stored, fmt.Sprintf("%d/%d", done, total))
		}}
	c := Campaign{Scenarios: []string{"s1", "s2", "s3"}, Targets: []conformance.Target{{Name: "a", Address: "h:1"}, {Name: "b", Address: "h:2"}}}
	run1, err := r.RunCampaign(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if got := asked[name]; !slices.Equal(got, c.Scenarios) {
			t.Errorf("suite asked about %s for %v, want one run with %v", name, got, c.Scenarios)
		}
	}
	slices.Sort(revived)
	if !slices.Equal(revived, []string{"a", "b"}) {
		t.Errorf("revived %v, want a and b once each", revived)
	}
	if len(stored) != 6 || stored[5] != "6/6" || run1.Results != 6 {
		t.Errorf("progress %v, run %+v; want 6 results", stored, run1)
	}

	// A batch retried after a crash runs only the scenarios the run does
	// not hold yet.
	clear(asked)
	if err := r.ExecuteTarget(ctx, run1.ID, conformance.Target{Name: "c", Address: "h:3"}, []string{"s1"}); err != nil {
		t.Fatal(err)
	}
	if err := r.ExecuteTarget(ctx, run1.ID, conformance.Target{Name: "c", Address: "h:3"}, []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	if got := asked["c"]; !slices.Equal(got, []string{"s1", "s2"}) {
		t.Errorf("suite asked about c for %v, want s1 then s2 alone", got)
	}
	if cells, _ := s.Cells(ctx, store.Filter{RunID: run1.ID, Target: "c"}); len(cells) != 2 {
		t.Errorf("%d rows for c, want 2", len(cells))
	}
}

// A scenario the suite returned no result for gets an error row, so that
// the grid shows the hole instead of hiding it.
func TestExecuteTargetMissingResult(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	r := &Runner{Store: s, Run: func(ctx context.Context, tg conformance.Target, o conformance.Options) (*conformance.Report, error) {
		return &conformance.Report{Results: []conformance.Result{{Scenario: "s1", Verdict: conformance.Pass}}}, nil
	}}
	run, err := r.RunCampaign(ctx, Campaign{Scenarios: []string{"s1", "s2"}, Targets: []conformance.Target{{Name: "a", Address: "h:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	cells, _ := s.Cells(ctx, store.Filter{RunID: run.ID})
	got := map[string]string{}
	for _, c := range cells {
		got[c.Scenario] = c.Verdict
	}
	if got["s1"] != "pass" || got["s2"] != "error" {
		t.Errorf("verdicts %v, want s1 pass and s2 error", got)
	}
}

// A local server restarts on the address it first bound, and the reviver
// finds it by target name.
func TestLocalServerRestart(t *testing.T) {
	var addrs []string
	stops := 0
	start := func(addr string) (string, func(), error) {
		if addr == "" {
			addr = "127.0.0.1:4433" // as if a free port was picked
		}
		addrs = append(addrs, addr)
		return addr, func() { stops++ }, nil
	}
	s, err := StartLocal(conformance.Target{Name: "x"}, "", start)
	if err != nil {
		t.Fatal(err)
	}
	revive := Reviver(s)
	if err := revive(context.Background(), conformance.Target{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := revive(context.Background(), conformance.Target{Name: "y"}); err == nil {
		t.Error("reviving a target that was not started here succeeded")
	}
	s.Stop()
	s.Stop()
	if !slices.Equal(addrs, []string{"127.0.0.1:4433", "127.0.0.1:4433"}) {
		t.Errorf("started on %v, want the same address twice", addrs)
	}
	if stops != 2 || s.Target.Address != "127.0.0.1:4433" {
		t.Errorf("%d stops, address %q; want 2 stops (restart, then one Stop) and the first address", stops, s.Target.Address)
	}
}
