package recovery

import (
	"testing"
	"time"
)

func TestPacerBurstAndRate(t *testing.T) {
	p := NewPacer(testMDS)
	const cwnd, srtt = 12000, 100 * ms
	// The burst allowance at start: ten packets at once.
	for i := 0; i < DefaultBurstPackets; i++ {
		if next := p.NextSendTime(epoch, cwnd, srtt); !next.Equal(epoch) {
			t.Fatalf("packet %d of the initial burst delayed to %v", i, next.Sub(epoch))
		}
		p.OnSent(epoch, testMDS)
	}
	// rate = 1.25 * 12000 B / 100 ms = 150 B/ms: one packet every 8 ms
	// ("interval = ( smoothed_rtt * packet_size / congestion_window ) / N").
	next := p.NextSendTime(epoch, cwnd, srtt)
	if next.Sub(epoch) != 8*ms {
		t.Fatalf("next send after the burst in %v, want 8ms", next.Sub(epoch))
	}
	// Paced for one second: N * cwnd / srtt = 150,000 B = 125 packets.
	now, sent := next, 0
	for now.Before(at(time.Second)) {
		if got := p.NextSendTime(now, cwnd, srtt); !got.Equal(now) {
			now = got
			continue
		}
		p.OnSent(now, testMDS)
		sent++
	}
	if sent < 124 || sent > 126 {
		t.Errorf("%d packets paced in one second, want 125", sent)
	}
	// After an idle period the bucket holds a full burst again, no more.
	now = at(5 * time.Second)
	burst := 0
	for p.NextSendTime(now, cwnd, srtt).Equal(now) {
		p.OnSent(now, testMDS)
		burst++
	}
	if burst != DefaultBurstPackets {
		t.Errorf("burst after idle %d, want %d", burst, DefaultBurstPackets)
	}
}

func TestPacerEdges(t *testing.T) {
	tests := []struct {
		name string
		cwnd int
		srtt time.Duration
	}{
		{"no RTT", 12000, 0},
		{"no window", 0, 100 * ms},
		{"huge window", 1 << 50, time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPacer(testMDS)
			now := epoch
			for i := 0; i < 100; i++ {
				next := p.NextSendTime(now, tt.cwnd, tt.srtt)
				if next.Before(now) || next.Sub(now) > time.Second {
					t.Fatalf("next send %v", next.Sub(now))
				}
				now = next
				p.OnSent(now, testMDS)
			}
		})
	}
	// A large window paces no slower than the timer granularity allows:
	// the bucket holds at least one granularity's worth.
	p := NewPacer(testMDS)
	p.NextSendTime(epoch, 100_000_000, 10*ms)
	if p.Budget() < 100_000_000*5/4/10 {
		t.Errorf("budget %d below one granularity of sending", p.Budget())
	}
}

func BenchmarkPacer(b *testing.B) {
	p := NewPacer(testMDS)
	now := epoch
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		now = p.NextSendTime(now, 1_000_000, 20*ms)
		p.OnSent(now, testMDS)
	}
}
