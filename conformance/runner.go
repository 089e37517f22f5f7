package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic"
)

// Options configure a run of the suite.
type Options struct {
	// ToolVersion is written into the report (default "dev"); cmd/quiver
	// gives its own version.
	ToolVersion string
	// Scenarios are IDs, globs ("hs-*") or family letters; empty runs all.
	Scenarios []string
	// Parallel is how many scenarios run at once (default 8; fails and
	// timing verdicts are confirmed alone at the end, see confirmVerdicts).
	Parallel int
	// Timeout is each scenario's deadline (default 10 s; transfer and
	// timing scenarios get at least 60 s).
	Timeout time.Duration
	// ArtifactsDir, when set, receives per scenario a pcapng with the
	// decryption secrets embedded, the key log and the qlog traces.
	ArtifactsDir string
	// Progress, when set, is called after each scenario.
	Progress func(done, total int, r Result)
	// Revive, when set, restarts the target. The runner calls it when the
	// target stops completing handshakes in the middle of a run (a probe
	// crashed it), then runs again, alone, the scenarios that ended
	// inconclusive meanwhile, and names the one after which the target
	// died. Without it the scenarios left are reported inconclusive at
	// once, with the reason.
	Revive func(ctx context.Context) error
}

// grace is how long the runner waits past a scenario's deadline before it
// gives up on it; a scenario that ignores its context must not hang the
// suite.
const grace = 3 * time.Second

// Run runs the selected server-facing scenarios against target and returns
// the report. It fails only when nothing can be run at all (a bad
// selection); an unreachable or hostile target gives inconclusive
// verdicts, never an error.
func Run(ctx context.Context, target Target, opts Options) (*Report, error) {
	// Scenarios such as tls-chacha20-only offer their own TLS 1.3 suites.
	quic.EnableTLS13SuiteControl()
	scs, err := Select(ServerRole, opts.Scenarios)
	if err != nil {
		return nil, err
	}
	if opts.ArtifactsDir != "" {
		if err := os.MkdirAll(opts.ArtifactsDir, 0o755); err != nil {
			return nil, fmt.Errorf("artifacts: %w", err)
		}
	}
	rep := &Report{Schema: SchemaVersion, ToolVersion: opts.toolVersion(), Started: time.Now()}
	prof := Discover(ctx, target)
	rep.Target = prof.Target
	rep.Results = runScenarios(ctx, prof, scs, opts)
	rep.Finished = time.Now()
	return rep, nil
}

// RunClient runs the selected client-facing scenarios (family M): for each,
// Quiver serves with a deliberately misbehaving server and launches the
// client under test against it.
func RunClient(ctx context.Context, client ClientTarget, opts Options) (*Report, error) {
	quic.EnableTLS13SuiteControl()
	scs, err := Select(ClientRole, opts.Scenarios)
	if err != nil {
		return nil, err
	}
	if client.Command == "" && client.Launch == nil {
		return nil, errors.New("no client command: give a template such as 'client --out {outdir} {url}'")
	}
	if client.ALPN == "" {
		client.ALPN = "hq-interop"
	}
	if opts.ArtifactsDir != "" {
		if err := os.MkdirAll(opts.ArtifactsDir, 0o755); err != nil {
			return nil, fmt.Errorf("artifacts: %w", err)
		}
	}
	if _, err := getCA(); err != nil {
		return nil, fmt.Errorf("certificates for the tester's server: %w", err)
	}
	rep := &Report{Schema: SchemaVersion, ToolVersion: opts.toolVersion(), Started: time.Now(), Client: &client}
	rep.Target = Target{Name: client.Name, ALPN: []string{client.ALPN}}
	prof := &Profile{Target: rep.Target, ALPNs: []string{client.ALPN}, Client: &client}
	rep.Results = runScenarios(ctx, prof, scs, opts)
	rep.Finished = time.Now()
	return rep, nil
}

func runScenarios(ctx context.Context, prof *Profile, scs []*Scenario, opts Options) []Result {
	par := opts.Parallel
	if par <= 0 {
		par = 8
	}
	h := newHealth(prof, opts.Revive)
	results := make([]Result, len(scs))
	suspect := make([]bool, len(scs))
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	report := func(i int) {
		if opts.Progress != nil {
			mu.Lock()
			done++
			opts.Progress(done, len(scs), results[i])
			mu.Unlock()
		}
	}
	for i, sc := range scs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results[i] = skipped(sc, "the run was cancelled before the scenario started")
				return
			}
			defer func() { <-sem }()
			epoch, skip := h.begin()
			if skip != "" {
				results[i] = skipped(sc, skip)
				report(i)
				return
			}
			r := runOne(ctx, prof, sc, opts)
			suspect[i] = h.end(ctx, sc.ID, epoch, r.Verdict)
			results[i] = r
			if !suspect[i] || opts.Revive == nil {
				report(i)
			}
		}()
	}
	wg.Wait()
	// Scenarios that ended inconclusive while the target was dead run
	// again, one at a time, so the one that kills the target is named.
	for i, sc := range scs {
		if !suspect[i] {
			continue
		}
		if opts.Revive == nil || h.isDown() {
			if h.isDown() {
				results[i].Checks = append(results[i].Checks, CheckResult{Name: "target-alive", Verdict: Inconclusive,
					Sentence: "The target stopped completing handshakes while this scenario (or one beside it) ran; the tester could not restart it."})
			}
			if opts.Revive != nil {
				report(i)
			}
			continue
		}
		_, skip := h.begin()
		if skip != "" {
			results[i] = skipped(sc, skip)
			report(i)
			continue
		}
		r := runOne(ctx, prof, sc, opts)
		h.gate.RUnlock()
		if r.Verdict == Inconclusive && ctx.Err() == nil && !h.alive(ctx) {
			revived := h.restart(ctx, fmt.Sprintf("the target stopped completing handshakes after %s", sc.ID))
			r.Checks = append(r.Checks, crashNote(revived))
			r.Facts = append(r.Facts, NewFact("target.stopped-answering", true))
		}
		results[i] = r
		report(i)
	}
	confirmVerdicts(ctx, prof, scs, results, opts, par, h)
	var found [][]passiveFinding
	judged := 0
	for i := range results {
		found = append(found, results[i].passive)
		judged += results[i].passiveConns
	}
	mergePassive(results, found, judged)
	return results
}

// needsConfirmation reports whether a result must be reproduced by a
// re-run alone before it is reported: every fail, and the warn or
// inconclusive of a timing-based scenario (load on the tester's host can
// blur a measurement into either).
func needsConfirmation(sc *Scenario, r Result) bool {
	return r.Verdict == Fail || sc.Timing && (r.Verdict == Warn || r.Verdict == Inconclusive)
}

// confirmVerdicts runs again, one at a time with nothing beside them,
// the scenarios whose verdict needs confirmation (docs/conformance-model.md,
// Verdicts rule 7). A verdict that comes out the same is marked
// confirmed; otherwise the re-run's result is reported, with the first
// run's verdict kept beside it.
func confirmVerdicts(ctx context.Context, prof *Profile, scs []*Scenario, results []Result, opts Options, par int, h *health) {
	for i, sc := range scs {
		if !needsConfirmation(sc, results[i]) || ctx.Err() != nil {
			continue
		}
		_, skip := h.begin()
		if skip != "" {
			continue
		}
		r := runOne(ctx, prof, sc, opts)
		h.gate.RUnlock()
		results[i] = confirmed(results[i], r, par)
	}
}

// confirmed combines a first result with the re-run alone.
func confirmed(first, again Result, par int) Result {
	if again.Verdict == first.Verdict {
		first.Confirmed = true
		return first
	}
	again.FirstRun = &FirstRun{Verdict: first.Verdict, Sentence: first.Sentence, Parallel: par}
	load := "with nothing beside it"
	if par > 1 {
		load = fmt.Sprintf("with up to %d scenarios at once", par)
	}
	again.Sentence += fmt.Sprintf(" (Run again alone: the first run, %s, said %s, which did not reproduce.)", load, first.Verdict)
	return again
}

func skipped(sc *Scenario, why string) Result {
	r := baseResult(sc)
	r.Started = time.Now()
	r.Verdict = Inconclusive
	r.Sentence = why
	return r
}

func baseResult(sc *Scenario) Result {
	return Result{Scenario: sc.ID, Title: sc.Title, Family: sc.Family, Role: sc.Role, Revision: sc.Revision}
}

func (o Options) toolVersion() string {
	if o.ToolVersion == "" {
		return "dev"
	}
	return o.ToolVersion
}

// runOne runs one scenario under its deadline. A panic becomes verdict
// error; a scenario that overruns its deadline is abandoned.
func runOne(ctx context.Context, prof *Profile, sc *Scenario, opts Options) Result {
	start := time.Now()
	res := baseResult(sc)
	res.Started = start
	t := &T{sc: sc, profile: prof, rec: newRecorder(start), started: start}
	if opts.ArtifactsDir != "" {
		t.dir = filepath.Join(opts.ArtifactsDir, sc.ID)
		if err := os.MkdirAll(t.dir, 0o755); err != nil {
			t.dir = ""
		} else {
			t.rec.startCapture(t.dir)
		}
	}
	defer t.rec.endCapture()
	if why, v := needsMet(prof, sc); v != "" {
		res.Verdict = v
		res.Sentence = why
		res.Checks = []CheckResult{{Name: "needs", Verdict: v, Sentence: why}}
		res.Duration = time.Since(start)
		return res
	}
	sctx, cancel := context.WithTimeout(ctx, sc.budget(opts))
	defer cancel()
	finished := make(chan struct{})
	var panicMsg string
	go func() {
		defer close(finished)
		defer func() {
			if p := recover(); p != nil {
				panicMsg = fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
			}
		}()
		defer t.runCleanups()
		sc.Run(sctx, t)
	}()
	overran := false
	select {
	case <-finished:
	case <-sctx.Done():
		select {
		case <-finished:
		case <-time.After(grace):
			overran = true
		}
	}
	t.mu.Lock()
	checks := append([]CheckResult(nil), t.checks...)
	res.Facts = append([]Fact(nil), t.facts...)
	errMsg := t.errMsg
	t.mu.Unlock()
	switch {
	case overran:
		checks = append(
			checks,
			CheckResult{
				Name:     "deadline",
				Verdict:  Errored,
				Sentence: fmt.Sprintf("The scenario did not stop within %v of its %v deadline; the tester abandoned it.", grace, sc.budget(opts)),
			},
		)
		errMsg = "scenario overran its deadline"
	case panicMsg != "":
		checks = append(checks, CheckResult{Name: "tester", Verdict: Errored, Sentence: "The tester panicked; this says nothing about the target."})
		errMsg = panicMsg
	case len(checks) == 0:
		why := "The scenario ended without a verdict."
		if errors.Is(sctx.Err(), context.DeadlineExceeded) {
			why = fmt.Sprintf("The scenario reached its %v deadline before it could decide.", sc.budget(opts))
		}
		checks = append(checks, CheckResult{Name: "outcome", Verdict: Inconclusive, Sentence: why})
	}
	if sum := t.rec.summary(); sum != "" {
		res.Facts = append(res.Facts, NewFact("record.summarised", sum))
		checks = t.keptEvidenceChecks(checks)
	}
	res.Checks = checks
	res.Error = errMsg
	res.Verdict, res.Sentence = combine(checks)
	res.Duration = time.Since(start)
	if t.dir != "" && !overran {
		res.Artifacts = writeArtifacts(t)
	}
	if !overran && panicMsg == "" {
		res.passive, res.passiveConns = t.passiveFindings()
	}
	return res
}

// combine takes the worst check as the scenario verdict and its sentence.
func combine(checks []CheckResult) (Verdict, string) {
	vs := make([]Verdict, len(checks))
	for i, c := range checks {
		vs[i] = c.Verdict
	}
	v := Worst(vs...)
	for _, c := range checks {
		if c.Verdict == v {
			return v, c.Sentence
		}
	}
	return v, ""
}

// needsMet decides the needs the profile can answer before the scenario
// runs (application protocols); the rest are decided inside Run.
// An unreachable target makes every scenario that needs an application
// protocol inconclusive, not unsupported: silence proves nothing.
func needsMet(p *Profile, sc *Scenario) (string, Verdict) {
	for _, n := range sc.Needs {
		if n == NeedCH3 && p.Client != nil && p.Client.ALPN != "h3" {
			return fmt.Sprintf("The client speaks %s, not HTTP/3.", p.Client.ALPN), Unsupported
		}
		if (n == NeedApp || n == NeedHQ || n == NeedH3) && len(p.ALPNs) == 0 && !p.Reachable {
			return "The target did not answer the discovery handshakes (hq-interop, h3), so it is unreachable from the tester.", Inconclusive
		}
		switch n {
		case NeedApp:
			if len(p.ALPNs) == 0 {
				return "The target accepted neither hq-interop nor h3 during discovery, so no application protocol is available.", Unsupported
			}
		case NeedHQ:
			if !p.HasALPN("hq-interop") {
				return fmt.Sprintf("The target does not speak hq-interop (it accepted %v).", p.ALPNs), Unsupported
			}
		case NeedH3:
			if !p.HasALPN("h3") {
				return fmt.Sprintf("The target does not speak h3 (it accepted %v).", p.ALPNs), Unsupported
			}
		case NeedLarge:
			if p.Target.LargePath == "" {
				return "The target profile names no large resource (give one of at least 1 MiB).", Unsupported
			}
		}
	}
	return "", ""
}

// writeArtifacts writes the scenario's pcapng (secrets embedded) and key
// log; the qlog files were written by the engine's tracer.
func writeArtifacts(t *T) *Artifacts {
	a := &Artifacts{}
	t.rec.mu.Lock()
	keylog := append([]byte(nil), t.rec.keylog.Bytes()...)
	t.rec.mu.Unlock()
	if len(keylog) > 0 {
		if err := os.WriteFile(filepath.Join(t.dir, "keys.log"), keylog, 0o644); err == nil {
			a.Keylog = filepath.Join(t.sc.ID, "keys.log")
		}
	}
	if t.rec.finishCapture(keylog) {
		a.Pcapng = filepath.Join(t.sc.ID, "capture.pcapng")
	}
	if ents, err := os.ReadDir(t.dir); err == nil {
		for _, e := range ents {
			if filepath.Ext(e.Name()) == ".sqlog" || filepath.Ext(e.Name()) == ".qlog" {
				a.Qlogs = append(a.Qlogs, filepath.Join(t.sc.ID, e.Name()))
			}
		}
	}
	return a
}
