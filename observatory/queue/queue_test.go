package queue

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/internal/pgtest"
	"github.com/quiver-quic/quiver/observatory/store"
)

// The test binary doubles as the worker processes: with
// QUIVER_FAKE_WORKER set it runs a worker instead of the tests.
func TestMain(m *testing.M) {
	if name := os.Getenv("QUIVER_FAKE_WORKER"); name != "" {
		os.Exit(fakeWorker(name, os.Getenv("QUIVER_FAKE_WORKER_DSN"), os.Getenv("QUIVER_FAKE_WORKER_VICTIM") == "1"))
	}
	leakcheck.Main(m)
}

// Scenarios of the fake suite that a victim worker never finishes: one
// hangs before its result is stored, one after (and before River hears
// that the job is done), which is where a kill hurts most.
const (
	hangBefore = "hang-before"
	hangAfter  = "hang-after"
)

// fakeWorker runs a worker whose suite passes every scenario at once, and
// prints a line per event on standard output:
//
//	hang-before TARGET/SCENARIO   (victim only; never returns)
//	hang-after TARGET/SCENARIO    (victim only; the row is stored)
//	done TARGET/SCENARIO STOREDBY
func fakeWorker(name, dsn string, victim bool) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	st, err := store.Open(ctx, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	pool, err := Connect(ctx, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	suite := func(ctx context.Context, t conformance.Target, o conformance.Options) (*conformance.Report, error) {
		rep := &conformance.Report{ToolVersion: name}
		for _, id := range o.Scenarios {
			if victim && id == hangBefore {
				say("hang-before %s/%s", t.Name, id)
				select {} // killed here
			}
			rep.Results = append(rep.Results, conformance.Result{Scenario: id, Verdict: conformance.Pass, Started: time.Now()})
		}
		return rep, nil
	}
	w := &Worker{
		Runner:      &observatory.Runner{Store: st, Run: suite, ToolVersion: name},
		Concurrency: 3,
		JobTimeout:  2 * time.Second,
		RescueAfter: 3 * time.Second,
		Done: func(rec store.Record) {
			if victim && rec.Scenario == hangAfter {
				say("hang-after %s/%s", rec.Target.Name, rec.Scenario)
				select {} // killed here, after the row was stored
			}
			say("done %s/%s %s", rec.Target.Name, rec.Scenario, rec.ToolVersion)
		},
	}
	if err := w.Work(ctx, pool); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// worker is a worker process started by the test.
type worker struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

func startWorker(t *testing.T, name, dsn string, victim bool) *worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "QUIVER_FAKE_WORKER="+name, "QUIVER_FAKE_WORKER_DSN="+dsn)
	if victim {
		cmd.Env = append(cmd.Env, "QUIVER_FAKE_WORKER_VICTIM=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-w.done
	})
	return w
}

// waitFor reads the worker's lines until want says it saw enough.
func (w *worker) waitFor(t *testing.T, deadline <-chan time.Time, what string, want func(line string) bool) {
	t.Helper()
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				t.Fatalf("worker exited before %s", what)
			}
			if want(line) {
				return
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Two worker processes share one campaign through the queue; the first is
// killed (SIGKILL) with one job hung before its result was stored and one
// after. River hands both to the survivor once they count as stuck, and
// the run ends with every result exactly once.
func TestWorkersShareCampaignAndSurviveKill(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pool, err := Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	scenarios := []string{"s1", "s2", "s3", "s4", "s5", hangBefore, hangAfter}
	c := observatory.Campaign{Name: "queue test", Scenarios: scenarios, Targets: []conformance.Target{
		{Name: "a", Address: "127.0.0.1:1"}, {Name: "b", Address: "127.0.0.1:2"},
	}}
	run, err := Enqueue(ctx, pool, st, "test", c)
	if err != nil {
		t.Fatal(err)
	}
	total := len(c.Targets) * len(scenarios)
	deadline := time.After(3 * time.Minute)

	// The victim takes jobs until its three slots are all hung.
	victim := startWorker(t, "victim", dsn, true)
	hung := map[string]map[string]bool{hangBefore: {}, hangAfter: {}} // kind → TARGET/SCENARIO
	victim.waitFor(t, deadline, "the victim to hang three jobs, before and after storing", func(line string) bool {
		kind, job, _ := strings.Cut(line, " ")
		if m := hung[kind]; m != nil {
			m[job] = true
		}
		nb, na := len(hung[hangBefore]), len(hung[hangAfter])
		return nb+na == 3 && nb > 0 && na > 0
	})
	// The survivor shares the campaign: it takes the job left.
	survivor := startWorker(t, "survivor", dsn, false)
	survivor.waitFor(t, deadline, "the survivor's first job", func(line string) bool { return strings.HasPrefix(line, "done ") })
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done

	// River rescues the victim's jobs and the survivor runs them: the
	// ones hung before storing get their rows from the survivor; for the
	// ones hung after, the survivor finds the victim's row and adds none.
	redelivered := map[string]bool{}
	var finished store.Run
	for finished.Finished.IsZero() || len(redelivered) < len(hung[hangAfter]) {
		select {
		case line, ok := <-survivor.lines:
			if !ok {
				t.Fatal("the survivor exited")
			}
			f := strings.Fields(line)
			if len(f) != 3 || f[0] != "done" {
				continue
			}
			if hung[hangAfter][f[1]] && f[2] == "victim" {
				redelivered[f[1]] = true
			}
			if finished, err = st.Run(ctx, run.ID); err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			cells, _ := st.Cells(ctx, store.Filter{RunID: run.ID})
			t.Fatalf("timed out: run %d has %d of %d results (finished: %v); re-delivered after storing: %v of %v",
				run.ID, len(cells), total, !finished.Finished.IsZero(), redelivered, hung[hangAfter])
		}
	}

	recs, err := st.Results(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, r := range recs {
		k := r.Target.Name + "/" + r.Scenario
		if by, dup := seen[k]; dup {
			t.Errorf("%s stored twice (by %s and %s)", k, by, r.ToolVersion)
		}
		seen[k] = r.ToolVersion
	}
	if len(recs) != total || finished.Results != total {
		t.Errorf("run has %d rows (%d counted), want %d", len(recs), finished.Results, total)
	}
	for k, by := range seen {
		switch {
		case hung[hangBefore][k] && by != "survivor":
			t.Errorf("%s stored by %s; only the survivor could finish it", k, by)
		case hung[hangAfter][k] && by != "victim":
			t.Errorf("%s stored by %s; the victim stored it before it was killed", k, by)
		}
	}
	counts := map[string]int{}
	for _, by := range seen {
		counts[by]++
	}
	if counts["victim"] == 0 || counts["survivor"] == 0 {
		t.Errorf("rows by worker %v; want both workers to have shared the campaign", counts)
	}
}
