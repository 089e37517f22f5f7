package rpcbench

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestBenchLineRoundTrip(t *testing.T) {
	r := Result{Name: "quiver/tcp", Concurrency: 64, Size: 581, Calls: 1000, Elapsed: time.Second, P50: 100 * time.Microsecond, P99: time.Millisecond, P999: 2 * time.Millisecond}
	got, ok := ParseLine(r.BenchLine())
	if !ok || got.Name != r.Name || got.Concurrency != 64 || got.Size != 581 || got.Calls != 1000 || got.P99 != r.P99 {
		t.Fatalf("ParseLine(%q) = %+v, %v", r.BenchLine(), got, ok)
	}
	r.CPU = 50 * time.Millisecond
	if got, ok := ParseLine(r.BenchLine()); !ok || got.CPUPerCall() != 50*time.Microsecond {
		t.Fatalf("CPU per call read back as %v (%v)", got.CPUPerCall(), ok)
	}
	// A line from before the CPU column still reads.
	old := "BenchmarkRPC/grpc/tcp/conc=64/size=581 \t   11806\t      169405 ns/op\t        5795 calls/s\t    4408.0 p50-us\t   94588.0 p99-us\t  141115.0 p99.9-us\t     0 errors"
	if got, ok := ParseLine(old); !ok || got.Name != "grpc/tcp" || got.Calls != 11806 || got.CPU != 0 {
		t.Fatalf("old line: %+v, %v", got, ok)
	}
	if _, ok := ParseLine("BenchmarkRPC/x/conc=1/size=1 \t 5\t 3 ns/op"); ok {
		t.Fatal("truncated line accepted")
	}
}

func TestRunCountsCalls(t *testing.T) {
	r := Run(context.Background(), "noop", 4, 1, 20*time.Millisecond, func(context.Context) error { return nil })
	if r.Calls == 0 || r.P50 > r.P99 || r.P99 > r.P999 {
		t.Fatalf("%+v", r)
	}
}

func TestCompareAlternatesAndSummarises(t *testing.T) {
	var order []string
	target := func(name string) Target {
		return Target{Name: name, Open: func(context.Context, int) (func(context.Context) error, func(), error) {
			order = append(order, name)
			return func(context.Context) error { return nil }, func() {}, nil
		}}
	}
	var out strings.Builder
	rs, err := Compare(context.Background(), &out, []Target{target("a"), target("b")}, []int{1}, []int{10}, 5*time.Millisecond, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ""); got != "abbaab" {
		t.Fatalf("run order %q, want abbaab (rotating first target)", got)
	}
	if len(rs) != 6 || strings.Count(out.String(), "BenchmarkRPC/") != 6 {
		t.Fatalf("%d results, output:\n%s", len(rs), out.String())
	}
	if s := Summarise(rs); len(s) != 2 || s[0].Runs != 3 {
		t.Fatalf("summary %+v", s)
	}
}

func TestSummariseMedianAndPairedRatios(t *testing.T) {
	mk := func(name string, rep, calls int) Result {
		return Result{Name: name, Concurrency: 64, Size: 581, Calls: calls, Elapsed: time.Second, Repeat: rep, P99: time.Duration(calls) * time.Microsecond}
	}
	rs := []Result{mk("q", 0, 100), mk("g", 0, 50), mk("q", 1, 300), mk("g", 1, 100), mk("q", 2, 1000), mk("g", 2, 1000)}
	s := Summarise(rs)
	if s[0].Name != "q" || s[0].Throughput() != 300 || s[0].P99 != 300*time.Microsecond || s[0].Calls != 1400 {
		t.Fatalf("summary of q: %+v", s[0])
	}
	rt := Ratios(rs, "q", "g")
	// Paired ratios 2, 3, 1: median 2 (the ratio of medians would be 3).
	if len(rt) != 1 || rt[0].Median != 2 || rt[0].Min != 1 || rt[0].Max != 3 || rt[0].Pairs != 3 {
		t.Fatalf("ratios %+v", rt)
	}
	// CPU per call: q spends 1 ms of CPU for 100 calls (10 µs/call), g
	// 1 ms for 50 (20 µs/call): q does 2x the calls per CPU-second.
	for i := range rs {
		rs[i].CPU = time.Millisecond
	}
	if c := CPURatios(rs[:2], "q", "g"); len(c) != 1 || c[0].Median != 2 || !c[0].CPU {
		t.Fatalf("CPU ratios %+v", c)
	}
}

func TestParsePath(t *testing.T) {
	p, err := ParsePath("wan,loss=0.005,delay=40ms")
	if err != nil || p.Link.Loss != 0.005 || p.Link.Delay != 40*time.Millisecond || p.Link.Rate != 20e6 || !p.Emulated() {
		t.Fatalf("%+v %v", p, err)
	}
	if p, _ := ParsePath("loopback"); p.Emulated() {
		t.Fatal("loopback emulated")
	}
	if _, err := ParsePath("moon"); err == nil {
		t.Fatal("unknown profile accepted")
	}
}

// TestSwitchingHundredSwaps is the switching goal at a short
// interval: 100 tcp<->quic swaps under a closed-loop load, zero failed
// calls, and calls both near and far from the swaps.
func TestSwitchingHundredSwaps(t *testing.T) {
	s, err := NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Switching(ctx, s, SwitchConfig{Conc: 8, Size: 581, Every: 10 * time.Millisecond, Swaps: 100, Calls: 500, Window: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Print(&out)
	t.Log(out.String())
	// Far calls may be none when swaps take longer than the interval
	// (a slow machine, -race): only near calls are required.
	if rep.Swaps < 100 || rep.Failed != 0 || rep.Near.Calls == 0 || rep.Calls < 500 {
		t.Fatalf("swaps %d, calls %d, failed %d (first: %v), near %d, far %d", rep.Swaps, rep.Calls, rep.Failed, rep.FirstErr, rep.Near.Calls, rep.Far.Calls)
	}
}

// TestMainThroughEmulatedPath runs the whole benchmark briefly over the
// lossy profile: every transport family crosses its relay and answers.
func TestMainThroughEmulatedPath(t *testing.T) {
	c := DefaultConfig()
	c.Transports, c.Conc, c.Sizes, c.Duration, c.Repeats, c.Path = "tcp,quic,udp,http2", "4", "581", 300*time.Millisecond, 1, "lossy,delay=2ms"
	var out strings.Builder
	if err := Main(context.Background(), c, &out, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"quiver/tcp", "quiver/quic", "quiver/udp", "quiver/http2"} {
		var r Result
		for _, line := range strings.Split(out.String(), "\n") {
			if x, ok := ParseLine(line); ok && x.Name == name {
				r = x
			}
		}
		if r.Calls == 0 {
			t.Errorf("%s: no calls through the lossy path:\n%s", name, out.String())
		}
	}
	if !strings.Contains(out.String(), "RTT 4ms") {
		t.Errorf("path not reported:\n%s", out.String())
	}
}
