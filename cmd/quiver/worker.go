package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/queue"
	"github.com/quiver-quic/quiver/observatory/store"
)

type workerOpts struct {
	db, artifacts             string
	concurrency               int
	timeout, jobTimeout, resc time.Duration
}

func workerCommand() *command {
	return &command{
		name:    "worker",
		summary: "run campaign jobs from the PostgreSQL queue (any number of workers, on any machines)",
		usage:   "--db postgres://… [flags]",
		examples: []string{
			"quiver track run --queue --db postgres://quiver@db.example/quiver targets.json",
			"quiver worker --db postgres://quiver@db.example/quiver --concurrency 8",
		},
		setFlags: func(fs *flag.FlagSet) any {
			o := &workerOpts{}
			fs.StringVar(&o.db, "db", "", "PostgreSQL `DSN` holding the queue and the results")
			fs.StringVar(&o.artifacts, "artifacts", "quiver-artifacts", "`directory` for per-result pcapng, qlog and key log (empty: keep none)")
			fs.IntVar(&o.concurrency, "concurrency", 4, "jobs (target × scenario) run at once")
			fs.DurationVar(&o.timeout, "timeout", 0, "deadline of each scenario (default: the suite's)")
			fs.DurationVar(&o.jobTimeout, "job-timeout", queue.DefaultJobTimeout, "a job running longer is cancelled and retried")
			fs.DurationVar(&o.resc, "rescue-after", queue.DefaultRescueAfter, "a job running longer counts as lost with its worker and goes to another (more than --job-timeout)")
			return o
		},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("%w: worker takes no arguments", errUsage)
			}
			return runWorker(ctx, env, opts.(*workerOpts))
		},
	}
}

func runWorker(ctx context.Context, env *cmdEnv, o *workerOpts) error {
	if !store.IsPostgres(o.db) {
		return fmt.Errorf("%w: worker needs --db postgres://… (the queue lives in PostgreSQL)", errUsage)
	}
	if o.resc <= o.jobTimeout {
		return fmt.Errorf("%w: --rescue-after (%v) must exceed --job-timeout (%v)", errUsage, o.resc, o.jobTimeout)
	}
	st, err := store.Open(ctx, o.db)
	if err != nil {
		return err
	}
	defer st.Close()
	pool, err := queue.Connect(ctx, o.db)
	if err != nil {
		return err
	}
	defer pool.Close()
	w := &queue.Worker{
		Runner:      &observatory.Runner{Store: st, Run: suiteRun, ToolVersion: version, ArtifactsDir: o.artifacts, Timeout: o.timeout},
		Concurrency: o.concurrency,
		JobTimeout:  o.jobTimeout,
		RescueAfter: o.resc,
		Done: func(rec store.Record) {
			fmt.Fprintf(env.stdout, "run %d  %s  %s: %s\n", rec.RunID, printableName(rec.Target.Name), rec.Scenario, rec.Verdict)
		},
	}
	fmt.Fprintf(env.stderr, "worker waiting for jobs in %s; interrupt to stop\n", displayDB(o.db))
	return w.Work(ctx, pool)
}

// enqueueCampaign puts c's jobs in the PostgreSQL queue for workers.
func enqueueCampaign(ctx context.Context, env *cmdEnv, st store.Store, o *trackOpts, c observatory.Campaign) error {
	pool, err := queue.Connect(ctx, o.db)
	if err != nil {
		return err
	}
	defer pool.Close()
	run, err := queue.Enqueue(ctx, pool, st, version, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "run %d: %d jobs queued (%d scenarios × %d targets)\nstart workers with: quiver worker --db '%s'\nfollow with: quiver track show --db '%s' %d\n",
		run.ID, len(c.Targets)*len(c.Scenarios), len(c.Scenarios), len(c.Targets), o.db, o.db, run.ID)
	return nil
}
