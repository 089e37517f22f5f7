package observatory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/observatory/store"
)

// RunFunc runs the conformance suite against one target; conformance.Run is
// the real one, and tests inject fakes.
type RunFunc func(ctx context.Context, target conformance.Target, opts conformance.Options) (*conformance.Report, error)

// Campaign is scenarios × targets. Each pair is one job.
type Campaign struct {
	Name      string
	Targets   []conformance.Target
	Scenarios []string // scenario IDs, already expanded from globs
}

// Job is one scenario against one target within a run. It carries
// everything a worker on another machine needs.
type Job struct {
	RunID    int64              `json:"run_id"`
	Target   conformance.Target `json:"target"`
	Scenario string             `json:"scenario"`
}

// Jobs lists the campaign's jobs for a run, target by target.
func (c *Campaign) Jobs(runID int64) []Job {
	jobs := make([]Job, 0, len(c.Targets)*len(c.Scenarios))
	for _, t := range c.Targets {
		for _, s := range c.Scenarios {
			jobs = append(jobs, Job{RunID: runID, Target: t, Scenario: s})
		}
	}
	return jobs
}

// SelectScenarios expands IDs, globs and family letters into the
// server-facing scenario IDs of the registry.
func SelectScenarios(patterns []string) ([]string, error) {
	scs, err := conformance.Select(conformance.ServerRole, patterns)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(scs))
	for i, s := range scs {
		ids[i] = s.ID
	}
	return ids, nil
}

// Runner executes jobs and stores their results.
type Runner struct {
	Store store.Store
	Run   RunFunc
	// ToolVersion goes into every result row.
	ToolVersion string
	// ArtifactsDir, when set, keeps each job's pcapng, key log and qlog
	// under run-N/TARGET/ in it; the rows name them relative to it.
	ArtifactsDir string
	// Timeout is each scenario's deadline (0: the suite's default).
	Timeout time.Duration
	// Parallel is how many jobs run at once (default 2).
	Parallel int
	// Progress, when set, is called after each job.
	Progress func(done, total int, rec store.Record)
}

// RunCampaign creates a run, executes every job of the campaign and returns
// the finished run. Results are stored as each job ends, so an
// interrupted campaign keeps what it measured. Job failures (the tester's,
// not the target's) are joined into the error after all jobs ran.
func (r *Runner) RunCampaign(ctx context.Context, c Campaign) (store.Run, error) {
	if len(c.Targets) == 0 || len(c.Scenarios) == 0 {
		return store.Run{}, errors.New("campaign has no targets or no scenarios")
	}
	run, err := r.Store.CreateRun(ctx, store.NewRun{Campaign: c.Name, ToolVersion: r.ToolVersion, Started: time.Now()})
	if err != nil {
		return store.Run{}, err
	}
	jobs := c.Jobs(run.ID)
	par := r.Parallel
	if par <= 0 {
		par = 2
	}
	var (
		mu   sync.Mutex
		done int
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan Job)
	for range min(par, len(jobs)) {
		wg.Go(func() {
			for j := range next {
				rec, err := r.Execute(ctx, j)
				mu.Lock()
				done++
				if err != nil {
					errs = append(errs, err)
				} else if r.Progress != nil {
					r.Progress(done, len(jobs), rec)
				}
				mu.Unlock()
			}
		})
	}
feed:
	for _, j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("campaign interrupted after %d of %d jobs: %w", done, len(jobs), ctx.Err()))
	} else if err := r.Store.FinishRun(context.WithoutCancel(ctx), run.ID, time.Now()); err != nil {
		errs = append(errs, err)
	}
	if got, err := r.Store.Run(context.WithoutCancel(ctx), run.ID); err == nil {
		run = got
	}
	return run, errors.Join(errs...)
}

// Execute runs one job and stores its result. A job whose result is
// already stored (a retry after a crash) stores nothing new and returns
// the stored row, so retries neither lose nor duplicate results.
func (r *Runner) Execute(ctx context.Context, j Job) (store.Record, error) {
	if rec, ok, err := r.stored(ctx, j); err != nil || ok {
		return rec, err
	}
	opts := conformance.Options{Scenarios: []string{j.Scenario}, Parallel: 1, Timeout: r.Timeout}
	var rel string
	if r.ArtifactsDir != "" {
		rel = filepath.Join(fmt.Sprintf("run-%d", j.RunID), pathSafe(j.Target.Name))
		opts.ArtifactsDir = filepath.Join(r.ArtifactsDir, rel)
	}
	started := time.Now()
	rep, err := r.Run(ctx, j.Target, opts)
	if err != nil {
		if ctx.Err() != nil {
			return store.Record{}, ctx.Err()
		}
		return store.Record{}, fmt.Errorf("%s on %s: %w", j.Scenario, j.Target.Name, err)
	}
	if ctx.Err() != nil {
		// A run cut short says nothing about the target: keep the job for
		// a retry rather than store an inconclusive verdict.
		return store.Record{}, ctx.Err()
	}
	res, ok := findResult(rep, j.Scenario)
	if !ok {
		res = conformance.Result{
			Scenario: j.Scenario, Verdict: conformance.Errored, Started: started, Duration: time.Since(started),
			Sentence: "The suite returned no result for this scenario.",
			Error:    "no result for " + j.Scenario + " in the report",
		}
	}
	t := j.Target
	if t.Implementation == "" {
		t.Implementation = rep.Target.Implementation
	}
	if t.Version == "" {
		t.Version = rep.Target.Version
	}
	tool := r.ToolVersion
	if rep.ToolVersion != "" {
		tool = rep.ToolVersion
	}
	rec, err := RecordOf(j.RunID, tool, t, res, rel, time.Now())
	if err != nil {
		return store.Record{}, err
	}
	rec.ID, err = r.Store.AddResult(context.WithoutCancel(ctx), rec)
	if errors.Is(err, store.ErrDuplicate) {
		// Another worker finished the same job first.
		rec, _, err = r.stored(ctx, j)
	}
	return rec, err
}

// stored returns the job's row if the run already has one.
func (r *Runner) stored(ctx context.Context, j Job) (store.Record, bool, error) {
	cells, err := r.Store.Cells(ctx, store.Filter{RunID: j.RunID, Target: j.Target.Name, Scenario: j.Scenario})
	if err != nil || len(cells) == 0 {
		return store.Record{}, false, err
	}
	rec, err := r.Store.Record(ctx, cells[0].ID)
	return rec, err == nil, err
}

func findResult(rep *conformance.Report, id string) (conformance.Result, bool) {
	for _, res := range rep.Results {
		if res.Scenario == id {
			return res, true
		}
	}
	return conformance.Result{}, false
}

var unsafePath = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// pathSafe turns a target name into one folder name.
func pathSafe(name string) string {
	s := unsafePath.ReplaceAllString(name, "_")
	if s == "" || s == "." || s == ".." {
		s = "_"
	}
	return s
}

// RecordOf builds the row for one scenario result. The artifacts the result
// names (relative to the job's artifacts folder, rel) become the row's
// artifact references, relative to the artifacts root.
func RecordOf(runID int64, toolVersion string, t conformance.Target, res conformance.Result, rel string, now time.Time) (store.Record, error) {
	ev, err := json.Marshal(res)
	if err != nil {
		return store.Record{}, err
	}
	rec := store.Record{
		RunID:       runID,
		ToolVersion: toolVersion,
		Target:      store.Target{Name: t.Name, Address: t.Address, Implementation: t.Implementation, Version: t.Version},
		Scenario:    res.Scenario,
		Verdict:     string(res.Verdict),
		Sentence:    res.Sentence,
		Evidence:    ev,
		Time:        now,
	}
	add := func(kind, p string) {
		if p != "" {
			rec.Artifacts = append(rec.Artifacts, store.Artifact{Kind: kind, Path: filepath.ToSlash(filepath.Join(rel, p))})
		}
	}
	if a := res.Artifacts; a != nil {
		add("pcapng", a.Pcapng)
		add("keylog", a.Keylog)
		for _, q := range a.Qlogs {
			add("qlog", q)
		}
	}
	return rec, nil
}

// DecodeResult decodes a row's evidence back into the suite's result.
func DecodeResult(rec store.Record) (conformance.Result, error) {
	var res conformance.Result
	if err := json.Unmarshal(rec.Evidence, &res); err != nil {
		return res, fmt.Errorf("result %d: evidence: %w", rec.ID, err)
	}
	return res, nil
}
