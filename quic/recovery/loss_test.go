package recovery

import (
	"errors"
	"testing"
	"time"
)

const testMDS = 1200

// newTestLD returns a server-side detector with NewReno whose handshake is
// confirmed, so that only the rules under test apply.
func newTestLD(t *testing.T) (*LossDetector, *NewReno) {
	t.Helper()
	cc := NewNewReno(testMDS)
	l := NewLossDetector(LossDetectorConfig{IsServer: true, CC: cc})
	l.SetHandshakeConfirmed(epoch)
	return l, cc
}

func sendData(l *LossDetector, space Space, pn int64, now time.Time) {
	l.OnPacketSent(space, SentPacket{PacketNumber: pn, Size: testMDS, AckEliciting: true, InFlight: true, Meta: uint64(pn) * 10}, now)
}

func ack(ranges ...AckRange) AckFrame { return AckFrame{Ranges: ranges} }

func pns(ps []SentPacket) []int64 {
	out := make([]int64, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.PacketNumber)
	}
	return out
}

func equalPNs(a []SentPacket, want ...int64) bool {
	got := pns(a)
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func TestAckFirstSample(t *testing.T) {
	l, _ := newTestLD(t)
	sendData(l, SpaceAppData, 0, epoch)
	res, err := l.OnAckReceived(SpaceAppData, AckFrame{Ranges: []AckRange{{0, 0}}, AckDelay: 5 * ms}, at(100*ms))
	if err != nil {
		t.Fatal(err)
	}
	if !equalPNs(res.Acked, 0) || len(res.Lost) != 0 || !res.RTTSample || res.LargestAcked != 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Acked[0].Meta != 0 || l.BytesInFlight() != 0 {
		t.Errorf("meta %d, bytes in flight %d", res.Acked[0].Meta, l.BytesInFlight())
	}
	r := l.RTT()
	if r.Smoothed() != 100*ms || r.RTTVar() != 50*ms || r.Min() != 100*ms {
		t.Errorf("rtt %v %v %v", r.Smoothed(), r.RTTVar(), r.Min())
	}
	if !l.LossDetectionTimer().IsZero() {
		t.Errorf("timer set with nothing in flight: %v", l.LossDetectionTimer())
	}
}

func TestRTTSampleRule(t *testing.T) {
	tests := []struct {
		name       string
		ackOnly1   bool // packet 1 is not ack-eliciting
		first      []AckRange
		second     []AckRange
		wantSample bool
	}{
		// "the largest acknowledged packet number is newly acknowledged"
		{name: "largest already acked", first: []AckRange{{1, 1}}, second: []AckRange{{0, 1}}, wantSample: false},
		{name: "largest newly acked", first: []AckRange{{0, 0}}, second: []AckRange{{0, 1}}, wantSample: true},
		// "at least one of the newly acknowledged packets was ack-eliciting"
		{name: "only non-ack-eliciting", ackOnly1: true, first: []AckRange{{0, 0}}, second: []AckRange{{0, 1}}, wantSample: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := newTestLD(t)
			sendData(l, SpaceAppData, 0, epoch)
			l.OnPacketSent(SpaceAppData, SentPacket{PacketNumber: 1, Size: 50, AckEliciting: !tt.ackOnly1, InFlight: !tt.ackOnly1}, at(ms))
			if _, err := l.OnAckReceived(SpaceAppData, ack(tt.first...), at(50*ms)); err != nil {
				t.Fatal(err)
			}
			res, err := l.OnAckReceived(SpaceAppData, ack(tt.second...), at(80*ms))
			if err != nil {
				t.Fatal(err)
			}
			if res.RTTSample != tt.wantSample {
				t.Errorf("RTT sample %v, want %v", res.RTTSample, tt.wantSample)
			}
		})
	}
}

func TestPacketAndTimeThresholdLoss(t *testing.T) {
	l, cc := newTestLD(t)
	// Packets 0..5 sent 1 ms apart.
	for pn := int64(0); pn <= 5; pn++ {
		sendData(l, SpaceAppData, pn, at(time.Duration(pn)*ms))
	}
	cwnd := cc.CongestionWindow()
	// ACK of 4 alone at 100 ms: latest_rtt = 96 ms. "largest_acked >=
	// pn + kPacketThreshold" declares 0 and 1 lost; 2 and 3 are within
	// both thresholds.
	res, err := l.OnAckReceived(SpaceAppData, ack(AckRange{4, 4}), at(100*ms))
	if err != nil {
		t.Fatal(err)
	}
	if !equalPNs(res.Acked, 4) || !equalPNs(res.Lost, 0, 1) {
		t.Fatalf("acked %v lost %v", pns(res.Acked), pns(res.Lost))
	}
	if got := cc.CongestionWindow(); got != cwnd/2 {
		t.Errorf("cwnd after loss %d, want %d", got, cwnd/2)
	}
	if l.BytesInFlight() != 3*testMDS {
		t.Errorf("bytes in flight %d", l.BytesInFlight())
	}
	// The loss timer is set for packet 2: sent at 2 ms + 9/8*96 ms.
	want := at(2*ms + 108*ms)
	if got := l.LossDetectionTimer(); !got.Equal(want) {
		t.Fatalf("loss timer %v, want %v", got.Sub(epoch), want.Sub(epoch))
	}
	if r := l.OnLossDetectionTimeout(want.Add(-time.Microsecond)); r.Action != TimeoutNone {
		t.Fatalf("early timeout acted: %+v", r)
	}
	r := l.OnLossDetectionTimeout(want)
	if r.Action != TimeoutLoss || r.Space != SpaceAppData || !equalPNs(r.Lost, 2) {
		t.Fatalf("timeout %+v lost %v", r, pns(r.Lost))
	}
	// Packet 3 follows 1 ms later.
	if got := l.LossDetectionTimer(); !got.Equal(want.Add(ms)) {
		t.Fatalf("next loss timer %v", got.Sub(epoch))
	}
	r = l.OnLossDetectionTimeout(want.Add(ms))
	if !equalPNs(r.Lost, 3) {
		t.Fatalf("lost %v", pns(r.Lost))
	}
	// One recovery period: the window was reduced once.
	if got := cc.CongestionWindow(); got != cwnd/2 {
		t.Errorf("cwnd %d after losses in one recovery period, want %d", got, cwnd/2)
	}
	// Only packet 5 is left; the PTO is armed for it.
	if l.BytesInFlight() != testMDS || !l.HasAckElicitingInFlight(SpaceAppData) {
		t.Errorf("bytes in flight %d", l.BytesInFlight())
	}
}

func TestPTOBackoff(t *testing.T) {
	l, _ := newTestLD(t)
	l.SetMaxAckDelay(25 * ms)
	// Fill the congestion window.
	for pn := int64(0); l.CanSend(); pn++ {
		sendData(l, SpaceAppData, pn, epoch)
	}
	inFlight := l.BytesInFlight()
	// No RTT sample: PTO = 333 + 666 + 25 ms.
	pto := 1024 * ms
	for i, mult := range []time.Duration{1, 2, 4, 8} {
		want := epoch.Add(mult * pto)
		if got := l.LossDetectionTimer(); !got.Equal(want) {
			t.Fatalf("PTO %d at %v, want %v", i, got.Sub(epoch), want.Sub(epoch))
		}
		r := l.OnLossDetectionTimeout(want)
		if r.Action != TimeoutProbe || r.Space != SpaceAppData || r.Probes != 2 || r.AntiDeadlock {
			t.Fatalf("timeout %+v", r)
		}
		if l.PTOCount() != i+1 {
			t.Fatalf("pto_count %d", l.PTOCount())
		}
		// "A PTO timer expiration event does not indicate packet loss and
		// MUST NOT cause prior unacknowledged packets to be marked as lost."
		if l.BytesInFlight() != inFlight {
			t.Fatalf("PTO changed bytes in flight")
		}
	}
	// "Probe packets MUST NOT be blocked by the congestion controller."
	if l.CongestionController().CanSend(l.BytesInFlight()) || !l.CanSend() {
		t.Fatal("probe blocked by the congestion controller")
	}
	sendData(l, SpaceAppData, 1000, at(8*pto))
	sendData(l, SpaceAppData, 1001, at(8*pto))
	if l.CanSend() {
		t.Fatal("more than two probes allowed")
	}
	// An acknowledgement resets the backoff.
	if _, err := l.OnAckReceived(SpaceAppData, ack(AckRange{1001, 1001}), at(8*pto+50*ms)); err != nil {
		t.Fatal(err)
	}
	if l.PTOCount() != 0 {
		t.Errorf("pto_count %d after ACK", l.PTOCount())
	}
}

func TestPTOSpaces(t *testing.T) {
	t.Run("no application PTO before confirmation", func(t *testing.T) {
		l := NewLossDetector(LossDetectorConfig{IsServer: true, CC: NewNewReno(testMDS)})
		sendData(l, SpaceAppData, 0, epoch)
		if !l.LossDetectionTimer().IsZero() {
			t.Fatalf("timer %v", l.LossDetectionTimer())
		}
		sendData(l, SpaceHandshake, 0, at(10*ms))
		if got, want := l.LossDetectionTimer(), at(10*ms+999*ms); !got.Equal(want) {
			t.Fatalf("handshake PTO %v, want %v (no max_ack_delay)", got.Sub(epoch), want.Sub(epoch))
		}
		r := l.OnLossDetectionTimeout(at(2 * time.Second))
		if r.Action != TimeoutProbe || r.Space != SpaceHandshake {
			t.Fatalf("timeout %+v", r)
		}
		l.OnPacketNumberSpaceDiscarded(SpaceHandshake, at(2*time.Second))
		if !l.LossDetectionTimer().IsZero() || l.PTOCount() != 0 {
			t.Fatalf("timer %v pto_count %d after discarding", l.LossDetectionTimer(), l.PTOCount())
		}
		l.SetHandshakeConfirmed(at(2 * time.Second))
		if got, want := l.LossDetectionTimer(), epoch.Add(999*ms+DefaultMaxAckDelay); !got.Equal(want) {
			t.Fatalf("application PTO %v, want %v", got.Sub(epoch), want.Sub(epoch))
		}
	})
	t.Run("earliest of Initial and Handshake", func(t *testing.T) {
		l := NewLossDetector(LossDetectorConfig{IsServer: true})
		sendData(l, SpaceInitial, 0, at(5*ms))
		sendData(l, SpaceHandshake, 0, epoch)
		if _, s := l.ptoTimeAndSpace(at(5 * ms)); s != SpaceHandshake {
			t.Fatalf("PTO space %v", s)
		}
	})
	t.Run("client anti-deadlock", func(t *testing.T) {
		l := NewLossDetector(LossDetectorConfig{})
		sendData(l, SpaceInitial, 0, epoch)
		// The server acknowledges the Initial: nothing is in flight, but
		// the client must keep a timer until the server validated it.
		if _, err := l.OnAckReceived(SpaceInitial, ack(AckRange{0, 0}), at(30*ms)); err != nil {
			t.Fatal(err)
		}
		want := at(30*ms + l.RTT().PTO(0))
		if got := l.LossDetectionTimer(); !got.Equal(want) {
			t.Fatalf("anti-deadlock timer %v, want %v", got.Sub(epoch), want.Sub(epoch))
		}
		r := l.OnLossDetectionTimeout(want)
		if r.Action != TimeoutProbe || r.Space != SpaceInitial || !r.AntiDeadlock || r.Probes != 1 {
			t.Fatalf("timeout %+v", r)
		}
		l.SetHandshakeKeys(want)
		r = l.OnLossDetectionTimeout(l.LossDetectionTimer())
		if r.Space != SpaceHandshake || !r.AntiDeadlock {
			t.Fatalf("timeout %+v", r)
		}
		// "a client does not reset the PTO backoff factor on receiving
		// acknowledgments in Initial packets."
		sendData(l, SpaceInitial, 1, at(5*time.Second))
		if _, err := l.OnAckReceived(SpaceInitial, ack(AckRange{1, 1}), at(5*time.Second+30*ms)); err != nil {
			t.Fatal(err)
		}
		if l.PTOCount() != 2 {
			t.Fatalf("pto_count %d, want 2", l.PTOCount())
		}
		l.SetPeerCompletedAddressValidation(at(6 * time.Second))
		if !l.LossDetectionTimer().IsZero() {
			t.Fatalf("timer still set after address validation")
		}
	})
	t.Run("server amplification limited", func(t *testing.T) {
		l := NewLossDetector(LossDetectorConfig{IsServer: true})
		sendData(l, SpaceInitial, 0, epoch)
		l.SetAmplificationLimited(true, epoch)
		if !l.LossDetectionTimer().IsZero() {
			t.Fatal("timer armed while amplification limited")
		}
		l.SetAmplificationLimited(false, at(2*time.Second))
		if got := l.LossDetectionTimer(); !got.Equal(at(999 * ms)) {
			t.Fatalf("timer %v after unblocking", got.Sub(epoch))
		}
	})
}

func TestDiscardSpace(t *testing.T) {
	l, _ := newTestLD(t)
	sendData(l, SpaceInitial, 0, epoch)
	sendData(l, SpaceInitial, 1, epoch)
	sendData(l, SpaceAppData, 0, epoch)
	l.OnPacketSent(SpaceInitial, SentPacket{PacketNumber: 2, Size: 40}, epoch) // ACK-only
	got := l.OnPacketNumberSpaceDiscarded(SpaceInitial, at(ms))
	if !equalPNs(got, 0, 1, 2) || l.BytesInFlight() != testMDS || l.HasAckElicitingInFlight(SpaceInitial) {
		t.Fatalf("discarded %v, bytes in flight %d", pns(got), l.BytesInFlight())
	}
	// Packets in a discarded space are ignored.
	sendData(l, SpaceInitial, 3, at(ms))
	if l.BytesInFlight() != testMDS {
		t.Fatal("packet recorded in a discarded space")
	}
}

func TestAckErrors(t *testing.T) {
	l, _ := newTestLD(t)
	sendData(l, SpaceAppData, 0, epoch)
	sendData(l, SpaceAppData, 2, epoch) // 1 skipped
	sendData(l, SpaceAppData, 3, epoch)
	tests := []struct {
		name   string
		ranges []AckRange
		want   error
	}{
		{"beyond largest sent", []AckRange{{3, 4}}, ErrAckOfUnsentPacket},
		{"skipped packet number", []AckRange{{1, 3}}, ErrAckOfUnsentPacket},
		{"ascending ranges", []AckRange{{0, 0}, {2, 3}}, ErrInvalidAckRanges},
		{"adjacent ranges", []AckRange{{2, 3}, {0, 1}}, ErrInvalidAckRanges},
		{"inverted range", []AckRange{{3, 2}}, ErrInvalidAckRanges},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.OnAckReceived(SpaceAppData, ack(tt.ranges...), at(ms)); !errors.Is(err, tt.want) {
				t.Errorf("err %v, want %v", err, tt.want)
			}
		})
	}
}

func TestECNCongestion(t *testing.T) {
	l, cc := newTestLD(t)
	for pn := int64(0); pn < 4; pn++ {
		sendData(l, SpaceAppData, pn, epoch)
	}
	a := AckFrame{Ranges: []AckRange{{0, 1}}, HasECN: true, ECT0: 2}
	if res, _ := l.OnAckReceived(SpaceAppData, a, at(50*ms)); res.CongestionECN {
		t.Fatal("congestion without CE")
	}
	cwnd := cc.CongestionWindow()
	a = AckFrame{Ranges: []AckRange{{0, 3}}, HasECN: true, ECT0: 3, CE: 1}
	res, _ := l.OnAckReceived(SpaceAppData, a, at(60*ms))
	if !res.CongestionECN || cc.CongestionWindow() != cwnd/2 || !cc.InRecovery() {
		t.Fatalf("CE increase: %+v cwnd %d", res, cc.CongestionWindow())
	}
}

// TestPersistentCongestion replays the example of RFC 9002 §7.6.3 with a
// PTO period of 2 s (smoothed_rtt 1 s, rttvar 250 ms, max_ack_delay 0).
func TestPersistentCongestion(t *testing.T) {
	sec := func(s float64) time.Time { return epoch.Add(time.Duration(s * float64(time.Second))) }
	run := func(t *testing.T, ackFive bool) (AckResult, *NewReno) {
		l, cc := newTestLD(t)
		l.SetMaxAckDelay(0)
		sendData(l, SpaceAppData, 1, sec(0))
		sendData(l, SpaceAppData, 2, sec(1))
		if _, err := l.OnAckReceived(SpaceAppData, ack(AckRange{1, 1}), sec(1.2)); err != nil {
			t.Fatal(err)
		}
		// Put the estimator where the example wants it, with the first
		// sample taken before packet 2 was sent.
		l.rtt.smoothed, l.rtt.rttvar, l.rtt.firstSample = time.Second, 250*ms, sec(0.5)
		times := []float64{2, 3, 4, 5, 6, 8, 12}
		for i, s := range times {
			sendData(l, SpaceAppData, int64(i+3), sec(s))
		}
		ranges := []AckRange{{9, 9}}
		if ackFive {
			ranges = []AckRange{{9, 9}, {5, 5}}
		}
		// The ACK arrives at 13 s (latest_rtt 1 s keeps the PTO period at
		// 1.75 s, duration 5.25 s).
		res, err := l.OnAckReceived(SpaceAppData, AckFrame{Ranges: ranges}, sec(13))
		if err != nil {
			t.Fatal(err)
		}
		return res, cc
	}
	t.Run("established", func(t *testing.T) {
		res, cc := run(t, false)
		if !equalPNs(res.Lost, 2, 3, 4, 5, 6, 7, 8) || !res.PersistentCongestion {
			t.Fatalf("lost %v, persistent %v", pns(res.Lost), res.PersistentCongestion)
		}
		// The window collapsed to kMinimumWindow, then grew in slow
		// start by packet 9, acknowledged after the losses (Appendix
		// A.7 runs OnPacketsLost before OnPacketsAcked).
		if cc.CongestionWindow() != MinimumWindow(testMDS)+testMDS {
			t.Errorf("cwnd %d, want kMinimumWindow + one packet", cc.CongestionWindow())
		}
	})
	t.Run("broken by an acknowledgement", func(t *testing.T) {
		res, cc := run(t, true)
		if !equalPNs(res.Lost, 2, 3, 4, 6, 7, 8) || res.PersistentCongestion {
			t.Fatalf("lost %v, persistent %v", pns(res.Lost), res.PersistentCongestion)
		}
		if cc.CongestionWindow() == MinimumWindow(testMDS) {
			t.Errorf("window collapsed")
		}
	})
}

func TestHistoryGrowthAndSkips(t *testing.T) {
	l, _ := newTestLD(t)
	// Far more packets than the initial ring, every third number skipped.
	var sent []int64
	for pn := int64(0); pn < 1000; pn++ {
		if pn%3 == 2 {
			continue
		}
		l.OnPacketSent(SpaceAppData, SentPacket{PacketNumber: pn, Size: 100, AckEliciting: true, InFlight: true}, epoch)
		sent = append(sent, pn)
	}
	var ranges []AckRange
	for pn := int64(999); pn >= 0; pn-- {
		if pn%3 != 2 {
			ranges = append(ranges, AckRange{pn, pn})
			if pn%3 == 1 {
				ranges[len(ranges)-1].Smallest = pn - 1
				pn--
			}
		}
	}
	res, err := l.OnAckReceived(SpaceAppData, AckFrame{Ranges: ranges}, at(10*ms))
	if err != nil {
		t.Fatal(err)
	}
	if !equalPNs(res.Acked, sent...) || l.BytesInFlight() != 0 {
		t.Fatalf("acked %d packets, bytes in flight %d", len(res.Acked), l.BytesInFlight())
	}
	if h := &l.spaces[SpaceAppData].sent; h.n != 0 {
		t.Errorf("history keeps %d slots", h.n)
	}
}

// BenchmarkSendAck measures one OnPacketSent plus one OnAckReceived per
// packet, with a window of packets in flight.
func BenchmarkSendAck(b *testing.B) {
	l := NewLossDetector(LossDetectorConfig{IsServer: true, CC: NewCubic(testMDS)})
	l.SetHandshakeConfirmed(epoch)
	const window = 200
	now := epoch
	pn := int64(0)
	for ; pn < window; pn++ {
		l.OnPacketSent(SpaceAppData, SentPacket{PacketNumber: pn, Size: testMDS, AckEliciting: true, InFlight: true}, now)
	}
	ranges := make([]AckRange, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(10 * time.Microsecond)
		l.OnPacketSent(SpaceAppData, SentPacket{PacketNumber: pn, Size: testMDS, AckEliciting: true, InFlight: true, Meta: uint64(pn)}, now)
		ranges[0] = AckRange{Smallest: 0, Largest: pn - window}
		if _, err := l.OnAckReceived(SpaceAppData, AckFrame{Ranges: ranges, AckDelay: time.Millisecond}, now); err != nil {
			b.Fatal(err)
		}
		pn++
	}
}

func TestZeroRTTRejected(t *testing.T) {
	l := NewLossDetector(LossDetectorConfig{CC: NewNewReno(testMDS)})
	sendData(l, SpaceInitial, 0, epoch)
	sendData(l, SpaceAppData, 0, epoch)
	sendData(l, SpaceAppData, 1, epoch)
	got := l.OnZeroRTTRejected(at(ms))
	if !equalPNs(got, 0, 1) || l.BytesInFlight() != testMDS {
		t.Fatalf("dropped %v, bytes in flight %d", pns(got), l.BytesInFlight())
	}
	// 1-RTT packets continue the numbering.
	sendData(l, SpaceAppData, 2, at(2*ms))
	if l.BytesInFlight() != 2*testMDS {
		t.Fatal("1-RTT packet not recorded after 0-RTT rejection")
	}
	// A Handshake ACK tells the client the server validated its address.
	sendData(l, SpaceHandshake, 0, at(2*ms))
	if _, err := l.OnAckReceived(SpaceHandshake, ack(AckRange{0, 0}), at(40*ms)); err != nil {
		t.Fatal(err)
	}
	if !l.peerCompletedAddressValidation() {
		t.Fatal("Handshake ACK did not complete address validation")
	}
}
