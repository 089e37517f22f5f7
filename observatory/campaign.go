package observatory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/observatory/facts"
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
//
// A campaign runs target by target: one run of the suite per target with
// every scenario of the campaign, so that the suite discovers the target
// once and paces its scenarios itself, and each scenario's result is stored
// as its own row as soon as it is decided. Execute runs a single job, for
// workers that take jobs from a queue.
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
	// Parallel is how many scenarios run at once against one target
	// (0: the suite's default).
	Parallel int
	// ParallelTargets is how many targets are measured at once (default 4).
	ParallelTargets int
	// Revive, when set, restarts a target that the campaign started itself
	// (the demo's local servers, a sweep's builds) after a probe crashed
	// it; the suite then reruns the scenarios the crash spoiled. Remote
	// targets have none.
	Revive func(ctx context.Context, target conformance.Target) error
	// Progress, when set, is called after each stored result.
	Progress func(done, total int, rec store.Record)
}

// RunCampaign creates a run, executes every job of the campaign and returns
// the finished run. Results are stored as each scenario ends, so an
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
	return r.RunCampaignIn(ctx, run, c)
}

// RunCampaignIn executes the campaign within a run that already exists (a
// keyed campaign claimed with Store.ClaimCampaign, resumed after its
// process died): the jobs the run already holds a result for are not run
// again, and the run is marked finished once every job has its result.
func (r *Runner) RunCampaignIn(ctx context.Context, run store.Run, c Campaign) (store.Run, error) {
	if len(c.Targets) == 0 || len(c.Scenarios) == 0 {
		return store.Run{}, errors.New("campaign has no targets or no scenarios")
	}
	total := len(c.Targets) * len(c.Scenarios)
	var (
		mu   sync.Mutex
		done int
		errs []error
		wg   sync.WaitGroup
	)
	stored := func(rec store.Record) {
		mu.Lock()
		defer mu.Unlock()
		done++
		if r.Progress != nil {
			r.Progress(done, total, rec)
		}
	}
	par := r.ParallelTargets
	if par <= 0 {
		par = 4
	}
	next := make(chan conformance.Target)
	for range min(par, len(c.Targets)) {
		wg.Go(func() {
			for t := range next {
				if err := r.executeTarget(ctx, run.ID, t, c.Scenarios, stored); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
feed:
	for _, t := range c.Targets {
		select {
		case next <- t:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("campaign interrupted after %d of %d jobs: %w", done, total, ctx.Err()))
	} else if err := r.Store.FinishRun(context.WithoutCancel(ctx), run.ID, time.Now()); err != nil {
		errs = append(errs, err)
	}
	if got, err := r.Store.Run(context.WithoutCancel(ctx), run.ID); err == nil {
		run = got
	}
	return run, errors.Join(errs...)
}

// ExecuteTarget runs the scenarios of one target within a run, in one run
// of the suite, and stores each result as its own row. Scenarios the run
// already holds a result for are not run again, so a retried batch neither
// loses nor duplicates rows.
func (r *Runner) ExecuteTarget(ctx context.Context, runID int64, t conformance.Target, scenarios []string) error {
	return r.executeTarget(ctx, runID, t, scenarios, nil)
}

// Execute runs one job and stores its result. A job whose result is
// already stored (a retry after a crash) stores nothing new and returns
// the stored row, so retries neither lose nor duplicate results.
func (r *Runner) Execute(ctx context.Context, j Job) (store.Record, error) {
	if rec, ok, err := r.stored(ctx, j.RunID, j.Target.Name, j.Scenario); err != nil || ok {
		return rec, err
	}
	if err := r.executeTarget(ctx, j.RunID, j.Target, []string{j.Scenario}, nil); err != nil {
		return store.Record{}, err
	}
	rec, ok, err := r.stored(ctx, j.RunID, j.Target.Name, j.Scenario)
	if err == nil && !ok {
		err = fmt.Errorf("%s on %s: no result stored", j.Scenario, j.Target.Name)
	}
	return rec, err
}

// executeTarget is ExecuteTarget that also tells onStored about each row it
// stores (or finds already stored).
func (r *Runner) executeTarget(ctx context.Context, runID int64, t conformance.Target, scenarios []string, onStored func(store.Record)) error {
	have, err := r.Store.Cells(ctx, store.Filter{RunID: runID, Target: t.Name})
	if err != nil {
		return err
	}
	var pending []string
	for _, s := range scenarios {
		if i := slices.IndexFunc(have, func(c store.Cell) bool { return c.Scenario == s }); i >= 0 {
			if onStored != nil {
				onStored(store.Record{ID: have[i].ID, RunID: runID, Target: have[i].Target, Scenario: s, Verdict: have[i].Verdict, Sentence: have[i].Sentence, Time: have[i].Time})
			}
			continue
		}
		pending = append(pending, s)
	}
	if len(pending) == 0 {
		return nil
	}
	b := &batch{r: r, runID: runID, target: t, onStored: onStored, done: map[string]bool{}}
	opts := conformance.Options{ToolVersion: r.ToolVersion, Scenarios: pending, Parallel: r.Parallel, Timeout: r.Timeout, Progress: b.progress}
	if r.ArtifactsDir != "" {
		b.rel = filepath.Join(fmt.Sprintf("run-%d", runID), pathSafe(t.Name))
		opts.ArtifactsDir = filepath.Join(r.ArtifactsDir, b.rel)
	}
	if r.Revive != nil {
		opts.Revive = func(ctx context.Context) error { return r.Revive(ctx, t) }
	}
	// An interruption cuts scenarios short: their inconclusive verdicts
	// say nothing about the target, so they are not stored and the jobs
	// stay open for a retry. Results stored before it are kept.
	b.cutShort = func(res conformance.Result) bool {
		return ctx.Err() != nil && (res.Verdict == conformance.Inconclusive || res.Verdict == conformance.Errored)
	}
	started := time.Now()
	rep, err := r.Run(ctx, t, opts)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s: %w", t.Name, err)
	}
	// Results the suite did not hand to Progress are stored now.
	b.mu.Lock()
	b.report = rep
	errs := b.errs
	b.mu.Unlock()
	for _, res := range rep.Results {
		if err := b.store(res); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() != nil {
		return errors.Join(append(errs, ctx.Err())...)
	}
	for _, s := range pending {
		if b.isDone(s) {
			continue
		}
		res := conformance.Result{
			Scenario: s, Verdict: conformance.Errored, Started: started, Duration: time.Since(started),
			Sentence: "The suite returned no result for this scenario.",
			Error:    "no result for " + s + " in the report",
		}
		if err := b.store(res); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// batch stores the results of one target's run of the suite.
type batch struct {
	r        *Runner
	runID    int64
	target   conformance.Target
	rel      string
	onStored func(store.Record)
	cutShort func(conformance.Result) bool
	report   *conformance.Report // set once the suite returned

	mu   sync.Mutex
	done map[string]bool
	errs []error
}

// progress stores each result as the suite decides it.
func (b *batch) progress(_, _ int, res conformance.Result) {
	if err := b.store(res); err != nil {
		b.mu.Lock()
		b.errs = append(b.errs, err)
		b.mu.Unlock()
	}
}

func (b *batch) isDone(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done[id]
}

// store adds one result's row, once. A result decided after the campaign
// was interrupted is dropped: the job stays open for a retry.
func (b *batch) store(res conformance.Result) error {
	b.mu.Lock()
	if b.done[res.Scenario] || b.cutShort(res) {
		b.mu.Unlock()
		return nil
	}
	b.done[res.Scenario] = true
	rep := b.report
	b.mu.Unlock()
	t := b.target
	tool := b.r.ToolVersion
	if rep != nil {
		if t.Implementation == "" {
			t.Implementation = rep.Target.Implementation
		}
		if t.Version == "" {
			t.Version = rep.Target.Version
		}
		if rep.ToolVersion != "" {
			tool = rep.ToolVersion
		}
	}
	if tool == "" {
		tool = "dev"
	}
	rec, err := RecordOf(b.runID, tool, t, res, b.rel, time.Now())
	if err != nil {
		return err
	}
	ctx := context.Background()
	rec.ID, err = b.r.Store.AddResult(ctx, rec)
	if errors.Is(err, store.ErrDuplicate) {
		// Another worker finished the same job first.
		rec, _, err = b.r.stored(ctx, b.runID, t.Name, res.Scenario)
	}
	if err != nil {
		return fmt.Errorf("%s on %s: %w", res.Scenario, t.Name, err)
	}
	if b.onStored != nil {
		b.onStored(rec)
	}
	return nil
}

// stored returns the row of a run × target × scenario if there is one.
func (r *Runner) stored(ctx context.Context, runID int64, target, scenario string) (store.Record, bool, error) {
	cells, err := r.Store.Cells(ctx, store.Filter{RunID: runID, Target: target, Scenario: scenario})
	if err != nil || len(cells) == 0 {
		return store.Record{}, false, err
	}
	rec, err := r.Store.Record(ctx, cells[0].ID)
	return rec, err == nil, err
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
	if rec.Facts, err = facts.FromEvidence(ev); err != nil {
		return store.Record{}, err
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
