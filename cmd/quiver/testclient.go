package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/conformance/report"
)

type testClientOpts struct {
	cmd, resumeCmd, alpn, name, scenarios, jsonFile, junit, artifacts string
	baseline, writeBaseline                                           string
	parallel                                                          int
}

func testClientCommand() *command {
	return &command{
		name:    "test-client",
		summary: "run the client-facing conformance scenarios against a QUIC client",
		usage:   "--cmd 'CLIENT … {url}' [flags]",
		examples: []string{
			"quiver test-client --cmd 'quiver get --insecure --out {outdir} {url}'",
			"quiver test-client --alpn h3 --cmd 'gtlsclient -q --download={outdir} {host} {port} {url}' --json client.json",
			"quiver test-client --baseline client-baseline.txt --junit junit.xml --cmd 'myclient --out {outdir} {url}'",
		},
		notes: exitStatusNotes,
		setFlags: func(fs *flag.FlagSet) any {
			o := &testClientOpts{}
			fs.StringVar(&o.cmd, "cmd", "", "client `command` template: {url} {urls} {addr} {host} {port} {ca} {keylog} {outdir}")
			fs.StringVar(&o.resumeCmd, "resume-cmd", "", "client `command` template that fetches the first of {urls} on one connection and the rest on a second that resumes the session (0-RTT, tokens); without it those scenarios are unsupported")
			fs.StringVar(&o.alpn, "alpn", "hq-interop", "application `protocol` the client speaks (hq-interop or h3)")
			fs.StringVar(&o.name, "name", "", "client `name` in the reports (default: the command's first word)")
			fs.StringVar(&o.scenarios, "scenarios", "*", "scenario `IDs or globs`, comma-separated")
			fs.IntVar(&o.parallel, "parallel", 4, "scenarios run at once")
			fs.StringVar(&o.jsonFile, "json", "", "write the versioned JSON report to `file`")
			fs.StringVar(&o.junit, "junit", "", "write a JUnit XML report to `file`")
			fs.StringVar(&o.artifacts, "artifacts", "", "keep per-scenario pcapng, qlog and key log under `dir`")
			baselineFlags(fs, &o.baseline, &o.writeBaseline)
			return o
		},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			o := opts.(*testClientOpts)
			if len(args) != 0 || o.cmd == "" {
				return fmt.Errorf("%w: test-client takes --cmd and no arguments", errUsage)
			}
			return runTestClient(ctx, env, o)
		},
	}
}

// runTestClient serves every selected client-facing scenario, launches the
// client from the template for each, prints the table and writes the
// reports; its exit status is described by exitStatusNotes.
func runTestClient(ctx context.Context, env *cmdEnv, o *testClientOpts) error {
	name := o.name
	if name == "" {
		name = firstWord(o.cmd)
	}
	base, patterns, err := loadBaseline(o.baseline, o.scenarios)
	if err != nil {
		return err
	}
	rep, err := conformance.RunClient(ctx, conformance.ClientTarget{Name: name, Command: o.cmd, ResumeCommand: o.resumeCmd, ALPN: o.alpn}, conformance.Options{
		ToolVersion:  version,
		Scenarios:    patterns,
		Parallel:     o.parallel,
		Timeout:      10 * time.Second,
		ArtifactsDir: o.artifacts,
		Progress:     report.ProgressLine(env.stderr, isTerminal(env.stderr)),
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return finishReport(ctx, env, rep, reportOpts{cmd: "test-client", jsonFile: o.jsonFile, junit: o.junit,
		baselineFile: o.baseline, baseline: base, writeBaseline: o.writeBaseline})
}

func firstWord(s string) string {
	for i, r := range s {
		if r == ' ' || r == '\t' {
			return s[:i]
		}
	}
	return s
}
