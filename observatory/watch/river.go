package watch

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// TickArgs is the River job of one watcher tick.
type TickArgs struct{}

// Kind is River's name for the watcher's tick.
func (TickArgs) Kind() string { return "quiver_watch_tick" }

type tickWorker struct {
	river.WorkerDefaults[TickArgs]
	w *Watcher
}

func (t *tickWorker) Work(ctx context.Context, _ *river.Job[TickArgs]) error { return t.w.Tick(ctx) }

// River runs the watcher's ticks as River periodic jobs in the PostgreSQL
// database of pool: a tick at start and one every interval. Any number of
// processes may run it: only River's elected leader inserts the ticks, one
// process takes each, and the campaign keys keep a tick that is retried
// after its process died (or that overlaps another) from starting a
// campaign twice.
type River struct {
	Watcher  *Watcher
	Interval time.Duration
	// RescueAfter is how long a tick may run before River counts its
	// process as dead and gives it to another (default 6 h: a sweep of
	// a release takes minutes, a scheduled campaign maybe an hour).
	RescueAfter time.Duration
	Logger      *slog.Logger
}

// Run works until ctx ends.
func (r *River) Run(ctx context.Context, pool *pgxpool.Pool) error {
	if r.Interval <= 0 {
		return errors.New("watch: the River tick interval must be positive")
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &tickWorker{w: r.Watcher}); err != nil {
		return err
	}
	interval := r.Interval
	cfg := &river.Config{
		Queues:     map[string]river.QueueConfig{"quiver_watch": {MaxWorkers: 1}},
		Workers:    workers,
		JobTimeout: -1, // a tick runs whole campaigns
		// A tick running longer than this is on a dead process.
		RescueStuckJobsAfter: cmp.Or(r.RescueAfter, 6*time.Hour),
		Logger:               cmp.Or(r.Logger, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(interval),
			func() (river.JobArgs, *river.InsertOpts) {
				return TickArgs{}, &river.InsertOpts{Queue: "quiver_watch"}
			}, &river.PeriodicJobOpts{RunOnStart: true})},
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Stop(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
