package quic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Unreliable datagrams (RFC 9221). Datagrams are queued both ways with a
// bound; when a queue is full the newest datagram is dropped, as the
// network may drop any of them.

const datagramQueueLen = 128

// ErrDatagramsNotNegotiated is returned by SendDatagram when the peer did
// not announce max_datagram_frame_size, or we did not (ReceiveDatagram).
var ErrDatagramsNotNegotiated = errors.New("quic: DATAGRAM not negotiated (set Config.MaxDatagramFrameSize on both sides)")

// datagramState is guarded by Conn.mu.
type datagramState struct {
	in      [][]byte
	inWake  chan struct{}
	out     [][]byte
	dropped uint64
}

// SendDatagram queues b to be sent in a DATAGRAM frame. It fails when the
// peer does not accept datagrams or b does not fit its limit; it drops
// the datagram silently when the send queue is full.
func (c *Conn) SendDatagram(b []byte) error {
	c.mu.Lock()
	max := c.peerMaxDatagram
	if max == 0 {
		c.mu.Unlock()
		return ErrDatagramsNotNegotiated
	}
	// The frame (type and length fields included) must fit the peer's
	// max_datagram_frame_size (RFC 9221 §3) and one packet.
	if n := uint64(1 + wire.VarintLen(uint64(len(b))) + len(b)); n > max || n > maxDatagramSize-64 {
		c.mu.Unlock()
		return fmt.Errorf("quic: datagram of %d bytes too large (peer max_datagram_frame_size %d)", len(b), max)
	}
	if len(c.dgrams.out) < datagramQueueLen {
		c.dgrams.out = append(c.dgrams.out, append([]byte(nil), b...))
	} else {
		c.dgrams.dropped++
	}
	c.mu.Unlock()
	c.wake()
	return nil
}

// ReceiveDatagram waits for the next datagram from the peer.
func (c *Conn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	if c.config.MaxDatagramFrameSize == 0 {
		return nil, ErrDatagramsNotNegotiated
	}
	for {
		c.mu.Lock()
		if len(c.dgrams.in) > 0 {
			b := c.dgrams.in[0]
			c.dgrams.in[0] = nil
			c.dgrams.in = c.dgrams.in[1:]
			c.mu.Unlock()
			return b, nil
		}
		c.mu.Unlock()
		select {
		case <-c.dgrams.inWake:
		case <-c.loopDone:
			return nil, c.closeErr
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// onDatagram handles a DATAGRAM frame from the peer.
func (c *Conn) onDatagram(now time.Time, f *wire.DatagramFrame) error {
	max := c.config.MaxDatagramFrameSize
	// RFC 9221 §3: "An endpoint that receives a DATAGRAM frame when it has
	// not indicated support via the transport parameter MUST terminate the
	// connection with an error of type PROTOCOL_VIOLATION. Similarly, an
	// endpoint that receives a DATAGRAM frame that is larger than the value
	// it sent in its max_datagram_frame_size transport parameter MUST
	// terminate the connection with an error of type PROTOCOL_VIOLATION."
	if max == 0 {
		return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "RFC 9221 §3: DATAGRAM frame without max_datagram_frame_size")
	}
	if n := uint64(f.Len()); n > max {
		return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "RFC 9221 §3: DATAGRAM frame of %d bytes exceeds max_datagram_frame_size %d", n, max)
	}
	c.mu.Lock()
	if len(c.dgrams.in) < datagramQueueLen {
		c.dgrams.in = append(c.dgrams.in, append([]byte(nil), f.Data...))
	}
	c.mu.Unlock()
	signal(c.dgrams.inWake)
	return nil
}

// appendDatagrams adds queued DATAGRAM frames that fit. They are never
// retransmitted (RFC 9221 §5: "DATAGRAM frames ... are not retransmitted
// upon loss detection"). c.mu is held.
func (c *Conn) appendDatagrams(buf []byte, end int, log *sentLog, p *builtPacket) []byte {
	for len(c.dgrams.out) > 0 {
		f := wire.DatagramFrame{Data: c.dgrams.out[0]}
		if len(buf)+f.Len() > end {
			break
		}
		buf = f.Append(buf)
		log.add(sentFrame{kind: frOther})
		p.ackElic = true
		c.dgrams.out[0] = nil
		c.dgrams.out = c.dgrams.out[1:]
	}
	return buf
}
