package quic

import (
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// maxAckRanges bounds the ranges kept and sent in an ACK frame. RFC 9000
// §13.2.4 lets a receiver limit them; older ranges are forgotten.
const maxAckRanges = 32

// ackState is the receive side of one packet number space: which packet
// numbers arrived, and when an ACK frame is due (RFC 9000 §13.2).
// TODO: replace with recovery.AckTracker once it lands.
type ackState struct {
	ranges       []wire.AckRange // descending, disjoint
	largestTime  time.Time       // when the largest packet arrived
	unacked      int             // ack-eliciting packets since the last ACK sent
	due          time.Time       // when an ACK must be sent; zero if none
	immediate    bool            // send an ACK now
	changed      bool            // new packets since the last ACK sent
	minKept      uint64          // packets below this are treated as duplicates
	disabled     bool            // probe: never send ACKs
	ackEliciting bool
	space        spaceID
}

// isDuplicate reports whether pn was already received (or is too old to
// tell).
func (a *ackState) isDuplicate(pn uint64) bool {
	if pn < a.minKept {
		return true
	}
	for _, r := range a.ranges {
		if pn > r.Largest {
			return false
		}
		if pn >= r.Smallest {
			return true
		}
	}
	return false
}

// onReceived records packet pn.
func (a *ackState) onReceived(now time.Time, pn uint64, ackEliciting bool, c *Conn) {
	outOfOrder := len(a.ranges) > 0 && pn < a.ranges[0].Largest
	gap := len(a.ranges) > 0 && pn > a.ranges[0].Largest+1
	a.insert(pn)
	if len(a.ranges) > 0 && a.ranges[0].Largest == pn {
		a.largestTime = now
	}
	a.changed = true
	if !ackEliciting {
		return
	}
	a.ackEliciting = true
	a.unacked++
	space := a.space
	// RFC 9000 §13.2.1: "an endpoint SHOULD send an ACK frame immediately
	// on receiving an ack-eliciting packet that is out of order" and
	// Initial/Handshake packets are acknowledged without delay;
	// otherwise after two ack-eliciting packets (§13.2.2) or max_ack_delay.
	if space != appSpace || outOfOrder || gap || a.unacked >= 2 {
		a.immediate = true
		return
	}
	if a.due.IsZero() {
		a.due = now.Add(c.config.maxAckDelay())
	}
}

func (a *ackState) insert(pn uint64) {
	for i := range a.ranges {
		r := &a.ranges[i]
		switch {
		case pn > r.Largest+1:
			a.ranges = append(a.ranges, wire.AckRange{})
			copy(a.ranges[i+1:], a.ranges[i:])
			a.ranges[i] = wire.AckRange{Smallest: pn, Largest: pn}
			a.trim()
			return
		case pn == r.Largest+1:
			r.Largest = pn
			return
		case pn >= r.Smallest:
			return
		case pn == r.Smallest-1:
			r.Smallest = pn
			if i+1 < len(a.ranges) && a.ranges[i+1].Largest+1 == pn {
				r.Smallest = a.ranges[i+1].Smallest
				a.ranges = append(a.ranges[:i+1], a.ranges[i+2:]...)
			}
			return
		}
	}
	a.ranges = append(a.ranges, wire.AckRange{Smallest: pn, Largest: pn})
	a.trim()
}

func (a *ackState) trim() {
	if len(a.ranges) > maxAckRanges {
		a.minKept = a.ranges[maxAckRanges-1].Smallest
		a.ranges = a.ranges[:maxAckRanges]
	}
}

// wantAck reports whether an ACK frame should go out now.
func (a *ackState) wantAck(now time.Time) bool {
	if a.disabled || !a.changed || len(a.ranges) == 0 {
		return false
	}
	return a.immediate || (!a.due.IsZero() && !now.Before(a.due))
}

// canAck reports whether there is anything to acknowledge (to piggyback
// on a packet that goes out anyway).
func (a *ackState) canAck() bool { return !a.disabled && a.changed && len(a.ranges) > 0 }

// deadline is when the delayed ACK must be sent.
func (a *ackState) deadline() time.Time {
	if a.disabled || !a.changed {
		return time.Time{}
	}
	return a.due
}

// frame fills f with the current ranges and ACK delay.
func (a *ackState) frame(now time.Time, exp uint8, f *wire.AckFrame) {
	f.Ranges = append(f.Ranges[:0], a.ranges...)
	d := now.Sub(a.largestTime)
	if d < 0 {
		d = 0
	}
	f.AckDelay = uint64(d.Microseconds()) >> exp
	f.ECN = false
}

// onAckSent resets the ACK timers after an ACK frame left.
func (a *ackState) onAckSent() {
	a.unacked = 0
	a.due = time.Time{}
	a.immediate = false
	a.changed = false
	a.ackEliciting = false
}

// onAckAcked forgets ranges the peer has seen acknowledged up to largest:
// RFC 9000 §13.2.4, a receiver can stop acknowledging them.
func (a *ackState) onAckAcked(largest uint64) {
	for i, r := range a.ranges {
		if r.Largest <= largest && i > 0 {
			a.minKept = max(a.minKept, r.Smallest)
			a.ranges = a.ranges[:i]
			return
		}
	}
}
