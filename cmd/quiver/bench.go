package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/bench"
	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/rpc/rpcbench"
)

type benchOpts struct {
	rpcbench.Config
	grpcDir    string
	out, store string
}

func benchCommand() *command {
	return &command{
		name:    "bench",
		summary: "benchmark QUIC implementations and Quiver's RPC transports (subcommands: goodput, handshakes, sweep, ackfreq, report, rpc)",
		usage:   "goodput|handshakes|sweep|ackfreq|rpc [flags]",
		examples: []string{
			"quiver bench goodput --impls quiver,quic-go,x/net,ngtcp2,tcp --size 100MB --runs 5",
			"quiver bench handshakes --impls quiver,quic-go,tcp --n 500 --runs 5",
			"quiver bench sweep --param rcvbuf --impls quiver,quic-go,ngtcp2 --size 100MB --runs 3",
			"quiver bench ackfreq --paths terrestrial,asymmetric --ratios 2,10,adaptive",
			"quiver bench report --doc docs/ack-frequency-results.md docs/runs/ackfreq-20261204.json.gz",
			"quiver bench goodput --help   (each subcommand lists its own flags)",
			"quiver bench rpc --transports tcp,quic --conc 1,64,512 --sizes 581,1024",
			"quiver bench rpc --grpc rpc/grpcbench --transports tcp,quic --conc 64 --sizes 581 --repeats 5",
			"quiver bench rpc --grpc rpc/grpcbench --path lossy --conc 64 --sizes 1024",
			"quiver bench rpc --swaps 100 --switch-every 1s --switch-conc 8",
		},
		subs: append(quicBenchCommands(), &command{name: "rpc", summary: "RPC throughput and latency per transport, gRPC-go beside them with --grpc",
			usage: "[flags]", examples: []string{"quiver bench rpc --transports tcp,quic --conc 1,64,512 --sizes 581,1024"},
			setFlags: func(fs *flag.FlagSet) any {
				o := &benchOpts{Config: rpcbench.DefaultConfig()}
				o.registerRPC(fs)
				return o
			},
			run: runBenchRPC}),
	}
}

func (o *benchOpts) registerRPC(fs *flag.FlagSet) {
	o.Config.Register(fs)
	fs.StringVar(&o.grpcDir, "grpc", o.grpcDir, "`dir` of the gRPC comparison module (rpc/grpcbench): run the same benchmark there with 'go run', gRPC-go alternating with Quiver's transports in one process")
	fs.StringVar(&o.out, "out", o.out, "`dir` to write rpc.json (every run, with the command line) and rpc.txt (benchmark lines) into")
	fs.StringVar(&o.store, "store", o.store, "also record the run in the observatory's store: SQLite `file` or PostgreSQL DSN (shown by quiver web beside the grid)")
}

func runBenchRPC(ctx context.Context, env *cmdEnv, opts any, args []string) error {
	o := opts.(*benchOpts)
	if len(args) > 0 {
		return fmt.Errorf("%w: bench rpc takes no arguments: %v", errUsage, args)
	}
	// The benchmark lines are kept as they pass, for rpc.json and the
	// store.
	lines := &benchLines{w: env.stdout}
	started := time.Now().UTC()
	var err error
	if o.grpcDir != "" {
		err = runGRPC(ctx, env, o, lines)
	} else {
		err = rpcbench.Main(ctx, o.Config, lines, nil)
	}
	if err != nil || (o.out == "" && o.store == "") {
		return err
	}
	rep := observatory.RPCReport{Kind: "rpc", Command: "quiver " + strings.Join(env.line, " "), Started: started,
		Host: bench.CurrentHost().String(), Results: lines.results}
	if o.out != "" {
		if err := writeRPCReport(o.out, &rep, lines.raw); err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "wrote %s\n", filepath.Join(o.out, "rpc.json"))
	}
	if o.store != "" && len(rep.Results) > 0 {
		return recordBench(ctx, env, o.store, &rep)
	}
	return nil
}

// benchLines passes output through and keeps the Go benchmark lines.
type benchLines struct {
	w       io.Writer
	partial []byte
	raw     []string
	results []rpcbench.Result
}

func (b *benchLines) Write(p []byte) (int, error) {
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		line := string(b.partial[:i])
		b.partial = b.partial[i+1:]
		if r, ok := rpcbench.ParseLine(line); ok {
			b.results = append(b.results, r)
			b.raw = append(b.raw, line)
		}
	}
	return b.w.Write(p)
}

// writeRPCReport writes rpc.json and rpc.txt (benchmark lines) into dir.
func writeRPCReport(dir string, rep *observatory.RPCReport, lines []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "rpc.json"))
	if err != nil {
		return err
	}
	err = bench.WriteJSON(f, rep)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "rpc.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// runGRPC runs the whole benchmark in the gRPC comparison module, which
// adds gRPC-go to the systems measured (Quiver's module never imports
// gRPC).
func runGRPC(ctx context.Context, env *cmdEnv, o *benchOpts, stdout io.Writer) error {
	var args []string
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	o.Config.Register(fs)
	fs.VisitAll(func(f *flag.Flag) { args = append(args, "--"+f.Name+"="+f.Value.String()) })
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "."}, args...)...)
	cmd.Dir = o.grpcDir
	cmd.Stdout, cmd.Stderr = stdout, env.stderr
	fmt.Fprintf(env.stderr, "running in %s: go run . %s\n", o.grpcDir, strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("gRPC comparison: %w", err)
	}
	return nil
}
