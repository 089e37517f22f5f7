package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/rpc"
	"github.com/quiver-quic/quiver/rpc/rpcbench"
)

type benchOpts struct {
	transports, conc, sizes string
	duration                time.Duration
	grpcDir                 string
	switchEvery             time.Duration
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
			"quiver bench rpc --transports tcp,quic --conc 64 --sizes 581 --grpc rpc/grpcbench --switch 200ms",
		},
		setFlags: func(fs *flag.FlagSet) any {
			o := &benchOpts{}
			fs.StringVar(&o.transports, "transports", "tcp,unix,http1,http2,quic,http3,udp", "comma-separated `list` of transports to measure")
			fs.StringVar(&o.conc, "conc", "1,64,512", "comma-separated `list` of concurrency levels (workers in a closed loop)")
			fs.StringVar(&o.sizes, "sizes", "581,1024", "comma-separated `list` of payload sizes in bytes (protobuf BytesValue)")
			fs.DurationVar(&o.duration, "duration", 2*time.Second, "measuring `time` per configuration")
			fs.StringVar(&o.grpcDir, "grpc", "", "`dir` of the gRPC comparison module (rpc/grpcbench); run with 'go run' when set")
			fs.DurationVar(&o.switchEvery, "switch", 0, "also measure calls while the client swaps tcp<->quic every `interval`")
			return o
		},
		run: runBench,
	}
}

func splitInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%w: %q is not a positive number", errUsage, f)
		}
		out = append(out, n)
	}
	return out, nil
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
	fs.StringVar(&o.transports, "transports", o.transports, "")
	fs.StringVar(&o.conc, "conc", o.conc, "")
	fs.StringVar(&o.sizes, "sizes", o.sizes, "")
	fs.DurationVar(&o.duration, "duration", o.duration, "")
	fs.StringVar(&o.grpcDir, "grpc", o.grpcDir, "")
	fs.DurationVar(&o.switchEvery, "switch", o.switchEvery, "")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return fmt.Errorf("%w: bad arguments after 'rpc': %v", errUsage, args[1:])
	}
	concs, err := splitInts(o.conc)
	if err != nil {
		return err
	}
	sizes, err := splitInts(o.sizes)
	if err != nil {
		return err
	}
	var results []rpcbench.Result
	emit := func(r rpcbench.Result) {
		results = append(results, r)
		fmt.Fprintln(env.stdout, r.BenchLine())
	}
	fmt.Fprintf(env.stdout, "goos: %s\npkg: github.com/quiver-quic/quiver/rpc\n", "linux")
	b, err := newBenchServer()
	if err != nil {
		return err
	}
	defer b.close()
	for _, name := range strings.Split(o.transports, ",") {
		name = strings.TrimSpace(name)
		dial, err := b.dialer(name)
		if err != nil {
			return err
		}
		for _, size := range sizes {
			for _, conc := range concs {
				c := rpc.NewClient(dial(), rpc.WithCodec(rpc.Proto))
				emit(rpcbench.Run(ctx, "quiver/"+name, conc, size, o.duration, echoCall(c, size)))
				c.Close()
			}
		}
	}
	if o.switchEvery > 0 {
		for _, size := range sizes {
			for _, conc := range concs {
				emit(b.switching(ctx, conc, size, o.duration, o.switchEvery))
			}
		}
	}
	if o.grpcDir != "" {
		rs, err := runGRPC(ctx, env, o)
		if err != nil {
			return fmt.Errorf("gRPC comparison: %w", err)
		}
		results = append(results, rs...)
	}
	fmt.Fprintln(env.stdout)
	rpcbench.Table(env.stdout, results)
	printRatios(env.stdout, results)
	return nil
}

func echoCall(c *rpc.Client, size int) func(context.Context) error {
	payload := make([]byte, size)
	return func(ctx context.Context) error {
		resp, err := rpc.Call[wrapperspb.BytesValue, wrapperspb.BytesValue](ctx, c, "Bench.Echo", wrapperspb.Bytes(payload))
		if err == nil && len(resp.Value) != size {
			err = errors.New("short answer")
		}
		return err
	}
}

// benchServer serves the echo handler on every transport at once.
type benchServer struct {
	srv     *rpc.Server
	addrs   map[string]string
	cli     *tls.Config
	served  chan error
	nServed int
}

func newBenchServer() (*benchServer, error) {
	cert, pool, err := peers.SelfSigned()
	if err != nil {
		return nil, err
	}
	stls := &tls.Config{Certificates: []tls.Certificate{cert}}
	b := &benchServer{srv: rpc.NewServer(), addrs: map[string]string{}, served: make(chan error, 8),
		cli: &tls.Config{RootCAs: pool, ServerName: "localhost"}}
	rpc.Register(b.srv, "Bench.Echo", func(ctx context.Context, r *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
		return r, nil
	})
	dir, err := os.MkdirTemp("", "quiver-bench")
	if err != nil {
		return nil, err
	}
	listen := map[string]func() (rpc.Listener, error){
		"tcp":  func() (rpc.Listener, error) { return rpc.ListenTCP("127.0.0.1:0", stls) },
		"unix": func() (rpc.Listener, error) { return rpc.ListenUnix(filepath.Join(dir, "rpc.sock")) },
		"http": func() (rpc.Listener, error) { return rpc.ListenHTTP("127.0.0.1:0", stls) },
		"quic": func() (rpc.Listener, error) { return rpc.ListenQUIC("127.0.0.1:0", stls) },
		"udp":  func() (rpc.Listener, error) { return rpc.ListenUDP("127.0.0.1:0", stls) },
	}
	for name, f := range listen {
		l, err := f()
		if err != nil {
			b.close()
			return nil, fmt.Errorf("listen %s: %w", name, err)
		}
		b.addrs[name] = l.Addr().String()
		b.nServed++
		go func() { b.served <- b.srv.Serve(l) }()
	}
	return b, nil
}

func (b *benchServer) dialer(name string) (func() rpc.Transport, error) {
	switch name {
	case "tcp":
		return func() rpc.Transport { return rpc.DialTCP(b.addrs["tcp"], b.cli) }, nil
	case "unix":
		return func() rpc.Transport { return rpc.DialUnix(b.addrs["unix"]) }, nil
	case "http1":
		return func() rpc.Transport { return rpc.DialHTTP1(b.addrs["http"], b.cli) }, nil
	case "http2":
		return func() rpc.Transport { return rpc.DialHTTP2(b.addrs["http"], b.cli) }, nil
	case "quic":
		return func() rpc.Transport { return rpc.DialQUIC(b.addrs["quic"], b.cli) }, nil
	case "http3":
		return func() rpc.Transport { return rpc.DialHTTP3(b.addrs["quic"], b.cli) }, nil
	case "udp":
		return func() rpc.Transport { return rpc.DialUDP(b.addrs["udp"], b.cli) }, nil
	}
	return nil, fmt.Errorf("%w: unknown transport %q (tcp, unix, http1, http2, quic, http3, udp)", errUsage, name)
}

func (b *benchServer) close() {
	b.srv.Close()
	for range b.nServed {
		<-b.served
	}
}

// switching measures calls while the client swaps between TCP+TLS and
// QUIC every interval.
func (b *benchServer) switching(ctx context.Context, conc, size int, d, every time.Duration) rpcbench.Result {
	tcp, _ := b.dialer("tcp")
	quic, _ := b.dialer("quic")
	c := rpc.NewClient(tcp(), rpc.WithCodec(rpc.Proto))
	defer c.Close()
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			case <-t.C:
				next := tcp
				if c.Transport().Name() == "tcp" {
					next = quic
				}
				if c.Switch(ctx, next()) == nil {
					n++
				}
			}
		}
	}()
	r := rpcbench.Run(ctx, "quiver/switch-tcp-quic", conc, size, d, echoCall(c, size))
	close(stop)
	<-done
	return r
}

// runGRPC runs the separate gRPC module with the same workload and reads
// its benchmark lines.
func runGRPC(ctx context.Context, env *cmdEnv, o *benchOpts) ([]rpcbench.Result, error) {
	cmd := exec.CommandContext(ctx, "go", "run", ".", "-conc", o.conc, "-sizes", o.sizes, "-duration", o.duration.String())
	cmd.Dir = o.grpcDir
	cmd.Stderr = env.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var rs []rpcbench.Result
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if r, ok := rpcbench.ParseLine(sc.Text()); ok {
			rs = append(rs, r)
			fmt.Fprintln(env.stdout, sc.Text())
		}
	}
	return rs, cmd.Wait()
}

// printRatios states the goals against what was measured.
func printRatios(w io.Writer, rs []rpcbench.Result) {
	find := func(name string, conc, size int) *rpcbench.Result {
		for i := range rs {
			if rs[i].Name == name && rs[i].Concurrency == conc && rs[i].Size == size {
				return &rs[i]
			}
		}
		return nil
	}
	for _, r := range rs {
		if r.Name != "grpc/tcp" {
			continue
		}
		for _, q := range []string{"quiver/tcp", "quiver/quic"} {
			if m := find(q, r.Concurrency, r.Size); m != nil {
				fmt.Fprintf(w, "%s / grpc/tcp throughput at conc=%d size=%d: %.2fx\n", q, r.Concurrency, r.Size, m.Throughput()/r.Throughput())
			}
		}
	}
	for _, r := range rs {
		if r.Name != "quiver/switch-tcp-quic" {
			continue
		}
		for _, q := range []string{"quiver/tcp", "quiver/quic"} {
			if m := find(q, r.Concurrency, r.Size); m != nil && m.P99 > 0 {
				fmt.Fprintf(w, "switching p99 / %s p99 at conc=%d size=%d: %.2fx\n", q, r.Concurrency, r.Size, float64(r.P99)/float64(m.P99))
			}
		}
	}
}
