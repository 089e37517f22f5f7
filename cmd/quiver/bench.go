package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/quiver-quic/quiver/rpc/rpcbench"
)

type benchOpts struct {
	rpcbench.Config
	grpcDir string
}

func benchCommand() *command {
	return &command{
		name:    "bench",
		summary: "benchmark QUIC implementations and Quiver's RPC transports (subcommands: goodput, handshakes, sweep, ackfreq, rpc)",
		usage:   "goodput|handshakes|sweep|ackfreq|rpc [flags]",
		examples: []string{
			"quiver bench goodput --impls quiver,quic-go,x/net,ngtcp2,tcp --size 100MB --runs 5",
			"quiver bench handshakes --impls quiver,quic-go,tcp --n 500 --runs 5",
			"quiver bench sweep --param rcvbuf --impls quiver,quic-go,ngtcp2 --size 100MB --runs 3",
			"quiver bench ackfreq --paths terrestrial,asymmetric --ratios 2,10,adaptive",
			"quiver bench goodput --help   (each subcommand lists its own flags; the flags below are rpc's)",
			"quiver bench rpc --transports tcp,quic --conc 1,64,512 --sizes 581,1024",
			"quiver bench rpc --grpc rpc/grpcbench --transports tcp,quic --conc 64 --sizes 581 --repeats 5",
			"quiver bench rpc --grpc rpc/grpcbench --path lossy --conc 64 --sizes 1024",
			"quiver bench rpc --swaps 100 --switch-every 1s --switch-conc 8",
		},
		setFlags: func(fs *flag.FlagSet) any {
			o := &benchOpts{Config: rpcbench.DefaultConfig()}
			o.registerRPC(fs)
			return o
		},
		run: runBench,
	}
}

func (o *benchOpts) registerRPC(fs *flag.FlagSet) {
	o.Config.Register(fs)
	fs.StringVar(&o.grpcDir, "grpc", o.grpcDir, "`dir` of the gRPC comparison module (rpc/grpcbench): run the same benchmark there with 'go run', gRPC-go alternating with Quiver's transports in one process")
}

func runBench(ctx context.Context, env *cmdEnv, opts any, args []string) error {
	o := opts.(*benchOpts)
	if len(args) > 0 {
		if sub, ok := quicBenches()[args[0]]; ok {
			return sub(ctx, env, args[1:])
		}
	}
	if len(args) == 0 || args[0] != "rpc" {
		return fmt.Errorf("%w: name a benchmark: goodput, handshakes, sweep, ackfreq or rpc", errUsage)
	}
	// Flags may also follow the subcommand name.
	fs := flag.NewFlagSet("quiver bench rpc", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.registerRPC(fs)
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		if errors.Is(err, flag.ErrHelp) {
			printCommandUsage(env.stdout, benchCommand())
			return nil
		}
		return fmt.Errorf("%w: bad arguments after 'rpc': %v", errUsage, args[1:])
	}
	if o.grpcDir != "" {
		return runGRPC(ctx, env, o)
	}
	if err := rpcbench.Main(ctx, o.Config, env.stdout, nil); err != nil {
		return fmt.Errorf("%w", err)
	}
	return nil
}

// runGRPC runs the whole benchmark in the gRPC comparison module, which
// adds gRPC-go to the systems measured (Quiver's module never imports
// gRPC).
func runGRPC(ctx context.Context, env *cmdEnv, o *benchOpts) error {
	var args []string
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	o.Config.Register(fs)
	fs.VisitAll(func(f *flag.Flag) { args = append(args, "--"+f.Name+"="+f.Value.String()) })
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "."}, args...)...)
	cmd.Dir = o.grpcDir
	cmd.Stdout, cmd.Stderr = env.stdout, env.stderr
	fmt.Fprintf(env.stderr, "running in %s: go run . %s\n", o.grpcDir, strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("gRPC comparison: %w", err)
	}
	return nil
}
