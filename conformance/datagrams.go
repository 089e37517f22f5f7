package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

func runDgram0RTTLimitKept(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "dgram-check"})
	if tp := t.serverTP(c); !tp.HasMaxDatagramFrameSize || tp.MaxDatagramFrameSize == 0 {
		t.Unsupported("The server did not advertise max_datagram_frame_size (needs dgram).")
	}
	c.Close(0, "")
	old, cur := t.earlyTP(ctx)
	req := t.sc.Requirements[0]
	if cur.MaxDatagramFrameSize < old.MaxDatagramFrameSize || !cur.HasMaxDatagramFrameSize {
		t.Fail(
			"dgram-limit",
			req,
			fmt.Sprintf(
				"With early data accepted, the server's max_datagram_frame_size fell from %d to %d.",
				old.MaxDatagramFrameSize,
				cur.MaxDatagramFrameSize,
			),
		)
		return
	}
	t.Pass(
		"dgram-limit",
		req,
		fmt.Sprintf(
			"With early data accepted, the server's max_datagram_frame_size is %d (remembered: %d).",
			cur.MaxDatagramFrameSize,
			old.MaxDatagramFrameSize,
		),
	)
}

func runDgramAcked(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "dgram", Config: func(cfg *quic.Config) { cfg.MaxDatagramFrameSize = 65535 }})
	tp := t.serverTP(c)
	limit, ok := rawTPVarint(tp, tpMaxDatagramFrameSize)
	if !ok || limit == 0 {
		t.Unsupported("The server does not advertise max_datagram_frame_size.")
	}
	mark := t.mark()
	for i := 0; i < 10 && ctx.Err() == nil; i++ {
		if err := c.SendDatagram([]byte(fmt.Sprintf("quiver datagram %d", i))); err != nil {
			t.Errorf("SendDatagram: %v", err)
		}
		t.rec.wait(ctx, 100*time.Millisecond, nil)
	}
	t.rec.wait(ctx, t.PTO(), nil)
	ps := t.rec.snapshot()
	sent := packetsOf(framesOf[*wire.DatagramFrame](ps, c.ID(), mark, true))
	mad := time.Duration(tp.MaxAckDelay) * time.Millisecond
	limitD := 2 * (t.RTT() + mad)
	late := 0
	var lateP []*packet
	for _, p := range sent {
		a := ackedBy(ps, c.ID(), 2, p.pn)
		if a == nil || a.at.Sub(p.at) > limitD {
			late++
			lateP = append(lateP, p)
		}
	}
	req := t.sc.Requirements[0]
	if cl := firstClose(received(ps, c.ID(), mark)); cl != nil || c.Err() != nil {
		t.Fail("acked", req, "The server closed the connection while the tester sent DATAGRAM frames within its limit.", events(Response, cl)...)
		return
	}
	if len(sent) == 0 {
		t.Errorf("no DATAGRAM frame left the tester")
	}
	if late >= 3 {
		t.Fail(
			"acked",
			req,
			fmt.Sprintf(
				"%d of %d packets carrying DATAGRAM frames were not acknowledged within 2 × (RTT + max_ack_delay) = %v.",
				late,
				len(sent),
				limitD.Round(time.Millisecond),
			),
			events(Trigger, lateP...)...)
		return
	}
	t.Pass(
		"acked",
		req,
		fmt.Sprintf("%d of %d packets carrying DATAGRAM frames were acknowledged within %v.", len(sent)-late, len(sent), limitD.Round(time.Millisecond)),
		events(Trigger, lastN(sent, 3)...)...)
}

func runDgramTooLarge(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "dgram", Config: func(cfg *quic.Config) { cfg.MaxDatagramFrameSize = 65535 }})
	limit, ok := rawTPVarint(t.serverTP(c), tpMaxDatagramFrameSize)
	if !ok || limit == 0 {
		t.Unsupported("The server does not advertise max_datagram_frame_size.")
	}
	// Frame size = type (1) + Length varint + data; find data for limit+1.
	n := int(limit)
	for n > 0 && 1+wire.VarintLen(uint64(n))+n > int(limit)+1 {
		n--
	}
	for 1+wire.VarintLen(uint64(n))+n < int(limit)+1 {
		n++
	}
	if 1+wire.VarintLen(uint64(n))+n > 1100 {
		t.Inconclusive(fmt.Sprintf("The server's max_datagram_frame_size (%d) is too large to exceed within one packet.", limit))
	}
	t.Provoke(ctx, c, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation),
		Describe: fmt.Sprintf("a %d-byte DATAGRAM frame, one byte above the server's max_datagram_frame_size of %d", limit+1, limit)}, func() {
		c.Inject(spaceApp, &wire.DatagramFrame{Data: randomBytes(n)})
	})
}

// requireDatagrams ends the scenario as unsupported when the server does
// not advertise max_datagram_frame_size; it returns the server's value.
func (t *T) requireDatagrams(ctx context.Context) uint64 {
	c := t.mustDial(ctx, DialOptions{Label: "dgram-check", Config: func(cfg *quic.Config) { cfg.MaxDatagramFrameSize = 65535 }})
	limit, ok := rawTPVarint(t.serverTP(c), tpMaxDatagramFrameSize)
	c.Close(0, "")
	if !ok || limit == 0 {
		t.Unsupported("The server does not advertise max_datagram_frame_size.")
	}
	return limit
}

func runDgramInHandshake(ctx context.Context, t *T) {
	t.requireDatagrams(ctx)
	scid := randomBytes(8)
	tp := rawquic.DefaultClientTP(scid)
	tp.HasMaxDatagramFrameSize, tp.MaxDatagramFrameSize = true, 65535
	rc := t.newRaw(ctx, rawquic.Options{Label: "dgram-in-handshake", SCID: scid, TP: tp})
	rc.HandshakeExtra = []wire.Frame{&wire.DatagramFrame{Data: []byte("quiver datagram in a Handshake packet")}}
	t.rawProvoke(ctx, rc, Expectation{Check: "close", Req: reqFrameNotPermitted, Codes: transportCodes(wire.ProtocolViolation),
		Describe: "a DATAGRAM frame in the Handshake packet carrying the client's Finished"}, true, func() {
		rc.Handshake(ctx, t.Settle())
	})
}

// testerDatagramLimit is the max_datagram_frame_size the tester announces
// in dgram-respects-tester-limit.
const testerDatagramLimit = 200

func runDgramRespectsTesterLimit(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "dgram-200", Config: func(cfg *quic.Config) { cfg.MaxDatagramFrameSize = testerDatagramLimit }})
	limit, ok := rawTPVarint(t.serverTP(c), tpMaxDatagramFrameSize)
	if !ok || limit == 0 {
		t.Unsupported("The server does not advertise max_datagram_frame_size.")
	}
	mark := t.mark()
	var sent []int
	for _, n := range []int{100, 190, 400} {
		if uint64((&wire.DatagramFrame{Data: make([]byte, n)}).Len()) > limit {
			continue // the server's own limit forbids it
		}
		if err := c.SendDatagram(randomBytes(n)); err != nil {
			t.Errorf("SendDatagram(%d bytes): %v", n, err)
		}
		sent = append(sent, n)
		t.rec.wait(ctx, t.PTO(), nil)
	}
	t.rec.wait(ctx, t.PTO(), func(ps []*packet) bool {
		return len(framesOf[*wire.DatagramFrame](ps, c.ID(), mark, false)) >= len(sent)
	})
	var sizes []int
	var ps []*packet
	for _, fa := range framesOf[*wire.DatagramFrame](t.rec.snapshot(), c.ID(), mark, false) {
		sizes = append(sizes, fa.f.(*wire.DatagramFrame).Len())
		ps = append(ps, fa.p)
	}
	t.Fact("dgram.echo-frame-sizes", sizes)
	v, sentence, bad := judgeDatagramSizes(sizes, testerDatagramLimit)
	switch v {
	case Unsupported:
		t.Unsupported(fmt.Sprintf("The server echoed none of the DATAGRAM payloads of %v bytes, so it offers no DATAGRAM echo.", sent))
	case Fail:
		t.Fail("limit", reqDgramPeerLimit, sentence, events(Response, ps[bad])...)
	default:
		t.Pass("limit", reqDgramPeerLimit, sentence, events(Response, ps...)...)
	}
}

// judgeDatagramSizes judges the DATAGRAM frames (their encoded sizes) a
// server sent to a tester that announced limit. bad indexes the first
// frame over the limit.
func judgeDatagramSizes(sizes []int, limit int) (v Verdict, sentence string, bad int) {
	if len(sizes) == 0 {
		return Unsupported, "", -1
	}
	for i, n := range sizes {
		if n > limit {
			return Fail, fmt.Sprintf("The server sent a %d-byte DATAGRAM frame to a tester whose max_datagram_frame_size is %d.", n, limit), i
		}
	}
	return Pass, fmt.Sprintf(
		"The server's %d DATAGRAM frame(s) (%v bytes) stayed within the tester's max_datagram_frame_size of %d.",
		len(sizes),
		sizes,
		limit,
	), -1
}

func init() {
	Register(&Scenario{
		ID: "dgram-0rtt-limit-kept", Title: "max_datagram_frame_size kept when 0-RTT is accepted", Family: "I", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9221(
				"3",
				Must,
				"When servers decide to accept 0-RTT data, they MUST send a max_datagram_frame_size transport parameter greater than or equal to the value they sent to the client",
			),
		},
		Run: runDgram0RTTLimitKept,
	})
	Register(&Scenario{
		ID: "dgram-tp", Title: "max_datagram_frame_size the server advertises", Family: "I", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{
			rfc9221(
				"3",
				Recommended,
				"For most uses of DATAGRAM frames, it is RECOMMENDED to send a value of 65535 in the max_datagram_frame_size transport parameter",
			),
		},
		Run: func(ctx context.Context, t *T) {
			c := t.mustDial(ctx, DialOptions{Label: "dgram-65535", Config: func(cfg *quic.Config) { cfg.MaxDatagramFrameSize = 65535 }})
			tp := t.serverTP(c)
			if v, ok := rawTPVarint(tp, tpMaxDatagramFrameSize); ok {
				t.Fact("dgram.support", v)
				t.Observe("value", fmt.Sprintf("The server advertises max_datagram_frame_size = %d.", v))
				return
			}
			t.Fact("dgram.support", "none")
			t.Observe("value", "The server does not advertise max_datagram_frame_size: no DATAGRAM support.")
		},
	})
	Register(&Scenario{
		ID: "dgram-acked", Title: "Packets with DATAGRAM frames are acknowledged", Family: "I", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"13.2.1",
				Must,
				"An endpoint MUST acknowledge all ack-eliciting Initial and Handshake packets immediately and all ack-eliciting 0-RTT and 1-RTT packets within its advertised max_ack_delay",
			),
			rfc9221("5.2", Descriptive, "Although DATAGRAM frames are not retransmitted upon loss detection, they are ack-eliciting"),
		},
		Run: runDgramAcked,
	})
	Register(&Scenario{
		ID: "dgram-too-large", Title: "DATAGRAM frame one byte above the server's limit", Family: "I", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9221(
				"3",
				Must,
				"an endpoint that receives a DATAGRAM frame that is larger than the value it sent in its max_datagram_frame_size transport parameter MUST terminate the connection with an error of type PROTOCOL_VIOLATION.",
			),
		},
		Run: runDgramTooLarge,
	})
	Register(&Scenario{
		ID: "dgram-unnegotiated", Title: "DATAGRAM frame to a server without DATAGRAM", Family: "I", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9221(
				"3",
				Must,
				"An endpoint that receives a DATAGRAM frame when it has not indicated support via the transport parameter MUST terminate the connection with an error of type PROTOCOL_VIOLATION.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			c := t.mustDial(ctx, DialOptions{Label: "engine"})
			if v, ok := rawTPVarint(t.serverTP(c), tpMaxDatagramFrameSize); ok && v > 0 {
				t.Unsupported(fmt.Sprintf("The server advertises max_datagram_frame_size = %d.", v))
			}
			t.Provoke(ctx, c, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation, wire.FrameEncodingError),
				Describe: "a DATAGRAM frame (type 0x31) the server never agreed to"}, func() {
				c.Inject(spaceApp, &wire.DatagramFrame{Data: []byte("quiver")})
			})
		},
	})
	Register(&Scenario{
		ID: "dgram-not-sent-without-tp", Title: "No DATAGRAM to a tester without max_datagram_frame_size", Family: "I", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9221(
				"3",
				MustNot,
				"An endpoint MUST NOT send DATAGRAM frames until it has received the max_datagram_frame_size transport parameter with a non-zero value during the handshake",
			),
		},
		Run: func(ctx context.Context, t *T) {
			c := t.mustDial(ctx, DialOptions{Label: "no-dgram"})
			t.fetchSmall(ctx, c)
			t.rec.wait(ctx, t.PTO(), nil)
			req := t.sc.Requirements[0]
			if fs := framesOf[*wire.DatagramFrame](t.rec.snapshot(), -1, 0, false); len(fs) > 0 {
				t.Fail(
					"absent",
					req,
					"The server sent a DATAGRAM frame to a tester that never advertised max_datagram_frame_size.",
					events(Response, fs[0].p)...)
				return
			}
			t.Pass("absent", req, "The server sent no DATAGRAM frame to a tester without max_datagram_frame_size.")
		},
	})
	Register(&Scenario{
		ID: "dgram-in-handshake-packet", Title: "DATAGRAM frame in the Handshake packet carrying Finished", Family: "I", Needs: []string{NeedApp},
		Requirements: []Requirement{reqFrameNotPermitted, reqDgramProtected},
		Run:          runDgramInHandshake,
	})
	Register(&Scenario{
		ID: "dgram-respects-tester-limit", Title: "DATAGRAM echoes within the tester's 200-byte limit", Family: "I", Needs: []string{NeedApp},
		Requirements: []Requirement{reqDgramPeerLimit},
		Run:          runDgramRespectsTesterLimit,
	})
}
