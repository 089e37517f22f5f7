package recovery

import (
	"math"
	"time"
)

// CongestionController is a sender-side congestion controller
// (RFC 9002 §7). LossDetector drives it; the engine only asks it questions
// (CanSend through LossDetector.CanSend, CongestionWindow for the pacer) and
// tells it when the sender is application limited.
type CongestionController interface {
	// OnPacketSent is called for every in-flight packet after it is sent;
	// bytesInFlight already includes it.
	OnPacketSent(now time.Time, bytes int, bytesInFlight int)
	// OnPacketsAcked is called with the packets an ACK frame newly
	// acknowledged, in ascending packet number order. Packets that are not
	// in flight must be skipped. bytesInFlight no longer includes them.
	OnPacketsAcked(now time.Time, acked []SentPacket, bytesInFlight int, rtt *RTT)
	// OnCongestionEvent is called when in-flight packets are declared
	// lost (sentTime is the send time of the last of them) or when the
	// peer-reported ECN-CE count increases (sentTime is the send time of
	// the largest newly acknowledged packet).
	OnCongestionEvent(now, sentTime time.Time, bytesInFlight int)
	// OnPersistentCongestion is called when persistent congestion is
	// established (RFC 9002 §7.6), after OnCongestionEvent.
	OnPersistentCongestion(now time.Time)
	// SetAppLimited tells the controller whether the sender has less to
	// send than the window allows (RFC 9002 §7.8). The engine sets it at
	// the end of each send turn: true when it stopped for lack of data or
	// flow-control credit although CanSend was still true.
	SetAppLimited(limited bool)
	// SetMaxDatagramSize changes max_datagram_size (e.g. after DPLPMTUD).
	SetMaxDatagramSize(size int)
	// CanSend reports whether one more full-sized packet may be sent.
	CanSend(bytesInFlight int) bool
	// CongestionWindow returns the congestion window in bytes.
	CongestionWindow() int
	// SlowStartThreshold returns ssthresh in bytes (math.MaxInt when
	// infinite).
	SlowStartThreshold() int
	// InRecovery reports whether a recovery period is in progress.
	InRecovery() bool
	// State returns the congestion state for qlog.
	State() CongestionState
}

// CongestionState is the state reported in qlog's
// recovery:congestion_state_updated event.
type CongestionState uint8

// Congestion states.
const (
	StateSlowStart CongestionState = iota
	StateCongestionAvoidance
	StateRecovery
	StateApplicationLimited
)

// String returns the qlog name of the state.
func (s CongestionState) String() string {
	switch s {
	case StateSlowStart:
		return "slow_start"
	case StateCongestionAvoidance:
		return "congestion_avoidance"
	case StateRecovery:
		return "recovery"
	case StateApplicationLimited:
		return "application_limited"
	}
	return "unknown"
}

// InitialWindow returns kInitialWindow: "Endpoints SHOULD use an initial
// congestion window of ten times the maximum datagram size
// (max_datagram_size), while limiting the window to the larger of 14,720
// bytes or twice the maximum datagram size."
func InitialWindow(maxDatagramSize int) int {
	return min(10*maxDatagramSize, max(14720, 2*maxDatagramSize))
}

// MinimumWindow returns kMinimumWindow: "The RECOMMENDED value is 2 *
// max_datagram_size."
func MinimumWindow(maxDatagramSize int) int { return 2 * maxDatagramSize }

// MinMaxDatagramSize is the smallest max_datagram_size: "with a minimum
// value of 1200 bytes".
const MinMaxDatagramSize = 1200

// window holds what NewReno and Cubic share: the window, the slow start
// threshold and the recovery period of RFC 9002 §7.3.2.
type window struct {
	mds      int
	cwnd     int
	ssthresh int
	// recoveryStart is congestion_recovery_start_time; zero when none.
	recoveryStart time.Time
	inRecovery    bool
	appLimited    bool
	// sendOne allows one packet beyond the window after entering
	// recovery: "If the congestion window is reduced immediately, a single
	// packet can be sent prior to reduction."
	sendOne bool
	// iwPackets, when not 0, replaces kInitialWindow by this many
	// datagrams (SetInitialWindowPackets).
	iwPackets int
}

// initialWindow is kInitialWindow for size, or iwPackets datagrams.
func (w *window) initialWindow(size int) int {
	if w.iwPackets > 0 {
		return w.iwPackets * size
	}
	return InitialWindow(size)
}

// SetInitialWindowPackets replaces the initial window by n datagrams of
// the maximum size, before anything was sent. RFC 9002 §7.2: "Endpoints
// SHOULD use an initial congestion window of ten times the maximum
// datagram size (max_datagram_size), while limiting the window to the
// larger of 14,720 bytes or twice the maximum datagram size"; 10 is that
// without the limit, a larger n departs from the SHOULD.
func (w *window) SetInitialWindowPackets(n int) {
	if n < 2 {
		return
	}
	w.iwPackets = n
	w.cwnd = w.initialWindow(w.mds)
}

func (w *window) init(maxDatagramSize int) {
	maxDatagramSize = max(maxDatagramSize, MinMaxDatagramSize)
	*w = window{
		mds:  maxDatagramSize,
		cwnd: InitialWindow(maxDatagramSize),
		// "A sender begins in slow start because the slow start threshold
		// is initialized to an infinite value."
		ssthresh: math.MaxInt,
	}
}

// inCongestionRecovery is "InCongestionRecovery(sent_time): return
// sent_time <= congestion_recovery_start_time".
func (w *window) inCongestionRecovery(sentTime time.Time) bool {
	return !sentTime.After(w.recoveryStart)
}

// enterRecovery starts a recovery period unless the packet that signalled
// congestion was sent in the current one: "No reaction if already in a
// recovery period." It reports whether a new period started.
func (w *window) enterRecovery(now, sentTime time.Time) bool {
	if w.inCongestionRecovery(sentTime) {
		return false
	}
	w.recoveryStart = now
	w.inRecovery = true
	w.sendOne = true
	return true
}

// onAcked ends the recovery period when it sees a packet sent in it: "A
// recovery period ends and the sender enters congestion avoidance when a
// packet sent during the recovery period is acknowledged." It reports
// whether the window may grow for p.
func (w *window) onAcked(p *SentPacket) bool {
	if w.inRecovery && p.TimeSent.After(w.recoveryStart) {
		w.inRecovery = false
	}
	// "Do not increase congestion_window if application limited or flow
	// control limited." "Do not increase congestion window in recovery
	// period."
	return !w.appLimited && !w.inCongestionRecovery(p.TimeSent)
}

// growsInAvoidance handles one acknowledged packet for both controllers:
// it ends the recovery period when due, applies slow start, and reports
// whether the packet feeds congestion avoidance.
func (w *window) growsInAvoidance(p *SentPacket) bool {
	if !p.InFlight || !w.onAcked(p) {
		return false
	}
	if w.cwnd < w.ssthresh {
		// "While a sender is in slow start, the congestion window
		// increases by the number of bytes acknowledged when each
		// acknowledgment is processed." (RFC 9438 §4.10 keeps standard
		// slow start for Cubic.)
		w.cwnd += int(p.Size)
		return false
	}
	return true
}

func (w *window) collapse() {
	// "When persistent congestion is declared, the sender's congestion
	// window MUST be reduced to the minimum congestion window
	// (kMinimumWindow)", and "congestion_recovery_start_time = 0".
	w.cwnd = MinimumWindow(w.mds)
	w.recoveryStart = time.Time{}
	w.inRecovery = false
	w.sendOne = false
}

func (w *window) setMaxDatagramSize(size int) {
	size = max(size, MinMaxDatagramSize)
	if w.cwnd == w.initialWindow(w.mds) {
		// "If the maximum datagram size changes during the connection, the
		// initial congestion window SHOULD be recalculated with the new
		// size."
		w.cwnd = w.initialWindow(size)
	}
	w.mds = size
	w.cwnd = max(w.cwnd, MinimumWindow(size))
}

// CanSend reports whether a full-sized packet fits: "An endpoint MUST NOT
// send a packet if it would cause bytes_in_flight to be larger than the
// congestion window, unless the packet is sent on a PTO timer expiration or
// when entering recovery."
func (w *window) CanSend(bytesInFlight int) bool {
	return w.sendOne || bytesInFlight+w.mds <= w.cwnd
}

// CongestionWindow returns the congestion window in bytes.
func (w *window) CongestionWindow() int { return w.cwnd }

// SlowStartThreshold returns ssthresh in bytes (math.MaxInt when infinite).
func (w *window) SlowStartThreshold() int { return w.ssthresh }

// InRecovery reports whether a recovery period is in progress.
func (w *window) InRecovery() bool { return w.inRecovery }

// SetAppLimited records whether the sender is application or flow-control
// limited.
func (w *window) SetAppLimited(limited bool) { w.appLimited = limited }

// State returns the congestion state for qlog.
func (w *window) State() CongestionState {
	switch {
	case w.inRecovery:
		return StateRecovery
	case w.appLimited:
		return StateApplicationLimited
	case w.cwnd < w.ssthresh:
		return StateSlowStart
	}
	return StateCongestionAvoidance
}

func (w *window) onSent() { w.sendOne = false }
