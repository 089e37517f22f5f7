package quic

import (
	"time"

	"github.com/quiver-quic/quiver/quic/recovery"
	"github.com/quiver-quic/quiver/quic/wire"
)

// ackState is the receive side of one packet number space: a
// recovery.AckTracker, plus the probe switch that turns ACKs off.
type ackState struct {
	t        *recovery.AckTracker
	space    spaceID
	disabled bool // probe: never send ACKs
	scratch  []recovery.AckRange
}

func (a *ackState) init(space spaceID, cfg *Config) {
	a.space = space
	a.t = recovery.NewAckTracker(recovery.Space(space), cfg.maxAckDelay())
	if cfg.AckEveryPackets > 0 {
		a.t.SetAckEvery(cfg.AckEveryPackets)
	}
}

// isDuplicate reports whether pn was already received (or is too old to
// tell). RFC 9000 §12.3: "A receiver MUST discard a newly unprotected
// packet unless it is certain that it has not processed another packet
// with the same packet number from the same packet number space."
func (a *ackState) isDuplicate(pn uint64) bool { return a.t == nil || a.t.IsDuplicate(int64(pn)) }

// onReceived records packet pn.
func (a *ackState) onReceived(now time.Time, pn uint64, ackEliciting bool, ecn uint8) {
	if a.t != nil {
		a.t.OnPacketReceived(int64(pn), ackEliciting, recovery.ECN(ecn&3), now)
	}
}

// wantAck reports whether an ACK frame should go out now.
func (a *ackState) wantAck(now time.Time) bool {
	return !a.disabled && a.t != nil && a.t.ShouldSendAck(now)
}

// canAck reports whether there is anything new to acknowledge, to
// piggyback on a packet that goes out anyway.
func (a *ackState) canAck() bool {
	return !a.disabled && a.t != nil && a.t.AckPending() && a.t.HasRanges()
}

// deadline is when the delayed ACK must be sent.
func (a *ackState) deadline() time.Time {
	if a.disabled || a.t == nil {
		return time.Time{}
	}
	return a.t.AckDeadline()
}

// frame fills f with the current ranges and ACK delay.
func (a *ackState) frame(now time.Time, exp uint8, f *wire.AckFrame) {
	a.scratch = a.t.AppendRanges(a.scratch[:0])
	f.Ranges = f.Ranges[:0]
	for _, r := range a.scratch {
		f.Ranges = append(f.Ranges, wire.AckRange{Smallest: uint64(r.Smallest), Largest: uint64(r.Largest)})
	}
	f.AckDelay = uint64(a.t.AckDelay(now).Microseconds()) >> exp
	f.ECT0, f.ECT1, f.ECNCE, f.ECN = a.t.ECNCounts()
}

// onAckSent resets the ACK timers after an ACK frame left.
func (a *ackState) onAckSent(now time.Time) { a.t.OnAckSent(now) }

// onAckAcked forgets what the peer has seen acknowledged (RFC 9000
// §13.2.4).
func (a *ackState) onAckAcked(largest uint64) {
	if a.t != nil {
		a.t.OnAckAcked(int64(largest))
	}
}

// release drops the tracker of a discarded space; the methods above then
// treat every packet as a duplicate and have nothing to acknowledge.
func (a *ackState) release() { a.t, a.scratch = nil, nil }
