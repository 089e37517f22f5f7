package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Family B, encryption levels (RFC 9001 §4.1.3, §4.9.1, §5.7): what a
// server does with 1-RTT packets before the handshake is complete, with
// Initial packets once it has processed a Handshake packet, and with
// CRYPTO data at a level TLS has left. The raw client holds its Finished
// back (rawClient.BeforeFinished) or stays silent after the server's
// first flight (earlyFlight) to make room for the probe.

// tlsFinished is the Finished handshake message type (RFC 8446 §4).
const tlsFinished = 20

func init() {
	Register(&Scenario{
		ID: "tls-early-1rtt-not-processed", Title: "1-RTT request before the tester's Finished", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("5.7", MustNot, "A server MUST NOT process incoming 1-RTT protected packets before the TLS handshake is complete.")},
		Run:          runEarly1RTTNotProcessed,
	})
	Register(&Scenario{
		ID: "tls-initial-keys-discarded", Title: "Initial packet after the server processed a Handshake packet", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001("4.9.1", Must, "a server MUST discard Initial keys when it first successfully processes a Handshake packet."),
			rfc9001("4.9.1", MustNot, "Endpoints MUST NOT send Initial packets after this point."),
		},
		Run: runInitialKeysDiscarded,
	})
	Register(&Scenario{
		ID: "tls-crypto-extends-old-level", Title: "Initial CRYPTO data past the ClientHello after the server's Handshake flight", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001("4.1.3", MustNot, "If the packet is from a previously installed encryption level, it MUST NOT contain data that extends past the end of previously received data in that flow."),
			rfc9001("4.1.3", Must, "Implementations MUST treat any violations of this requirement as a connection error of type PROTOCOL_VIOLATION."),
		},
		Run: runCryptoExtendsOldLevel,
	})
	Register(&Scenario{
		ID: "tls-trailing-crypto-data", Title: "ClientHello followed by the start of another message", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("4.1.3", Must, "if there is data from a previous encryption level that TLS has not consumed, this MUST be treated as a connection error of type PROTOCOL_VIOLATION.")},
		Run:          runTrailingCryptoData,
	})
}

// finishedHold is how long the tester holds its Finished back: 2 × RTT as
// the catalogue says, but at least 200 ms, since on loopback 2 × RTT is
// too short for a server's timers or scheduler to show anything (as in
// hs-handshake-done-not-early).
func (t *T) finishedHold() time.Duration { return max(2*t.RTT(), 200*time.Millisecond) }

func runEarly1RTTNotProcessed(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "request before Finished"})
	var (
		req   *rawRequest
		early []uint64 // the tester's 1-RTT packets sent before its Finished
		hold  time.Duration
	)
	rc.BeforeFinished = func() {
		// The client has the 1-RTT keys once it has the server's
		// Finished; the request leaves under them while the Finished
		// waits.
		m := t.mark()
		req = rc.Request(t.profile.SmallPath)
		for _, p := range t.rec.snapshot()[m:] {
			if p.sent && p.conn == rc.trace.id && p.space == spaceApp {
				early = append(early, p.pn)
			}
		}
		hold = t.finishedHold()
		rc.Receive(ctx, hold, nil)
	}
	err := rc.Handshake(ctx, t.Settle()+2*time.Second)
	ps := t.rec.snapshot()
	fin := finishedSent(ps, rc.trace.id)
	if req == nil || fin == nil {
		t.Inconclusive(fmt.Sprintf("The handshake did not reach the tester's Finished: %v.", err), events(Context, lastN(received(ps, rc.trace.id, 0), 3)...)...)
	}
	reqReq := t.sc.Requirements[0]
	if p, what := earlyProcessed(ps, rc.trace.id, fin.at, early, req.id); p != nil {
		t.Fail("not-processed", reqReq, fmt.Sprintf("While the tester held its Finished back (%v), the server %s: it processed a 1-RTT packet before the handshake was complete.", hold.Round(time.Millisecond), what),
			append(events(Response, p), events(Context, fin)...)...)
		return
	}
	// Not required: whether the server kept the request and answered it
	// once the handshake was complete.
	if err == nil {
		if _, err := rc.Await(ctx, req, t.Settle()); err == nil {
			t.Fact("tls.early-1rtt", "buffered and answered after the Finished")
		} else {
			t.Fact("tls.early-1rtt", "dropped (the tester resent the request once)")
		}
	}
	t.Pass("not-processed", reqReq, fmt.Sprintf("While the tester held its Finished back for %v, the server neither acknowledged nor answered the request the tester had sent in a 1-RTT packet.", hold.Round(time.Millisecond)), events(Context, fin)...)
}

// earlyProcessed returns the first server packet on conn that arrived
// before finAt and acknowledges one of the tester's 1-RTT packets early or
// carries data of stream id, with what it did.
func earlyProcessed(ps []*packet, conn int, finAt time.Time, early []uint64, id uint64) (*packet, string) {
	for _, p := range received(ps, conn, 0) {
		if !p.at.Before(finAt) {
			break
		}
		for _, f := range p.frames {
			switch f := f.(type) {
			case *wire.AckFrame:
				if p.space != spaceApp {
					continue
				}
				for _, pn := range early {
					if f.Acks(pn) {
						return p, fmt.Sprintf("acknowledged the tester's 1-RTT packet %d", pn)
					}
				}
			case *wire.StreamFrame:
				if f.StreamID == id {
					return p, fmt.Sprintf("sent response data on stream %d", id)
				}
			case *wire.ResetStreamFrame:
				if f.StreamID == id {
					return p, fmt.Sprintf("reset stream %d of the request", id)
				}
			}
		}
	}
	return nil, ""
}

func runInitialKeysDiscarded(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "Initial after Handshake"})
	var hsPing, ack, initPing *packet
	rc.BeforeFinished = func() {
		// A Handshake packet the server must acknowledge, sent before the
		// Finished so that the server is still mid-handshake.
		m := t.mark()
		pkt, pn := rc.longPacket(1, []wire.Frame{rc.ackFrame(1), &wire.PingFrame{}}, longOpts{})
		hsPing = rc.lastSent()
		rc.send(pkt)
		if ack = rc.receiveUntil(ctx, t.Settle(), m, acks(1, pn)); ack == nil {
			return
		}
		// Catalogue: one more Initial packet, a padded PING.
		pkt, _ = rc.longPacket(0, []wire.Frame{&wire.PingFrame{}}, longOpts{PadTo: 1200})
		initPing = rc.lastSent()
		rc.send(pkt)
		rc.Receive(ctx, t.finishedHold(), nil)
	}
	err := rc.Handshake(ctx, 2*t.Settle()+2*time.Second)
	if err == nil {
		rc.Receive(ctx, t.PTO(), nil)
	}
	ps := t.rec.snapshot()
	if ack == nil {
		t.Inconclusive(fmt.Sprintf("The server never acknowledged the tester's Handshake PING (%v).", err), events(Trigger, hsPing)...)
	}
	// An acknowledgment of the later Initial PING proves it without any
	// tolerance: it was built after the PING left, which was after the
	// server's acknowledgment of the Handshake packet arrived. Any other
	// Initial packet counts once it arrives more than one RTT after that
	// acknowledgment (packets already in flight).
	if initPing != nil {
		if a := ackedBy(ps, rc.trace.id, spaceInitial, initPing.pn); a != nil {
			t.Fail("discarded", t.sc.Requirements[0], "The server acknowledged the tester's Initial PING, sent after the server had acknowledged a Handshake packet of the tester, so it kept its Initial keys.",
				append(events(Context, hsPing, ack), append(events(Trigger, initPing), events(Response, a)...)...)...)
			return
		}
	}
	if p := initialAfter(ps, rc.trace.id, ack.at.Add(t.RTT())); p != nil {
		t.Fail("discarded", t.sc.Requirements[1], fmt.Sprintf("The server sent an Initial packet %v after it had acknowledged the tester's Handshake packet, so it kept its Initial keys.", p.at.Sub(ack.at).Round(time.Microsecond)),
			append(events(Context, hsPing, ack, initPing), events(Response, p)...)...)
		return
	}
	t.Pass("discarded", t.sc.Requirements[1], "After acknowledging the tester's Handshake packet the server sent no Initial packet, and ignored the tester's later Initial PING.", events(Context, hsPing, ack, initPing)...)
}

// initialAfter returns the first Initial packet of the server on conn that
// arrived after at.
func initialAfter(ps []*packet, conn int, at time.Time) *packet {
	for _, p := range received(ps, conn, 0) {
		if p.space == spaceInitial && p.at.After(at) {
			return p
		}
	}
	return nil
}

func runCryptoExtendsOldLevel(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "Initial CRYPTO after Handshake flight"})
	if !rc.earlyFlight(ctx, t.Settle()) {
		t.Inconclusive(fmt.Sprintf("The server's first flight did not give the tester Handshake keys within %v.", t.Settle().Round(time.Millisecond)))
	}
	// The server has sent its Handshake flight, so for it the Initial
	// level is a previous one (catalogue §5 note 9). Bytes past the end
	// of the ClientHello: the header of a Finished message and part of
	// its body.
	mark := t.mark()
	extra := append([]byte{tlsFinished, 0, 0, 32}, randomBytes(16)...)
	pkt, _ := rc.longPacket(0, []wire.Frame{rc.ackFrame(0), &wire.CryptoFrame{Offset: rc.cryptoOff[0], Data: extra}}, longOpts{PadTo: 1200})
	rc.send(pkt)
	done := t.finishAfterOffence(ctx, rc, mark)
	t.judgeProvoked(rc.trace, done, mark, Expectation{Check: "close", Req: t.sc.Requirements[1], Codes: transportCodes(wire.ProtocolViolation),
		Describe: "Initial CRYPTO data past the end of the ClientHello, sent after the server's Handshake flight"})
}

// finishAfterOffence waits one settle window for a close after a
// handshake-time offence; without one, it lets the raw client finish the
// handshake and sends a 1-RTT PING every PTO for one more settle window
// (the provoked-error pattern of catalogue §2.5). It reports whether the
// handshake completed.
func (t *T) finishAfterOffence(ctx context.Context, rc *rawClient, mark int) bool {
	closed := func() bool { return firstClose(received(t.rec.snapshot(), rc.trace.id, mark)) != nil }
	rc.Receive(ctx, t.Settle(), closed)
	if closed() {
		return rc.confirmed
	}
	rc.Silent = false
	rc.flush()
	rc.Receive(ctx, t.Settle(), func() bool { return rc.confirmed || closed() })
	for waited := time.Duration(0); waited < t.Settle() && rc.confirmed && !closed() && ctx.Err() == nil; waited += t.PTO() {
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
		rc.Receive(ctx, t.PTO(), closed)
	}
	return rc.confirmed
}

func runTrailingCryptoData(ctx context.Context, t *T) {
	// The first bytes of a further handshake message: the type and two of
	// the three length bytes of a Finished.
	trailing := []byte{tlsFinished, 0, 0}
	rc := t.newRaw(ctx, rawOptions{Label: "ClientHello and trailing bytes", RewriteHello: func(ch []byte) []byte {
		return append(ch, trailing...)
	}})
	rc.ClientHello(ctx)
	mark := t.mark()
	rc.Silent = true
	rc.sendClientHello(ctx, 1200)
	req := t.sc.Requirements[0]
	done := t.finishAfterOffence(ctx, rc, mark)
	if cl := firstClose(received(t.rec.snapshot(), rc.trace.id, mark)); cl != nil {
		cc := cl.closeFrame()
		evs := append(events(Trigger, rc.firstSentAfter(mark)), events(Response, cl)...)
		if trailingCloseAccepted(cc) {
			t.Pass("close", req, fmt.Sprintf("The server closed the connection with %s after a ClientHello followed by the start of another handshake message.", closeCode(cc)), evs...)
		} else {
			t.Warn("close", reqMostAppropriate, fmt.Sprintf("The server closed the connection after the trailing CRYPTO data, but with %s instead of PROTOCOL_VIOLATION or a TLS alert; use the specific code.", closeCode(cc)), evs...)
		}
		return
	}
	t.judgeProvoked(rc.trace, done, mark, Expectation{Check: "close", Req: req, Codes: transportCodes(wire.ProtocolViolation),
		Describe: "a ClientHello followed by the first bytes of another handshake message in the Initial CRYPTO stream"})
}

// trailingCloseAccepted reports whether a close after trailing Initial
// CRYPTO data passes: PROTOCOL_VIOLATION, or a TLS alert (0x0100–0x01ff,
// RFC 9001 §4.8), which a server whose TLS stack notices the unconsumed
// bytes first sends instead (catalogue: any 0x01xx code passes).
func trailingCloseAccepted(cc *wire.ConnectionCloseFrame) bool {
	if cc.Application {
		return false
	}
	return cc.ErrorCode == uint64(wire.ProtocolViolation) || cc.ErrorCode >= 0x100 && cc.ErrorCode <= 0x1ff
}

// firstSentAfter returns the raw client's first packet recorded from mark.
func (rc *rawClient) firstSentAfter(mark int) *packet {
	for _, p := range rc.t.rec.snapshot()[mark:] {
		if p.sent && p.conn == rc.trace.id {
			return p
		}
	}
	return nil
}
