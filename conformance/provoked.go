package conformance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// variant is one connection of a provoked-error scenario: its trigger runs
// on an established tester connection.
type variant struct {
	name    string
	trigger func(ctx context.Context, t *T, c *Conn)
}

// provokedSpec describes a scenario that follows the provoked-error
// pattern (docs/conformance-model.md, Provoked errors) on established engine connections.
type provokedSpec struct {
	id, title, family string
	needs             []string
	reqs              []Requirement // reqs[0] is the requirement the close rests on
	codes             []uint64
	application       bool
	anyCode           bool
	warnOnly          bool // the requirement is a SHOULD: going on is warn
	streamErrors      bool
	describe          string
	// frames, when set, are injected in a 1-RTT packet as the trigger.
	frames func(t *T, c *Conn) []wire.Frame
	// variants, when set, replace frames: one connection each.
	variants []variant
	// goesOn, when set, names what happened when the target processed
	// the trigger and went on (Expectation.GoesOn).
	goesOn func(t *T, c *Conn, ps []*packet, mark int) (Requirement, string)
}

func transportCodes(cs ...wire.TransportErrorCode) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = uint64(c)
	}
	return out
}

func registerProvoked(s provokedSpec) {
	Register(&Scenario{
		ID: s.id, Title: s.title, Family: s.family, Needs: s.needs, Requirements: s.reqs,
		Run: func(ctx context.Context, t *T) {
			vs := s.variants
			if vs == nil {
				vs = []variant{{name: s.id, trigger: func(ctx context.Context, t *T, c *Conn) {
					c.Inject(spaceApp, s.frames(t, c)...)
				}}}
			}
			for _, v := range vs {
				c := t.mustDial(ctx, DialOptions{Label: v.name})
				name := v.name
				if len(vs) == 1 {
					name = "close"
				}
				e := Expectation{Check: name, Req: s.reqs[0], Codes: s.codes, Application: s.application,
					Describe: s.describe, GoesOnWarns: s.warnOnly, AnyCode: s.anyCode, StreamErrors: s.streamErrors}
				if len(vs) > 1 {
					e.Describe = fmt.Sprintf("%s (%s)", s.describe, v.name)
				}
				if s.goesOn != nil {
					e.GoesOn = func(ps []*packet, conn, mark int) (Requirement, string) { return s.goesOn(t, c, ps, mark) }
				}
				t.Provoke(ctx, c, e, func() { v.trigger(ctx, t, c) })
			}
		},
	})
}

// injectVariant makes a variant that injects frames in a 1-RTT packet.
func injectVariant(name string, frames func(t *T, c *Conn) []wire.Frame) variant {
	return variant{name: name, trigger: func(ctx context.Context, t *T, c *Conn) {
		c.Inject(spaceApp, frames(t, c)...)
	}}
}

// serverTP returns the connection's server transport parameters or ends
// the scenario as inconclusive.
func (t *T) serverTP(c *Conn) *wire.TransportParameters {
	tp := c.TransportParameters()
	if tp == nil {
		t.Inconclusive("The server's transport parameters could not be read.")
	}
	return tp
}

// provokedOutcome is a provoked-error verdict before it is recorded, so
// that Provoke can send the trigger again when the target never showed it
// processed it.
type provokedOutcome struct {
	v        Verdict
	req      Requirement
	sentence string
	evs      []PacketEvent
	trigger  []*packet
	// unprocessed: the target went on (it acknowledged later PINGs) but
	// never acknowledged the packet(s) carrying the trigger.
	unprocessed bool
	// retryable: sending the trigger again changes nothing but the packet.
	retryable bool
}

// retried adds to the outcome of a second trigger what the first one
// showed.
func (o *provokedOutcome) retried(first provokedOutcome) {
	if o.unprocessed {
		o.sentence += fmt.Sprintf(" The same happened to the first trigger (%s), sent one settle window earlier.", pnList(first.trigger))
		o.evs = append(events(Trigger, first.trigger...), o.evs...)
		return
	}
	o.sentence += fmt.Sprintf(
		" (The first trigger, %s, was never acknowledged; this verdict rests on the second, sent in a fresh packet.)",
		pnList(first.trigger),
	)
}

// carriesTrigger reports whether a packet the tester sent after the mark
// can carry an offence: anything but a packet of well-formed ACK and
// PADDING frames (a malformed ACK is recorded as a raw frame, and a packet
// without frames is itself an offence).
func carriesTrigger(p *packet) bool {
	if p.ackEliciting || len(p.frames) == 0 {
		return true
	}
	for _, f := range p.frames {
		if _, raw := f.(*wire.RawFrame); raw {
			return true
		}
	}
	return false
}

// triggerPackets returns the packets the tester sent on conn that carry
// the trigger: those in [mark, end) that carry more than acknowledgments
// (all of them when none does), or, with end < 0, the first such packet
// after mark.
func triggerPackets(ps []*packet, conn, mark, end int) []*packet {
	var window, carrying []*packet
	for i, p := range ps {
		if i < mark || (end >= 0 && i >= end) || !p.sent || p.conn != conn {
			continue
		}
		if end < 0 {
			if carrying == nil && carriesTrigger(p) {
				return []*packet{p}
			}
			if window == nil {
				window = []*packet{p}
			}
			continue
		}
		window = append(window, p)
		if carriesTrigger(p) {
			carrying = append(carrying, p)
		}
	}
	if len(carrying) > 0 {
		return carrying
	}
	return window
}

// triggerSent waits, at most one PTO, until the engine has sent a packet
// on conn after mark that can carry the trigger (InjectFrames only queues
// frames for the connection's goroutine), and returns the recorder index
// after it: the end of the trigger's window.
func (t *T) triggerSent(ctx context.Context, conn, mark int) int {
	end := -1
	t.rec.wait(ctx, t.PTO(), func(ps []*packet) bool {
		for i := mark; i < len(ps); i++ {
			if p := ps[i]; p.sent && p.conn == conn && carriesTrigger(p) {
				end = i + 1
				return true
			}
		}
		return false
	})
	if end < 0 {
		return t.mark()
	}
	// Packets the engine built in the same pass (a trigger too large for
	// one packet) are recorded at the same instant.
	ps := t.rec.snapshot()
	for end < len(ps) && ps[end].sent && ps[end].conn == conn && ps[end].at.Equal(ps[end-1].at) {
		end++
	}
	return end
}

// triggerProcessed reports the packets that prove the target processed
// every packet carrying the trigger, and the trigger packets without such
// proof. Proof is an acknowledgment (RFC 9000 §13.1: “packets MUST NOT be
// acknowledged until packet protection has been successfully removed and
// all frames contained in the packet have been processed”), for STREAM
// data also an acknowledgment of a retransmission of the same bytes, and
// for Initial and Handshake packets the server's HANDSHAKE_DONE after
// them: the handshake they carried was processed.
func triggerProcessed(ps []*packet, conn int, trigger []*packet) (proof, missing []*packet) {
	for _, p := range trigger {
		if a := ackedBy(ps, conn, p.space, p.pn); a != nil {
			proof = append(proof, a)
			continue
		}
		if p.space < spaceApp {
			if hd := handshakeDoneAfter(ps, conn, p.at); hd != nil {
				proof = append(proof, hd)
				continue
			}
		}
		if a := retransmissionAcked(ps, conn, p); a != nil {
			proof = append(proof, a)
			continue
		}
		missing = append(missing, p)
	}
	return proof, missing
}

// retransmissionAcked returns the acknowledgment of a later packet that
// carried again every STREAM frame of p (the engine retransmits its own
// stream data), or nil.
func retransmissionAcked(ps []*packet, conn int, p *packet) *packet {
	var want []*wire.StreamFrame
	for _, f := range p.frames {
		if sf, ok := f.(*wire.StreamFrame); ok {
			want = append(want, sf)
		}
	}
	if len(want) == 0 {
		return nil
	}
	var proof *packet
	for _, sf := range want {
		var found *packet
		for _, q := range ps {
			if !q.sent || q.conn != conn || q == p || !q.at.After(p.at) {
				continue
			}
			for _, f := range q.frames {
				if g, ok := f.(*wire.StreamFrame); ok && g.StreamID == sf.StreamID && g.Offset <= sf.Offset &&
					g.Offset+uint64(len(g.Data)) >= sf.Offset+uint64(len(sf.Data)) {
					if a := ackedBy(ps, conn, q.space, q.pn); a != nil {
						found = a
					}
				}
			}
			if found != nil {
				break
			}
		}
		if found == nil {
			return nil
		}
		proof = found
	}
	return proof
}

// retryable reports whether the trigger can go out again in a fresh
// packet without changing the offence: 1-RTT packets without STREAM or
// CRYPTO frames (stream data and handshake messages are not idempotent,
// and the engine retransmits its own).
func retryable(trigger []*packet) bool {
	if len(trigger) == 0 {
		return false
	}
	for _, p := range trigger {
		if p.space != spaceApp || p.has(wire.FrameTypeCrypto) {
			return false
		}
		for _, f := range p.frames {
			if _, ok := f.(*wire.StreamFrame); ok {
				return false
			}
		}
	}
	return true
}

// handshakeDoneAfter returns the first packet of the target on conn that
// carries HANDSHAKE_DONE and arrived after at (any time when at is zero).
func handshakeDoneAfter(ps []*packet, conn int, at time.Time) *packet {
	for _, p := range ps {
		if !p.sent && p.conn == conn && p.has(wire.FrameTypeHandshakeDone) && (at.IsZero() || p.at.After(at)) {
			return p
		}
	}
	return nil
}

// pnList names packets for a sentence: "packet 1-RTT 7" or "packets
// 1-RTT 7, 8".
func pnList(ps []*packet) string {
	if len(ps) == 0 {
		return "no packet"
	}
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%s %d", p.ev.PacketType, p.pn))
	}
	if len(s) == 1 {
		return "packet " + s[0]
	}
	return "packets " + strings.Join(s, ", ")
}
