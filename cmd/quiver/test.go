package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/quiver-quic/quiver/conformance"
)

// runTest runs the conformance suite against the server at addr, prints
// the table and writes the reports. It returns exitError{1} when a
// scenario fails, so scripts and CI can gate on the exit status.
func runTest(ctx context.Context, env *cmdEnv, o *testOpts, addr string) error {
	conformance.ToolVersion = version
	target := conformance.Target{Name: addr, Address: addr, SNI: o.sni, ALPN: splitList(o.alpn), SmallPath: o.small, LargePath: o.large}
	var patterns []string
	for _, p := range splitList(o.scenarios) {
		if p != "*" {
			patterns = append(patterns, p)
		}
	}
	rep, err := conformance.Run(ctx, target, conformance.Options{
		Scenarios:    patterns,
		Parallel:     o.parallel,
		Timeout:      o.timeout,
		ArtifactsDir: o.artifacts,
		Progress:     conformance.ProgressLine(env.stderr, isTerminal(env.stderr)),
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return finishReport(env, rep, o.jsonFile, o.junit)
}

// finishReport writes the reports, then the table; a failing scenario
// makes the exit status 1, so scripts and CI can gate on it.
func finishReport(env *cmdEnv, rep *conformance.Report, jsonFile, junit string) error {
	// Write the reports before anything can fail, so a run always leaves
	// its results behind.
	if jsonFile != "" {
		if err := writeReport(jsonFile, rep, conformance.WriteJSON); err != nil {
			return err
		}
	}
	if junit != "" {
		if err := writeReport(junit, rep, conformance.WriteJUnit); err != nil {
			return err
		}
	}
	if err := conformance.WriteTable(env.stdout, rep); err != nil {
		return err
	}
	if rep.Counts()[conformance.Fail] > 0 {
		return exitError{code: 1}
	}
	return nil
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
