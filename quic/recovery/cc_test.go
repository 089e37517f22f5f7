package recovery

import (
	"math"
	"testing"
	"time"
)

func TestInitialWindow(t *testing.T) {
	tests := []struct{ mds, want int }{
		{1200, 12000}, // 10 * 1200
		{1472, 14720}, // 10 * 1472 = 14720
		{1500, 14720}, // capped at 14720
		{9000, 18000}, // 2 * mds
		{65000, 130000},
	}
	for _, tt := range tests {
		if got := InitialWindow(tt.mds); got != tt.want {
			t.Errorf("InitialWindow(%d) = %d, want %d", tt.mds, got, tt.want)
		}
	}
	if got := MinimumWindow(1200); got != 2400 {
		t.Errorf("MinimumWindow = %d", got)
	}
}

func packet(pn int64, sent time.Time) SentPacket {
	return SentPacket{PacketNumber: pn, TimeSent: sent, Size: testMDS, AckEliciting: true, InFlight: true}
}

func TestNewRenoRecoveryPeriod(t *testing.T) {
	c := NewNewReno(testMDS)
	rtt := NewRTT(0)
	if c.State() != StateSlowStart || !c.CanSend(0) || c.CanSend(12000-testMDS+1) {
		t.Fatalf("initial state %v", c.State())
	}
	// Slow start: the window grows by the bytes acknowledged.
	c.OnPacketsAcked(at(100*ms), []SentPacket{packet(0, epoch), packet(1, epoch)}, 0, &rtt)
	if c.CongestionWindow() != 14400 {
		t.Fatalf("cwnd %d after slow start", c.CongestionWindow())
	}
	// A loss of a packet sent at 50 ms, detected at 200 ms.
	c.OnCongestionEvent(at(200*ms), at(50*ms), 0)
	if c.CongestionWindow() != 7200 || c.SlowStartThreshold() != 7200 || !c.InRecovery() || c.State() != StateRecovery {
		t.Fatalf("cwnd %d ssthresh %d", c.CongestionWindow(), c.SlowStartThreshold())
	}
	// "If the congestion window is reduced immediately, a single packet
	// can be sent prior to reduction."
	if !c.CanSend(100000) {
		t.Fatal("no packet allowed on entering recovery")
	}
	c.OnPacketSent(at(200*ms), testMDS, 100000)
	if c.CanSend(100000) {
		t.Fatal("more than one packet allowed beyond the window")
	}
	// "during a recovery period, the congestion window does not change in
	// response to new losses".
	c.OnCongestionEvent(at(210*ms), at(150*ms), 0)
	if c.CongestionWindow() != 7200 {
		t.Fatalf("second reduction in one recovery period: %d", c.CongestionWindow())
	}
	// Packets sent before recovery do not grow the window.
	c.OnPacketsAcked(at(220*ms), []SentPacket{packet(2, at(150*ms))}, 0, &rtt)
	if c.CongestionWindow() != 7200 || !c.InRecovery() {
		t.Fatalf("cwnd %d grew in recovery", c.CongestionWindow())
	}
	// "A recovery period ends ... when a packet sent during the recovery
	// period is acknowledged."
	c.OnPacketsAcked(at(300*ms), []SentPacket{packet(3, at(201*ms))}, 0, &rtt)
	if c.InRecovery() || c.State() != StateCongestionAvoidance {
		t.Fatalf("still in recovery, state %v", c.State())
	}
	// Congestion avoidance: one datagram per window acknowledged. The
	// packet that ended recovery counted 1200 bytes already.
	for i := 0; i < 4; i++ {
		c.OnPacketsAcked(at(310*ms), []SentPacket{packet(int64(4+i), at(250*ms))}, 0, &rtt)
	}
	if c.CongestionWindow() != 7200 {
		t.Fatalf("cwnd %d before a full window", c.CongestionWindow())
	}
	c.OnPacketsAcked(at(310*ms), []SentPacket{packet(9, at(250*ms))}, 0, &rtt)
	if c.CongestionWindow() != 8400 {
		t.Fatalf("cwnd %d after a full window, want 8400", c.CongestionWindow())
	}
	// Application limited: no growth.
	c.SetAppLimited(true)
	c.OnPacketsAcked(at(320*ms), []SentPacket{packet(10, at(250*ms))}, 0, &rtt)
	if c.State() != StateApplicationLimited || c.bytesAcked != 0 {
		t.Fatalf("grew while application limited")
	}
	c.SetAppLimited(false)
	// Persistent congestion.
	c.OnPersistentCongestion(at(400 * ms))
	if c.CongestionWindow() != MinimumWindow(testMDS) || c.InRecovery() {
		t.Fatalf("cwnd %d after persistent congestion", c.CongestionWindow())
	}
	// A window below ssthresh means slow start again.
	if c.State() != StateSlowStart {
		t.Fatalf("state %v", c.State())
	}
}

func TestCubicCurve(t *testing.T) {
	c := NewCubic(testMDS)
	c.cwnd = 1000 * testMDS
	c.OnCongestionEvent(at(time.Second), epoch, 0)
	if c.wMax != 1000*testMDS || c.CongestionWindow() != 700*testMDS {
		t.Fatalf("W_max %v cwnd %d", c.wMax, c.CongestionWindow())
	}
	// K = cbrt(W_max * (1 - β) / C) = cbrt(1000 * 0.3 / 0.4) segments.
	rtt := NewRTT(0)
	rtt.Update(100*ms, 0, 0, true, epoch)
	c.OnPacketsAcked(at(time.Second+10*ms), []SentPacket{packet(1, at(time.Second+ms))}, 0, &rtt)
	wantK := math.Cbrt(1000 * 0.3 / 0.4)
	if math.Abs(c.k-wantK) > 1e-9 {
		t.Fatalf("K = %v, want %v", c.k, wantK)
	}
	// "W_cubic(t) at K equals W_max", and W_cubic(0) is the reduced
	// window.
	if got := c.wCubic(c.k); math.Abs(got-c.wMax) > 1e-6 {
		t.Fatalf("W_cubic(K) = %v, want %v", got, c.wMax)
	}
	if got := c.wCubic(0); math.Abs(got-0.7*c.wMax) > 1e-6 {
		t.Fatalf("W_cubic(0) = %v, want β*W_max", got)
	}
	// Drive ACKs for a full window every RTT (100 ms, so that the cubic
	// curve and not the Reno-friendly estimate leads) and check the
	// growth: non-decreasing, concave up to W_max around K, convex beyond.
	now := at(time.Second + 10*ms)
	prev := c.CongestionWindow()
	acked := make([]SentPacket, 0, 4000)
	var atK, atHalfK int
	for step := 0; step < 150; step++ {
		now = now.Add(100 * ms)
		acked = acked[:0]
		for i := 0; i < c.CongestionWindow()/testMDS; i++ {
			acked = append(acked, packet(int64(i), now.Add(-90*ms)))
		}
		c.OnPacketsAcked(now, acked, 0, &rtt)
		if c.CongestionWindow() < prev {
			t.Fatalf("window shrank at step %d", step)
		}
		prev = c.CongestionWindow()
		tt := now.Sub(c.epochStart).Seconds()
		if atHalfK == 0 && tt >= c.k/2 {
			atHalfK = prev
		}
		if atK == 0 && tt >= c.k {
			atK = prev
		}
	}
	if math.Abs(float64(atK)-c.wMax)/c.wMax > 0.02 {
		t.Errorf("cwnd at K = %d, want about W_max %v", atK, c.wMax)
	}
	// Concave: more than half the way back at K/2 (the cubic gives 7/8).
	if float64(atHalfK) < 0.7*c.wMax+0.8*0.3*c.wMax {
		t.Errorf("cwnd at K/2 = %d, curve not concave", atHalfK)
	}
	// Convex: about C*(15-K)^3 = 0.4*5.9^3 = 82 segments above W_max
	// after 15 s.
	if float64(prev) < c.wMax+70*testMDS {
		t.Errorf("cwnd %d did not grow past W_max in the convex region", prev)
	}
}

func TestCubicFastConvergenceAndRenoFriendly(t *testing.T) {
	c := NewCubic(testMDS)
	c.cwnd = 100 * testMDS
	c.OnCongestionEvent(at(time.Second), epoch, 0)
	// A second loss before the window regained W_max: W_max = cwnd *
	// (1 + β) / 2.
	c.OnCongestionEvent(at(2*time.Second), at(1500*ms), 0)
	if want := 70 * testMDS * 1.7 / 2; math.Abs(c.wMax-want) > 1 {
		t.Fatalf("W_max %v, want %v", c.wMax, want)
	}
	if math.Abs(float64(c.CongestionWindow())-70*testMDS*0.7) > 1 {
		t.Fatalf("cwnd %d", c.CongestionWindow())
	}

	// Reno-friendly region: with a tiny W_max the cubic curve is flat
	// near cwnd, and W_est (Reno at α = 0.53 per RTT) leads.
	r := NewCubic(testMDS)
	r.cwnd = 4 * testMDS
	r.OnCongestionEvent(at(time.Second), epoch, 0)
	rtt := NewRTT(0)
	rtt.Update(10*ms, 0, 0, true, epoch)
	now := at(time.Second)
	for step := 0; step < 10; step++ {
		now = now.Add(10 * ms)
		n := max(r.CongestionWindow()/testMDS, 1)
		acked := make([]SentPacket, n)
		for i := range acked {
			acked[i] = packet(int64(i), now.Add(-5*ms))
		}
		r.OnPacketsAcked(now, acked, 0, &rtt)
	}
	if r.wCubic(now.Sub(r.epochStart).Seconds()) >= r.wEst {
		t.Fatalf("not in the Reno-friendly region")
	}
	if float64(r.CongestionWindow()) < r.wEst-1 {
		t.Fatalf("cwnd %d below W_est %v", r.CongestionWindow(), r.wEst)
	}
}

func TestCubicAppLimited(t *testing.T) {
	c := NewCubic(testMDS)
	c.cwnd = 100 * testMDS
	c.OnCongestionEvent(at(time.Second), epoch, 0)
	rtt := NewRTT(0)
	rtt.Update(50*ms, 0, 0, true, epoch)
	c.OnPacketsAcked(at(1100*ms), []SentPacket{packet(1, at(1050*ms))}, 0, &rtt)
	start := c.epochStart
	cwnd := c.CongestionWindow()
	c.SetAppLimited(true)
	c.OnPacketsAcked(at(5*time.Second), []SentPacket{packet(2, at(4*time.Second))}, 0, &rtt)
	if c.CongestionWindow() != cwnd {
		t.Fatalf("window grew while application limited")
	}
	if got := c.epochStart.Sub(start); got != 3900*ms {
		t.Fatalf("epoch moved by %v, want the 3.9 s spent application limited", got)
	}
}

// TestControllerReset: after losses shrink the window, Reset brings back
// the initial window and slow start (RFC 9000 §9.4).
func TestControllerReset(t *testing.T) {
	for name, cc := range map[string]interface {
		CongestionController
		Reset()
	}{"newreno": NewNewReno(1200), "cubic": NewCubic(1200)} {
		now := time.Unix(0, 0)
		initial := cc.CongestionWindow()
		cc.OnCongestionEvent(now.Add(time.Second), now, 0)
		cc.OnPersistentCongestion(now.Add(time.Second))
		if cc.CongestionWindow() >= initial {
			t.Fatalf("%s: window %d not reduced from %d", name, cc.CongestionWindow(), initial)
		}
		cc.Reset()
		if cc.CongestionWindow() != initial || cc.SlowStartThreshold() != math.MaxInt {
			t.Errorf("%s: after Reset window %d ssthresh %d, want %d and infinite", name, cc.CongestionWindow(), cc.SlowStartThreshold(), initial)
		}
	}
}
