package recovery

import "time"

// RTT estimates the round-trip time of one path (RFC 9002 §5).
//
// The zero value is not ready: call Reset with the initial RTT (InitialRTT
// when nothing better is known) before use. Reset again when the estimator
// must forget the path, e.g. after migration (RFC 9000 §9.4).
type RTT struct {
	latest   time.Duration
	min      time.Duration
	smoothed time.Duration
	rttvar   time.Duration
	// firstSample is when the first RTT sample was taken; zero before it.
	firstSample time.Time
}

// NewRTT returns an estimator initialised with initialRTT.
func NewRTT(initialRTT time.Duration) RTT {
	var r RTT
	r.Reset(initialRTT)
	return r
}

// Reset forgets every sample and starts again from initialRTT:
// "smoothed_rtt = kInitialRtt; rttvar = kInitialRtt / 2".
func (r *RTT) Reset(initialRTT time.Duration) {
	if initialRTT <= 0 {
		initialRTT = InitialRTT
	}
	*r = RTT{smoothed: initialRTT, rttvar: initialRTT / 2}
}

// HasSample reports whether at least one RTT sample has been taken.
func (r *RTT) HasSample() bool { return !r.firstSample.IsZero() }

// FirstSampleTime returns when the first RTT sample was taken, or the zero
// time before it. Persistent congestion only considers packets sent after it.
func (r *RTT) FirstSampleTime() time.Time { return r.firstSample }

// Latest returns latest_rtt, the last raw sample (zero before any sample).
func (r *RTT) Latest() time.Duration { return r.latest }

// Min returns min_rtt (zero before any sample).
func (r *RTT) Min() time.Duration { return r.min }

// Smoothed returns smoothed_rtt.
func (r *RTT) Smoothed() time.Duration { return r.smoothed }

// RTTVar returns rttvar, the mean deviation of the samples.
func (r *RTT) RTTVar() time.Duration { return r.rttvar }

// Update takes a new sample latest (ack_time - send_time_of_largest_acked),
// taken at now, with the peer-reported ackDelay. maxAckDelay is the peer's
// max_ack_delay; it only clamps ackDelay once handshakeConfirmed is true.
//
// The caller decides whether an ACK yields a sample at all (RFC 9002 §5.1);
// LossDetector does so.
func (r *RTT) Update(latest, ackDelay, maxAckDelay time.Duration, handshakeConfirmed bool, now time.Time) {
	if latest <= 0 {
		// Clocks are monotonic, but a zero sample would make min_rtt useless.
		latest = 1
	}
	r.latest = latest
	if r.firstSample.IsZero() {
		// "min_rtt MUST be set to the latest_rtt on the first RTT sample."
		// "On the first RTT sample after initialization, smoothed_rtt and
		// rttvar are set as follows: smoothed_rtt = latest_rtt; rttvar =
		// latest_rtt / 2".
		r.firstSample = now
		r.min = latest
		r.smoothed = latest
		r.rttvar = latest / 2
		return
	}
	// "min_rtt MUST be set to the lesser of min_rtt and latest_rtt on all
	// other samples." It "does not adjust for acknowledgment delays".
	r.min = min(r.min, latest)
	// "MUST use the lesser of the acknowledgment delay and the peer's
	// max_ack_delay after the handshake is confirmed" and "SHOULD ignore the
	// peer's max_ack_delay until the handshake is confirmed".
	if handshakeConfirmed {
		ackDelay = min(ackDelay, maxAckDelay)
	}
	// "MUST NOT subtract the acknowledgment delay from the RTT sample if the
	// resulting value is smaller than the min_rtt."
	adjusted := latest
	if ackDelay > 0 && latest >= r.min+ackDelay {
		adjusted = latest - ackDelay
	}
	// smoothed_rtt = 7/8 * smoothed_rtt + 1/8 * adjusted_rtt
	// rttvar = 3/4 * rttvar + 1/4 * abs(smoothed_rtt - adjusted_rtt)
	// RFC 6298 and Appendix A.7 compute rttvar from the old smoothed_rtt.
	dev := r.smoothed - adjusted
	if dev < 0 {
		dev = -dev
	}
	r.rttvar = (3*r.rttvar + dev) / 4
	r.smoothed = (7*r.smoothed + adjusted) / 8
}

// OnPersistentCongestion follows "Endpoints SHOULD set the min_rtt to the
// newest RTT sample after persistent congestion is established."
func (r *RTT) OnPersistentCongestion() {
	if r.HasSample() {
		r.min = r.latest
	}
}

// PTO returns the probe timeout period without backoff:
// "PTO = smoothed_rtt + max(4*rttvar, kGranularity) + max_ack_delay".
// Pass maxAckDelay 0 for the Initial and Handshake spaces.
func (r *RTT) PTO(maxAckDelay time.Duration) time.Duration {
	return r.smoothed + max(4*r.rttvar, Granularity) + maxAckDelay
}

// PersistentCongestionDuration returns "(smoothed_rtt + max(4*rttvar,
// kGranularity) + max_ack_delay) * kPersistentCongestionThreshold". "Unlike
// the PTO computation, this duration includes the max_ack_delay irrespective
// of the packet number spaces in which losses are established."
func (r *RTT) PersistentCongestionDuration(maxAckDelay time.Duration) time.Duration {
	return r.PTO(maxAckDelay) * PersistentCongestionThreshold
}

// LossDelay returns the time threshold of RFC 9002 §6.1.2:
// "max(kTimeThreshold * max(smoothed_rtt, latest_rtt), kGranularity)".
func (r *RTT) LossDelay() time.Duration {
	return max(timeThreshold(max(r.smoothed, r.latest)), Granularity)
}
