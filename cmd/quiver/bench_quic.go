package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/bench"
	"github.com/quiver-quic/quiver/observatory"
)

// quicBenchCommands are the `quiver bench` subcommands that measure QUIC
// implementations (package bench), beside rpc; each parses its own flags
// with parseSub. The hidden ones are the bench's own endpoints, started by
// the bench as processes of their own.
func quicBenchCommands() []*command {
	sub := func(name, summary, example string, hidden bool, f func(ctx context.Context, env *cmdEnv, args []string) error) *command {
		return &command{name: name, summary: summary, usage: "[flags]", examples: []string{example}, ownFlags: true, hidden: hidden,
			run: func(ctx context.Context, env *cmdEnv, _ any, args []string) error { return f(ctx, env, args) }}
	}
	return []*command{
		sub("goodput", "goodput and CPU per GB of implementation pairs", "quiver bench goodput --impls quiver,quic-go,tcp --size 100MB", false, benchGoodput),
		sub("handshakes", "full handshakes per second", "quiver bench handshakes --impls quiver,quic-go,tcp --n 500", false, benchHandshakes),
		sub("sweep", "a parameter sweep (rcvbuf, gso, gro, cipher, cc, ack, rate, topology, mtu, offload, pin)",
			"quiver bench sweep --param rcvbuf", false, benchSweep),
		sub("ackfreq", "ACK ratios over emulated paths", "quiver bench ackfreq --paths terrestrial --ratios 2,10", false, benchAckFreq),
		sub("report", "the ACK-frequency tables and the pair matrix from stored runs",
			"quiver bench report --doc docs/ack-frequency-results.md docs/runs/ackfreq-20261204.json.gz", false, benchReport),
		sub("tls-serve", "", "", true, benchTLSServe),
		sub("tls-get", "", "", true, benchTLSGet),
		sub("hs-client", "", "", true, benchHSClient),
		sub("quiver-serve", "", "", true, benchQuiverServe),
		sub("quiver-get", "", "", true, benchQuiverGet),
	}
}

// commonFlags are the flags every measurement shares.
type commonFlags struct {
	impls, pairs, alpn, out, name string
	store                         string
	runs                          int
	profile, verbose, keep        bool
	timeout                       time.Duration
}

func (c *commonFlags) register(fs *flag.FlagSet, impls string, runs int) {
	fs.StringVar(&c.impls, "impls", impls, "comma-separated `list` of implementations, each paired with itself: "+strings.Join(bench.ImplNames(), ", "))
	fs.StringVar(&c.pairs, "pairs", "", "comma-separated `pairs` server<-client (e.g. ngtcp2<-quic-go); replaces the self pairs of --impls")
	fs.StringVar(&c.alpn, "alpn", "hq-interop", "application `protocol`: hq-interop or h3 (pairs that cannot speak it use one they share)")
	fs.IntVar(&c.runs, "runs", runs, "repetitions of every pair and configuration, alternating")
	fs.StringVar(&c.out, "out", "", "`dir` for the JSON, CSV, benchmark-format, Markdown and chart files (default bench-results/KIND-TIME)")
	fs.BoolVar(&c.profile, "profile", false, "take a CPU profile of every Go endpoint and report where the CPU goes")
	fs.BoolVar(&c.verbose, "v", false, "print a line per run even when standard error is not a terminal")
	fs.BoolVar(&c.keep, "keep", false, "keep the working folder (files, profiles) for inspection")
	fs.DurationVar(&c.timeout, "timeout", 3*time.Minute, "bound on one run")
	fs.StringVar(&c.store, "store", "", "also record the run in the observatory's store: SQLite `file` or PostgreSQL DSN (shown by quiver web beside the grid)")
}

// options turns the common flags into bench options.
func (c *commonFlags) options(env *cmdEnv, command string) (bench.Options, error) {
	o := bench.Options{Runs: c.runs, ALPN: c.alpn, Profile: c.profile, Keep: c.keep, RunTimeout: c.timeout, Command: command}
	var err error
	if c.pairs != "" {
		o.Pairs, err = bench.ParsePairs(c.pairs)
	} else {
		o.Pairs, err = bench.SelfPairs(splitList(c.impls))
	}
	if err != nil {
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	if len(o.Pairs) == 0 {
		return o, fmt.Errorf("%w: no implementation to measure", errUsage)
	}
	if o.Bins, err = bench.DefaultBins(); err != nil {
		return o, err
	}
	if c.verbose || isTerminal(env.stderr) {
		o.Progress = env.stderr
	}
	return o, nil
}

// parseSub parses a subcommand's flags, printing its help on --help.
func parseSub(env *cmdEnv, fs *flag.FlagSet, usage string, args []string) (bool, error) {
	fs.SetOutput(io.Discard)
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(env.stdout, "Usage: %s\n\nFlags:\n", usage)
			fs.SetOutput(env.stdout)
			fs.PrintDefaults()
			return true, nil
		}
		return false, fmt.Errorf("%w: %v", errUsage, err)
	}
	if len(pos) > 0 {
		return false, fmt.Errorf("%w: unexpected arguments %v", errUsage, pos)
	}
	return false, nil
}

func commandLine(sub string, args []string) string {
	return strings.TrimSpace("quiver bench " + sub + " " + strings.Join(args, " "))
}

// finish prints the table and the benchmark lines and writes the files.
func finish(ctx context.Context, env *cmdEnv, res *bench.Result, runErr error, outDir, kind, storeDSN string) error {
	if res == nil {
		return runErr
	}
	if outDir == "" {
		outDir = filepath.Join("bench-results", kind+"-"+res.Started.Format("20060102-150405"))
	}
	bench.WriteBenchfmt(env.stdout, res)
	fmt.Fprintln(env.stdout)
	bench.WriteTable(env.stdout, res)
	paths, err := bench.WriteFiles(outDir, kind, res)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "wrote %s\n", strings.Join(paths, ", "))
	if storeDSN != "" && len(res.Runs) > 0 {
		if err := recordBench(ctx, env, storeDSN, res); err != nil {
			return errors.Join(runErr, err)
		}
	}
	return runErr
}

// recordBench stores a benchmark's JSON in the observatory's store.
func recordBench(ctx context.Context, env *cmdEnv, dsn string, doc any) error {
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	b, err := observatory.BenchRecord(data, version)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, dsn, true)
	if err != nil {
		return err
	}
	defer st.Close()
	id, err := st.AddBenchRun(ctx, b)
	if err != nil {
		return fmt.Errorf("record %s run: %w", b.Kind, err)
	}
	fmt.Fprintf(env.stderr, "recorded as benchmark run %d (%s) in %s\n", id, b.Kind, displayDB(dsn))
	return nil
}

func benchGoodput(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("quiver bench goodput", flag.ContinueOnError)
	var c commonFlags
	c.register(fs, "quiver,quic-go,x/net,ngtcp2,tcp", 5)
	size := fs.String("size", "100MB", "file `size` (e.g. 100MB, 1GiB)")
	var ag agentFlags
	ag.register(fs)
	if help, err := parseSub(env, fs, "quiver bench goodput [flags]", args); help || err != nil {
		return err
	}
	o, err := c.options(env, commandLine("goodput", args))
	if err != nil {
		return err
	}
	if o.Size, err = bench.ParseSize(*size); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	res, err := ag.measure(ctx, env, &c, o, "goodput", bench.Goodput)
	return finish(ctx, env, res, err, c.out, "goodput", c.store)
}

func benchHandshakes(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("quiver bench handshakes", flag.ContinueOnError)
	var c commonFlags
	c.register(fs, "quiver,quic-go,tcp", 5)
	n := fs.Int("n", 500, "full handshakes per run")
	parallel := fs.Int("parallel", 1, "handshakes in flight at once")
	var ag agentFlags
	ag.register(fs)
	if help, err := parseSub(env, fs, "quiver bench handshakes [flags]", args); help || err != nil {
		return err
	}
	o, err := c.options(env, commandLine("handshakes", args))
	if err != nil {
		return err
	}
	o.Handshakes, o.Parallel = *n, *parallel
	res, err := ag.measure(ctx, env, &c, o, "handshakes", bench.Handshakes)
	return finish(ctx, env, res, err, c.out, "handshakes", c.store)
}

func benchSweep(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("quiver bench sweep", flag.ContinueOnError)
	var c commonFlags
	c.register(fs, "quiver,quic-go,ngtcp2,tcp", 3)
	size := fs.String("size", "100MB", "file `size`")
	param := fs.String("param", "rcvbuf", "`parameter` to sweep: rcvbuf (× 212,992 B, sets net.core.rmem_default and rmem_max, "+
		"root; drops from the kernel's UDP RcvbufErrors), gso, gro, cipher (aes128, aes256, chacha20, aes128-noaesni), "+
		"cc, ack (ACK ratios, Quiver only), rate (Gbit/s on a tbf-shaped veth pair, root), topology, mtu (bytes, "+
		"on the veth pair, root), offload (ethtool -K sets on the veth pair: default, all, none, no-tso, no-gso, "+
		"no-csum; root), pin (none, same, sibling, different CPUs)")
	values := fs.String("values", "", "comma-separated `values` (default: every value of the parameter)")
	topo := fs.String("topology", "loopback", "`topology` for parameters other than rate: loopback or veth (namespace pair 198.18.0.1/2, root)")
	var ag agentFlags
	ag.register(fs)
	if help, err := parseSub(env, fs, "quiver bench sweep [flags]", args); help || err != nil {
		return err
	}
	o, err := c.options(env, commandLine("sweep", args))
	if err != nil {
		return err
	}
	if o.Size, err = bench.ParseSize(*size); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	vals := *values
	if vals == "" {
		vals = bench.SweepParams[*param]
	}
	if o.Configs, err = bench.SweepConfigs(*param, splitList(vals), *topo); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	res, err := ag.measure(ctx, env, &c, o, "sweep", bench.Sweep)
	return finish(ctx, env, res, err, c.out, "sweep-"+*param, c.store)
}

// Hidden endpoints: flags only, no help beyond errors.

func benchTLSServe(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("tls-serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:4433", "")
	cert := fs.String("cert", "", "")
	key := fs.String("key", "", "")
	root := fs.String("root", ".", "")
	cc := fs.String("cc", "", "")
	cipher := fs.String("cipher", "", "")
	prof := fs.String("cpuprofile", "", "")
	if _, err := parseSub(env, fs, "quiver bench tls-serve --addr A --cert F --key F --root DIR [--cc NAME] [--cipher NAME] [--cpuprofile F]", args); err != nil {
		return err
	}
	restore, err := bench.RestrictCipher(*cipher)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	defer restore()
	stop, err := bench.StartCPUProfile(*prof)
	if err != nil {
		return err
	}
	defer stop()
	return bench.TLSServer(ctx, *addr, *cert, *key, *root, *cc)
}

// urlArgs parses flags around one URL argument.
func urlArgs(env *cmdEnv, fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if len(pos) != 1 {
		return nil, fmt.Errorf("%w: want one URL", errUsage)
	}
	return pos, nil
}

func benchTLSGet(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("tls-get", flag.ContinueOnError)
	out := fs.String("out", ".", "")
	cipher := fs.String("cipher", "", "")
	prof := fs.String("cpuprofile", "", "")
	urls, err := urlArgs(env, fs, args)
	if err != nil {
		return err
	}
	restore, err := bench.RestrictCipher(*cipher)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	defer restore()
	stop, err := bench.StartCPUProfile(*prof)
	if err != nil {
		return err
	}
	defer stop()
	_, err = bench.TLSGet(ctx, urls[0], *out)
	return err
}

func benchHSClient(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("hs-client", flag.ContinueOnError)
	impl := fs.String("impl", "quiver", "")
	alpn := fs.String("alpn", "hq-interop", "")
	n := fs.Int("n", 100, "")
	parallel := fs.Int("parallel", 1, "")
	prof := fs.String("cpuprofile", "", "")
	urls, err := urlArgs(env, fs, args)
	if err != nil {
		return err
	}
	stop, err := bench.StartCPUProfile(*prof)
	if err != nil {
		return err
	}
	defer stop()
	d, err := bench.HandshakeClient(ctx, *impl, urls[0], *alpn, *n, *parallel)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "handshakes %d elapsed-ns %d\n", *n, d.Nanoseconds())
	return nil
}

func benchQuiverServe(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("quiver-serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:4433", "")
	cert := fs.String("cert", "", "")
	key := fs.String("key", "", "")
	root := fs.String("root", ".", "")
	var q bench.QuiverEndpointConfig
	fs.StringVar(&q.CC, "cc", "", "")
	fs.IntVar(&q.AckRatio, "ack-ratio", 0, "")
	fs.DurationVar(&q.AckDelay, "ack-delay", 0, "")
	fs.BoolVar(&q.StrictAcks, "strict-acks", false, "")
	fs.IntVar(&q.SocketBuffer, "socket-buffer", 0, "")
	cipher := fs.String("cipher", "", "")
	prof := fs.String("cpuprofile", "", "")
	if _, err := parseSub(env, fs, "quiver bench quiver-serve --addr A --cert F --key F --root DIR [--cc NAME] [--ack-ratio N] [--socket-buffer N] [--cipher NAME] [--cpuprofile F]", args); err != nil {
		return err
	}
	restore, err := bench.RestrictCipher(*cipher)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	defer restore()
	stop, err := bench.StartCPUProfile(*prof)
	if err != nil {
		return err
	}
	defer stop()
	return bench.QuiverServe(ctx, *addr, *cert, *key, *root, q)
}

func benchQuiverGet(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("quiver-get", flag.ContinueOnError)
	out := fs.String("out", ".", "")
	var q bench.QuiverEndpointConfig
	fs.StringVar(&q.CC, "cc", "", "")
	fs.DurationVar(&q.AckDelay, "ack-delay", 0, "")
	fs.BoolVar(&q.StrictAcks, "strict-acks", false, "")
	fs.IntVar(&q.AckRatio, "ack-ratio", 0, "")
	fs.IntVar(&q.SocketBuffer, "socket-buffer", 0, "")
	fs.BoolVar(&q.AckStats, "ack-stats", false, "")
	cipher := fs.String("cipher", "", "")
	prof := fs.String("cpuprofile", "", "")
	urls, err := urlArgs(env, fs, args)
	if err != nil {
		return err
	}
	restore, err := bench.RestrictCipher(*cipher)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	defer restore()
	stop, err := bench.StartCPUProfile(*prof)
	if err != nil {
		return err
	}
	defer stop()
	_, err = bench.QuiverGet(ctx, urls[0], *out, q)
	return err
}

func benchAckFreq(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("quiver bench ackfreq", flag.ContinueOnError)
	var c commonFlags
	c.register(fs, "quiver", 3)
	size := fs.String("size", "10MB", "file `size` per transfer")
	paths := fs.String("paths", strings.Join(bench.PathNames, ","), "emulated `paths`: "+strings.Join(bench.PathNames, ", "))
	ratios := fs.String("ratios", bench.DefaultRatios, "ACK `ratios` (ack-eliciting packets per ACK; 2 is RFC 9000's default), adaptive, "+
		"strict (1:2 with a receiver that acknowledges every two packets even within a burst), N@DELAY (a fixed Requested Max Ack Delay, e.g. 10@25ms)")
	if help, err := parseSub(env, fs, "quiver bench ackfreq [flags]", args); help || err != nil {
		return err
	}
	o, err := c.options(env, commandLine("ackfreq", args))
	if err != nil {
		return err
	}
	if o.Size, err = bench.ParseSize(*size); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if o.Configs, err = bench.AckFreqConfigs(splitList(*paths), splitList(*ratios)); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	res, err := bench.AckFreq(ctx, o)
	return finish(ctx, env, res, err, c.out, "ackfreq", c.store)
}

// startCPUProfile backs the --cpuprofile flags of quiver serve and get.
func startCPUProfile(path string) (func(), error) { return bench.StartCPUProfile(path) }
