package bench

import (
	"slices"
	"testing"
	"time"
)

// TestParseHostIRQ reads /proc/stat's irq and softirq fields and refuses
// a line that is not the all-CPU one.
func TestParseHostIRQ(t *testing.T) {
	irq, soft, ok := parseHostIRQ("cpu  4705 150 1120 16250 520 30 45 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if !ok || irq != 300*time.Millisecond || soft != 450*time.Millisecond {
		t.Errorf("got irq %v softirq %v %v, want 300ms 450ms", irq, soft, ok)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7\n", "cpu 1 2 3 4 5 x 7\n", "cpu 1 2 3 4 5 6\n", "cpu 1 2 3 4 5 -6 7\n"} {
		if _, _, ok := parseHostIRQ(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestRemoteTrace turns agents' cumulative samples into CPUs per second,
// keeping the server's seconds that overlap the client's.
func TestRemoteTrace(t *testing.T) {
	s := func(sec int, busy, soft time.Duration) CPUSample {
		return CPUSample{T: time.Duration(sec) * time.Second, User: busy / 2, System: busy / 2, SoftIRQ: soft, HostOK: true}
	}
	server := []CPUSample{s(1, 0, 0), s(2, 100*time.Millisecond, 0), s(3, 900*time.Millisecond, 0), s(4, 1700*time.Millisecond, 0)}
	client := []CPUSample{s(1, 500*time.Millisecond, time.Second), s(2, time.Second, 1250*time.Millisecond), s(3, 2*time.Second, 1500*time.Millisecond)}
	tr := remoteTrace(server, client, "agent:1")
	if tr == nil {
		t.Fatal("no trace")
	}
	if !slices.Equal(tr.Client, []float64{0.5, 1}) || !slices.Equal(tr.Server, []float64{0.8, 0.8}) || !slices.Equal(tr.SoftIRQ, []float64{0.25, 0.25}) {
		t.Errorf("trace %+v", tr)
	}
	if remoteTrace(server, client[:1], "x") != nil {
		t.Error("a trace from one sample")
	}
}
