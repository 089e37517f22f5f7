package rpcbench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is what 'quiver bench rpc' (and the gRPC comparison module,
// which runs the same code with gRPC added) measures.
type Config struct {
	Transports string
	Conc       string
	Sizes      string
	Duration   time.Duration
	Repeats    int
	Path       string
	Profile    string

	Swaps       int
	SwitchEvery time.Duration
	SwitchCalls int
	SwitchConc  int
	Window      time.Duration
}

// DefaultConfig is the configuration without flags.
func DefaultConfig() Config {
	return Config{Transports: strings.Join(Transports, ","), Conc: "1,64,512", Sizes: "581,1024",
		Duration: 2 * time.Second, Repeats: 3, Path: "loopback",
		SwitchEvery: 20 * time.Second, SwitchCalls: 10000, SwitchConc: 8}
}

// Register adds the configuration's flags to fs, with c's current values
// as defaults.
func (c *Config) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Transports, "transports", c.Transports, "comma-separated `list` of transports to measure ("+strings.Join(Transports, ", ")+"); empty for none")
	fs.StringVar(&c.Conc, "conc", c.Conc, "comma-separated `list` of concurrency levels (workers in a closed loop)")
	fs.StringVar(&c.Sizes, "sizes", c.Sizes, "comma-separated `list` of payload sizes in bytes (protobuf BytesValue)")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "measuring `time` per run")
	fs.IntVar(&c.Repeats, "repeats", c.Repeats, "`runs` of every cell, the systems alternating; tables show medians, ratios are medians of paired runs")
	fs.StringVar(&c.Path, "path", c.Path, "emulated network `profile` between client and server: loopback, lan, wan, lossy, optionally with overrides (wan,loss=0.005,delay=50ms,rate=10e6)")
	fs.StringVar(&c.Profile, "profile", c.Profile, "write CPU, mutex, block and allocation profiles of the run (client and server share the process) into `dir`")
	fs.IntVar(&c.Swaps, "swaps", c.Swaps, "run the switching experiment instead: at least `n` tcp<->quic swaps under load (0: off)")
	fs.DurationVar(&c.SwitchEvery, "switch-every", c.SwitchEvery, "switching experiment: `interval` between swaps")
	fs.IntVar(&c.SwitchCalls, "switch-calls", c.SwitchCalls, "switching experiment: at least `n` calls")
	fs.IntVar(&c.SwitchConc, "switch-conc", c.SwitchConc, "switching experiment: concurrent `workers`")
	fs.DurationVar(&c.Window, "window", c.Window, "switching experiment: calls within this `time` of a swap count as near it (0: a quarter of the interval, at most 5s)")
}

// ParseInts reads a comma-separated list of positive numbers.
func ParseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Extra adds systems to a comparison (the gRPC module adds gRPC-go); it
// gets the bench's server for its certificate and the path to put its
// own server behind. The returned func releases what it made.
type Extra func(s *Server, p *Path) ([]Target, func(), error)

// Main runs the benchmark that c describes and writes lines in Go
// benchmark format, then a table of medians and the goal ratios.
func Main(ctx context.Context, c Config, w io.Writer, extra Extra) error {
	concs, err := ParseInts(c.Conc)
	if err != nil {
		return err
	}
	sizes, err := ParseInts(c.Sizes)
	if err != nil {
		return err
	}
	if c.Repeats < 1 {
		return fmt.Errorf("--repeats must be at least 1")
	}
	path, err := ParsePath(c.Path)
	if err != nil {
		return err
	}
	defer path.Close()
	if c.Profile != "" {
		stop, err := startProfiles(c.Profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	s, err := NewServer(path)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(w, "goos: %s\ngoarch: %s\npkg: github.com/quiver-quic/quiver/rpc\n", runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "# path: %s\n", path)
	if c.Swaps > 0 {
		win := c.Window
		if win == 0 {
			win = min(c.SwitchEvery/4, 5*time.Second)
		}
		var ratios []float64
		failed := 0
		for range c.Repeats {
			rep, err := Switching(ctx, s, SwitchConfig{Conc: c.SwitchConc, Size: sizes[0], Every: c.SwitchEvery,
				Swaps: c.Swaps, Calls: c.SwitchCalls, Window: win})
			if err != nil {
				return err
			}
			rep.Print(w)
			ratios = append(ratios, rep.P99Ratio())
			failed += rep.Failed
		}
		fmt.Fprintf(w, "\nswitching, %d runs: median p99 near/far %.2fx (range %.2f-%.2f), failed calls %d\n",
			len(ratios), median(ratios), slices.Min(ratios), slices.Max(ratios), failed)
		return nil
	}
	var targets []Target
	if strings.TrimSpace(c.Transports) != "" {
		for _, name := range strings.Split(c.Transports, ",") {
			t, err := s.QuiverTarget(strings.TrimSpace(name))
			if err != nil {
				return err
			}
			targets = append(targets, t)
		}
	}
	if extra != nil {
		ts, release, err := extra(s, path)
		if err != nil {
			return err
		}
		defer release()
		targets = append(targets, ts...)
	}
	if len(targets) == 0 {
		return fmt.Errorf("nothing to measure")
	}
	rs, err := Compare(ctx, w, targets, concs, sizes, c.Duration, c.Repeats)
	fmt.Fprintln(w)
	Table(w, Summarise(rs))
	for _, den := range []string{"grpc/tcp"} {
		for _, num := range []string{"quiver/tcp", "quiver/quic"} {
			for _, r := range Ratios(rs, num, den) {
				fmt.Fprintln(w, r)
			}
			for _, r := range CPURatios(rs, num, den) {
				fmt.Fprintln(w, r)
			}
		}
	}
	return err
}

// startProfiles starts a CPU profile and turns on mutex and block
// profiling; the returned func writes them all into dir.
func startProfiles(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	runtime.SetMutexProfileFraction(10)
	runtime.SetBlockProfileRate(int(50 * time.Microsecond))
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		for _, name := range []string{"mutex", "block", "allocs", "goroutine"} {
			if g, err := os.Create(filepath.Join(dir, name+".pprof")); err == nil {
				pprof.Lookup(name).WriteTo(g, 0)
				g.Close()
			}
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
	}, nil
}
