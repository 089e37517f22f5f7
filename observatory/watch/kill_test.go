package watch

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/quiver-quic/quiver/observatory/store"
)

// watchChild is the watcher process TestWatchKillProcess kills: it sweeps
// the release its proxy lists, with a suite that stops before s3; once it
// got there it says "blocked" on standard output and waits to be killed.
func watchChild(dsn, proxyURL string) int {
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := &suite{block: "s3", blocked: make(chan struct{})}
	var mu sync.Mutex
	w := newWatcher(st, proxyURL, s, map[string]int{}, &mu)
	go func() {
		<-s.blocked
		fmt.Println("blocked")
	}()
	w.Run(context.Background(), nil)
	return 2
}

// TestWatchKillProcess kills a watcher process with SIGKILL in the middle
// of a release's sweep (no chance to clean up: an open SQLite WAL, a
// PostgreSQL session cut), then starts another: the results the killed one
// stored are there, the sweep completes in the same run, and no second
// campaign is made.
func TestWatchKillProcess(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		bg := context.Background()
		p := newProxy(t, "v0.1.0")
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "QUIVER_WATCH_CHILD_DSN="+dsn, "QUIVER_WATCH_CHILD_PROXY="+p.srv.URL)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Whatever happens, the child does not outlive the test.
		t.Cleanup(func() { cmd.Process.Kill() })
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "blocked\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child said %q, %v", line, err)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()

		st := openStore(t, dsn)
		before, err := st.Cells(bg, store.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(before) != 2 {
			t.Fatalf("%d results survived the kill, want 2 (s1, s2)", len(before))
		}
		var mu sync.Mutex
		sweeps := map[string]int{}
		s := &suite{}
		w := newWatcher(st, p.srv.URL, s, sweeps, &mu)
		var kinds []string
		w.Event = func(e Event) { kinds = append(kinds, e.Kind+" "+e.Key) }
		if err := w.Tick(bg); err != nil {
			t.Fatal(err)
		}
		if want := "[resume release/fake/v0.1.0 done release/fake/v0.1.0]"; fmt.Sprint(kinds) != want {
			t.Errorf("events after the restart %v, want %s", kinds, want)
		}
		if calls := s.scenarioCalls(); fmt.Sprint(calls) != "[[s3 s4]]" {
			t.Errorf("the resumed sweep ran %v, want [[s3 s4]]", calls)
		}
		after, _ := st.Cells(bg, store.Filter{})
		runs, _ := st.ListRuns(bg)
		if len(after) != 4 || after[0].ID != before[0].ID || after[1].ID != before[1].ID || len(runs) != 1 || runs[0].Finished.IsZero() {
			t.Errorf("after the restart: %d results, runs %+v", len(after), runs)
		}
	})
}
