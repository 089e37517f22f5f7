package conformance

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// cidTokens maps each connection ID the tester's server gave the client
// to its stateless reset token: the handshake ID from the transport
// parameters, the others from NEW_CONNECTION_ID frames.
func cidTokens(ps []*packet, conn int, handshakeSCID []byte, handshakeToken [16]byte) map[string][16]byte {
	m := map[string][16]byte{string(handshakeSCID): handshakeToken}
	for _, p := range ps {
		if !p.sent || p.conn != conn {
			continue
		}
		for _, f := range p.frames {
			if nc, ok := f.(*wire.NewConnectionIDFrame); ok {
				m[string(nc.ConnectionID)] = nc.StatelessResetToken
			}
		}
	}
	return m
}

// clientDatagramsAfter returns the client's datagrams that arrived after at.
func clientDatagramsAfter(s *testServer, at time.Time) []rawDatagram {
	var out []rawDatagram
	for _, d := range s.rawIn() {
		if d.at.After(at) {
			out = append(out, d)
		}
	}
	return out
}

// spaceFrame is a frame of the client's with its packet number space.
type spaceFrame struct {
	space int
	f     wire.Frame
}

// testerClosePN is the packet number of the tester's first 1-RTT packet
// carrying CONNECTION_CLOSE on conn since mark.
func testerClosePN(ps []*packet, conn, mark int) (uint64, bool) {
	for _, p := range ps[min(mark, len(ps)):] {
		if p.sent && p.conn == conn && p.space == spaceApp && p.has(wire.FrameTypeConnectionClose) {
			return p.pn, true
		}
	}
	return 0, false
}

// classifyDraining sorts the client's datagrams after the tester's close:
// those carrying CONNECTION_CLOSE, and the others. A datagram whose 1-RTT
// ACK frames all stop short of the close packet closePN left before the
// client read the close (it crossed it on the way, or waited in a busy
// client's queue): it proves nothing and is left out. (RFC 9000 §10.2.2:
// "An endpoint that receives a CONNECTION_CLOSE frame MAY send a single
// packet containing a CONNECTION_CLOSE frame before entering the draining
// state"; what it sent before it received the frame is not draining.)
func classifyDraining(ds []rawDatagram, closePN uint64, frames func(rawDatagram) []spaceFrame) (closing, other []rawDatagram) {
	for _, d := range ds {
		hasClose, acks, acksClose := false, false, false
		for _, sf := range frames(d) {
			switch f := sf.f.(type) {
			case *wire.ConnectionCloseFrame:
				hasClose = true
			case *wire.AckFrame:
				if sf.space == spaceApp && len(f.Ranges) > 0 {
					acks = true
					if f.Ranges[0].Largest >= closePN {
						acksClose = true
					}
				}
			}
		}
		switch {
		case hasClose:
			closing = append(closing, d)
		case acks && !acksClose:
			// Sent before the close was read.
		default:
			other = append(other, d)
		}
	}
	return closing, other
}

func registerClientEnding() {
	registerClient(&Scenario{
		ID: "cli-stateless-reset", Title: "The client drains after a stateless reset", Requirements: []Requirement{reqCliResetDrain},
		Run: func(ctx context.Context, t *T) {
			var mu sync.Mutex
			var token [16]byte
			var scid, reset []byte
			var passOne bool
			probe := quic.Probe{TransportParameters: func(p *wire.TransportParameters) {
				mu.Lock()
				token, scid = p.StatelessResetToken, append([]byte(nil), p.InitialSourceConnectionID...)
				mu.Unlock()
			}}
			// After the reset the server falls silent, but for one datagram:
			// a PING that a client still holding the connection answers.
			out := func(d []byte) [][]byte {
				mu.Lock()
				defer mu.Unlock()
				if reset == nil || bytes.Equal(d, reset) {
					return [][]byte{d}
				}
				if passOne {
					passOne = false
					return [][]byte{d}
				}
				return nil
			}
			s, c := t.holdOpen(ctx, serveOptions{Label: "stateless reset", Probe: probe, Out: out})
			// Clients may move to a connection ID of a NEW_CONNECTION_ID
			// right after the handshake: let that settle, make the client
			// send, and use the token of the ID it sends to last.
			c.Ping()
			t.rec.wait(ctx, t.PTO(), nil)
			rcv := received(t.rec.snapshot(), s.trace.id, 0)
			if len(rcv) == 0 {
				t.Inconclusive("The tester decrypted no packet from the client.")
			}
			mu.Lock()
			tokens := cidTokens(t.rec.snapshot(), s.trace.id, scid, token)
			mu.Unlock()
			dcid := rcv[len(rcv)-1].dcid
			tok, ok := tokens[string(dcid)]
			if !ok {
				t.Inconclusive(fmt.Sprintf("The client's current Destination Connection ID %x is not one the tester issued.", dcid))
			}
			t.Fact("reset.dcid", fmt.Sprintf("%x", dcid))
			// A datagram that looks like a short-header packet (RFC 9000
			// §10.3): 0b01 first bits, unpredictable bytes, the token last.
			b := randomBytes(60)
			b[0] = 0x40 | b[0]&0x3f
			copy(b[len(b)-16:], tok[:])
			mu.Lock()
			reset, passOne = b, true
			mu.Unlock()
			at := time.Now()
			if err := c.SendRawDatagram(b); err != nil {
				t.Inconclusive(fmt.Sprintf("The tester could not send the stateless reset: %v.", err))
			}
			c.Ping()
			grace := t.RTT() + 10*time.Millisecond
			t.rec.wait(ctx, t.Settle(), nil)
			late := clientDatagramsAfter(s, at.Add(grace))
			if len(late) > 0 {
				t.Fail("drain", reqCliResetDrain, fmt.Sprintf("The client sent %d datagram(s) on the connection more than %v after a stateless reset with the token of connection ID %x: %s.",
					len(late), grace.Round(time.Millisecond), dcid, datagramSummary(late)))
				return
			}
			t.Pass("drain", reqCliResetDrain, fmt.Sprintf("The client sent nothing for %v after a stateless reset, not even an acknowledgment of the PING that followed it.", t.Settle().Round(time.Millisecond)))
		},
	})
	registerClient(&Scenario{
		ID: "cli-draining-silence", Title: "The client is silent in the draining state", Requirements: []Requirement{reqCliDraining, reqCliDrainingOnce},
		Run: func(ctx context.Context, t *T) {
			var mu sync.Mutex
			var deaf bool
			// Once the close is out, the engine no longer sees the client,
			// so that a CONNECTION_CLOSE from it does not silence the
			// tester's PINGs.
			in := func(d []byte, reply func([]byte)) bool {
				mu.Lock()
				defer mu.Unlock()
				return deaf
			}
			s, c := t.holdOpen(ctx, serveOptions{Label: "draining", In: in})
			mark := t.mark()
			c.Inject(spaceApp, &wire.ConnectionCloseFrame{ErrorCode: uint64(wire.NoError)})
			mu.Lock()
			deaf = true
			mu.Unlock()
			at := time.Now()
			// PINGs for one PTO after the close.
			for end := at.Add(t.PTO()); time.Now().Before(end); {
				t.rec.wait(ctx, t.PTO()/4, nil)
				c.Ping()
			}
			t.rec.wait(ctx, 3*t.PTO(), nil)
			grace := t.RTT() + 10*time.Millisecond
			closePN, ok := testerClosePN(t.rec.snapshot(), s.trace.id, mark)
			if !ok {
				t.Inconclusive("The tester's CONNECTION_CLOSE did not leave.")
			}
			closing, other := classifyDraining(clientDatagramsAfter(s, at.Add(grace)), closePN, func(d rawDatagram) []spaceFrame {
				var out []spaceFrame
				s.openRaw(d.b, func(_ wire.Header, space int, _ uint64, _ []byte, frames []wire.Frame) {
					for _, f := range frames {
						out = append(out, spaceFrame{space, f})
					}
				})
				return out
			})
			evs := events(Context, received(t.rec.snapshot(), s.trace.id, mark)...)
			if len(other) > 0 {
				t.Fail("silent", reqCliDraining, fmt.Sprintf("After the tester's CONNECTION_CLOSE the client sent %d datagram(s) without a CONNECTION_CLOSE (%s) instead of draining.", len(other), datagramSummary(other)), evs...)
			} else {
				t.Pass("silent", reqCliDraining, fmt.Sprintf("The client sent no other packet within %v after the tester's CONNECTION_CLOSE, although PINGs followed it.", (t.PTO()*4).Round(time.Millisecond)))
			}
			if len(closing) > 1 {
				t.Fail("one-close", reqCliDrainingOnce, fmt.Sprintf("The client answered the tester's CONNECTION_CLOSE with %d datagrams carrying CONNECTION_CLOSE; one at most is allowed.", len(closing)), evs...)
			} else {
				t.Pass("one-close", reqCliDrainingOnce, fmt.Sprintf("The client sent %d closing packet(s) in answer.", len(closing)))
			}
		},
	})
}

func init() {
	registerClientEnding()
}
