package recovery

import (
	"errors"
	"time"
)

// Errors returned by LossDetector.OnAckReceived. The engine closes the
// connection with PROTOCOL_VIOLATION (RFC 9000 §13.1: "An endpoint SHOULD
// treat receipt of an acknowledgment for a packet it did not send as a
// connection error of type PROTOCOL_VIOLATION") or FRAME_ENCODING_ERROR.
var (
	ErrAckOfUnsentPacket = errors.New("recovery: ACK acknowledges a packet that was not sent")
	ErrInvalidAckRanges  = errors.New("recovery: ACK ranges are not descending and disjoint")
)

// AckFrame is the part of a received ACK frame loss detection needs.
type AckFrame struct {
	// Ranges in descending order; Ranges[0].Largest is Largest
	// Acknowledged.
	Ranges []AckRange
	// AckDelay is the decoded ACK Delay field (already scaled by the
	// peer's ack_delay_exponent).
	AckDelay time.Duration
	// HasECN is set for ACK frames of type 0x03; ECT0, ECT1 and CE are
	// then the reported counts.
	HasECN         bool
	ECT0, ECT1, CE uint64
}

// AckResult tells the engine what an ACK frame changed. Its slices point
// into the LossDetector and stay valid until the next call that mutates it.
type AckResult struct {
	// Acked are the newly acknowledged packets, in ascending packet
	// number order. The engine releases their frames (and, for a packet
	// that carried an ACK frame, tells the AckTracker: OnAckAcked).
	Acked []SentPacket
	// Lost are the packets newly declared lost, in ascending packet
	// number order. The engine retransmits their frames (RFC 9000 §13.3).
	Lost []SentPacket
	// LargestAcked is the largest packet number acknowledged so far in
	// the space, -1 if none.
	LargestAcked int64
	// RTTSample is set when this ACK produced an RTT sample.
	RTTSample bool
	// CongestionECN is set when the ECN-CE count increased.
	CongestionECN bool
	// PersistentCongestion is set when persistent congestion was
	// established.
	PersistentCongestion bool
}

// TimeoutAction says what the engine must do after a loss detection
// timeout.
type TimeoutAction uint8

// Timeout actions.
const (
	// TimeoutNone: the timer had not expired; nothing to do.
	TimeoutNone TimeoutAction = iota
	// TimeoutLoss: packets were declared lost by the time threshold;
	// retransmit the frames of TimeoutResult.Lost.
	TimeoutLoss
	// TimeoutProbe: a PTO expired; send TimeoutResult.Probes
	// ack-eliciting packets in TimeoutResult.Space, bypassing the
	// congestion controller (LossDetector.CanSend allows them).
	TimeoutProbe
)

// TimeoutResult is returned by OnLossDetectionTimeout.
type TimeoutResult struct {
	Action TimeoutAction
	Space  Space
	// Probes is the number of ack-eliciting probe packets to send (1 or
	// 2): "When a PTO timer expires, a sender MUST send at least one
	// ack-eliciting packet in the packet number space as a probe. An
	// endpoint MAY send up to two full-sized datagrams containing
	// ack-eliciting packets". "An endpoint SHOULD include new data in
	// packets that are sent on PTO expiration. Previously sent data MAY be
	// sent if no new data can be sent." When there is nothing, send PING.
	Probes int
	// AntiDeadlock is set for the client's probe sent with nothing in
	// flight: "When the PTO fires, the client MUST send a Handshake packet
	// if it has Handshake keys, otherwise it MUST send an Initial packet in
	// a UDP datagram with a payload of at least 1200 bytes."
	AntiDeadlock bool
	// Lost, for TimeoutLoss, as in AckResult.
	Lost                 []SentPacket
	PersistentCongestion bool
}

// LossDetectorConfig configures a LossDetector.
type LossDetectorConfig struct {
	// IsServer selects the server's rules for address validation.
	IsServer bool
	// InitialRTT is kInitialRtt; InitialRTT (333 ms) when zero.
	InitialRTT time.Duration
	// PacketThreshold is kPacketThreshold; PacketThreshold (3) when zero.
	PacketThreshold int64
	// CC receives the congestion signals; nil disables congestion control
	// (CanSend then always allows sending).
	CC CongestionController
}

// spaceState is the loss detection state of one packet number space.
type spaceState struct {
	sent sentHistory
	// largestAcked is largest_acked_packet; -1 before any ACK.
	largestAcked int64
	// largestSent is the largest packet number sent; -1 before any.
	largestSent int64
	// lossTime is loss_time: when the next packet can be declared lost
	// by the time threshold; zero when none.
	lossTime time.Time
	// lastAckElicitingSent is time_of_last_ack_eliciting_packet.
	lastAckElicitingSent time.Time
	ackElicitingInFlight int
	// ceCount is ecn_ce_counters: the highest ECN-CE count reported.
	ceCount   uint64
	discarded bool
}

// LossDetector implements RFC 9002 loss detection for one connection (one
// path): it keeps the sent packets of the three packet number spaces, the
// RTT estimate, bytes in flight and the single loss detection timer, and
// feeds a CongestionController.
//
// The engine drives it as follows, passing the time it read once per loop
// turn:
//
//  1. Before sending: CanSend (congestion window or pending probes), then
//     the Pacer for in-flight packets.
//  2. After sending each packet (every packet number, including ACK-only
//     packets, in increasing order within a space): OnPacketSent.
//  3. On each ACK frame: OnAckReceived; retransmit the frames of
//     AckResult.Lost, release those of AckResult.Acked.
//  4. When LossDetectionTimer() is non-zero and not after now:
//     OnLossDetectionTimeout, then do what it says.
//  5. On handshake events: SetHandshakeKeys, SetHandshakeConfirmed,
//     OnPacketNumberSpaceDiscarded (Initial or Handshake keys dropped),
//     OnZeroRTTRejected; a server also reports SetAmplificationLimited
//     (after each received datagram while it is blocked). A client that
//     receives a Retry replaces the LossDetector and its controller with
//     fresh ones ("Clients that receive a Retry packet reset congestion
//     control and loss recovery state, including resetting any pending
//     timers") and requeues its CRYPTO and 0-RTT frames; packet numbers go
//     on increasing.
//  6. When the peer's max_ack_delay is known or changes: SetMaxAckDelay.
//
// Re-arm the connection's timer after each of these calls from
// LossDetectionTimer().
type LossDetector struct {
	rtt             RTT
	cc              CongestionController
	spaces          [NumSpaces]spaceState
	packetThreshold int64
	isServer        bool

	bytesInFlight int
	ptoCount      int
	// probes is the number of probe packets that may still bypass the
	// congestion controller after a PTO.
	probes int

	handshakeConfirmed     bool
	peerValidatedAddress   bool
	hasHandshakeKeys       bool
	amplificationLimited   bool
	maxAckDelay            time.Duration
	timer                  time.Time
	acked, lost, discarded []SentPacket
}

// NewLossDetector returns a LossDetector in its initial state (RFC 9002
// Appendix A.4).
func NewLossDetector(cfg LossDetectorConfig) *LossDetector {
	l := &LossDetector{
		rtt:             NewRTT(cfg.InitialRTT),
		cc:              cfg.CC,
		packetThreshold: cfg.PacketThreshold,
		isServer:        cfg.IsServer,
		maxAckDelay:     DefaultMaxAckDelay,
	}
	if l.packetThreshold <= 0 {
		l.packetThreshold = PacketThreshold
	}
	for i := range l.spaces {
		l.spaces[i].largestAcked = -1
		l.spaces[i].largestSent = -1
	}
	return l
}

// RTT returns the RTT estimator. The engine may read it (the Pacer and qlog
// need smoothed_rtt) and Reset it on migration.
func (l *LossDetector) RTT() *RTT { return &l.rtt }

// CongestionController returns the controller given in the configuration.
func (l *LossDetector) CongestionController() CongestionController { return l.cc }

// BytesInFlight returns bytes_in_flight.
func (l *LossDetector) BytesInFlight() int { return l.bytesInFlight }

// PTOCount returns pto_count, the number of PTOs since the last
// acknowledgement that reset it.
func (l *LossDetector) PTOCount() int { return l.ptoCount }

// LargestAcked returns the largest packet number acknowledged in space, or
// -1. The engine needs it to encode packet numbers (RFC 9000 §17.1).
func (l *LossDetector) LargestAcked(space Space) int64 { return l.spaces[space].largestAcked }

// HasAckElicitingInFlight reports whether space has ack-eliciting packets
// in flight.
func (l *LossDetector) HasAckElicitingInFlight(space Space) bool {
	return l.spaces[space].ackElicitingInFlight > 0
}

// LossDetectionTimer returns when OnLossDetectionTimeout must be called, or
// the zero time when the timer is not set. "This algorithm may result in the
// timer being set in the past, particularly if timers wake up late. Timers
// set in the past fire immediately."
func (l *LossDetector) LossDetectionTimer() time.Time { return l.timer }

// CanSend reports whether a packet that counts toward bytes in flight may
// be sent now: either a PTO probe is due ("Probe packets MUST NOT be
// blocked by the congestion controller") or the congestion controller
// allows it. Packets containing only ACK frames are never blocked.
func (l *LossDetector) CanSend() bool {
	return l.probes > 0 || l.cc == nil || l.cc.CanSend(l.bytesInFlight)
}

// SetMaxAckDelay sets the peer's max_ack_delay (transport parameter, or the
// effective value while ACK_FREQUENCY frames are outstanding).
func (l *LossDetector) SetMaxAckDelay(d time.Duration) { l.maxAckDelay = d }

// MaxAckDelay returns the peer's max_ack_delay in use.
func (l *LossDetector) MaxAckDelay() time.Duration { return l.maxAckDelay }

// SetHandshakeConfirmed records handshake confirmation (RFC 9001 §4.1.2),
// which enables the Application Data PTO and max_ack_delay clamping, and
// re-arms the timer.
func (l *LossDetector) SetHandshakeConfirmed(now time.Time) {
	l.handshakeConfirmed = true
	l.setTimer(now)
}

// SetHandshakeKeys records that Handshake keys are available, which
// selects the space of the client's anti-deadlock probe.
func (l *LossDetector) SetHandshakeKeys(now time.Time) {
	l.hasHandshakeKeys = true
	l.setTimer(now)
}

// SetPeerCompletedAddressValidation records, at a client, that the server
// has validated its address: a Handshake packet was acknowledged or the
// handshake is confirmed. A server never needs to call it.
func (l *LossDetector) SetPeerCompletedAddressValidation(now time.Time) {
	l.peerValidatedAddress = true
	l.setTimer(now)
}

// SetAmplificationLimited tells a server whether it is blocked by the
// anti-amplification limit (RFC 9000 §8.1). "If no additional data can be
// sent, the server's PTO timer MUST NOT be armed until datagrams have been
// received from the client". "When the server receives a datagram from the
// client, the amplification limit is increased and the server resets the PTO
// timer. If the PTO timer is then set to a time in the past, it is executed
// immediately."
func (l *LossDetector) SetAmplificationLimited(limited bool, now time.Time) {
	if l.amplificationLimited == limited {
		return
	}
	l.amplificationLimited = limited
	l.setTimer(now)
}

func (l *LossDetector) peerCompletedAddressValidation() bool {
	// "Assume clients validate the server's address implicitly." "Servers
	// complete address validation when a protected packet is received."
	return l.isServer || l.peerValidatedAddress || l.handshakeConfirmed
}

func (l *LossDetector) ackElicitingInFlight() bool {
	for i := range l.spaces {
		if l.spaces[i].ackElicitingInFlight > 0 {
			return true
		}
	}
	return false
}

// OnPacketSent records a packet sent at now in space. p.TimeSent is
// overwritten with now. Packet numbers in a space must increase; numbers
// skipped on purpose are remembered, and an ACK of one is an error.
func (l *LossDetector) OnPacketSent(space Space, p SentPacket, now time.Time) {
	s := &l.spaces[space]
	if s.discarded || p.PacketNumber <= s.largestSent {
		return
	}
	p.TimeSent = now
	s.sent.push(p)
	s.largestSent = p.PacketNumber
	if p.AckEliciting && l.probes > 0 {
		l.probes--
	}
	if !p.InFlight {
		return
	}
	if p.AckEliciting {
		s.lastAckElicitingSent = now
		s.ackElicitingInFlight++
	}
	l.bytesInFlight += int(p.Size)
	if l.cc != nil {
		l.cc.OnPacketSent(now, int(p.Size), l.bytesInFlight)
	}
	// "A sender SHOULD restart its PTO timer every time an ack-eliciting
	// packet is sent or acknowledged".
	l.setTimer(now)
}

// OnAckReceived processes an ACK frame received at now in space (RFC 9002
// Appendix A.7). The returned slices are valid until the next call.
func (l *LossDetector) OnAckReceived(space Space, ack AckFrame, now time.Time) (AckResult, error) {
	s := &l.spaces[space]
	l.acked = l.acked[:0]
	l.lost = l.lost[:0]
	res := AckResult{LargestAcked: s.largestAcked}
	if len(ack.Ranges) == 0 || s.discarded {
		return res, nil
	}
	for i, r := range ack.Ranges {
		if r.Smallest > r.Largest || r.Smallest < 0 || (i > 0 && r.Largest >= ack.Ranges[i-1].Smallest-1) {
			return res, ErrInvalidAckRanges
		}
	}
	largest := ack.Ranges[0].Largest
	if largest > s.largestSent {
		return res, ErrAckOfUnsentPacket
	}
	if largest > s.largestAcked {
		s.largestAcked = largest
	}
	res.LargestAcked = s.largestAcked
	if space == SpaceHandshake {
		// "Servers complete address validation when a protected packet is
		// received": the client knows it from an ACK of a Handshake packet.
		l.peerValidatedAddress = true
	}

	// DetectAndRemoveAckedPackets, walking the ranges from the lowest so
	// that Acked comes out in ascending order.
	h := &s.sent
	if h.n > 0 {
		first, last := h.base, h.last()
		for i := len(ack.Ranges) - 1; i >= 0; i-- {
			r := ack.Ranges[i]
			lo, hi := max(r.Smallest, first), min(r.Largest, last)
			for pn := lo; pn <= hi; pn++ {
				p := h.at(pn)
				switch p.state {
				case slotSent:
					p.state = slotAcked
					l.acked = append(l.acked, *p)
				case slotSkipped:
					return res, ErrAckOfUnsentPacket
				}
			}
		}
	}
	// "Nothing to do if there are no newly acked packets."
	if len(l.acked) == 0 {
		return res, nil
	}

	newest := &l.acked[len(l.acked)-1]
	ackEliciting := false
	for i := range l.acked {
		p := &l.acked[i]
		if p.AckEliciting {
			ackEliciting = true
			s.ackElicitingInFlight--
		}
		if p.InFlight {
			l.bytesInFlight -= int(p.Size)
		}
	}
	// "An endpoint generates an RTT sample on receiving an ACK frame that
	// meets the following two conditions: the largest acknowledged packet
	// number is newly acknowledged, and at least one of the newly
	// acknowledged packets was ack-eliciting."
	if newest.PacketNumber == largest && ackEliciting {
		ackDelay := ack.AckDelay
		if space == SpaceInitial {
			// "MAY ignore the acknowledgment delay for Initial packets,
			// since these acknowledgments are not delayed by the peer".
			ackDelay = 0
		}
		l.rtt.Update(now.Sub(newest.TimeSent), ackDelay, l.maxAckDelay, l.handshakeConfirmed, now)
		res.RTTSample = true
	}

	// ProcessECN: "If the ECN-CE counter reported by the peer has
	// increased, this could be a new congestion event."
	if ack.HasECN && ack.CE > s.ceCount {
		s.ceCount = ack.CE
		res.CongestionECN = true
		if l.cc != nil {
			l.cc.OnCongestionEvent(now, newest.TimeSent, l.bytesInFlight)
		}
	}

	res.PersistentCongestion = l.detectLost(space, now)
	if l.cc != nil {
		l.cc.OnPacketsAcked(now, l.acked, l.bytesInFlight, &l.rtt)
	}
	// "The PTO backoff factor is reset when an acknowledgment is received,
	// except ... a client does not reset the PTO backoff factor on
	// receiving acknowledgments in Initial packets."
	if l.peerCompletedAddressValidation() {
		l.ptoCount = 0
	}
	h.trim()
	l.setTimer(now)
	res.Acked = l.acked
	res.Lost = l.lost
	return res, nil
}

// detectLost is DetectAndRemoveLostPackets followed by OnPacketsLost: it
// appends the newly lost packets of space to l.lost, removes them from
// flight, signals the congestion controller and reports whether persistent
// congestion was established.
func (l *LossDetector) detectLost(space Space, now time.Time) bool {
	s := &l.spaces[space]
	s.lossTime = time.Time{}
	h := &s.sent
	if s.largestAcked < 0 || h.n == 0 {
		return false
	}
	lossDelay := l.rtt.LossDelay()
	// "Packets sent before this time are deemed lost."
	lostSendTime := now.Add(-lossDelay)
	pcDuration := l.rtt.PersistentCongestionDuration(l.maxAckDelay)
	firstSample := l.rtt.FirstSampleTime()
	var lastLoss, runStart time.Time
	persistent := false
	start := len(l.lost)
	end := min(s.largestAcked, h.last())
	for pn := h.base; pn <= end; pn++ {
		p := h.at(pn)
		switch p.state {
		case slotAcked:
			// "none of the packets sent between the send times of these
			// two packets are acknowledged".
			runStart = time.Time{}
			continue
		case slotSent:
		default:
			continue
		}
		// "The packet was sent kPacketThreshold packets before an
		// acknowledged packet, or it was sent long enough in the past."
		if !p.TimeSent.After(lostSendTime) || s.largestAcked >= pn+l.packetThreshold {
			p.state = slotLost
			l.lost = append(l.lost, *p)
			if p.InFlight {
				l.bytesInFlight -= int(p.Size)
				if p.TimeSent.After(lastLoss) && !p.PMTUProbe && !p.OtherPath {
					lastLoss = p.TimeSent
				}
			}
			if !p.AckEliciting {
				continue
			}
			s.ackElicitingInFlight--
			if p.PMTUProbe || p.OtherPath {
				continue
			}
			// Persistent congestion needs two ack-eliciting packets lost,
			// "a prior RTT sample existed when these two packets were
			// sent", and "the duration between the send times of these two
			// packets exceeds the persistent congestion duration". "A
			// sender ... MAY use state for just the packet number space
			// that was acknowledged."
			if firstSample.IsZero() || !p.TimeSent.After(firstSample) {
				continue
			}
			if runStart.IsZero() {
				runStart = p.TimeSent
			} else if p.TimeSent.Sub(runStart) > pcDuration {
				persistent = true
			}
			continue
		}
		// "If packets sent prior to the largest acknowledged packet cannot
		// yet be declared lost, then a timer SHOULD be set for the
		// remaining time."
		if t := p.TimeSent.Add(lossDelay); s.lossTime.IsZero() || t.Before(s.lossTime) {
			s.lossTime = t
		}
	}
	if len(l.lost) == start {
		return false
	}
	// "Congestion event if in-flight packets were lost"
	if l.cc != nil && !lastLoss.IsZero() {
		l.cc.OnCongestionEvent(now, lastLoss, l.bytesInFlight)
	}
	if persistent {
		// "When persistent congestion is declared, the sender's
		// congestion window MUST be reduced to the minimum congestion
		// window". "Endpoints SHOULD set the min_rtt to the newest RTT
		// sample after persistent congestion is established."
		l.rtt.OnPersistentCongestion()
		if l.cc != nil {
			l.cc.OnPersistentCongestion(now)
		}
	}
	return persistent
}

// lossTimeAndSpace is GetLossTimeAndSpace: the earliest loss_time.
func (l *LossDetector) lossTimeAndSpace() (time.Time, Space) {
	var t time.Time
	space := SpaceInitial
	for i := range l.spaces {
		lt := l.spaces[i].lossTime
		if !lt.IsZero() && (t.IsZero() || lt.Before(t)) {
			t, space = lt, Space(i)
		}
	}
	return t, space
}

// ptoTimeAndSpace is GetPtoTimeAndSpace; the zero time means no PTO.
func (l *LossDetector) ptoTimeAndSpace(now time.Time) (time.Time, Space) {
	// "When a PTO timer expires, the PTO backoff MUST be increased,
	// resulting in the PTO period being set to twice its current value."
	backoff := time.Duration(1) << min(l.ptoCount, 30)
	duration := l.rtt.PTO(0) * backoff
	if !l.ackElicitingInFlight() {
		// "the client MUST set the PTO timer if the client has not
		// received an acknowledgment for any of its Handshake packets and
		// the handshake is not confirmed ..., even if there are no packets
		// in flight." The anti-deadlock PTO starts from now.
		if l.hasHandshakeKeys {
			return now.Add(duration), SpaceHandshake
		}
		return now.Add(duration), SpaceInitial
	}
	var timeout time.Time
	space := SpaceInitial
	for i := range l.spaces {
		s := &l.spaces[i]
		if s.ackElicitingInFlight == 0 {
			continue
		}
		if Space(i) == SpaceAppData {
			// "An endpoint MUST NOT set its PTO timer for the Application
			// Data packet number space until the handshake is confirmed."
			if !l.handshakeConfirmed {
				break
			}
			// "When the PTO is armed for Initial or Handshake packet number
			// spaces, the max_ack_delay in the PTO period computation is
			// set to 0".
			duration += l.maxAckDelay * backoff
		}
		if t := s.lastAckElicitingSent.Add(duration); timeout.IsZero() || t.Before(timeout) {
			timeout, space = t, Space(i)
		}
	}
	return timeout, space
}

// setTimer is SetLossDetectionTimer.
func (l *LossDetector) setTimer(now time.Time) {
	if t, _ := l.lossTimeAndSpace(); !t.IsZero() {
		// "The PTO timer MUST NOT be set if a timer is set for time
		// threshold loss detection".
		l.timer = t
		return
	}
	if l.isServer && l.amplificationLimited {
		// "The server's timer is not set if nothing can be sent."
		l.timer = time.Time{}
		return
	}
	if !l.ackElicitingInFlight() && l.peerCompletedAddressValidation() {
		// "There is nothing to detect lost, so no timer is set."
		l.timer = time.Time{}
		return
	}
	l.timer, _ = l.ptoTimeAndSpace(now)
}

// OnLossDetectionTimeout handles the expiry of the loss detection timer
// (RFC 9002 Appendix A.9). It does nothing (TimeoutNone) when called before
// LossDetectionTimer(). The returned slice is valid until the next call.
func (l *LossDetector) OnLossDetectionTimeout(now time.Time) TimeoutResult {
	if l.timer.IsZero() || now.Before(l.timer) {
		return TimeoutResult{}
	}
	l.lost = l.lost[:0]
	if t, space := l.lossTimeAndSpace(); !t.IsZero() {
		// Time threshold loss detection.
		pc := l.detectLost(space, now)
		l.spaces[space].sent.trim()
		l.setTimer(now)
		return TimeoutResult{Action: TimeoutLoss, Space: space, Lost: l.lost, PersistentCongestion: pc}
	}
	res := TimeoutResult{Action: TimeoutProbe, Probes: 2}
	if !l.ackElicitingInFlight() {
		// "Client sends an anti-deadlock packet: Initial is padded to earn
		// more anti-amplification credit, a Handshake packet proves address
		// ownership."
		res.Space = SpaceInitial
		if l.hasHandshakeKeys {
			res.Space = SpaceHandshake
		}
		res.Probes = 1
		res.AntiDeadlock = true
	} else {
		_, res.Space = l.ptoTimeAndSpace(now)
	}
	l.probes = res.Probes
	l.ptoCount++
	l.setTimer(now)
	return res
}

// OnPacketNumberSpaceDiscarded drops every packet of space when its keys
// are discarded (RFC 9002 §6.4): "The sender MUST discard all recovery state
// associated with those packets and MUST remove them from the count of bytes
// in flight." Later packets and ACKs in space are ignored. It returns the
// packets still waiting for their fate, so that the engine can release
// their frames; the slice is valid until the next call.
func (l *LossDetector) OnPacketNumberSpaceDiscarded(space Space, now time.Time) []SentPacket {
	l.spaces[space].discarded = true
	dropped := l.dropAll(space, now)
	// The space takes no more packets: its ring goes back to the heap.
	l.spaces[space].sent = sentHistory{}
	return dropped
}

// OnZeroRTTRejected drops the 0-RTT packets, all in the Application Data
// space: "When 0-RTT is rejected, recovery state for all in-flight 0-RTT
// packets is discarded." The space stays usable for 1-RTT packets, and the
// engine re-sends the frames of the returned packets (valid until the next
// call) in 1-RTT packets.
func (l *LossDetector) OnZeroRTTRejected(now time.Time) []SentPacket {
	return l.dropAll(SpaceAppData, now)
}

func (l *LossDetector) dropAll(space Space, now time.Time) []SentPacket {
	s := &l.spaces[space]
	l.discarded = l.discarded[:0]
	h := &s.sent
	for i := 0; i < h.n; i++ {
		p := h.at(h.base + int64(i))
		if p.state != slotSent {
			continue
		}
		l.discarded = append(l.discarded, *p)
		if p.InFlight {
			l.bytesInFlight -= int(p.Size)
		}
	}
	h.clear()
	s.ackElicitingInFlight = 0
	s.lastAckElicitingSent = time.Time{}
	s.lossTime = time.Time{}
	// "When Initial or Handshake keys are discarded, the PTO and loss
	// detection timers MUST be reset".
	l.ptoCount = 0
	l.setTimer(now)
	return l.discarded
}
