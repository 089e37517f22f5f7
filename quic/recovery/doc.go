// Package recovery implements QUIC loss detection and congestion control
// (RFC 9002) and the receive-side acknowledgement policy (RFC 9000 §13.2,
// draft-ietf-quic-ack-frequency-14).
//
// The package knows nothing of the wire format: packet numbers are int64,
// sizes are bytes, times are time.Time and time.Duration. Every method whose
// result depends on the clock takes the current time as now; nothing here
// reads the clock, so the state is deterministic and tested with a fixed
// epoch.
//
// The pieces, each one struct in its own file:
//
//   - RTT: the round-trip estimator of RFC 9002 §5.
//   - LossDetector: sent-packet history per packet number space, ACK
//     processing, packet- and time-threshold loss detection, the loss
//     detection / PTO timer and persistent congestion (RFC 9002 §6, §7.6,
//     Appendix A). It owns an RTT and drives a CongestionController.
//   - CongestionController: NewReno (RFC 9002 §7) and Cubic (RFC 9438).
//   - Pacer: a leaky-bucket pacer (RFC 9002 §7.7).
//   - AckTracker: what a receiver has received in one packet number space
//     and when it must acknowledge it.
//
// None of these types is safe for concurrent use: one connection goroutine
// owns them.
package recovery

import "time"

// Constants of RFC 9002 Appendix A.2 and B.1.
const (
	// PacketThreshold is kPacketThreshold: "The RECOMMENDED initial value
	// for the packet reordering threshold (kPacketThreshold) is 3".
	PacketThreshold = 3

	// Granularity is kGranularity: "The RECOMMENDED value of the timer
	// granularity (kGranularity) is 1 millisecond."
	Granularity = time.Millisecond

	// InitialRTT is kInitialRtt: "When no previous RTT is available, the
	// initial RTT SHOULD be set to 333 milliseconds."
	InitialRTT = 333 * time.Millisecond

	// PersistentCongestionThreshold is kPersistentCongestionThreshold: "The
	// RECOMMENDED value for kPersistentCongestionThreshold is 3".
	PersistentCongestionThreshold = 3

	// DefaultMaxAckDelay is the max_ack_delay a peer uses when it does not
	// send the transport parameter (RFC 9000 §18.2).
	DefaultMaxAckDelay = 25 * time.Millisecond
)

// kTimeThreshold is 9/8: "The RECOMMENDED time threshold (kTimeThreshold),
// expressed as an RTT multiplier, is 9/8." It is applied as d + d/8.
func timeThreshold(d time.Duration) time.Duration { return d + d/8 }

// Space is a packet number space (RFC 9000 §12.3).
type Space uint8

// The three packet number spaces. 0-RTT and 1-RTT packets share SpaceAppData.
const (
	SpaceInitial Space = iota
	SpaceHandshake
	SpaceAppData
	NumSpaces = 3
)

// String returns the qlog name of the space.
func (s Space) String() string {
	switch s {
	case SpaceInitial:
		return "initial"
	case SpaceHandshake:
		return "handshake"
	case SpaceAppData:
		return "application_data"
	}
	return "unknown"
}

// AckRange is an inclusive range of packet numbers [Smallest, Largest], as
// carried in an ACK frame. Lists of ranges are always in descending order
// (the first range holds the largest packet number) and do not overlap.
type AckRange struct {
	Smallest, Largest int64
}
