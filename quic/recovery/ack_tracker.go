package recovery

import "time"

// ECN is the ECN field of a received packet's IP header (RFC 3168).
type ECN uint8

// ECN codepoints, with their values in the IP header.
const (
	NotECT ECN = 0b00
	ECT1   ECN = 0b01
	ECT0   ECN = 0b10
	CE     ECN = 0b11
)

// DefaultMaxAckRanges bounds the ranges an AckTracker keeps; the oldest are
// dropped first (RFC 9000 §13.2.3: "A receiver ... might need to limit the
// number of ACK Ranges it sends"). 64 ranges fit easily in one datagram.
const DefaultMaxAckRanges = 64

// maxAckElicitingThreshold caps the Ack-Eliciting Threshold a peer can ask
// for (docs/ack-frequency-engine.md §3, resource cap).
const maxAckElicitingThreshold = 1024

// AckTracker is the receive side of one packet number space: which packet
// numbers arrived, duplicate detection, ECN counts, and when an ACK frame
// must be sent (RFC 9000 §13.2, with the receiver rules of
// draft-ietf-quic-ack-frequency-14 §5).
//
// The engine drives it per received packet:
//
//  1. After removing header protection: IsDuplicate(pn); drop the packet if
//     true ("A receiver MUST discard a newly unprotected packet unless it is
//     certain that it has not processed another packet with the same packet
//     number from the same packet number space", RFC 9000 §12.3).
//  2. After processing its frames (ACK_FREQUENCY → OnAckFrequency,
//     IMMEDIATE_ACK → OnImmediateAck): OnPacketReceived.
//  3. When building a packet: if ShouldSendAck(now) send an ACK (ACK-only
//     when nothing else is to be sent); an ACK may also ride on any other
//     packet while AckPending(). Fill the frame from AppendRanges,
//     AckDelay and ECNCounts, then call OnAckSent.
//  4. Arm the connection timer at AckDeadline().
//  5. When a packet that carried an ACK frame is acknowledged:
//     OnAckAcked(largest acknowledged in that frame).
type AckTracker struct {
	space Space

	// Policy: T, D and RT of the ack-frequency draft. Without the
	// extension they express RFC 9000: T = 1, D = max_ack_delay, RT = 1.
	threshold   uint64
	maxAckDelay time.Duration
	reorder     uint64
	afSeen      bool
	afSeq       uint64
	maxRanges   int

	// ranges holds the received packet numbers in descending order.
	ranges []AckRange
	// floor: packet numbers below it were forgotten and count as
	// duplicates.
	floor int64
	// largestTime is when ranges[0].Largest was received.
	largestTime time.Time
	// largestAckEliciting is the draft's Largest Unacked: the largest
	// ack-eliciting packet number received; -1 if none.
	largestAckEliciting int64
	// largestReported is the draft's Largest Acked: the largest packet
	// number reported in an ACK frame we sent; -1 before the first.
	largestReported int64

	// pending counts ack-eliciting packets received since the last ACK.
	pending      uint64
	firstPending time.Time
	deadline     time.Time
	lastAckTime  time.Time
	// unacked is set when any packet arrived since the last ACK.
	unacked      bool
	immediateReq bool
	lastCE       bool

	ect0, ect1, ce uint64
	ecnSeen        bool
}

// NewAckTracker returns a tracker for space. maxAckDelay is our
// max_ack_delay transport parameter (only used in SpaceAppData; "An endpoint
// MUST acknowledge all ack-eliciting Initial and Handshake packets
// immediately").
func NewAckTracker(space Space, maxAckDelay time.Duration) *AckTracker {
	return &AckTracker{
		space:               space,
		threshold:           1,
		maxAckDelay:         maxAckDelay,
		reorder:             1,
		maxRanges:           DefaultMaxAckRanges,
		ranges:              make([]AckRange, 0, 4), // grows with reordering; small while idle
		largestAckEliciting: -1,
		largestReported:     -1,
	}
}

// SetMaxRanges changes the number of ranges kept (at least 2).
func (t *AckTracker) SetMaxRanges(n int) {
	n = max(n, 2)
	t.maxRanges = n
	for len(t.ranges) > n {
		t.dropOldest()
	}
	if cap(t.ranges) < n {
		r := make([]AckRange, len(t.ranges), n)
		copy(r, t.ranges)
		t.ranges = r
	}
}

// SetAckEvery makes the tracker acknowledge at once after n ack-eliciting
// packets of SpaceAppData (RFC 9000's default is 2; 1 acknowledges every
// packet at once), the pending ones before waiting at most max_ack_delay.
// An ACK_FREQUENCY frame from the peer replaces it. n < 1 is taken as 1.
func (t *AckTracker) SetAckEvery(n int) { t.threshold = uint64(max(n, 1) - 1) }

// SetMaxAckDelay changes our max_ack_delay (the D in force before any
// ACK_FREQUENCY frame).
func (t *AckTracker) SetMaxAckDelay(d time.Duration) { t.maxAckDelay = d }

// Policy returns the Ack-Eliciting Threshold, max_ack_delay and Reordering
// Threshold in force (for qlog's quiver:ack_frequency_applied).
func (t *AckTracker) Policy() (threshold uint64, maxAckDelay time.Duration, reorder uint64) {
	return t.threshold, t.maxAckDelay, t.reorder
}

// IsDuplicate reports whether pn was already received, or is too old to be
// told apart from a duplicate.
func (t *AckTracker) IsDuplicate(pn int64) bool {
	if pn < t.floor {
		return true
	}
	if n := len(t.ranges); n >= t.maxRanges && pn < t.ranges[n-1].Smallest-1 {
		// It would start a range older than all we keep.
		return true
	}
	for _, r := range t.ranges {
		if pn > r.Largest {
			return false
		}
		if pn >= r.Smallest {
			return true
		}
	}
	return false
}

// OnPacketReceived records packet pn received at now with the ECN
// codepoint of its datagram. It returns false, and records nothing, when pn
// is a duplicate or too old to be tracked.
func (t *AckTracker) OnPacketReceived(pn int64, ackEliciting bool, ecn ECN, now time.Time) bool {
	if t.IsDuplicate(pn) {
		return false
	}
	newRange, ok := t.insert(pn)
	if !ok {
		return false
	}
	if pn == t.ranges[0].Largest {
		t.largestTime = now
	}
	// "Each packet number space maintains separate counts" of the ECN
	// codepoints of received packets (RFC 9000 §13.4.1).
	switch ecn {
	case ECT0:
		t.ect0++
	case ECT1:
		t.ect1++
	case CE:
		t.ce++
	}
	if ecn != NotECT {
		t.ecnSeen = true
	}
	prevCE := t.lastCE
	t.lastCE = ecn == CE
	t.unacked = true
	if !ackEliciting {
		// Non-ack-eliciting packets are acknowledged only along with
		// others: "An endpoint MUST NOT send a non-ack-eliciting packet in
		// response to a non-ack-eliciting packet".
		return true
	}

	t.pending++
	if t.pending == 1 {
		t.firstPending = now
	}
	immediate := false
	switch {
	case t.space != SpaceAppData:
		// "An endpoint MUST acknowledge all ack-eliciting Initial and
		// Handshake packets immediately" (RFC 9000 §13.2.1).
		immediate = true
	case t.immediateReq:
		// IMMEDIATE_ACK (draft §5.6).
		immediate = true
	case t.pending > min(t.threshold, maxAckElicitingThreshold):
		// "A receiver SHOULD send an ACK frame after receiving at least
		// two ack-eliciting packets" (RFC 9000 §13.2.2); with the
		// extension, once more than T have arrived.
		immediate = true
	case t.reorderTrigger(pn):
		immediate = true
	case ecn == CE && (t.threshold <= 1 || !prevCE):
		// "packets marked with the ECN Congestion Experienced (CE)
		// codepoint in the IP header SHOULD be acknowledged immediately"
		// (RFC 9000 §13.2.1). With T > 1 only the transition from non-CE
		// to CE does (draft §5.5).
		immediate = true
	case newRange && len(t.ranges) >= t.maxRanges:
		// The ranges would no longer fit: report them before the oldest
		// are dropped (docs/ack-frequency-engine.md §3, resource cap).
		immediate = true
	}
	if pn > t.largestAckEliciting {
		t.largestAckEliciting = pn
	}
	switch {
	case immediate:
		t.deadline = now
	case t.deadline.IsZero():
		t.deadline = t.delayedDeadline(now)
	}
	return true
}

// delayedDeadline returns when the pending packets must be acknowledged at
// the latest. RFC 9000: "An endpoint MUST acknowledge all ack-eliciting
// 0-RTT and 1-RTT packets within its max_ack_delay"; after an ACK_FREQUENCY
// frame, the draft's "D has passed since the last acknowledgement".
func (t *AckTracker) delayedDeadline(now time.Time) time.Time {
	d := t.firstPending.Add(t.maxAckDelay)
	if t.afSeen && !t.lastAckTime.IsZero() {
		d = t.lastAckTime.Add(t.maxAckDelay)
	}
	if d.Before(now) {
		return now
	}
	return d
}

// reorderTrigger applies the reordering rules to ack-eliciting packet pn,
// already recorded; largestAckEliciting does not include it yet.
func (t *AckTracker) reorderTrigger(pn int64) bool {
	switch {
	case t.reorder == 0:
		// "0: reordering never triggers an immediate ACK."
		return false
	case t.reorder == 1:
		// RFC 9000 §13.2.1: "an endpoint SHOULD generate and send an ACK
		// frame without delay when it receives an ack-eliciting packet
		// either: when the received packet has a packet number less than
		// another ack-eliciting packet that has been received, or when the
		// packet has a packet number larger than the highest-numbered
		// ack-eliciting packet that has been received and there are
		// missing packets between that packet and this packet."
		if t.largestAckEliciting < 0 {
			return false
		}
		if pn < t.largestAckEliciting {
			return true
		}
		r := t.rangeOf(pn)
		return r.Smallest > max(t.largestAckEliciting+1, t.floor)
	}
	// Reordering Threshold above 1 (draft §6.2).
	rt := int64(min(t.reorder, 1<<40))
	if t.largestReported >= 0 && pn <= t.largestReported-rt {
		// The packet arrived after the sender could already have declared
		// it lost.
		return true
	}
	largestUnacked := max(t.largestAckEliciting, pn)
	// Largest Reported Missing = Largest Acked - RT; undefined (here:
	// nothing below packet number 0) before the first ACK.
	c := max(t.floor, 0)
	if t.largestReported >= 0 {
		c = max(c, t.largestReported-rt+1)
	}
	// Find the smallest unreported missing packet number, walking the
	// ranges from the lowest.
	for i := len(t.ranges) - 1; i >= 0; i-- {
		r := t.ranges[i]
		if r.Largest < c {
			continue
		}
		if r.Smallest > c {
			break
		}
		c = r.Largest + 1
	}
	return c < largestUnacked && largestUnacked-c >= rt
}

// rangeOf returns the range that holds pn, which must be recorded.
func (t *AckTracker) rangeOf(pn int64) AckRange {
	for _, r := range t.ranges {
		if pn >= r.Smallest {
			return r
		}
	}
	return AckRange{}
}

// insert records pn, which is not a duplicate. It reports whether a new
// range was created, and false in ok when pn is too old to be kept.
func (t *AckTracker) insert(pn int64) (newRange, ok bool) {
	rs := t.ranges
	// The common case: the next packet in order.
	if len(rs) > 0 && pn == rs[0].Largest+1 {
		rs[0].Largest = pn
		return false, true
	}
	// i is the first range below pn.
	i := 0
	for i < len(rs) && rs[i].Largest > pn {
		i++
	}
	extendsBelow := i < len(rs) && rs[i].Largest+1 == pn
	extendsAbove := i > 0 && rs[i-1].Smallest-1 == pn
	switch {
	case extendsBelow && extendsAbove:
		// pn fills the gap between two ranges.
		rs[i-1].Smallest = rs[i].Smallest
		t.ranges = append(rs[:i], rs[i+1:]...)
		return false, true
	case extendsBelow:
		rs[i].Largest = pn
		return false, true
	case extendsAbove:
		rs[i-1].Smallest = pn
		return false, true
	}
	if len(rs) >= t.maxRanges {
		if i == len(rs) {
			// pn would be the oldest range and dropped at once.
			return false, false
		}
		t.dropOldest()
		rs = t.ranges
	}
	rs = append(rs, AckRange{})
	copy(rs[i+1:], rs[i:])
	rs[i] = AckRange{Smallest: pn, Largest: pn}
	t.ranges = rs
	return true, true
}

// dropOldest forgets the lowest range; its packet numbers and everything
// below become duplicates.
func (t *AckTracker) dropOldest() {
	last := t.ranges[len(t.ranges)-1]
	t.floor = last.Largest + 1
	t.ranges = t.ranges[:len(t.ranges)-1]
}

// OnImmediateAck handles an IMMEDIATE_ACK frame received at now: the next
// packet leaves with an ACK.
func (t *AckTracker) OnImmediateAck(now time.Time) {
	t.immediateReq = true
	if t.pending > 0 {
		t.deadline = now
	}
}

// OnAckFrequency handles an ACK_FREQUENCY frame received at now
// (draft-ietf-quic-ack-frequency-14 §4; docs/ack-frequency-engine.md §2). The
// engine has already checked maxAckDelay against min_ack_delay and 2^14 ms
// (PROTOCOL_VIOLATION). It returns false when the frame is ignored because
// its sequence number is not above the largest processed.
//
// threshold is the Ack-Eliciting Threshold (0: acknowledge every
// ack-eliciting packet), maxAckDelay the Requested Max Ack Delay, reorder
// the Reordering Threshold (0: reordering never triggers an ACK, 1: RFC 9000
// behaviour).
func (t *AckTracker) OnAckFrequency(seq, threshold uint64, maxAckDelay time.Duration, reorder uint64, now time.Time) bool {
	if t.afSeen && seq <= t.afSeq {
		return false
	}
	t.afSeen = true
	t.afSeq = seq
	t.threshold = threshold
	t.maxAckDelay = maxAckDelay
	t.reorder = reorder
	// The new values apply to the packets already pending (our rule).
	if t.pending > 0 {
		if t.pending > min(t.threshold, maxAckElicitingThreshold) {
			t.deadline = now
		} else if t.deadline.After(now) {
			t.deadline = t.delayedDeadline(now)
		}
	}
	return true
}

// AckDeadline returns when an ACK frame must be sent, or the zero time when
// no ack-eliciting packet waits for one. A deadline at or before now means
// at once.
func (t *AckTracker) AckDeadline() time.Time { return t.deadline }

// ShouldSendAck reports whether an ACK frame is due at now.
func (t *AckTracker) ShouldSendAck(now time.Time) bool {
	return !t.deadline.IsZero() && !now.Before(t.deadline)
}

// AckPending reports whether packets arrived since the last ACK frame was
// sent, so that an ACK frame could usefully ride on an outgoing packet.
func (t *AckTracker) AckPending() bool { return t.unacked }

// HasRanges reports whether anything is known to acknowledge.
func (t *AckTracker) HasRanges() bool { return len(t.ranges) > 0 }

// Largest returns the largest packet number received, or -1.
func (t *AckTracker) Largest() int64 {
	if len(t.ranges) == 0 {
		return -1
	}
	return t.ranges[0].Largest
}

// AppendRanges appends the received ranges, in descending order, to dst.
// An encoder that runs out of room drops ranges from the end (the oldest).
func (t *AckTracker) AppendRanges(dst []AckRange) []AckRange {
	return append(dst, t.ranges...)
}

// AckDelay returns the ACK Delay to report at now: "the time delta between
// when this ACK was sent and when the largest acknowledged packet ... was
// received" (RFC 9000 §19.3).
func (t *AckTracker) AckDelay(now time.Time) time.Duration {
	if len(t.ranges) == 0 || now.Before(t.largestTime) {
		return 0
	}
	return now.Sub(t.largestTime)
}

// ECNCounts returns the ECN counts to report, and whether any ECN-marked
// packet was received (and so whether an ACK frame of type 0x03 is due).
func (t *AckTracker) ECNCounts() (ect0, ect1, ce uint64, ok bool) {
	return t.ect0, t.ect1, t.ce, t.ecnSeen
}

// OnAckSent records that an ACK frame with the current ranges was sent at
// now (ACK-only or piggybacked): the pending count and deadline reset.
func (t *AckTracker) OnAckSent(now time.Time) {
	t.pending = 0
	t.firstPending = time.Time{}
	t.deadline = time.Time{}
	t.lastAckTime = now
	t.unacked = false
	t.immediateReq = false
	if len(t.ranges) > 0 {
		t.largestReported = max(t.largestReported, t.ranges[0].Largest)
	}
}

// OnAckAcked is called when a packet carrying one of our ACK frames, whose
// Largest Acknowledged was largest, is acknowledged: "When a packet
// containing an ACK frame is acknowledged, the receiver can stop
// acknowledging packets less than or equal to the Largest Acknowledged field
// in the sent ACK frame" (RFC 9000 §13.2.4). The packet numbers dropped
// become duplicates.
func (t *AckTracker) OnAckAcked(largest int64) {
	if largest < t.floor {
		return
	}
	// Keep the range holding largest+1 intact; forget what lies wholly at
	// or below largest.
	for len(t.ranges) > 0 {
		last := t.ranges[len(t.ranges)-1]
		if last.Largest > largest {
			break
		}
		t.ranges = t.ranges[:len(t.ranges)-1]
	}
	t.floor = largest + 1
	if n := len(t.ranges); n > 0 && t.ranges[n-1].Smallest < t.floor {
		t.ranges[n-1].Smallest = t.floor
	}
}
