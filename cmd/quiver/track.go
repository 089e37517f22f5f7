package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/facts"
	"github.com/quiver-quic/quiver/observatory/results"
	"github.com/quiver-quic/quiver/observatory/store"
)

// trackOpts are the flags of every track subcommand. They may come before
// or after the subcommand's name (dispatch).
type trackOpts struct {
	db, targets, scenarios, artifacts, campaign, target  string
	impl, versions, since, cache, proxy, commit, command string
	role                                                 string
	merge, mixedCommits                                  bool
	parallel, window                                     int
	timeout, every                                       time.Duration
	json, queue                                          bool
}

func (o *trackOpts) setFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", "quiver.db", "SQLite `file` or PostgreSQL DSN of the result store")
	fs.StringVar(&o.targets, "targets", "", "targets `file` (JSON) for run; also accepted as its argument")
	fs.StringVar(&o.scenarios, "scenarios", "*", "scenario `IDs or globs`, comma-separated, for run")
	fs.StringVar(&o.artifacts, "artifacts", "quiver-artifacts", "`directory` for per-result pcapng, qlog and key log (empty: keep none)")
	fs.StringVar(&o.campaign, "campaign", "", "`label` of the run (default: the targets file name)")
	fs.IntVar(&o.parallel, "parallel", 4, "scenarios run at once against each target (targets: 4 at once)")
	fs.DurationVar(&o.timeout, "timeout", 0, "deadline of each scenario (default: the suite's)")
	fs.StringVar(&o.target, "target", "", "only this target `name` (show, changes)")
	fs.IntVar(&o.window, "window", results.DefaultFlapWindow, "flapping: `N` most recent judged results looked at by changes")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of a table (list, show, diff, changes)")
	fs.BoolVar(&o.queue, "queue", false, "run: put the jobs in the PostgreSQL queue for quiver worker processes instead of running them")
	fs.StringVar(&o.impl, "impl", "", "sweep: `implementation` to build at each version (quic-go or x/net); watch: comma-separated, their new releases are swept")
	fs.StringVar(&o.versions, "versions", "", "sweep: released `versions`, comma-separated (see go list -m -versions)")
	fs.StringVar(&o.since, "since", "", "sweep, watch: every released version from `version` on")
	fs.StringVar(&o.role, "role", "server", "sweep: which endpoint of each release is tested, `server` (server-facing suite, target \"IMPL releases\") or client (client-facing suite, target \"IMPL clients\")")
	fs.BoolVar(&o.merge, "merge", false, "export: add the target's runs to the dataset file already there instead of replacing it")
	fs.BoolVar(&o.mixedCommits, "mixed-commits", false, "export --merge: keep results measured at different Quiver commits in one series (refused without it; the dataset records it)")
	fs.StringVar(&o.cache, "cache", "", "sweep: `directory` of cached builds (default ~/.cache/quiver/sweeps)")
	fs.DurationVar(&o.every, "every", time.Hour, "watch: `interval` of the scheduled campaign and of release checks")
	fs.StringVar(&o.commit, "commit", "", "export: the Quiver `commit` that measured the data, kept in the dataset")
	fs.StringVar(&o.command, "command", "", "export: the `command line` that measured the data, kept in the dataset")
	fs.StringVar(&o.proxy, "proxy", "", "watch: Go module proxy `URL` to ask for releases (default: from GOPROXY, else proxy.golang.org)")
}

// suiteRun is the conformance suite the commands run; tests replace it.
var suiteRun observatory.RunFunc = conformance.Run

// selectScenarios expands scenario patterns; tests replace it.
var selectScenarios = observatory.SelectScenarios

func runTrack(ctx context.Context, env *cmdEnv, o *trackOpts, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: track needs a subcommand: run, list, show, diff, changes, facts, sweep, watch, import, export or evolution", errUsage)
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "run":
		return trackRunCmd(ctx, env, o, args)
	case "sweep":
		return trackSweep(ctx, env, o, args)
	case "import":
		return trackImport(ctx, env, o, args)
	case "watch":
		return trackWatch(ctx, env, o, args)
	case "export":
		return trackExport(ctx, env, o, args)
	case "evolution":
		return trackEvolution(ctx, env, o, args)
	case "list", "show", "diff", "changes", "facts":
	default:
		return fmt.Errorf("%w: unknown track subcommand %q (run, list, show, diff, changes, facts, sweep, watch, import, export or evolution)", errUsage, sub)
	}
	st, err := openStore(ctx, o.db, false)
	if err != nil {
		return err
	}
	defer st.Close()
	switch sub {
	case "list":
		if len(args) > 0 {
			return fmt.Errorf("%w: track list takes no arguments", errUsage)
		}
		runs, err := st.ListRuns(ctx)
		if err != nil {
			return err
		}
		if o.json {
			return writeJSON(env.stdout, runs)
		}
		if len(runs) == 0 {
			fmt.Fprintf(env.stdout, "no runs in %s yet; start one with: quiver track run --db %s targets.json\n", displayDB(o.db), o.db)
			return nil
		}
		return results.WriteRuns(env.stdout, runs)
	case "show":
		return trackShow(ctx, env, st, o, args)
	case "diff":
		return trackDiff(ctx, env, st, o, args)
	default: // changes
		if len(args) > 0 {
			return fmt.Errorf("%w: track changes takes no arguments", errUsage)
		}
		cells, err := st.Cells(ctx, store.Filter{Target: o.target})
		if err != nil {
			return err
		}
		ch := results.DetectChanges(cells, o.window)
		fcells, err := st.FactCells(ctx, store.FactFilter{Target: o.target})
		if err != nil {
			return err
		}
		fch := facts.DetectChanges(fcells)
		if o.json {
			return writeJSON(env.stdout, changesJSON{Changes: ch, FactChanges: fch})
		}
		if err := results.WriteChanges(env.stdout, ch); err != nil {
			return err
		}
		fmt.Fprintln(env.stdout)
		return facts.WriteChanges(env.stdout, fch)
	case "facts":
		return trackFacts(ctx, env, st, o, args)
	}
}

// changesJSON is what track changes --json prints (and /api/changes serves).
type changesJSON struct {
	Changes     []results.Change `json:"changes"`
	FactChanges []facts.Change   `json:"fact_changes"`
}

// trackFacts types the facts of results stored before the store kept them
// (read from their evidence), then lists the facts of the latest run, or
// of the run given.
func trackFacts(ctx context.Context, env *cmdEnv, st store.Store, o *trackOpts, args []string) error {
	if len(args) > 1 {
		return fmt.Errorf("%w: track facts takes at most one run id", errUsage)
	}
	n, err := facts.Backfill(ctx, st)
	if err != nil {
		return err
	}
	if n > 0 {
		fmt.Fprintf(env.stderr, "typed the facts of %d older results\n", n)
	}
	var id int64
	if len(args) == 1 {
		if id, err = parseRunID(args[0]); err != nil {
			return err
		}
	} else {
		runs, err := st.ListRuns(ctx)
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			return fmt.Errorf("no runs in %s yet", displayDB(o.db))
		}
		id = runs[0].ID
	}
	fcells, err := st.FactCells(ctx, store.FactFilter{RunID: id, Target: o.target})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(env.stdout, fcells)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tscenario\tfact\ttype\tvalue")
	for _, c := range fcells {
		v := c.Value
		if c.Unit != "" {
			v += " " + c.Unit
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printableName(c.Target.Name), c.Scenario, c.Key, c.Type, printableName(v))
	}
	return tw.Flush()
}

// openStore opens the store; create says whether a missing SQLite file may
// be created (only commands that write may create one).
func openStore(ctx context.Context, db string, create bool) (store.Store, error) {
	if !create && !store.IsPostgres(db) {
		if _, err := statFile(db); err != nil {
			return nil, fmt.Errorf("no result store at %s: run a campaign first (quiver track run --db %s targets.json, or quiver demo)", db, db)
		}
	}
	return store.Open(ctx, db)
}

func displayDB(db string) string {
	if store.IsPostgres(db) {
		return "the PostgreSQL store"
	}
	return db
}

func trackRunCmd(ctx context.Context, env *cmdEnv, o *trackOpts, args []string) error {
	file := o.targets
	switch {
	case len(args) == 1 && file == "":
		file = args[0]
	case len(args) > 1 || (len(args) == 1 && file != ""):
		return fmt.Errorf("%w: track run takes one targets file", errUsage)
	}
	if file == "" {
		return fmt.Errorf("%w: track run needs a targets file (--targets FILE)", errUsage)
	}
	if o.queue && !store.IsPostgres(o.db) {
		return fmt.Errorf("%w: --queue needs --db postgres://… (workers share the queue and the results there)", errUsage)
	}
	targets, err := observatory.LoadTargets(file)
	if err != nil {
		return err
	}
	scenarios, err := selectScenarios(scenarioPatterns(o.scenarios))
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	st, err := openStore(ctx, o.db, true)
	if err != nil {
		return err
	}
	defer st.Close()
	name := o.campaign
	if name == "" {
		name = file
	}
	c := observatory.Campaign{Name: name, Targets: targets, Scenarios: scenarios}
	if o.queue {
		return enqueueCampaign(ctx, env, st, o, c)
	}
	run, err := runCampaign(ctx, env, st, o, c, nil)
	if err != nil && run.ID == 0 {
		return err
	}
	cells, cerr := st.Cells(ctx, store.Filter{RunID: run.ID})
	if cerr != nil {
		return cerr
	}
	fmt.Fprintf(env.stdout, "run %d: %d results in %s\n\n", run.ID, len(cells), displayDB(o.db))
	if werr := results.WriteGrid(env.stdout, results.NewGrid(cells)); werr != nil {
		return werr
	}
	return err
}

// runCampaign runs c into st, showing progress on stderr. revive, when
// set, restarts targets the command started itself.
func runCampaign(ctx context.Context, env *cmdEnv, st store.Store, o *trackOpts, c observatory.Campaign, revive func(context.Context, conformance.Target) error) (store.Run, error) {
	total := len(c.Targets) * len(c.Scenarios)
	fmt.Fprintf(env.stderr, "running %d scenarios × %d targets (%d jobs)\n", len(c.Scenarios), len(c.Targets), total)
	r := &observatory.Runner{
		Store: st, Run: suiteRun, ToolVersion: version, ArtifactsDir: o.artifacts,
		Timeout: o.timeout, Parallel: o.parallel, Revive: revive,
		Progress: campaignProgress(env.stderr),
	}
	run, err := r.RunCampaign(ctx, c)
	endCampaignProgress(env.stderr)
	return run, err
}

func trackShow(ctx context.Context, env *cmdEnv, st store.Store, o *trackOpts, args []string) error {
	if len(args) > 1 {
		return fmt.Errorf("%w: track show takes at most one run id", errUsage)
	}
	var id int64
	if len(args) == 1 {
		var err error
		if id, err = parseRunID(args[0]); err != nil {
			return err
		}
	} else {
		runs, err := st.ListRuns(ctx)
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			return fmt.Errorf("no runs in %s yet", displayDB(o.db))
		}
		id = runs[0].ID
	}
	run, err := st.Run(ctx, id)
	if err != nil {
		return err
	}
	if o.json {
		recs, err := st.Results(ctx, id)
		if err != nil {
			return err
		}
		var keep []store.Record
		for _, r := range recs {
			if o.target == "" || r.Target.Name == o.target {
				keep = append(keep, r)
			}
		}
		return writeJSON(env.stdout, struct {
			Run     store.Run      `json:"run"`
			Results []store.Record `json:"results"`
		}{run, keep})
	}
	cells, err := st.Cells(ctx, store.Filter{RunID: id, Target: o.target})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "run %d (%s), started %s, %d results\n\n", run.ID, run.Campaign, run.Started.Format(time.RFC3339), run.Results)
	return results.WriteResults(env.stdout, cells)
}

func trackDiff(ctx context.Context, env *cmdEnv, st store.Store, o *trackOpts, args []string) error {
	var a, b int64
	switch len(args) {
	case 0:
		runs, err := st.ListRuns(ctx)
		if err != nil {
			return err
		}
		if len(runs) < 2 {
			return fmt.Errorf("track diff needs two runs; %s has %d", displayDB(o.db), len(runs))
		}
		a, b = runs[1].ID, runs[0].ID
	case 2:
		var err error
		if a, err = parseRunID(args[0]); err != nil {
			return err
		}
		if b, err = parseRunID(args[1]); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: track diff takes two run ids (or none: the last two runs)", errUsage)
	}
	var sides [2][]store.Cell
	for i, id := range []int64{a, b} {
		if _, err := st.Run(ctx, id); err != nil {
			return err
		}
		cells, err := st.Cells(ctx, store.Filter{RunID: id, Target: o.target})
		if err != nil {
			return err
		}
		sides[i] = cells
	}
	d := results.DiffRuns(sides[0], sides[1])
	if o.json {
		return writeJSON(env.stdout, d)
	}
	return results.WriteDiff(env.stdout, a, b, d)
}

func parseRunID(s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(s, "#"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: %q is not a run id (see quiver track list)", errUsage, s)
	}
	return id, nil
}

func writeJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

// scenarioPatterns splits --scenarios; "*" alone means every scenario.
func scenarioPatterns(s string) []string {
	var out []string
	for _, p := range splitList(s) {
		if p != "*" {
			out = append(out, p)
		}
	}
	return out
}

// trackImport records benchmark JSON files (goodput.json, sweep-*.json,
// ackfreq.json, rpc.json as quiver bench writes them) in the store; a file
// already imported is reported and skipped.
func trackImport(ctx context.Context, env *cmdEnv, o *trackOpts, files []string) error {
	if len(files) == 0 {
		return fmt.Errorf("%w: track import needs benchmark JSON files (e.g. bench-results/*/ackfreq.json)", errUsage)
	}
	var recs []store.BenchRun
	var datasets []string
	for _, f := range files {
		if isDataset(f) {
			datasets = append(datasets, f)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		b, err := observatory.BenchRecord(data, version)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		recs = append(recs, b)
	}
	st, err := openStore(ctx, o.db, true)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, f := range datasets {
		if err := importDataset(ctx, env, st, f); err != nil {
			return err
		}
	}
	benchFiles := slices.DeleteFunc(slices.Clone(files), isDataset)
	for i, b := range recs {
		id, err := st.AddBenchRun(ctx, b)
		switch {
		case errors.Is(err, store.ErrDuplicate):
			fmt.Fprintf(env.stdout, "%s: already recorded\n", benchFiles[i])
		case err != nil:
			return fmt.Errorf("%s: %w", benchFiles[i], err)
		default:
			fmt.Fprintf(env.stdout, "%s: benchmark run %d (%s, %d rows)\n", benchFiles[i], id, b.Kind, len(b.Summary))
		}
	}
	return nil
}
