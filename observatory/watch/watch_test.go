package watch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/internal/pgtest"
	"github.com/quiver-quic/quiver/observatory/results"
	"github.com/quiver-quic/quiver/observatory/store"
)

func TestMain(m *testing.M) {
	if dsn := os.Getenv("QUIVER_WATCH_CHILD_DSN"); dsn != "" {
		os.Exit(watchChild(dsn, os.Getenv("QUIVER_WATCH_CHILD_PROXY")))
	}
	leakcheck.Main(m)
}

// module is the fake module the local proxy serves; its path has upper
// case letters, which the GOPROXY protocol escapes.
const module = "example.com/Fake/quic"

// proxy is a local module proxy: GET /example.com/!fake/quic/@v/list
// answers the versions it holds, which a test adds to.
type proxy struct {
	mu       sync.Mutex
	versions []string
	srv      *httptest.Server
}

func newProxy(t *testing.T, versions ...string) *proxy {
	p := &proxy{versions: versions}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/example.com/!fake/quic/@v/list" {
			http.NotFound(w, r)
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		fmt.Fprintln(w, strings.Join(p.versions, "\n"))
	}))
	t.Cleanup(p.srv.Close)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return p
}

func (p *proxy) publish(v string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.versions = append(p.versions, v)
}

var scenarios = []string{"s1", "s2", "s3", "s4"}

// suite is a fake conformance suite. Each result goes to Progress as it
// is decided (so the runner stores it at once, as with the real suite);
// when block is set, the suite stops before the scenario named by it and
// waits for its context to end, as a killed process would.
type suite struct {
	mu      sync.Mutex
	calls   [][]string // the scenarios of each call
	block   string
	blocked chan struct{} // closed when the suite blocks
}

func (s *suite) run(ctx context.Context, t conformance.Target, o conformance.Options) (*conformance.Report, error) {
	s.mu.Lock()
	s.calls = append(s.calls, append([]string(nil), o.Scenarios...))
	block := s.block
	s.mu.Unlock()
	rep := &conformance.Report{Target: t}
	for i, id := range o.Scenarios {
		if id == block {
			close(s.blocked)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		res := conformance.Result{Scenario: id, Verdict: conformance.Pass, Sentence: t.Version + " passes " + id,
			Facts: []conformance.Fact{conformance.NewFact("tp", map[string]string{"max_datagram_frame_size": "44b0"})}}
		if o.Progress != nil {
			o.Progress(i+1, len(o.Scenarios), res)
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

func (s *suite) scenarioCalls() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

type backend struct {
	name string
	dsn  func(t *testing.T) string
}

func forEachBackend(t *testing.T, f func(t *testing.T, dsn string)) {
	for _, b := range []backend{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "quiver.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	} {
		t.Run(b.name, func(t *testing.T) { f(t, b.dsn(t)) })
	}
}

func openStore(t *testing.T, dsn string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newWatcher watches the fake module from since on; its sweep runs the
// fake suite into the release's run, and sweeps counts each sweep.
func newWatcher(st store.Store, proxyURL string, s *suite, sweeps map[string]int, mu *sync.Mutex) *Watcher {
	r := &observatory.Runner{Store: st, Run: s.run, ToolVersion: "test"}
	return &Watcher{
		Store: st, Proxy: proxyURL, ToolVersion: "test",
		Releases: []Release{{Impl: "fake", Module: module, Since: "v0.1.0"}},
		SweepRelease: func(ctx context.Context, rel Release, v string, run store.Run) error {
			mu.Lock()
			sweeps[v]++
			mu.Unlock()
			if v == "v0.1.5" {
				return Permanent(errors.New("v0.1.5 does not build"))
			}
			t := conformance.Target{Name: "fake releases", Address: "127.0.0.1:1", Implementation: "fake", Version: v}
			_, err := r.RunCampaignIn(ctx, run, observatory.Campaign{Name: run.Campaign, Targets: []conformance.Target{t}, Scenarios: scenarios})
			return err
		},
	}
}

// events collects the watcher's events and hands them to the test.
func events(w *Watcher) <-chan Event {
	ch := make(chan Event, 100)
	w.Event = func(e Event) { ch <- e }
	return ch
}

// waitFor reads events until one of kind (and version, when set) comes;
// the test's own deadline bounds it.
func waitFor(t *testing.T, ch <-chan Event, kind, version string) Event {
	t.Helper()
	for e := range ch {
		if e.Kind == "error" {
			t.Errorf("watcher error: %v", e.Err)
		}
		if e.Kind == kind && (version == "" || e.Version == version) {
			return e
		}
	}
	t.Fatalf("events ended before %s %s", kind, version)
	return Event{}
}

// TestWatchSweepsNewRelease: a release published on the proxy is swept on
// the next tick, once; older, pre-release and failing releases are not
// retried.
func TestWatchSweepsNewRelease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st := openStore(t, dsn)
		p := newProxy(t, "v0.0.9", "v0.1.0", "v0.1.5", "v0.2.0-rc.1")
		var mu sync.Mutex
		sweeps := map[string]int{}
		w := newWatcher(st, p.srv.URL, &suite{}, sweeps, &mu)
		ev := events(w)
		ticks := make(chan time.Time)
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx, ticks) }()

		waitFor(t, ev, "done", "v0.1.0")
		if e := waitFor(t, ev, "failed", "v0.1.5"); !strings.Contains(e.Err.Error(), "does not build") {
			t.Errorf("failed event: %v", e.Err)
		}
		waitFor(t, ev, "idle", "")
		p.publish("v0.2.0")
		ticks <- time.Now()
		if e := waitFor(t, ev, "new-release", ""); e.Version != "v0.2.0" {
			t.Errorf("new release %s, want v0.2.0", e.Version)
		}
		waitFor(t, ev, "done", "v0.2.0")
		waitFor(t, ev, "idle", "")
		ticks <- time.Now()
		waitFor(t, ev, "idle", "")
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}

		mu.Lock()
		if want := map[string]int{"v0.1.0": 1, "v0.1.5": 1, "v0.2.0": 1}; fmt.Sprint(sweeps) != fmt.Sprint(want) {
			t.Errorf("sweeps %v, want %v", sweeps, want)
		}
		mu.Unlock()
		runs, err := st.ListRuns(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range runs {
			got = append(got, fmt.Sprintf("%s:%d:%v", r.Campaign, r.Results, !r.Finished.IsZero()))
		}
		slices.Sort(got)
		want := []string{"sweep fake v0.1.0:4:true", "sweep fake v0.1.5:0:true", "sweep fake v0.2.0:4:true"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("runs %v, want %v", got, want)
		}
	})
}

// TestWatchKillMidCampaign: a watcher killed in the middle of a release's
// sweep and of a scheduled campaign loses no stored result and, started
// again, completes the same runs with the scenarios left, starting no
// second campaign for either key.
func TestWatchKillMidCampaign(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		bg := context.Background()
		p := newProxy(t, "v0.1.0")
		var mu sync.Mutex
		sweeps := map[string]int{}

		// The first watcher: killed while the release's third scenario runs.
		st1 := openStore(t, dsn)
		s1 := &suite{block: "s3", blocked: make(chan struct{})}
		w1 := newWatcher(st1, p.srv.URL, s1, sweeps, &mu)
		ctx, kill := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() { done <- w1.Run(ctx, nil) }()
		<-s1.blocked
		kill()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("killed watcher: %v", err)
		}
		before, err := st1.Cells(bg, store.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(before) != 2 {
			t.Fatalf("%d results stored before the kill, want 2 (s1, s2)", len(before))
		}

		// The second: a fresh process on the same store.
		st2 := openStore(t, dsn)
		s2 := &suite{}
		w2 := newWatcher(st2, p.srv.URL, s2, sweeps, &mu)
		var kinds []string
		w2.Event = func(e Event) { kinds = append(kinds, e.Kind+" "+e.Key) }
		if err := w2.Tick(bg); err != nil {
			t.Fatal(err)
		}
		if want := []string{"resume release/fake/v0.1.0", "done release/fake/v0.1.0"}; fmt.Sprint(kinds) != fmt.Sprint(want) {
			t.Errorf("events after the restart %q, want %q", kinds, want)
		}
		if calls := s2.scenarioCalls(); len(calls) != 1 || fmt.Sprint(calls[0]) != "[s3 s4]" {
			t.Errorf("the resumed sweep ran %v, want [[s3 s4]]", calls)
		}
		after, err := st2.Cells(bg, store.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range after {
			ids = append(ids, fmt.Sprintf("%d %s", c.RunID, c.Scenario))
		}
		if len(after) != 4 || after[0].ID != before[0].ID || after[1].ID != before[1].ID || after[3].RunID != before[0].RunID {
			t.Errorf("results after the restart %v (before: %+v)", ids, before)
		}
		runs, _ := st2.ListRuns(bg)
		if len(runs) != 1 || runs[0].Finished.IsZero() {
			t.Errorf("runs %+v, want one finished run", runs)
		}
		// A third tick does nothing.
		if err := w2.Tick(bg); err != nil {
			t.Fatal(err)
		}
		if n := len(s2.scenarioCalls()); n != 1 {
			t.Errorf("the suite ran %d times after the restart, want 1", n)
		}
	})
}

// TestWatchSchedule: one campaign per slot of the schedule, on an injected
// clock; a campaign killed in its slot is completed by the next watcher
// even when it starts in a later slot, which then gets its own.
func TestWatchSchedule(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		bg := context.Background()
		st := openStore(t, dsn)
		now := time.Date(2026, 12, 4, 10, 20, 0, 0, time.UTC)
		clock := func() time.Time { return now }
		target := conformance.Target{Name: "local quic-go", Address: "127.0.0.1:4433"}
		mk := func(s *suite) *Watcher {
			return &Watcher{
				Store: st, Runner: &observatory.Runner{Store: st, Run: s.run, ToolVersion: "test"}, ToolVersion: "test",
				Campaign: observatory.Campaign{Name: "targets.json", Targets: []conformance.Target{target}, Scenarios: scenarios},
				Every:    time.Hour, Now: clock,
			}
		}
		s1 := &suite{block: "s2", blocked: make(chan struct{})}
		ctx, kill := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() { done <- mk(s1).Tick(ctx) }()
		<-s1.blocked
		kill()
		<-done

		s2 := &suite{}
		w := mk(s2)
		if err := w.Tick(bg); err != nil { // same slot: completes the run
			t.Fatal(err)
		}
		now = now.Add(30 * time.Minute) // 10:50, same slot: nothing
		if err := w.Tick(bg); err != nil {
			t.Fatal(err)
		}
		now = now.Add(30 * time.Minute) // 11:20: the next slot
		if err := w.Tick(bg); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(s2.scenarioCalls()); got != "[[s2 s3 s4] [s1 s2 s3 s4]]" {
			t.Errorf("suite calls %s, want the rest of the 10:00 campaign then the 11:00 one", got)
		}
		keys, err := st.CampaignKeys(bg, "schedule/targets.json/")
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 2 {
			t.Errorf("keys %v, want the 10:00 and 11:00 slots", keys)
		}
		for k, r := range keys {
			if r.Results != 4 || r.Finished.IsZero() {
				t.Errorf("%s: run %+v, want 4 results, finished", k, r)
			}
		}
	})
}

func TestParseList(t *testing.T) {
	got := ParseList([]byte("v0.2.0\nv0.10.0\r\n\nv0.2.0\nv1.0.0-rc.1\nnonsense\nv0.1.0+incompatible\n  v0.9.1  \n"))
	if want := []string{"v0.2.0", "v0.9.1", "v0.10.0"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ParseList = %v, want %v", got, want)
	}
}

func TestListVersionsErrors(t *testing.T) {
	p := newProxy(t, "v0.1.0")
	ctx := context.Background()
	if _, err := ListVersions(ctx, nil, p.srv.URL, "example.com/missing"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing module: %v", err)
	}
	for _, bad := range []string{"", "/abs", "a/../b", "ex!ample.com/x", "a b"} {
		if _, err := ListVersions(ctx, nil, p.srv.URL, bad); err == nil || !strings.Contains(err.Error(), "bad module path") {
			t.Errorf("module %q: %v", bad, err)
		}
	}
	if vs, err := ListVersions(ctx, nil, p.srv.URL, module); err != nil || fmt.Sprint(vs) != "[v0.1.0]" {
		t.Errorf("ListVersions = %v, %v", vs, err)
	}
	for env, want := range map[string]string{
		"": DefaultProxy, "direct": DefaultProxy, "https://a.example/,direct": "https://a.example", "off|https://b": "https://b",
	} {
		if got := ProxyFromEnv(env); got != want {
			t.Errorf("ProxyFromEnv(%q) = %q, want %q", env, got, want)
		}
	}
}

func FuzzParseList(f *testing.F) {
	f.Add([]byte("v0.1.0\nv0.2.0\n"))
	f.Add([]byte("v1.2.3-pre\x00\nv\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		vs := ParseList(b)
		for i := 1; i < len(vs); i++ {
			if results.CompareVersions(vs[i-1], vs[i]) >= 0 {
				t.Fatalf("not in order: %v", vs)
			}
		}
	})
}
