package netem

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// BenchmarkNamespacesTbf measures what the router's tbf delivers towards
// the client beside what it was configured for, in one run: the rate the
// tests only bound from below (TestNamespacesTbf). Needs root.
//
//	go test ./netem -run '^$' -bench NamespacesTbf -benchtime 3x
func BenchmarkNamespacesTbf(b *testing.B) {
	const rate = 20e6
	n := setupNamespaces(b, NamespaceConfig{RateToClient: rate, QueueBytes: 4 << 20, Forward: true})
	const count, size = 2000, 1200 // about 1 s at 20 Mbit/s
	var sum float64
	for range b.N {
		r := sendThroughTbf(b, n, count, size)
		if r.got < count/2 {
			b.Fatalf("%d of %d datagrams crossed the router", r.got, count)
		}
		sum += r.bps
	}
	got := sum / float64(b.N)
	b.ReportMetric(rate/1e6, "configured-Mbps")
	b.ReportMetric(got/1e6, "delivered-Mbps")
	b.ReportMetric(got/rate, "delivered/configured")
}

// BenchmarkNamespacesTCPFlow measures the cross-traffic flow's goodput
// through a 20 Mbit/s tbf beside the bottleneck's rate. Needs root.
//
//	go test ./netem -run '^$' -bench NamespacesTCPFlow -benchtime 3x
func BenchmarkNamespacesTCPFlow(b *testing.B) {
	const rate = 20e6
	n := setupNamespaces(b, NamespaceConfig{RateToClient: rate, Forward: true})
	var sum float64
	for range b.N {
		f, err := n.StartTCPFlow(b.Context(), n.Server, NSCrossServer, n.Client, netip.AddrPortFrom(NSCrossClient, 5201), "cubic")
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
		_, err = f.WaitReceived(ctx, rate/8)
		cancel()
		_, bps, serr := f.Stop()
		if err != nil || serr != nil {
			b.Fatal(err, serr)
		}
		sum += bps
	}
	got := sum / float64(b.N)
	b.ReportMetric(rate/1e6, "bottleneck-Mbps")
	b.ReportMetric(got/1e6, "tcp-Mbps")
	b.ReportMetric(got/rate, "tcp/bottleneck")
}
