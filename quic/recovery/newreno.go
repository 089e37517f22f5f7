package recovery

import "time"

// NewReno is the congestion controller of RFC 9002 §7 and Appendix B.
type NewReno struct {
	window
	// bytesAcked counts bytes acknowledged in congestion avoidance; the
	// window grows by one datagram each time it reaches the window. This
	// is the byte counting of RFC 3465 §2.1 that RFC 9002 Appendix B.5
	// suggests for "an integer representation for congestion_window".
	bytesAcked int
}

var _ CongestionController = (*NewReno)(nil)

// NewNewReno returns a NewReno controller in slow start with the initial
// window for maxDatagramSize (at least 1200).
func NewNewReno(maxDatagramSize int) *NewReno {
	c := &NewReno{}
	c.window.init(maxDatagramSize)
	return c
}

// OnPacketSent implements CongestionController.
func (c *NewReno) OnPacketSent(now time.Time, bytes, bytesInFlight int) { c.onSent() }

// OnPacketsAcked implements CongestionController.
func (c *NewReno) OnPacketsAcked(now time.Time, acked []SentPacket, bytesInFlight int, rtt *RTT) {
	for i := range acked {
		p := &acked[i]
		if !c.growsInAvoidance(p) {
			continue
		}
		// "A sender in congestion avoidance ... MUST limit the increase to
		// the congestion window to at most one maximum datagram size for
		// each congestion window that is acknowledged."
		c.bytesAcked += int(p.Size)
		if c.bytesAcked >= c.cwnd {
			c.bytesAcked -= c.cwnd
			c.cwnd += c.mds
		}
	}
}

// OnCongestionEvent implements CongestionController.
func (c *NewReno) OnCongestionEvent(now, sentTime time.Time, bytesInFlight int) {
	if !c.enterRecovery(now, sentTime) {
		return
	}
	// "On entering a recovery period, a sender MUST set the slow start
	// threshold to half the value of the congestion window when loss is
	// detected. The congestion window MUST be set to the reduced value of
	// the slow start threshold before exiting the recovery period."
	// kLossReductionFactor is 0.5; the window never drops below
	// kMinimumWindow.
	c.ssthresh = c.cwnd / 2
	c.cwnd = max(c.ssthresh, MinimumWindow(c.mds))
	c.bytesAcked = 0
}

// OnPersistentCongestion implements CongestionController.
func (c *NewReno) OnPersistentCongestion(now time.Time) {
	c.collapse()
	c.bytesAcked = 0
}

// SetMaxDatagramSize implements CongestionController.
func (c *NewReno) SetMaxDatagramSize(size int) { c.setMaxDatagramSize(size) }

// Reset returns the controller to its initial state (slow start, initial
// window), keeping the datagram size: RFC 9000 §9.4, after a migration
// to a new path.
func (c *NewReno) Reset() {
	iw := c.iwPackets
	*c = *NewNewReno(c.mds)
	c.SetInitialWindowPackets(iw)
}
