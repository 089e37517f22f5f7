package conformance

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestReviveNamesTheKiller runs scenarios against Quiver's server where
// one scenario "crashes" the server (stops it). The runner must find the
// target dead, restart it through Options.Revive, run the suspects again
// alone, name the killer, and leave every other scenario passing.
func TestReviveNamesTheKiller(t *testing.T) {
	var mu sync.Mutex
	srv := newQuiverServer(t, "127.0.0.1:0")
	addr := srv.addr
	t.Cleanup(func() { mu.Lock(); srv.stop(); mu.Unlock() })
	revives := 0
	revive := func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		srv.stop()
		srv = newQuiverServer(t, addr)
		revives++
		return nil
	}
	normal := func(ctx context.Context, t *T) {
		t.mustDial(ctx, DialOptions{})
		t.Pass("handshake", rfc9001("4.1.2", Must, "x MUST y"), "The handshake completed.")
	}
	scs := []*Scenario{{ID: "killer", Family: "-", Run: func(ctx context.Context, t *T) {
		mu.Lock()
		srv.stop()
		mu.Unlock()
		t.Inconclusive("Nothing came back.")
	}}}
	for range 7 {
		scs = append(scs, &Scenario{ID: "normal", Family: "-", Run: normal})
	}
	prof := &Profile{Target: Target{Address: addr}, ALPNs: []string{"hq-interop"}, Reachable: true, SmallPath: "/"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res := runScenarios(ctx, prof, scs, Options{Parallel: 4, Revive: revive})
	if res[0].Verdict != Inconclusive || !hasFactIn(res[0], "target.stopped-answering") {
		t.Errorf("killer: %s %s, facts %v; want inconclusive naming the crash", res[0].Verdict, res[0].Sentence, res[0].Facts)
	}
	for i, r := range res[1:] {
		if r.Verdict != Pass {
			t.Errorf("normal scenario %d: %s: %s", i, r.Verdict, r.Sentence)
		}
	}
	if revives == 0 {
		t.Error("the target was never revived")
	}

	// Without Revive the scenarios left are reported inconclusive at once.
	mu.Lock()
	srv.stop()
	srv = newQuiverServer(t, addr)
	mu.Unlock()
	start := time.Now()
	res = runScenarios(ctx, prof, append(scs[:1:1], scs[1:]...), Options{Parallel: 1})
	down := 0
	for _, r := range res {
		if r.Verdict == Pass || r.Verdict == Fail {
			continue
		}
		down++
	}
	if down == 0 {
		t.Error("no scenario reported the dead target")
	}
	t.Logf("without revive: %d of %d not judged, in %v", down, len(res), time.Since(start).Round(time.Millisecond))
}

func hasFactIn(r Result, key string) bool {
	for _, f := range r.Facts {
		if f.Key == key {
			return true
		}
	}
	return false
}
