package recovery

import (
	"math"
	"time"
)

// Cubic constants of RFC 9438 §4.
const (
	// cubicC is C: "C SHOULD be set to 0.4."
	cubicC = 0.4
	// cubicBeta is β_cubic: "β_cubic SHOULD be set to 0.7".
	cubicBeta = 0.7
	// cubicAlpha is α_cubic = 3 * (1 - β_cubic) / (1 + β_cubic), the
	// additive increase that keeps the Reno-friendly estimate as fast as
	// Reno with the same reduction factor.
	cubicAlpha = 3 * (1 - cubicBeta) / (1 + cubicBeta)
)

// Cubic is the CUBIC congestion controller of RFC 9438, with the slow
// start, recovery period and persistent congestion rules of RFC 9002.
//
// Windows are kept in bytes; the cubic function is evaluated in segments of
// max_datagram_size as the RFC writes it, which only scales C.
type Cubic struct {
	window
	// FastConvergence enables "fast convergence" (RFC 9438 §4.7); on by
	// default.
	FastConvergence bool

	// wMax is W_max in bytes: the window just before the last reduction.
	wMax float64
	// k is K in seconds: the time the cubic function takes to grow back
	// to wMax.
	k float64
	// epochStart is the start of the current congestion avoidance stage;
	// zero when none.
	epochStart time.Time
	// wEst is W_est in bytes, the Reno-friendly estimate.
	wEst float64
	// cwndF is the window with its fractional part, since growth per ACK
	// is often below one byte.
	cwndF   float64
	lastAck time.Time
}

var _ CongestionController = (*Cubic)(nil)

// NewCubic returns a Cubic controller in slow start with the initial window
// for maxDatagramSize (at least 1200) and fast convergence on.
func NewCubic(maxDatagramSize int) *Cubic {
	c := &Cubic{FastConvergence: true}
	c.window.init(maxDatagramSize)
	return c
}

// OnPacketSent implements CongestionController.
func (c *Cubic) OnPacketSent(now time.Time, bytes, bytesInFlight int) { c.onSent() }

// OnPacketsAcked implements CongestionController.
func (c *Cubic) OnPacketsAcked(now time.Time, acked []SentPacket, bytesInFlight int, rtt *RTT) {
	if c.appLimited && !c.epochStart.IsZero() && !c.lastAck.IsZero() {
		// "CUBIC does not raise its congestion window size if the flow is
		// currently limited by the application" (RFC 9438 §5.8); the time
		// spent application limited is taken out of t, so the window does
		// not jump when sending resumes.
		c.epochStart = c.epochStart.Add(now.Sub(c.lastAck))
	}
	c.lastAck = now
	for i := range acked {
		if p := &acked[i]; c.growsInAvoidance(p) {
			c.congestionAvoidance(now, int(p.Size), rtt.Smoothed())
		}
	}
}

// wCubic is W_cubic(t) = C*(t-K)^3 + W_max (RFC 9438 §4.2), in bytes.
func (c *Cubic) wCubic(t float64) float64 {
	d := t - c.k
	return cubicC*d*d*d*float64(c.mds) + c.wMax
}

func (c *Cubic) congestionAvoidance(now time.Time, bytes int, srtt time.Duration) {
	if int(c.cwndF) != c.cwnd {
		c.cwndF = float64(c.cwnd)
	}
	mds := float64(c.mds)
	if c.epochStart.IsZero() {
		// A new congestion avoidance stage: K = cubic_root((W_max -
		// cwnd_epoch)/C), with cwnd_epoch the window at its start. When
		// the window is already above W_max (e.g. slow start overshot it),
		// the curve starts at its plateau.
		c.epochStart = now
		if c.cwndF < c.wMax {
			c.k = math.Cbrt((c.wMax - c.cwndF) / mds / cubicC)
		} else {
			c.k = 0
			c.wMax = c.cwndF
		}
		c.wEst = c.cwndF
	}
	t := now.Sub(c.epochStart).Seconds()
	// "target = W_cubic(t + RTT)", bounded to [cwnd, 1.5*cwnd]: "the
	// target ... SHOULD NOT be less than cwnd" and "more than 1.5 cwnd".
	target := c.wCubic(t + srtt.Seconds())
	target = min(max(target, c.cwndF), 1.5*c.cwndF)

	// Reno-friendly region (RFC 9438 §4.3): "W_est = W_est + α_cubic *
	// segments_acked / cwnd", with α_cubic "set to 1 once W_est reaches
	// W_max".
	alpha := cubicAlpha
	if c.wEst >= c.wMax {
		alpha = 1
	}
	c.wEst += alpha * float64(bytes) * mds / c.cwndF
	if c.wCubic(t) < c.wEst {
		// "If W_cubic(t) is less than W_est, then the protocol is in the
		// Reno-friendly region and cwnd SHOULD be set to W_est".
		c.cwndF = max(c.cwndF, c.wEst)
	} else {
		// Concave and convex regions: "cwnd MUST be incremented by (target
		// - cwnd)/cwnd for each received new ACK", here per acknowledged
		// byte.
		c.cwndF += (target - c.cwndF) * float64(bytes) / c.cwndF
	}
	c.cwnd = int(c.cwndF)
}

// OnCongestionEvent implements CongestionController.
func (c *Cubic) OnCongestionEvent(now, sentTime time.Time, bytesInFlight int) {
	if !c.enterRecovery(now, sentTime) {
		return
	}
	cwnd := float64(c.cwnd)
	c.epochStart = time.Time{}
	// Fast convergence (RFC 9438 §4.7): "if cwnd < W_max and fast
	// convergence enabled, further reduce W_max: W_max = cwnd * (1 +
	// β_cubic) / 2; otherwise, W_max = cwnd".
	if c.FastConvergence && cwnd < c.wMax {
		c.wMax = cwnd * (1 + cubicBeta) / 2
	} else {
		c.wMax = cwnd
	}
	// "ssthresh = cwnd * β_cubic; ssthresh = max(ssthresh, 2)" and "cwnd
	// = ssthresh" (RFC 9438 §4.6), with RFC 9002's kMinimumWindow.
	c.ssthresh = max(int(cwnd*cubicBeta), MinimumWindow(c.mds))
	c.cwnd = c.ssthresh
}

// OnPersistentCongestion implements CongestionController. RFC 9438 §4.8
// follows the standard response to a timeout: the window collapses while
// ssthresh keeps the β_cubic reduction of the congestion event that came
// first.
func (c *Cubic) OnPersistentCongestion(now time.Time) {
	c.collapse()
	c.epochStart = time.Time{}
}

// SetMaxDatagramSize implements CongestionController.
func (c *Cubic) SetMaxDatagramSize(size int) { c.setMaxDatagramSize(size) }

// Reset returns the controller to its initial state (slow start, initial
// window), keeping the datagram size and FastConvergence: RFC 9000 §9.4,
// after a migration to a new path.
func (c *Cubic) Reset() {
	fc, iw := c.FastConvergence, c.iwPackets
	*c = *NewCubic(c.mds)
	c.FastConvergence = fc
	c.SetInitialWindowPackets(iw)
}
