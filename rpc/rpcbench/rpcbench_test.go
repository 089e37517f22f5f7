package rpcbench

import (
	"context"
	"testing"
	"time"
)

func TestBenchLineRoundTrip(t *testing.T) {
	r := Result{Name: "quiver/tcp", Concurrency: 64, Size: 581, Calls: 1000, Elapsed: time.Second, P50: 100 * time.Microsecond, P99: time.Millisecond, P999: 2 * time.Millisecond}
	got, ok := ParseLine(r.BenchLine())
	if !ok || got.Name != r.Name || got.Concurrency != 64 || got.Size != 581 || got.Calls != 1000 || got.P99 != r.P99 {
		t.Fatalf("ParseLine(%q) = %+v, %v", r.BenchLine(), got, ok)
	}
}

func TestRunCountsCalls(t *testing.T) {
	r := Run(context.Background(), "noop", 4, 1, 20*time.Millisecond, func(context.Context) error { return nil })
	if r.Calls == 0 || r.P50 > r.P99 || r.P99 > r.P999 {
		t.Fatalf("%+v", r)
	}
}
