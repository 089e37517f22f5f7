package conformance

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Family B (TLS) and family L (close, draining, stateless reset): the
// scenarios the current hooks and the raw client can drive.

func init() {
	Register(&Scenario{
		ID: "tls-alpn-unknown", Title: "Only an unknown ALPN offered", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("8.1", Must, "When using ALPN, endpoints MUST immediately close a connection … with a no_application_protocol TLS alert … if an application protocol is not negotiated.")},
		Run: func(ctx context.Context, t *T) {
			t.ProvokeHandshake(ctx, DialOptions{Label: "alpn", ALPN: []string{"quiver-unknown-alpn"}}, Expectation{
				Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.CryptoError(120)),
				Describe: "a ClientHello offering only the ALPN value quiver-unknown-alpn"})
		},
	})
	registerProvoked(provokedSpec{
		id: "tls-keyupdate-message", title: "TLS KeyUpdate message in 1-RTT CRYPTO", family: "B", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9001("6", Must, "Endpoints MUST treat the receipt of a TLS KeyUpdate message as a connection error of type 0x010a")},
		codes:    transportCodes(wire.CryptoError(10)),
		describe: "a TLS KeyUpdate handshake message in a 1-RTT CRYPTO frame",
		frames: func(t *T, c *Conn) []wire.Frame {
			// KeyUpdate (24), length 1, update_not_requested (0).
			return []wire.Frame{&wire.CryptoFrame{Offset: 0, Data: []byte{tlsKeyUpdate, 0, 0, 1, 0}}}
		},
	})
	Register(&Scenario{
		ID: "tls-handshake-keys-discarded", Title: "Handshake packet after HANDSHAKE_DONE", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("4.9.2", Must, "An endpoint MUST discard its Handshake keys when the TLS handshake is confirmed")},
		Run:          runTLSHandshakeKeysDiscarded,
	})
	Register(&Scenario{
		ID: "tls-no-tls-keyupdate", Title: "No TLS KeyUpdate from the server", Family: "B", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{rfc9001("6", MustNot, "Endpoints MUST NOT send a TLS KeyUpdate message.")},
		Run: func(ctx context.Context, t *T) {
			t.noServerTLSMessage(ctx, tlsKeyUpdate, "KeyUpdate")
		},
	})
	Register(&Scenario{
		ID: "tls-no-post-handshake-auth", Title: "No post-handshake CertificateRequest", Family: "B", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{rfc9001("4.4", MustNot, "servers MUST NOT send post-handshake TLS CertificateRequest messages")},
		Run: func(ctx context.Context, t *T) {
			t.noServerTLSMessage(ctx, tlsCertificateRequest, "CertificateRequest")
		},
	})
	Register(&Scenario{
		ID: "close-draining-silence", Title: "Server silent while draining", Family: "L", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("10.2.2", MustNot, "While otherwise identical to the closing state, an endpoint in the draining state MUST NOT send any packets."),
			rfc9000("10.2.2", May, "An endpoint that receives a CONNECTION_CLOSE frame MAY send a single packet containing a CONNECTION_CLOSE frame before entering the draining state"),
		},
		Run: runCloseDrainingSilence,
	})
	Register(&Scenario{
		ID: "close-reason-utf8", Title: "CONNECTION_CLOSE reason phrases are UTF-8", Family: "L", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{rfc9000("19.19", Should, "This SHOULD be a UTF-8 encoded string")},
		Run:          runCloseReasonUTF8,
	})
	Register(&Scenario{
		ID: "idle-timeout-min-3pto", Title: "Idle timeout stretched to 3 PTO", Family: "L", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("10.1", Must, "To avoid excessively small idle timeout periods, endpoints MUST increase the idle timeout period to be at least three times the current Probe Timeout (PTO).")},
		Run:          runIdleMin3PTO,
	})
	Register(&Scenario{
		ID: "sr-unknown-cid", Title: "Stateless reset policy for unknown connection IDs", Family: "L", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("10.3", May, "An endpoint MAY send a Stateless Reset in response to receiving a packet that it cannot associate with an active connection.")},
		Run:          runSRUnknownCID,
	})
}

func runTLSHandshakeKeysDiscarded(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	rc.Receive(ctx, t.PTO(), nil)
	mark := len(t.rec.snapshot())
	pkt, pn := rc.longPacket(1, []wire.Frame{&wire.PingFrame{}}, longOpts{})
	trig := rc.lastSent()
	rc.send(pkt)
	rc.Receive(ctx, t.Settle(), nil)
	req := t.sc.Requirements[0]
	for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
		if p.space != 1 {
			continue
		}
		for _, f := range p.frames {
			if a, ok := f.(*wire.AckFrame); ok && a.Acks(pn) {
				t.Fail("discarded", req, "After HANDSHAKE_DONE the server still acknowledged a Handshake packet, so it kept its Handshake keys.", append(events(Trigger, trig), events(Response, p)...)...)
				return
			}
		}
	}
	t.Pass("discarded", req, "The server did not acknowledge a Handshake packet sent after HANDSHAKE_DONE.", events(Trigger, trig)...)
}

// noServerTLSMessage checks the server's 1-RTT CRYPTO stream for a TLS
// message type.
func (t *T) noServerTLSMessage(ctx context.Context, typ byte, name string) {
	c := t.mustDial(ctx, DialOptions{})
	t.fetchSmall(ctx, c)
	t.rec.wait(ctx, t.PTO(), nil)
	var buf cryptoBuffer
	var last *packet
	for _, p := range received(t.rec.snapshot(), c.ID(), 0) {
		for _, f := range p.frames {
			if cf, ok := f.(*wire.CryptoFrame); ok && p.space == 2 {
				buf.add(cf.Offset, cf.Data)
				last = p
			}
		}
	}
	msgs := tlsMessages(buf.contiguous())
	for _, m := range msgs {
		if m[0] == typ {
			t.Fail("absent", t.sc.Requirements[0], fmt.Sprintf("The server sent a TLS %s message in its 1-RTT CRYPTO data.", name), events(Response, last)...)
			return
		}
	}
	t.Pass("absent", t.sc.Requirements[0], fmt.Sprintf("The server's %d post-handshake TLS message(s) include no %s.", len(msgs), name))
}

func runCloseDrainingSilence(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	rc.Receive(ctx, t.PTO(), nil)
	rc.NoAcks = true
	mark := len(t.rec.snapshot())
	trig := rc.Send1RTT([]wire.Frame{&wire.ConnectionCloseFrame{ErrorCode: 0}}, shortOpts{})
	start := time.Now()
	for time.Since(start) < t.PTO() && ctx.Err() == nil {
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
		rc.Receive(ctx, 50*time.Millisecond, nil)
	}
	rc.Receive(ctx, 3*t.PTO()-time.Since(start), nil)
	req := t.sc.Requirements[0]
	var closes, other []*packet
	for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
		if p.closeFrame() != nil && len(closes) == 0 {
			closes = append(closes, p)
		} else {
			other = append(other, p)
		}
	}
	if len(other) > 0 {
		t.Fail("silence", req, fmt.Sprintf("After the tester's CONNECTION_CLOSE the server sent %d more packet(s) (first: %s) instead of draining in silence.", len(other), other[0].ev.PacketType), append(events(Trigger, trig), events(Response, lastN(other, 3)...)...)...)
		return
	}
	t.Pass("silence", req, fmt.Sprintf("After the tester's CONNECTION_CLOSE the server sent %d closing packet(s) and then nothing for 3 PTO, while PINGs kept arriving.", len(closes)), append(events(Trigger, trig), events(Response, closes...)...)...)
}

func runCloseReasonUTF8(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{})
	t.Provoke(ctx, c, Expectation{Check: "provoke", Req: rfc9000("12.4", Must, "An endpoint MUST treat the receipt of a frame of unknown type as a connection error of type FRAME_ENCODING_ERROR."),
		Codes: transportCodes(wire.FrameEncodingError), Describe: "an unknown frame type"}, func() {
		c.Inject(spaceApp, &wire.RawFrame{Bytes: wire.AppendVarint(nil, unknownFrameType)})
	})
	// The provoking check is context for this scenario, not its verdict.
	t.mu.Lock()
	t.checks = t.checks[:0]
	t.mu.Unlock()
	n := 0
	for _, p := range received(t.rec.snapshot(), -1, 0) {
		cc := p.closeFrame()
		if cc == nil {
			continue
		}
		n++
		if !utf8.Valid(cc.Reason) {
			t.Warn("utf8", t.sc.Requirements[0], fmt.Sprintf("The server's CONNECTION_CLOSE reason phrase %q is not valid UTF-8.", cc.Reason), events(Response, p)...)
			return
		}
	}
	if n == 0 {
		t.Inconclusive("The server sent no CONNECTION_CLOSE to judge.")
	}
	t.Pass("utf8", t.sc.Requirements[0], fmt.Sprintf("All %d reason phrases the server sent are valid UTF-8.", n))
}

func runIdleMin3PTO(ctx context.Context, t *T) {
	tp := defaultClientTP(nil)
	scid := randomBytes(8)
	tp.InitialSourceConnectionID = scid
	tp.MaxIdleTimeout = 1
	rc := t.newRaw(ctx, rawOptions{Label: "idle-1ms", SCID: scid, TP: tp})
	if err := rc.Handshake(ctx, t.Settle()+2*time.Second); err != nil {
		t.Inconclusive(fmt.Sprintf("The handshake with max_idle_timeout = 1 ms did not complete: %v.", err))
	}
	// Quiet for 1.5 PTO, then PINGs one PTO apart.
	sleep(ctx, t.PTO()*3/2)
	mark := len(t.rec.snapshot())
	var pings []*packet
	req := t.sc.Requirements[0]
	for i := 0; i < 3; i++ {
		pg := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
		pings = append(pings, pg)
		rc.Receive(ctx, t.PTO(), nil)
		ps := t.rec.snapshot()
		if a := ackedBy(ps, rc.trace.id, 2, pg.pn); a != nil {
			t.Pass("alive", req, fmt.Sprintf("After 1.5 PTO of silence with max_idle_timeout = 1 ms, the server still acknowledged a PING."), append(events(Trigger, pg), events(Response, a)...)...)
			return
		}
		for _, p := range received(ps, rc.trace.id, mark) {
			if p.ev.PacketType == "stateless_reset" {
				t.Fail("alive", req, "The server answered with a stateless reset after 1.5 PTO of silence: it used an idle timeout below 3 PTO.", events(Response, p)...)
				return
			}
		}
	}
	t.requireControl(ctx, "The server never acknowledged the PINGs after 1.5 PTO of silence")
	t.Fail("alive", req, "With max_idle_timeout = 1 ms the server dropped the connection within 1.5 PTO: three PINGs went unanswered while a normal connection works.", events(Trigger, pings...)...)
}

func runSRUnknownCID(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "unknown-cid"})
	policy := map[string]string{}
	for _, size := range []int{1200, 100, 50} {
		before := t.datagramsReceived(rc.trace.id)
		b := append([]byte{0x40 | 0x01}, randomBytes(size-1)...)
		rc.send(b)
		rc.Receive(ctx, max(t.PTO(), 300*time.Millisecond), nil)
		if n := t.datagramsReceived(rc.trace.id) - before; n > 0 {
			policy[fmt.Sprint(size)] = fmt.Sprintf("%d answer(s)", n)
		} else {
			policy[fmt.Sprint(size)] = "silent"
		}
	}
	t.Fact("sr.policy", policy)
	t.Observe("policy", fmt.Sprintf("Answers to short-header packets with unknown connection IDs, by size: %v.", policy))
}
