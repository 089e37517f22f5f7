package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/quiver-quic/quiver/interop"
	"github.com/quiver-quic/quiver/interop/endpoint"
)

type demoOpts struct {
	db, addr, artifacts, impls, scenarios string
	parallel                              int
	noWeb                                 bool
}

func demoCommand() *command {
	return &command{
		name:    "demo",
		summary: "start local servers of several implementations, test them all, show the results",
		usage:   "[flags]",
		examples: []string{
			"quiver demo",
			"quiver demo --no-web --db /tmp/quiver.db",
			"quiver demo --impls quiver,quic-go --scenarios 'hs-*'",
		},
		setFlags: func(fs *flag.FlagSet) any {
			o := &demoOpts{}
			fs.StringVar(&o.db, "db", "quiver.db", "SQLite `file` the campaign's results go to")
			fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "`address` the dashboard listens on")
			fs.BoolVar(&o.noWeb, "no-web", false, "print the grid and exit instead of serving the dashboard")
			fs.StringVar(&o.artifacts, "artifacts", "quiver-artifacts", "`directory` for per-result pcapng, qlog and key log")
			fs.StringVar(&o.impls, "impls", "", "`implementations` to start, comma-separated (default: quiver, quiver-retry, quic-go, go-x-net, ngtcp2)")
			fs.StringVar(&o.scenarios, "scenarios", "*", "scenario `IDs or globs`, comma-separated")
			fs.IntVar(&o.parallel, "parallel", 4, "scenarios run at once against each server (the servers are tested at once)")
			return o
		},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("%w: demo takes no arguments", errUsage)
			}
			return runDemo(ctx, env, opts.(*demoOpts))
		},
	}
}

type testOpts struct {
	sni, alpn, scenarios       string
	small, large               string
	parallel                   int
	timeout                    time.Duration
	jsonFile, junit, artifacts string
	baseline, writeBaseline    string
}

func testCommand() *command {
	return &command{
		name:    "test",
		summary: "run the conformance suite against a QUIC server",
		usage:   "[flags] HOST:PORT",
		examples: []string{
			"quiver test 127.0.0.1:4433",
			"quiver test --small /index.html --large /1MB.bin 127.0.0.1:4433",
			"quiver test --alpn h3 --scenarios 'A*,handshake-*' --json report.json quic.example:443",
			"quiver test --scenarios 'hs-*,tls-*' --write-baseline quiver-baseline.txt 127.0.0.1:4433",
			"quiver test --baseline quiver-baseline.txt --junit junit.xml 127.0.0.1:4433",
		},
		notes: exitStatusNotes,
		setFlags: func(fs *flag.FlagSet) any {
			o := &testOpts{}
			fs.StringVar(&o.sni, "sni", "", "TLS server `name` to send (default: the host)")
			fs.StringVar(&o.alpn, "alpn", "", "application `protocols` to offer, comma-separated (default: discover hq-interop or h3)")
			fs.StringVar(&o.scenarios, "scenarios", "*", "scenario `IDs or globs`, comma-separated")
			fs.StringVar(&o.small, "small", "", "`path` of a small resource (a few KiB) on the server (default: /)")
			fs.StringVar(&o.large, "large", "", "`path` of a large resource (at least 1 MiB); without it the scenarios that need one are unsupported")
			fs.IntVar(&o.parallel, "parallel", 8, "scenarios run at once (fails and timing verdicts are re-run alone to confirm them)")
			fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "deadline of each scenario")
			fs.StringVar(&o.jsonFile, "json", "", "write the versioned JSON report to `file`")
			fs.StringVar(&o.junit, "junit", "", "write a JUnit XML report to `file`")
			fs.StringVar(&o.artifacts, "artifacts", "", "keep per-scenario pcapng, qlog and key log under `dir`")
			baselineFlags(fs, &o.baseline, &o.writeBaseline)
			return o
		},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%w: test takes one HOST:PORT", errUsage)
			}
			return runTest(ctx, env, opts.(*testOpts), args[0])
		},
	}
}

type interopOpts struct {
	clients, servers, tests, out, engine string
}

func interopCommand() *command {
	return &command{
		name:    "interop",
		summary: "pair clients and servers of different implementations over emulated links",
		usage:   "[flags] | endpoint [endpoint flags] [URL...]",
		examples: []string{
			"quiver interop --clients quiver,quic-go --servers quic-go,x/net,ngtcp2 --tests handshake,transfer",
			"quiver interop --engine ns --clients quic-go --servers quiver --tests crosstraffic,rebind-addr",
			"ROLE=server TESTCASE=handshake WWW=./www CERTS=./certs PORT=4433 quiver interop endpoint",
		},
		subs: []*command{{name: "endpoint", summary: "Quiver as an endpoint of the interop runner's contract (ROLE, TESTCASE, … in the environment)",
			usage: "[endpoint flags] [URL...]", examples: []string{"ROLE=server TESTCASE=handshake WWW=./www CERTS=./certs PORT=4433 quiver interop endpoint"},
			ownFlags: true, run: func(ctx context.Context, env *cmdEnv, _ any, args []string) error {
				// The endpoint that follows the runner's contract
				// (ROLE, TESTCASE, …; exit 127 for unsupported).
				if code := endpoint.Main(ctx, args, os.Getenv, env.stderr); code != 0 {
					return exitError{code}
				}
				return nil
			}}},
		setFlags: func(fs *flag.FlagSet) any {
			o := &interopOpts{}
			fs.StringVar(&o.clients, "clients", "all", "client `implementations`, comma-separated")
			fs.StringVar(&o.servers, "servers", "all", "server `implementations`, comma-separated")
			fs.StringVar(&o.tests, "tests", "all", "test `cases`, comma-separated")
			fs.StringVar(&o.out, "out", "interop-results", "`directory` for result.json, the matrix page and logs")
			fs.StringVar(&o.engine, "engine", interop.EngineAuto, "link `engine`: auto (network namespaces, as root, for the tests that need them; loopback relay otherwise), proxy (loopback relay only) or ns (namespaces for every IPv4 test)")
			return o
		},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			o := opts.(*interopOpts)
			if len(args) > 0 {
				return fmt.Errorf("%w: interop takes no arguments", errUsage)
			}
			servers, err := interop.Impls(o.servers, "server")
			if err != nil {
				return fmt.Errorf("%w: --servers: %v", errUsage, err)
			}
			clients, err := interop.Impls(o.clients, "client")
			if err != nil {
				return fmt.Errorf("%w: --clients: %v", errUsage, err)
			}
			tests, err := interop.Lookup(o.tests)
			if err != nil {
				return fmt.Errorf("%w: --tests: %v", errUsage, err)
			}
			switch o.engine {
			case interop.EngineAuto, interop.EngineProxy, interop.EngineNS:
			default:
				return fmt.Errorf("%w: --engine %q: want auto, proxy or ns", errUsage, o.engine)
			}
			m := &interop.Matrix{Servers: servers, Clients: clients, Tests: tests, LogDir: o.out, Engine: o.engine,
				Seed: uint64(time.Now().UnixNano()), Version: version, Progress: interop.Progress(env.stderr)}
			res, dir, err := m.Run(ctx)
			if res != nil {
				res.Summary(env.stdout)
				fmt.Fprintf(env.stdout, "\nresult: %s\nmatrix: %s\n", filepath.Join(dir, "result.json"), filepath.Join(dir, "index.html"))
			}
			return err
		},
	}
}

func trackCommand() *command {
	return &command{
		name:    "track",
		summary: "run and compare campaigns over targets and released versions",
		usage:   "run|list|show|diff|changes|facts|sweep|watch|import|export|evolution [flags] [arguments] (flags before or after the subcommand)",
		examples: []string{
			"quiver track run --db quiver.db --scenarios 'hs-*' targets.json",
			"quiver track list",
			"quiver track show 3",
			"quiver track diff 2 3",
			"quiver track changes --target 'quic-go local'",
			"quiver track run --db postgres://quiver@db.example/quiver --targets targets.json",
			"quiver track run --queue --db postgres://quiver@db.example/quiver targets.json   # for quiver worker",
			"quiver track sweep --impl quic-go --since v0.48.0 --scenarios 'hs-*,v2-*'",
			"quiver track sweep --impl x/net --versions v0.18.0,v0.30.0,v0.62.0",
			"quiver track sweep --role client --impl quic-go --since v0.43.0 --scenarios 'cli-initial-*'",
			"quiver track import --db quiver.db bench-results/ackfreq-*/ackfreq.json   # benchmark runs, shown beside the grid",
			"quiver track facts --target 'quic-go releases'   # typed facts of the latest run",
			"quiver track watch --every 6h --impl quic-go,x/net targets.json   # scheduled campaign + each new release swept",
		},
		setFlags: trackFlags,
		subs: []*command{
			trackSub("run", "run a campaign (scenarios × targets) into the store", "[flags] [targets.json]"),
			trackSub("list", "list the stored runs", "[flags]"),
			trackSub("show", "show a run's results (default: the latest run)", "[flags] [RUN]"),
			trackSub("diff", "compare two runs' results", "[flags] RUN-A RUN-B"),
			trackSub("changes", "arrived, regressed, fixed, flapping, unobservable results and fact changes", "[flags]"),
			trackSub("facts", "the typed facts of a run (default: the latest); types those of older results", "[flags] [RUN]"),
			trackSub("sweep", "build an implementation at each released version and test them all", "--impl NAME [flags]"),
			trackSub("watch", "run a campaign on a schedule and sweep each new release of --impl", "[flags] [targets.json]"),
			trackSub("import", "record benchmark JSON files or dataset files (*.json.gz) in the store", "[flags] FILE..."),
			trackSub("export", "write a target's history as a dataset file (--target NAME)", "[flags] FILE.json.gz"),
			trackSub("evolution", "docs/evolution.md from the datasets kept in the repository (or the files given)", "[flags] [FILE.json.gz...]"),
		},
	}
}

func trackFlags(fs *flag.FlagSet) any {
	o := &trackOpts{}
	o.setFlags(fs)
	return o
}

// trackSub is a track subcommand: every one takes all the track flags.
func trackSub(name, summary, usage string) *command {
	return &command{name: name, summary: summary, usage: usage, examples: []string{"quiver track " + name + " --help"}, setFlags: trackFlags,
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			return runTrack(ctx, env, opts.(*trackOpts), append([]string{name}, args...))
		}}
}

type webOpts struct{ addr, db, artifacts string }

func webCommand() *command {
	return &command{
		name:    "web",
		summary: "serve the observatory dashboard",
		usage:   "[flags]",
		examples: []string{
			"quiver web --addr 127.0.0.1:8080 --db quiver.db",
		},
		setFlags: func(fs *flag.FlagSet) any {
			o := &webOpts{}
			fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "`address` to listen on")
			fs.StringVar(&o.db, "db", "quiver.db", "SQLite `file` or PostgreSQL DSN of the result store")
			fs.StringVar(&o.artifacts, "artifacts", "quiver-artifacts", "`directory` the results' artifacts are kept in (downloads never leave it)")
			return o
		},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("%w: web takes no arguments", errUsage)
			}
			o := opts.(*webOpts)
			// A fresh store is made, and the release history kept in the
			// repository imported, so that a fresh clone shows something.
			st, err := openStore(ctx, o.db, true)
			if err != nil {
				return err
			}
			defer st.Close()
			importHistory(ctx, env, st)
			return serveDashboard(ctx, env, st, o.addr, o.artifacts)
		},
	}
}

func versionCommand() *command {
	return &command{
		name:     "version",
		summary:  "print Quiver's version",
		usage:    "",
		examples: []string{"quiver version"},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			writeVersion(env.stdout)
			return nil
		},
	}
}
