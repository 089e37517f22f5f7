package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/conformance/variants"
)

type variantsOpts struct {
	names, serverScenarios, clientScenarios, roles string
	jsonDir                                        string
	combined, markdown                             bool
	parallel                                       int
	timeout                                        time.Duration
}

func variantsCommand() *command {
	return &command{
		name:    "variants",
		summary: "run the suite against Quiver made to take every choice the RFCs allow; any pass lost is a tester bug",
		usage:   "[flags]",
		examples: []string{
			"quiver variants",
			"quiver variants --variants retry,cid-0 --roles server",
			"quiver variants --combined --parallel 8",
			"quiver variants --variants retry+cid-1,zero-padding+no-pacing --roles server",
		},
		setFlags: func(fs *flag.FlagSet) any {
			o := &variantsOpts{}
			fs.StringVar(&o.names, "variants", "*", "`variants`, comma-separated; a+b runs a and b together (default: all, one at a time): "+joinNames())
			fs.StringVar(&o.roles, "roles", "server,client", "`roles` to test: server (Quiver serves, the server suite), client (Quiver's client, the client suite)")
			fs.BoolVar(&o.combined, "combined", false, "group variants that do not interact into a few targets (what CI runs) instead of one run each")
			fs.StringVar(&o.serverScenarios, "server-scenarios", "*", "server-facing scenario `IDs or globs`")
			fs.StringVar(&o.clientScenarios, "client-scenarios", "*", "client-facing scenario `IDs or globs`")
			fs.IntVar(&o.parallel, "parallel", 8, "scenarios run at once in each suite run")
			fs.BoolVar(&o.markdown, "markdown", false, "write the variant table (variant, configuration, permitting RFC text, results) in Markdown after the text report")
			fs.StringVar(&o.jsonDir, "json-dir", "", "write each suite run's JSON report into `dir`")
			fs.DurationVar(&o.timeout, "timeout", 0, "each scenario's `deadline` (default: the suite's)")
			return o
		},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("%w: variants takes no arguments", errUsage)
			}
			return runVariants(ctx, env, opts.(*variantsOpts))
		},
	}
}

func joinNames() string {
	s := ""
	for i, n := range variants.Names() {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

func runVariants(ctx context.Context, env *cmdEnv, o *variantsOpts) error {
	var targets []variants.Target
	for _, n := range splitList(o.names) {
		if n == "*" {
			targets = variants.Singles(variants.All)
			break
		}
		// Named, a variant runs in every role it can take, even one it is
		// not compliant in (cid-0 as a server).
		// a+b runs variants a and b together in one target.
		t := variants.Target{Named: true}
		for _, part := range strings.Split(n, "+") {
			v, err := variants.Find(part)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			t.Variants = append(t.Variants, v)
		}
		targets = append(targets, t)
	}
	opts := variants.Options{Parallel: o.parallel, Timeout: o.timeout, ReportDir: o.jsonDir, ToolVersion: version,
		ServerScenarios: patterns(o.serverScenarios), ClientScenarios: patterns(o.clientScenarios),
		Log: func(format string, args ...any) { fmt.Fprintf(env.stderr, format+"\n", args...) }}
	server, client := targets, targets
	if o.combined {
		server, client = variants.Combined()
	}
	for _, r := range splitList(o.roles) {
		switch r {
		case "server":
			opts.Server = server
		case "client":
			opts.Client = client
		default:
			return fmt.Errorf("%w: unknown role %q (server, client)", errUsage, r)
		}
	}
	m, err := variants.Run(ctx, opts)
	if err != nil {
		return err
	}
	if err := m.WriteText(env.stdout); err != nil {
		return err
	}
	if o.markdown {
		fmt.Fprintln(env.stdout)
		if err := m.WriteMarkdown(env.stdout); err != nil {
			return err
		}
	}
	if len(m.FalseVerdicts()) > 0 {
		return exitError{code: 1}
	}
	return nil
}

func patterns(s string) []string {
	var out []string
	for _, p := range splitList(s) {
		if p != "*" {
			out = append(out, p)
		}
	}
	return out
}
