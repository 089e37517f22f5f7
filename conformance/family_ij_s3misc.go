package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family I (DATAGRAM) and family J (greasing the QUIC bit): the scenarios
// that need a DATAGRAM frame in a Handshake packet, a small tester limit,
// or the QUIC bit cleared on every packet the tester sends.

var (
	reqGreaseBitAccept = fromKnowledge("RFC 9287", "3", Must, "an endpoint that advertises grease_quic_bit must accept packets with the QUIC bit set to 0.")
	reqGreaseBitEmpty  = fromKnowledge("RFC 9287", "3", Must, "an endpoint that understands grease_quic_bit treats a non-empty value as a connection error of type TRANSPORT_PARAMETER_ERROR.")
	reqGreaseBitVaries = fromKnowledge("RFC 9287", "3.1", Should, "an endpoint that receives grease_quic_bit from its peer sets the QUIC bit to an unpredictable value, unless another extension gives the bit a meaning.")
	reqDgramProtected  = rfc9221("5", Must, "Like STREAM frames, DATAGRAM frames contain application data and MUST be protected with either 0-RTT or 1-RTT keys.")
	reqDgramPeerLimit  = rfc9221("3", MustNot, "An endpoint MUST NOT send DATAGRAM frames that are larger than the max_datagram_frame_size value it has received from its peer.")
)

func init() {
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
	Register(&Scenario{
		ID: "grease-quic-bit-accepted", Title: "Packets with the QUIC bit cleared are accepted", Family: "J", Needs: []string{NeedApp},
		Requirements: []Requirement{reqGreaseBitAccept},
		Run:          runGreaseQUICBitAccepted,
	})
	Register(&Scenario{
		ID: "grease-quic-bit-tp-nonempty", Title: "grease_quic_bit with a one-byte value", Family: "J", Needs: []string{NeedApp},
		Requirements: []Requirement{reqGreaseBitEmpty},
		Run: func(ctx context.Context, t *T) {
			t.requireGreaseQUICBit(ctx)
			t.ProvokeHandshake(ctx, DialOptions{Label: "gqb-one-byte", Probe: quic.Probe{TransportParameters: func(tp *wire.TransportParameters) {
				tp.GreaseQUICBit = false
				tp.Unknown = append(tp.Unknown, wire.TransportParameter{ID: tpGreaseQUICBit, Value: []byte{0x01}})
			}}}, Expectation{Check: "close", Req: reqGreaseBitEmpty, Codes: transportCodes(wire.TransportParameterError),
				Describe: "transport parameters carrying grease_quic_bit (0x2ab2) with a one-byte value"})
		},
	})
	Register(&Scenario{
		ID: "grease-quic-bit-server-greases", Title: "The server greases the QUIC bit", Family: "J", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqGreaseBitVaries},
		Run:          runGreaseQUICBitServerGreases,
	})
}

// requireGreaseQUICBit ends the scenario as unsupported when the server
// does not advertise grease_quic_bit (the gqb need).
func (t *T) requireGreaseQUICBit(ctx context.Context) {
	c := t.mustDial(ctx, DialOptions{Label: "gqb-check"})
	_, ok := rawTPValue(t.serverTP(c), tpGreaseQUICBit)
	t.Fact("grease.quic-bit", ok)
	c.Close(0, "")
	if !ok {
		t.Unsupported("The server does not advertise grease_quic_bit (0x2ab2).")
	}
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
	tp := defaultClientTP(scid)
	tp.HasMaxDatagramFrameSize, tp.MaxDatagramFrameSize = true, 65535
	rc := t.newRaw(ctx, rawOptions{Label: "dgram-in-handshake", SCID: scid, TP: tp})
	rc.handshakeExtra = []wire.Frame{&wire.DatagramFrame{Data: []byte("quiver datagram in a Handshake packet")}}
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
	return Pass, fmt.Sprintf("The server's %d DATAGRAM frame(s) (%v bytes) stayed within the tester's max_datagram_frame_size of %d.", len(sizes), sizes, limit), -1
}

func runGreaseQUICBitAccepted(ctx context.Context, t *T) {
	t.requireGreaseQUICBit(ctx)
	try := func(label string, clear bool) (*rawClient, []byte, error) {
		scid := randomBytes(8)
		tp := defaultClientTP(scid)
		tp.GreaseQUICBit = true
		rc := t.newRaw(ctx, rawOptions{Label: label, SCID: scid, TP: tp})
		rc.ClearQUICBit = clear
		if err := rc.Handshake(ctx, t.Settle()+time.Second); err != nil {
			return rc, nil, fmt.Errorf("handshake: %w", err)
		}
		body, err := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
		return rc, body, err
	}
	rc, body, err := try("quic-bit-cleared", true)
	cleared := 0
	t.rec.mu.Lock()
	for _, d := range t.rec.datagrams {
		if d.sent && d.local == rc.local && len(d.b) > 0 && d.b[0]&0x40 == 0 {
			cleared++
		}
	}
	t.rec.mu.Unlock()
	sent := packetsOf(framesOf[*wire.StreamFrame](t.rec.snapshot(), rc.trace.id, 0, true))
	if err == nil {
		t.Pass("accepted", reqGreaseBitAccept, fmt.Sprintf("With the QUIC bit cleared on %d datagram(s) (every Handshake and 1-RTT packet), the tester completed the handshake and fetched %s (%d bytes).", cleared, t.profile.SmallPath, len(body)), events(Trigger, sent...)...)
		return
	}
	_, _, cerr := try("quic-bit-set", false)
	if cerr != nil {
		t.Inconclusive(fmt.Sprintf("With the QUIC bit cleared the exchange failed (%v), but with it set it failed as well (%v).", err, cerr))
	}
	t.Fail("accepted", reqGreaseBitAccept, fmt.Sprintf("The server advertises grease_quic_bit, but with the QUIC bit cleared on every Handshake and 1-RTT packet the exchange failed (%v) while the same exchange with the bit set succeeds.", err), events(Trigger, lastN(sent, 3)...)...)
}

func runGreaseQUICBitServerGreases(ctx context.Context, t *T) {
	t.requireGreaseQUICBit(ctx)
	c := t.mustDial(ctx, DialOptions{Label: "gqb", Config: func(cfg *quic.Config) { cfg.DisableGreaseQUICBit = false }})
	t.fetchPath(ctx, c, t.profile.Target.LargePath)
	set, cleared := 0, 0
	local := c.trace.localAddr()
	t.rec.mu.Lock()
	for _, d := range t.rec.datagrams {
		// Short-header datagrams only: every 1-RTT packet leaves after
		// the server processed the tester's transport parameters.
		if d.sent || d.local != local || len(d.b) == 0 || d.b[0]&0x80 != 0 {
			continue
		}
		if d.b[0]&0x40 == 0 {
			cleared++
		} else {
			set++
		}
	}
	t.rec.mu.Unlock()
	t.Fact("grease.quic-bit-server", map[string]int{"set": set, "cleared": cleared})
	switch v, sentence := judgeQUICBitGrease(set, cleared); v {
	case Inconclusive:
		t.Inconclusive(sentence)
	case Warn:
		t.Warn("varies", reqGreaseBitVaries, sentence)
	default:
		t.Pass("varies", reqGreaseBitVaries, sentence)
	}
}

// judgeQUICBitGrease judges the QUIC bit of the server's short-header
// datagrams to a tester that advertised grease_quic_bit: it should be
// unpredictable, so both values should appear over a transfer.
func judgeQUICBitGrease(set, cleared int) (Verdict, string) {
	switch {
	case set+cleared < 20:
		return Inconclusive, fmt.Sprintf("The server sent only %d short-header datagram(s), too few to judge its QUIC bit.", set+cleared)
	case cleared == 0:
		return Warn, fmt.Sprintf("The QUIC bit was set on all %d of the server's short-header datagrams although the tester advertised grease_quic_bit; set it to an unpredictable value.", set)
	case set == 0:
		return Warn, fmt.Sprintf("The QUIC bit was cleared on all %d of the server's short-header datagrams: a constant value, not an unpredictable one.", cleared)
	}
	return Pass, fmt.Sprintf("The server cleared the QUIC bit on %d and set it on %d of its short-header datagrams.", cleared, set)
}
