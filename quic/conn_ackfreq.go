package quic

import (
	"errors"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// ACK frequency (draft-ietf-quic-ack-frequency-14; design in
// shared/design/ack-frequency.md). The receiver side follows the draft
// through recovery.AckTracker. The sender side is an API without a policy
// yet: SetAckFrequency and SendImmediateAck send the frames on request.

// defaultMinAckDelay is the min_ack_delay we advertise: RFC 9002's timer
// granularity.
const defaultMinAckDelay = time.Millisecond

func (c *Config) minAckDelay() time.Duration {
	switch {
	case c.MinAckDelay < 0:
		return 0 // extension off
	case c.MinAckDelay == 0:
		return defaultMinAckDelay
	}
	return c.MinAckDelay
}

// ackFreqState is the sender side, owned by the loop.
type ackFreqState struct {
	nextSeq      uint64
	pending      *wire.AckFrequencyFrame // to send
	last         wire.AckFrequencyFrame  // the latest sent, for loss
	haveLast     bool
	immediateAck bool
}

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
		// until the peer has the frame (ack-frequency.md §6.4).
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
// draft §4 and ack-frequency.md §5.2).
func (c *Conn) onAckFrequency(now time.Time, f *wire.AckFrequencyFrame) error {
	min := c.config.minAckDelay()
	if min == 0 {
		return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "ACK_FREQUENCY received without min_ack_delay advertised")
	}
	// "Receipt of a value less than the advertised min_ack_delay ... MUST
	// be treated as a connection error of type PROTOCOL_VIOLATION."
	if f.RequestedMaxAckDelay < uint64(min.Microseconds()) {
		return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "draft-ietf-quic-ack-frequency §4: Requested Max Ack Delay %dµs below our min_ack_delay %v", f.RequestedMaxAckDelay, min)
	}
	c.spaces[appSpace].acks.t.OnAckFrequency(f.SequenceNumber, f.AckElicitingThreshold, time.Duration(f.RequestedMaxAckDelay)*time.Microsecond, f.ReorderingThreshold, now)
	return nil
}

func (c *Conn) onImmediateAck(now time.Time, f *wire.ImmediateAckFrame) error {
	if c.config.minAckDelay() == 0 {
		return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "IMMEDIATE_ACK received without min_ack_delay advertised")
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
// number, unless a newer frame already went out (ack-frequency.md §6.2).
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
