// Package rpcbench measures RPC throughput and latency percentiles with a
// closed-loop workload (each of N workers sends its next call when the
// previous one returns), and prints results in Go benchmark format so that
// benchstat compares runs. Quiver's bench command and the separate gRPC
// comparison module use the same code, so both sides measure alike.
package rpcbench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Result is one measured configuration.
type Result struct {
	Name        string // e.g. "quiver/tcp" or "grpc/tcp"
	Concurrency int
	Size        int // payload bytes
	Calls       int
	Errors      int
	Elapsed     time.Duration
	P50, P99    time.Duration
	P999        time.Duration
	// CPU is the process's CPU time (user and system) during the run;
	// client and server share the process, so CPU/Calls is what a call
	// costs both ends, a figure that a loaded machine disturbs far less
	// than calls per second.
	CPU    time.Duration
	Repeat int     // which repeat of an alternating comparison
	Runs   int     // set by Summarise: how many runs were folded
	Rate   float64 // set by Summarise: median calls per second
}

// Throughput is calls per second (for a summary, the median of its runs).
func (r Result) Throughput() float64 {
	if r.Runs > 0 {
		return r.Rate
	}
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Elapsed.Seconds()
}

// Run calls call from conc workers for d and measures every call.
func Run(ctx context.Context, name string, conc, size int, d time.Duration, call func(context.Context) error) Result {
	lat := make([][]time.Duration, conc)
	errs := make([]int, conc)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cpu0 := processCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				err := call(context.WithoutCancel(ctx))
				el := time.Since(t0)
				if err != nil {
					errs[w]++
					continue
				}
				lat[w] = append(lat[w], el)
			}
		}()
	}
	wg.Wait()
	r := Result{Name: name, Concurrency: conc, Size: size, Elapsed: time.Since(start), CPU: processCPU() - cpu0}
	var all []time.Duration
	for w := range conc {
		all = append(all, lat[w]...)
		r.Errors += errs[w]
	}
	slices.Sort(all)
	r.Calls = len(all)
	if len(all) > 0 {
		pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
		r.P50, r.P99, r.P999 = pct(0.50), pct(0.99), pct(0.999)
	}
	return r
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUPerCall is the CPU time per call of both ends.
func (r Result) CPUPerCall() time.Duration {
	if r.Calls == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Calls)
}

// BenchLine formats r as a Go benchmark result line with custom units.
func (r Result) BenchLine() string {
	nsop := 0.0
	if r.Calls > 0 {
		nsop = float64(r.Elapsed.Nanoseconds()) / float64(r.Calls)
	}
	return fmt.Sprintf("BenchmarkRPC/%s/conc=%d/size=%d \t%8d\t%12.0f ns/op\t%12.0f calls/s\t%10.1f p50-us\t%10.1f p99-us\t%10.1f p99.9-us\t%6d errors\t%8.1f cpu-us/op",
		r.Name, r.Concurrency, r.Size, r.Calls, nsop, r.Throughput(),
		us(r.P50), us(r.P99), us(r.P999), r.Errors, us(r.CPUPerCall()))
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ParseLine reads a line printed by BenchLine back.
func ParseLine(line string) (Result, bool) {
	var r Result
	var nsop, tput, p50, p99, p999, cpu float64
	var name string
	n, err := fmt.Sscanf(line, "BenchmarkRPC/%s \t%d\t%f ns/op\t%f calls/s\t%f p50-us\t%f p99-us\t%f p99.9-us\t%d errors\t%f cpu-us/op",
		&name, &r.Calls, &nsop, &tput, &p50, &p99, &p999, &r.Errors, &cpu)
	// Lines written before the CPU column end after the errors.
	if err != nil && n != 8 || n < 8 {
		return r, false
	}
	r.CPU = time.Duration(cpu * 1e3 * float64(r.Calls))
	var rest string
	i := len(name)
	for j := 0; j < 2; j++ {
		i = lastSlash(name[:i])
	}
	r.Name, rest = name[:i], name[i:]
	if _, err := fmt.Sscanf(rest, "/conc=%d/size=%d", &r.Concurrency, &r.Size); err != nil {
		return r, false
	}
	r.Elapsed = time.Duration(nsop * float64(r.Calls))
	r.P50, r.P99, r.P999 = time.Duration(p50*1e3), time.Duration(p99*1e3), time.Duration(p999*1e3)
	return r, true
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return 0
}

// Table prints results as an aligned table.
func Table(w io.Writer, rs []Result) {
	fmt.Fprintf(w, "%-20s %5s %6s %10s %12s %10s %10s %10s %7s %9s\n", "transport", "conc", "size", "calls", "calls/s", "p50", "p99", "p99.9", "errors", "cpu/call")
	for _, r := range rs {
		fmt.Fprintf(w, "%-20s %5d %6d %10d %12.0f %10s %10s %10s %7d %9s\n", r.Name, r.Concurrency, r.Size, r.Calls, r.Throughput(),
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.P999.Round(time.Microsecond), r.Errors, r.CPUPerCall().Round(100*time.Nanosecond))
	}
}
