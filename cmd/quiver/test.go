package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/conformance/report"
)

// exitStatusNotes is the part of test's and test-client's --help that a
// CI job relies on (docs/ci.md says the same).
const exitStatusNotes = `Exit status:
  0  every verdict as expected: no scenario failed, or with --baseline every
     verdict is one the baseline expects (with only --write-baseline: the
     baseline was written)
  1  a scenario failed, or with --baseline a verdict changed (each change is
     printed: "SCENARIO: expected V, got W")
  2  the run could not be made or judged: bad flags or arguments, an unknown
     scenario, an unreadable baseline, a report that could not be written,
     an interrupted run, or (test) a target that answered no discovery
     handshake
`

// baselineFlags declares --baseline and --write-baseline, shared by test
// and test-client.
func baselineFlags(fs *flag.FlagSet, baseline, write *string) {
	fs.StringVar(baseline, "baseline", "", "compare the verdicts with the expected ones in `file` and exit 1 only on a change; "+
		"without --scenarios, run the scenarios the file lists")
	fs.StringVar(write, "write-baseline", "", "write this run's verdicts to `file` as the baseline of later runs")
}

// runTest runs the conformance suite against the server at addr, prints
// the table and writes the reports. Its exit status is described by
// exitStatusNotes.
func runTest(ctx context.Context, env *cmdEnv, o *testOpts, addr string) error {
	target := conformance.Target{Name: addr, Address: addr, SNI: o.sni, ALPN: splitList(o.alpn), SmallPath: o.small, LargePath: o.large}
	base, patterns, err := loadBaseline(o.baseline, o.scenarios)
	if err != nil {
		return err
	}
	rep, err := conformance.Run(ctx, target, conformance.Options{
		ToolVersion:  version,
		Scenarios:    patterns,
		Parallel:     o.parallel,
		Timeout:      o.timeout,
		ArtifactsDir: o.artifacts,
		Progress:     report.ProgressLine(env.stderr, isTerminal(env.stderr)),
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	ro := reportOpts{cmd: "test", jsonFile: o.jsonFile, junit: o.junit, baselineFile: o.baseline, baseline: base, writeBaseline: o.writeBaseline}
	if o.alpn == "" && len(rep.Target.ALPN) == 0 {
		// Without --alpn, discovery found no application protocol: the
		// server is down or elsewhere, and every verdict is inconclusive.
		ro.unreachable = fmt.Sprintf("the target %s answered no discovery handshake (hq-interop, h3): is it running? "+
			"(give --alpn if it speaks another protocol)", addr)
	}
	return finishReport(ctx, env, rep, ro)
}

// loadBaseline reads the baseline file, if any, and returns the scenario
// patterns to run: those of --scenarios, or the baseline's scenarios
// when --scenarios is left at "*".
func loadBaseline(file, scenarios string) (conformance.Baseline, []string, error) {
	var patterns []string
	for _, p := range splitList(scenarios) {
		if p != "*" {
			patterns = append(patterns, p)
		}
	}
	if file == "" {
		return nil, patterns, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	defer f.Close()
	b, err := conformance.ReadBaseline(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", errUsage, file, err)
	}
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("%w: baseline %s lists no scenario", errUsage, file)
	}
	if len(patterns) == 0 && (scenarios == "*" || scenarios == "") {
		patterns = b.Scenarios()
	}
	return b, patterns, nil
}

// reportOpts say what finishReport writes and how it judges the run.
type reportOpts struct {
	cmd             string // "test" or "test-client", for messages
	jsonFile, junit string
	baselineFile    string
	baseline        conformance.Baseline // nil without --baseline
	writeBaseline   string
	unreachable     string // why the target could not be tested, if so
}

// finishReport writes the reports, then the table, and decides the exit
// status (exitStatusNotes).
func finishReport(ctx context.Context, env *cmdEnv, rep *conformance.Report, o reportOpts) error {
	// Write the reports before anything can fail, so a run always leaves
	// its results behind.
	if o.jsonFile != "" {
		if err := writeReport(o.jsonFile, rep, report.WriteJSON); err != nil {
			return testerError(env, o.cmd, "%v", err)
		}
	}
	if o.junit != "" {
		if err := writeReport(o.junit, rep, report.WriteJUnit); err != nil {
			return testerError(env, o.cmd, "%v", err)
		}
	}
	if err := report.WriteTable(env.stdout, rep); err != nil {
		return testerError(env, o.cmd, "%v", err)
	}
	if ctx.Err() != nil {
		return testerError(env, o.cmd, "interrupted: %v", context.Cause(ctx))
	}
	if o.unreachable != "" {
		return testerError(env, o.cmd, "%s", o.unreachable)
	}
	if o.writeBaseline != "" {
		if err := writeReport(o.writeBaseline, rep, func(w io.Writer, r *conformance.Report) error {
			return conformance.BaselineOf(r).Write(w)
		}); err != nil {
			return testerError(env, o.cmd, "%v", err)
		}
		fmt.Fprintf(env.stdout, "Baseline of %d verdicts written to %s.\n", len(rep.Results), o.writeBaseline)
	}
	if o.baseline != nil {
		changes := o.baseline.Compare(rep)
		if len(changes) == 0 {
			fmt.Fprintf(env.stdout, "All %d verdicts as the baseline %s expects.\n", len(rep.Results), o.baselineFile)
			return nil
		}
		fmt.Fprintf(env.stdout, "%d changed from the baseline %s:\n", len(changes), o.baselineFile)
		for _, c := range changes {
			fmt.Fprintf(env.stdout, "  %s\n", c)
		}
		return exitError{code: 1}
	}
	if o.writeBaseline != "" {
		return nil
	}
	if rep.Counts()[conformance.Fail] > 0 {
		return exitError{code: 1}
	}
	return nil
}

// testerError prints why a run could not be made or judged and gives exit
// status 2, apart from 1 (a scenario failed or changed).
func testerError(env *cmdEnv, cmd, format string, args ...any) error {
	fmt.Fprintf(env.stderr, "quiver %s: %s\n", cmd, fmt.Sprintf(format, args...))
	return exitError{code: 2}
}

func writeReport(path string, rep *conformance.Report, write func(io.Writer, *conformance.Report) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := write(f, rep); err != nil {
		f.Close()
		return fmt.Errorf("report %s: %w", path, err)
	}
	return f.Close()
}
