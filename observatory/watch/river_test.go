package watch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/observatory/internal/pgtest"
	"github.com/quiver-quic/quiver/observatory/queue"
)

// TestWatchRiver: on PostgreSQL the ticks are River periodic jobs. Two
// processes run them at once on one database; the release is swept once,
// and a release published later is swept once by the tick at the next
// start.
func TestWatchRiver(t *testing.T) {
	dsn := pgtest.DSN(t)
	bg := context.Background()
	pool, err := queue.Connect(bg, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	p := newProxy(t, "v0.1.0")
	var mu sync.Mutex
	sweeps := map[string]int{}

	start := func() (chan Event, func()) {
		ev := make(chan Event, 100)
		ctx, cancel := context.WithCancel(bg)
		var wg sync.WaitGroup
		for range 2 {
			st := openStore(t, dsn)
			w := newWatcher(st, p.srv.URL, &suite{}, sweeps, &mu)
			w.Event = func(e Event) { ev <- e }
			r := &River{Watcher: w, Interval: time.Hour}
			wg.Go(func() {
				if err := r.Run(ctx, pool); err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("River.Run: %v", err)
				}
			})
		}
		return ev, func() { cancel(); wg.Wait() }
	}

	ev, stop := start()
	waitFor(t, ev, "done", "v0.1.0")
	stop()

	p.publish("v0.2.0")
	ev, stop = start()
	waitFor(t, ev, "done", "v0.2.0")
	stop()

	mu.Lock()
	defer mu.Unlock()
	if want := map[string]int{"v0.1.0": 1, "v0.2.0": 1}; fmt.Sprint(sweeps) != fmt.Sprint(want) {
		t.Errorf("sweeps %v, want %v", sweeps, want)
	}
}
