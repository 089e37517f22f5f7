// Package queue shares a campaign between any number of worker processes,
// on any number of machines, through River (github.com/riverqueue/river), a
// job queue kept in the same PostgreSQL database as the results.
//
// Enqueue creates the run and puts one River job per target × scenario in
// the queue; Work runs a worker that takes jobs and runs each through
// observatory.Runner.Execute. A worker killed in the middle of a job loses
// nothing: River gives the job to another worker once it counts as stuck
// (RescueAfter), and Execute's idempotence (one row per run × target ×
// scenario, enforced by the store) keeps the retry from adding a second
// row when the killed worker had already stored it.
package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/store"
)

// JobArgs is one target × scenario of a run, as River stores it.
type JobArgs struct {
	observatory.Job
	// Total is the number of jobs in the run; the worker that stores the
	// last result marks the run finished.
	Total int `json:"total"`
}

// Kind is River's name for Quiver's jobs.
func (JobArgs) Kind() string { return "quiver_scenario" }

// Default timings. A job is one scenario, which the suite bounds at 60 s
// plus a grace period; a job running much longer is on a dead worker.
const (
	DefaultJobTimeout  = 5 * time.Minute
	DefaultRescueAfter = DefaultJobTimeout + time.Minute
)

// Connect opens a connection pool to the PostgreSQL database at dsn and
// brings River's tables up to date (rivermigrate; idempotent).
func Connect(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("queue database: %w", err)
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	return pool, nil
}

// Enqueue creates a run of the campaign in st and puts its jobs in the
// queue, in one transaction, so that workers see all of them or none.
func Enqueue(ctx context.Context, pool *pgxpool.Pool, st store.Store, toolVersion string, c observatory.Campaign) (store.Run, error) {
	if len(c.Targets) == 0 || len(c.Scenarios) == 0 {
		return store.Run{}, errors.New("campaign has no targets or no scenarios")
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quietLogger()})
	if err != nil {
		return store.Run{}, err
	}
	run, err := st.CreateRun(ctx, store.NewRun{Campaign: c.Name, ToolVersion: toolVersion, Started: time.Now()})
	if err != nil {
		return store.Run{}, err
	}
	jobs := c.Jobs(run.ID)
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = river.InsertManyParams{Args: JobArgs{Job: j, Total: len(jobs)}}
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := client.InsertManyTx(ctx, tx, params)
		return err
	})
	if err != nil {
		return run, fmt.Errorf("enqueue run %d: %w", run.ID, err)
	}
	return run, nil
}

// Worker takes jobs from the queue and runs them.
type Worker struct {
	Runner *observatory.Runner
	// Concurrency is how many jobs run at once (default 4).
	Concurrency int
	// JobTimeout cancels a job that runs longer (default DefaultJobTimeout).
	JobTimeout time.Duration
	// RescueAfter is how long a job may run before River counts its
	// worker as dead and gives the job to another (default
	// DefaultRescueAfter; it must exceed JobTimeout).
	RescueAfter time.Duration
	// Done, when set, is called after each job stored its result (and
	// finished the run, when it stored the last one).
	Done func(rec store.Record)
	// Logger receives River's own messages (default: warnings and errors
	// on standard error).
	Logger *slog.Logger
}

// Work runs the worker until ctx ends, then stops taking jobs and lets the
// running ones finish (those cut off are retried by another worker).
func (w *Worker) Work(ctx context.Context, pool *pgxpool.Pool) error {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &scenarioWorker{w: w}); err != nil {
		return err
	}
	cfg := &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cmp.Or(w.Concurrency, 4)}},
		Workers:              workers,
		JobTimeout:           cmp.Or(w.JobTimeout, DefaultJobTimeout),
		RescueStuckJobsAfter: cmp.Or(w.RescueAfter, DefaultRescueAfter),
		Logger:               cmp.Or(w.Logger, quietLogger()),
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

// scenarioWorker is River's worker for JobArgs.
type scenarioWorker struct {
	river.WorkerDefaults[JobArgs]
	w *Worker
}

func (sw *scenarioWorker) Work(ctx context.Context, job *river.Job[JobArgs]) error {
	r := sw.w.Runner
	rec, err := r.Execute(ctx, job.Args.Job)
	if err != nil {
		return err
	}
	// The worker that stores the last result finishes the run.
	cells, err := r.Store.Cells(ctx, store.Filter{RunID: job.Args.RunID})
	if err != nil {
		return err
	}
	if len(cells) >= job.Args.Total {
		if err := r.Store.FinishRun(ctx, job.Args.RunID, time.Now()); err != nil {
			return err
		}
	}
	if sw.w.Done != nil {
		sw.w.Done(rec)
	}
	return nil
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
