package quic

import (
	"errors"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// ACK frequency (draft-ietf-quic-ack-frequency-14; Quiver's own rules in
// docs/ack-frequency-engine.md). The receiver side follows the draft
// through recovery.AckTracker. The sender side sends the frames on request
// (SetAckFrequency, SendImmediateAck) or as Config.AckFrequency's policy
// asks.

// defaultMinAckDelay is the min_ack_delay we advertise: RFC 9002's timer
// granularity.
const defaultMinAckDelay = time.Millisecond

func (c *Config) minAckDelay() time.Duration {
	d := c.MinAckDelay
	switch {
	case d < 0:
		return 0 // extension off
	case d == 0:
		d = defaultMinAckDelay
	}
	// draft-ietf-quic-ack-frequency-14 §3: "An endpoint's min_ack_delay
	// MUST NOT be greater than its max_ack_delay." max_ack_delay goes out
	// in whole milliseconds; below 1 ms the extension stays off.
	return min(d, c.maxAckDelay().Truncate(time.Millisecond))
}

// AckFrequencyPolicy is the data sender's ACK frequency policy
// (docs/ack-frequency-engine.md §5). The zero value sends no ACK_FREQUENCY frame.
type AckFrequencyPolicy struct {
	// Ratio N asks the peer for one ACK per N ack-eliciting packets (T =
	// N-1), once the handshake is confirmed and an RTT sample exists
	// ("fixed" policy). AdaptiveAckRatio selects the "adaptive" policy:
	// about Acks acknowledgments per congestion window.
	Ratio int
	// MaxAckDelay is the Requested Max Ack Delay of the fixed policy: 0
	// means 25ms; a negative value means smoothed RTT / 4 ("rtt" mode),
	// re-sent when the RTT moves by more than 25%.
	MaxAckDelay time.Duration
	// Acks is the adaptive policy's target ACKs per congestion window;
	// default 4.
	Acks int
	// MaxThreshold caps the adaptive threshold T; default 63 (1:64).
	MaxThreshold uint64
}

// AdaptiveAckRatio selects the adaptive ACK frequency policy.
const AdaptiveAckRatio = -1

// ackFreqState is the sender side, owned by the loop.
type ackFreqState struct {
	policyT      uint64
	policyD      time.Duration
	policySent   bool
	policyAt     time.Time
	nextSeq      uint64
	pending      *wire.AckFrequencyFrame // to send
	last         wire.AckFrequencyFrame  // the latest sent, for loss
	haveLast     bool
	immediateAck bool
	// ackedAppPackets counts the ack-eliciting 1-RTT packets the peer
	// acknowledged, for the adaptive policy's start
	// (docs/ack-frequency-engine.md §5).
	ackedAppPackets uint64
}

// adaptiveSlowStartPackets is how many ack-eliciting packets must be
// acknowledged before the adaptive policy thins ACKs
// (docs/ack-frequency-engine.md §5).
const adaptiveSlowStartPackets = 100

// ErrAckFrequencyNotNegotiated is returned when the peer did not send
// min_ack_delay.
var ErrAckFrequencyNotNegotiated = errors.New("quic: the peer does not support ACK_FREQUENCY (no min_ack_delay)")

// SetAckFrequency asks the peer to acknowledge after more than threshold
// ack-eliciting packets or maxAckDelay, with the reordering threshold
// reorder (draft-ietf-quic-ack-frequency §4), by sending an ACK_FREQUENCY
// frame.
func (c *Conn) SetAckFrequency(threshold uint64, maxAckDelay time.Duration, reorder uint64) error {
	var err error
	ok := c.run(contextBackground, func(now time.Time) {
		if !c.havePeerTP || !c.peerParams.tp.HasMinAckDelay {
			err = ErrAckFrequencyNotNegotiated
			return
		}
		d := uint64(maxAckDelay.Microseconds())
		// "the Requested Max Ack Delay ... MUST NOT be less than the
		// receiver's advertised min_ack_delay" and below 2^14 ms.
		if d < c.peerParams.tp.MinAckDelay || d >= 1<<14*1000 {
			err = fmt.Errorf("quic: requested max ack delay %v outside [peer min_ack_delay %dµs, 2^14 ms)", maxAckDelay, c.peerParams.tp.MinAckDelay)
			return
		}
		f := &wire.AckFrequencyFrame{SequenceNumber: c.ackFreq.nextSeq, AckElicitingThreshold: threshold, RequestedMaxAckDelay: d, ReorderingThreshold: reorder}
		c.ackFreq.nextSeq++
		c.ackFreq.pending = f
		// The PTO must allow for the larger of the old and new delays
		// until the peer has the frame (draft §7; docs/ack-frequency-engine.md §4).
		c.loss.ld.SetMaxAckDelay(max(c.loss.ld.MaxAckDelay(), maxAckDelay))
	})
	if !ok {
		return c.Err()
	}
	return err
}

// SendImmediateAck sends an IMMEDIATE_ACK frame: the peer acknowledges at
// once.
func (c *Conn) SendImmediateAck() error {
	var err error
	if !c.run(contextBackground, func(now time.Time) {
		if !c.havePeerTP || !c.peerParams.tp.HasMinAckDelay {
			err = ErrAckFrequencyNotNegotiated
			return
		}
		c.ackFreq.immediateAck = true
	}) {
		return c.Err()
	}
	return err
}

// onAckFrequency handles ACK_FREQUENCY from the peer (receiver rules,
// draft §4 and docs/ack-frequency-engine.md §2).
func (c *Conn) onAckFrequency(now time.Time, f *wire.AckFrequencyFrame) error {
	min := c.config.minAckDelay()
	if min == 0 {
		// Not advertised: the frame type is unknown to us (RFC 9000 §12.4:
		// "An endpoint MUST treat the receipt of a frame of unknown type as
		// a connection error of type FRAME_ENCODING_ERROR").
		return localTransportError(wire.FrameEncodingError, uint64(f.Type()), "ACK_FREQUENCY received without min_ack_delay advertised")
	}
	// draft §4, Requested Max Ack Delay: "Note that values of 2^14
	// milliseconds or greater are invalid for max_ack_delay ... A value
	// smaller than the min_ack_delay advertised by the peer is also
	// invalid. Receipt of an invalid value MUST be treated as a connection
	// error of type PROTOCOL_VIOLATION."
	if f.RequestedMaxAckDelay < uint64(min.Microseconds()) {
		return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "draft-ietf-quic-ack-frequency §4: Requested Max Ack Delay %dµs below our min_ack_delay %v", f.RequestedMaxAckDelay, min)
	}
	// The 2^14 ms bound is checked by the frame parser (wire/parse.go).
	// "A receiving endpoint MUST ignore a received ACK_FREQUENCY frame
	// unless the Sequence Number value in the frame is greater than the
	// largest processed value": recovery.AckTracker.OnAckFrequency.
	c.spaces[appSpace].acks.t.OnAckFrequency(f.SequenceNumber, f.AckElicitingThreshold, time.Duration(f.RequestedMaxAckDelay)*time.Microsecond, f.ReorderingThreshold, now)
	return nil
}

func (c *Conn) onImmediateAck(now time.Time, f *wire.ImmediateAckFrame) error {
	if c.config.minAckDelay() == 0 {
		return localTransportError(wire.FrameEncodingError, uint64(f.Type()), "IMMEDIATE_ACK received without min_ack_delay advertised")
	}
	c.spaces[appSpace].acks.t.OnImmediateAck(now)
	return nil
}

// appendAckFrequency adds pending ACK_FREQUENCY and IMMEDIATE_ACK frames
// (1-RTT only).
func (c *Conn) appendAckFrequency(buf []byte, end int, log *sentLog, p *builtPacket) []byte {
	s := &c.ackFreq
	if f := s.pending; f != nil && len(buf)+f.Len() <= end {
		buf = f.Append(buf)
		log.add(sentFrame{kind: frAckFrequency, id: f.SequenceNumber})
		s.last, s.haveLast, s.pending = *f, true, nil
		p.ackElic = true
	}
	if s.immediateAck && len(buf)+1 <= end {
		buf = append(buf, byte(wire.FrameTypeImmediateAck))
		log.add(sentFrame{kind: frOther})
		s.immediateAck = false
		p.ackElic = true
	}
	return buf
}

// onAckFrequencyLost sends the current values again under a new sequence
// number, unless a newer frame already went out
// (docs/ack-frequency-engine.md §4).
func (c *Conn) onAckFrequencyLost(seq uint64) {
	s := &c.ackFreq
	if !s.haveLast || s.last.SequenceNumber != seq || s.pending != nil {
		return
	}
	f := s.last
	f.SequenceNumber = s.nextSeq
	s.nextSeq++
	s.pending = &f
}

// applyAckFrequencyPolicy sends ACK_FREQUENCY frames as the configured
// policy asks (docs/ack-frequency-engine.md §5); it runs once per loop turn.
func (c *Conn) applyAckFrequencyPolicy(now time.Time) {
	pol := c.config.AckFrequency
	if pol.Ratio == 0 || !c.handshakeConfirmed || !c.havePeerTP || !c.peerParams.tp.HasMinAckDelay {
		return
	}
	rtt := c.loss.ld.RTT()
	if !rtt.HasSample() {
		return
	}
	s := &c.ackFreq
	srtt := rtt.Smoothed()
	peerMin := time.Duration(c.peerParams.tp.MinAckDelay) * time.Microsecond
	dmin := max(peerMin, time.Millisecond)
	var t uint64
	var d time.Duration
	if pol.Ratio > 0 {
		t = uint64(pol.Ratio - 1)
		switch {
		case pol.MaxAckDelay > 0:
			d = pol.MaxAckDelay
		case pol.MaxAckDelay == 0:
			d = 25 * time.Millisecond
		default:
			d = srtt / 4
		}
	} else {
		t, d = adaptiveAckPolicy(pol, c.loss.cc.CongestionWindow(), srtt, dmin, s.ackedAppPackets)
	}
	d = max(d, dmin)
	if s.policySent {
		// A new frame only on a relevant change (25 %), at most once per
		// smoothed RTT (docs/ack-frequency-engine.md §4).
		changedT := t != s.policyT && diffAtLeast(float64(t), float64(s.policyT), 0.25, 1)
		changedD := d != s.policyD && diffAtLeast(float64(d), float64(s.policyD), 0.25, float64(time.Millisecond))
		if !changedT && !changedD || now.Sub(s.policyAt) < srtt {
			return
		}
	}
	// RT: the packet threshold, 1 when the RTT is below the peer's
	// min_ack_delay.
	rt := uint64(3)
	if srtt < peerMin {
		rt = 1
	}
	f := &wire.AckFrequencyFrame{SequenceNumber: s.nextSeq, AckElicitingThreshold: t, RequestedMaxAckDelay: uint64(d.Microseconds()), ReorderingThreshold: rt}
	s.nextSeq++
	s.pending = f
	s.policyT, s.policyD, s.policySent, s.policyAt = t, d, true, now
	c.loss.ld.SetMaxAckDelay(max(c.loss.ld.MaxAckDelay(), d))
}

// adaptiveAckPolicy computes the adaptive policy's Ack-Eliciting
// Threshold and Requested Max Ack Delay from the congestion window (bytes),
// smoothed RTT, the delay floor dmin and the count of acknowledged
// ack-eliciting 1-RTT packets.
func adaptiveAckPolicy(pol AckFrequencyPolicy, cwnd int, srtt, dmin time.Duration, acked uint64) (uint64, time.Duration) {
	// docs/ack-frequency-engine.md §5: T is 1 until 100 ack-eliciting
	// packets are acknowledged, then clamp(⌊cwnd / (A × MSS)⌋ − 1, 1,
	// Tmax); D is clamp(smoothed RTT / A, Dmin, smoothed RTT) with Dmin =
	// max(peer min_ack_delay, 1 ms). A defaults to 4; any A ≥ 1 is the
	// caller's choice.
	a := pol.Acks
	if a <= 0 {
		a = 4
	}
	tmax := pol.MaxThreshold
	if tmax == 0 {
		tmax = 63
	}
	t := uint64(1)
	if acked >= adaptiveSlowStartPackets {
		w := uint64(cwnd / (a * maxDatagramSize))
		t = min(max(w, 2)-1, tmax)
	}
	d := min(max(srtt/time.Duration(a), dmin), max(srtt, dmin))
	return t, d
}

// diffAtLeast reports whether a and b differ by at least frac of b and by
// at least abs.
func diffAtLeast(a, b, frac, abs float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d >= abs && d >= frac*b
}
