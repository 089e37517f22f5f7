package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/quiver-quic/quiver/bench"
)

type agentOpts struct {
	keys, addr, state string
}

// agentCommand is `quiver agent init|serve`: the daemon that runs
// benchmark endpoints on its host for a controller (package bench's
// Agent), and the keys both ends authenticate with.
func agentCommand() *command {
	return &command{
		name:    "agent",
		summary: "run benchmark endpoints on this host for a controller (init: make the keys; serve: the daemon)",
		usage:   "init|serve [flags]",
		examples: []string{
			"quiver agent init --keys ./agent-keys   (copy the directory to every agent host and the controller)",
			"quiver agent serve --keys ./agent-keys --addr 198.18.0.1:7443",
			"quiver bench goodput --impls quiver,tcp --size 100MB --agent-keys ./agent-keys --server-agent 198.18.0.1:7443 --client-agent 198.18.0.2:7443",
		},
		setFlags: func(fs *flag.FlagSet) any {
			o := &agentOpts{}
			o.register(fs)
			return o
		},
		run: runAgent,
	}
}

func (o *agentOpts) register(fs *flag.FlagSet) {
	fs.StringVar(&o.keys, "keys", "agent-keys", "`dir` of the keys (CA, agent and controller certificates)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:7443", "serve: TCP `address` to listen on for controllers (mutual TLS)")
	fs.StringVar(&o.state, "state", bench.DefaultStateDir(), "serve: `dir` of the agents' state files; a starting agent ends the endpoints that dead agents left there")
}

func runAgent(ctx context.Context, env *cmdEnv, opts any, args []string) error {
	o := opts.(*agentOpts)
	if len(args) > 1 {
		// Flags may also follow the subcommand name.
		fs := flag.NewFlagSet("quiver agent "+args[0], flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.register(fs)
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
			return fmt.Errorf("%w: bad arguments after %q: %v", errUsage, args[0], args[1:])
		}
		args = args[:1]
	}
	if len(args) != 1 {
		return fmt.Errorf("%w: agent init or agent serve", errUsage)
	}
	switch args[0] {
	case "init":
		if err := bench.InitAgentKeys(o.keys); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "keys in %s: %s, %s/%s (agents), %s/%s (controllers)\n", o.keys, bench.AgentCAFile,
			bench.AgentCertFile, bench.AgentKeyFile, bench.ControllerCertFile, bench.ControllerKeyFile)
		return nil
	case "serve":
		l, err := bench.ListenAgent(o.addr, o.keys)
		if err != nil {
			return err
		}
		a, err := bench.DefaultAgent()
		if err != nil {
			l.Close()
			return err
		}
		a.StateDir = o.state
		a.Logf = func(format string, args ...any) { fmt.Fprintf(env.stderr, format+"\n", args...) }
		// The line a supervisor (or a test) reads to learn the port.
		fmt.Fprintf(env.stdout, "agent listening on %s\n", l.Addr())
		return a.Serve(ctx, l)
	}
	return fmt.Errorf("%w: agent init or agent serve, not %q", errUsage, args[0])
}

// agentFlags are the goodput and handshake benches' flags for running the
// ends on agents.
type agentFlags struct {
	server, client, keys string
}

func (a *agentFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.server, "server-agent", "", "run every server on the agent at `HOST:PORT` (quiver agent serve); its HOST is the address clients connect to")
	fs.StringVar(&a.client, "client-agent", "", "run every client on the agent at `HOST:PORT`")
	fs.StringVar(&a.keys, "agent-keys", "agent-keys", "`dir` of the keys made by quiver agent init")
}

// measure runs kind through the agents when both are named, else locally
// with local; the agents' per-second CPU samples go to cpu-samples.json in
// the output folder.
func (a *agentFlags) measure(ctx context.Context, env *cmdEnv, c *commonFlags, o bench.Options, kind string,
	local func(context.Context, bench.Options) (*bench.Result, error)) (*bench.Result, error) {
	if a.server == "" && a.client == "" {
		return local(ctx, o)
	}
	if a.server == "" || a.client == "" {
		return nil, fmt.Errorf("%w: --server-agent and --client-agent go together", errUsage)
	}
	srv, err := bench.DialAgent(a.server, a.keys)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	cli, err := bench.DialAgent(a.client, a.keys)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	res, traces, err := bench.MeasureRemote(ctx, o, kind, srv, cli)
	if res != nil && len(traces) > 0 {
		if c.out == "" {
			c.out = filepath.Join("bench-results", kind+"-"+res.Started.Format("20060102-150405"))
		}
		if werr := writeTraces(filepath.Join(c.out, "cpu-samples.json"), traces); werr != nil && err == nil {
			err = werr
		}
	}
	return res, err
}

func writeTraces(path string, traces []bench.EndpointTrace) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = bench.WriteJSON(f, traces)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
