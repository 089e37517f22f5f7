package conformance

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family A, the client's flights (catalogue §3.A): a ClientHello split
// across Initial packets that arrive out of order, and a second flight
// coalesced into one datagram. All run on the raw client, which places
// every CRYPTO byte and packet number itself.

var reqCryptoBuffer = rfc9000("7.5", Must, "Implementations MUST support buffering at least 4096 bytes of data received in out-of-order CRYPTO frames.")

func init() {
	Register(&Scenario{
		ID: "hs-clienthello-split-reordered", Title: "ClientHello in two Initial packets, second half first", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{reqCryptoBuffer},
		Run: func(ctx context.Context, t *T) {
			runClientHelloReordered(ctx, t, rawOptions{Label: "ClientHello in 2 packets, reversed"}, 2)
		},
	})
	Register(&Scenario{
		ID: "hs-clienthello-multi-datagram", Title: "ClientHello of about 3,500 bytes in three Initial datagrams, reversed", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{reqCryptoBuffer,
			rfc9001("4.3", May, "servers MAY use the Retry feature … to only buffer partial ClientHello messages from clients with a validated address.")},
		Run: runClientHelloMultiDatagram,
	})
	Register(&Scenario{
		ID: "hs-coalesced-client-flight", Title: "Initial, Handshake and 1-RTT packets in one client datagram", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("12.2", Must, "Receivers MUST be able to process coalesced packets."),
			rfc9000("12.2", Must, "The receiver of coalesced QUIC packets MUST individually process each QUIC packet and separately acknowledge them"),
		},
		Run: runHSCoalescedClientFlight,
	})
}

// reversedClientHello returns a FirstFlight that sends the ClientHello
// split into at least n CRYPTO frames of equal size, each in its own
// Initial padded to a 1200-byte datagram, the highest packet number (the
// end of the ClientHello) first and the others each gap later. flight
// receives the packets of the latest flight, in the order sent.
func (rc *rawClient) reversedClientHello(ctx context.Context, n int, gap time.Duration, flight *[]*packet) func() {
	return func() {
		ch := rc.clientHello
		rc.cryptoQ[0] = nil
		rc.cryptoOff[0] = uint64(len(ch))
		// What a 1200-byte Initial holds: the header (with the token a
		// Retry gave), the CRYPTO frame header and the AEAD tag.
		room := 1200 - (1 + 4 + 1 + len(rc.dcid) + 1 + len(rc.scid) + 2 + len(rc.token) + 2 + 4) - 5 - 16
		n = max(n, (len(ch)+room-1)/room)
		size := (len(ch) + n - 1) / n
		base := rc.nextPN[0]
		*flight = nil
		for i := n - 1; i >= 0; i-- {
			lo, hi := i*size, min((i+1)*size, len(ch))
			rc.nextPN[0] = base + uint64(i)
			pkt, _ := rc.longPacket(0, []wire.Frame{&wire.CryptoFrame{Offset: uint64(lo), Data: ch[lo:hi]}}, longOpts{PadTo: 1200})
			rc.send(pkt)
			*flight = append(*flight, rc.lastSent())
			if i > 0 {
				sleep(ctx, gap)
			}
		}
		rc.nextPN[0] = base + uint64(n)
	}
}

// reassembly is what a server did with a ClientHello that arrived out of
// order.
type reassembly struct {
	completed bool      // the handshake completed
	answered  bool      // the server sent CRYPTO data (its ServerHello) or Handshake packets
	unacked   []*packet // the flight's packets the server never acknowledged
}

// judgeReassembly reads the server's packets on conn after the tester sent
// flight.
func judgeReassembly(ps []*packet, conn int, flight []*packet, completed bool) reassembly {
	r := reassembly{completed: completed}
	for _, p := range flight {
		if ackedBy(ps, conn, 0, p.pn) == nil {
			r.unacked = append(r.unacked, p)
		}
	}
	for _, p := range received(ps, conn, 0) {
		if p.space == 1 || (p.space == 0 && p.has(wire.FrameTypeCrypto)) {
			r.answered = true
		}
	}
	return r
}

// reportReassembly turns a reassembly into the scenario's check.
func (t *T) reportReassembly(r reassembly, flight []*packet, chLen int, err error, answers []*packet) {
	req := t.sc.Requirements[0]
	what := fmt.Sprintf("a %d-byte ClientHello in %d Initial packets sent in reverse order", chLen, len(flight))
	switch {
	case r.completed:
		t.Pass("reassembly", req, fmt.Sprintf("The server reassembled %s and completed the handshake.", what), events(Trigger, flight...)...)
	case len(r.unacked) == 0 && len(flight) > 0 && !r.answered:
		t.Fail("reassembly", req, fmt.Sprintf("The server acknowledged all of %s but sent no handshake within %v: it dropped out-of-order CRYPTO data instead of buffering it.", what, t.Settle().Round(time.Millisecond)), events(Trigger, flight...)...)
	default:
		t.Inconclusive(fmt.Sprintf("The handshake after %s did not complete (%v), and the server did not acknowledge every packet of it.", what, err), append(events(Trigger, flight...), events(Context, lastN(answers, 4)...)...)...)
	}
}

func runClientHelloReordered(ctx context.Context, t *T, o rawOptions, n int) (*rawClient, reassembly) {
	rc := t.newRaw(ctx, o)
	var flight []*packet
	rc.FirstFlight = rc.reversedClientHello(ctx, n, 10*time.Millisecond, &flight)
	err := rc.Handshake(ctx, t.Settle()+2*time.Second)
	r := judgeReassembly(t.rec.snapshot(), rc.trace.id, flight, err == nil)
	t.reportReassembly(r, flight, len(rc.clientHello), err, received(t.rec.snapshot(), rc.trace.id, 0))
	return rc, r
}

// greaseTP is a reserved transport parameter (RFC 9000 §18.1: 31 * N + 27)
// of n bytes, which a server must ignore.
func greaseTP(n int) []byte {
	b := wire.AppendVarint(nil, 31*1000+27)
	b = wire.AppendVarint(b, uint64(n))
	return append(b, make([]byte, n)...)
}

func runClientHelloMultiDatagram(ctx context.Context, t *T) {
	// The catalogue inflates the ClientHello with a hybrid post-quantum
	// key share and a padding extension. crypto/tls writes no padding
	// extension, so a reserved transport parameter, which every server
	// must ignore, brings it to about 3,300 bytes instead: three
	// 1200-byte datagrams (four after a Retry with a long token).
	scid := randomBytes(8)
	tp := append(defaultClientTP(scid).Marshal(), greaseTP(1800)...)
	rc, r := runClientHelloReordered(ctx, t, rawOptions{Label: "ClientHello in 3 datagrams, reversed", SCID: scid, RawTP: tp,
		Curves: []tls.CurveID{tls.X25519MLKEM768, tls.X25519}}, 3)
	t.Fact("tls.clienthello-bytes", len(rc.clientHello))
	retried := rc.retrySCID != nil
	t.Fact("retry.large-clienthello", retried)
	if r.completed {
		t.Observe("retry", map[bool]string{true: "The server answered the large ClientHello with a Retry first, which §4.3 allows.", false: "The server answered the large ClientHello without a Retry."}[retried])
	}
}

// inlineRequest builds a request for path in protocol alpn as frames for
// one packet: over h3 the control stream, when it is not open yet, goes in
// the same packet rather than in one of its own ahead of it (as Request
// sends it), so that a packet that must travel alone (coalesced with the
// Finished, or in 0-RTT) carries everything.
func (rc *rawClient) inlineRequest(alpn, path string) ([]wire.Frame, *rawRequest) {
	var frames []wire.Frame
	if alpn == h3.ALPNH3 && !rc.h3Control {
		rc.h3Control = true
		frames = append(frames, &wire.StreamFrame{StreamID: 2, Data: append([]byte{0x00}, h3Frame(0x04, nil)...)})
	}
	saved := rc.alpn
	rc.alpn = []string{alpn}
	id := 4 * rc.nextBidi
	rc.nextBidi++
	req := rc.prepareRequest(id, path)
	rc.alpn = saved
	return append(frames, req.frame), req
}

// coalesced is what the server did with the tester's coalesced second
// flight.
type coalesced struct {
	hsDone   bool // the Handshake packet was processed: acknowledged, or HANDSHAKE_DONE came
	hsLost   bool // not processed while a later Handshake packet was acknowledged
	appDone  bool // the 1-RTT packet was acknowledged or its request answered
	appLost  bool // not processed while a later 1-RTT packet was acknowledged
	hsAck    *packet
	appAck   *packet
	laterAck *packet
}

// judgeCoalesced reads the server's packets on conn: the tester's
// Handshake packet hsPN and 1-RTT packet appPN left in one datagram, and
// later packets hsLater and appLater (nil when not sent) went alone.
func judgeCoalesced(ps []*packet, conn int, hsPN, appPN uint64, hsLater, appLater *packet, confirmed, answered bool) coalesced {
	var c coalesced
	c.hsAck = ackedBy(ps, conn, 1, hsPN)
	c.appAck = ackedBy(ps, conn, 2, appPN)
	c.hsDone = c.hsAck != nil || confirmed
	c.appDone = c.appAck != nil || answered
	if !c.hsDone && hsLater != nil {
		if a := ackedBy(ps, conn, 1, hsLater.pn); a != nil {
			c.hsLost, c.laterAck = true, a
		}
	}
	if !c.appDone && appLater != nil {
		if a := ackedBy(ps, conn, 2, appLater.pn); a != nil {
			c.appLost, c.laterAck = true, a
		}
	}
	return c
}

func runHSCoalescedClientFlight(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "coalesced second flight"})
	var req *rawRequest
	rc.CoalesceFinished = func() []wire.Frame {
		var frames []wire.Frame
		frames, req = rc.inlineRequest(rc.negotiatedALPN(), t.profile.SmallPath)
		return frames
	}
	err := rc.Handshake(ctx, t.Settle()+2*time.Second)
	ps := t.rec.snapshot()
	var hsPkt, appPkt *packet
	for _, p := range ps {
		if p.sent && p.conn == rc.trace.id && p.space == 1 && p.has(wire.FrameTypeCrypto) && hsPkt == nil {
			hsPkt = p
		}
		if p.sent && p.conn == rc.trace.id && p.space == 2 && hasFrame[*wire.StreamFrame]()(p) && appPkt == nil {
			appPkt = p
		}
	}
	if hsPkt == nil || appPkt == nil || req == nil {
		t.Inconclusive(fmt.Sprintf("The handshake did not reach the tester's second flight: %v.", err), events(Context, lastN(received(ps, rc.trace.id, 0), 3)...)...)
	}
	var body []byte
	answered := false
	if err == nil {
		// No resend of the request (Await would resend it after a PTO):
		// only the coalesced copy may be answered.
		rc.Receive(ctx, t.Settle(), func() bool {
			_, done := rc.Body(req)
			return done || rc.peerClosed
		})
		body, answered = rc.Body(req)
	}
	// Later packets of each space, alone, so that a packet dropped from
	// the coalesced datagram shows as dropped, not lost.
	var hsLater, appLater *packet
	if !rc.confirmed && ackedBy(t.rec.snapshot(), rc.trace.id, 1, hsPkt.pn) == nil {
		pkt, _ := rc.longPacket(1, []wire.Frame{&wire.PingFrame{}}, longOpts{})
		rc.send(pkt)
		hsLater = rc.lastSent()
	}
	if ackedBy(t.rec.snapshot(), rc.trace.id, 2, appPkt.pn) == nil && !answered {
		appLater = rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	}
	if hsLater != nil || appLater != nil {
		rc.Receive(ctx, t.Settle(), nil)
	}
	c := judgeCoalesced(t.rec.snapshot(), rc.trace.id, hsPkt.pn, appPkt.pn, hsLater, appLater, rc.confirmed, answered)
	reqProcess, reqAck := t.sc.Requirements[0], t.sc.Requirements[1]
	trig := events(Trigger, hsPkt, appPkt)
	switch {
	case c.hsLost:
		t.Fail("handshake-packet", reqProcess, fmt.Sprintf("The server never processed the Handshake packet %d (the Finished) of the coalesced datagram, but acknowledged the tester's later Handshake packet %d sent alone.", hsPkt.pn, hsLater.pn), append(trig, events(Response, c.laterAck)...)...)
	case c.hsDone:
		t.Pass("handshake-packet", reqProcess, fmt.Sprintf("The server processed the Handshake packet of the coalesced datagram (%s).", map[bool]string{true: "it acknowledged it", false: "it completed the handshake"}[c.hsAck != nil]), append(trig, events(Response, c.hsAck)...)...)
	default:
		t.Check("handshake-packet", Inconclusive, reqProcess, fmt.Sprintf("The server neither acknowledged the Handshake packet of the coalesced datagram nor completed the handshake: %v.", err), trig...)
	}
	switch {
	case c.appLost:
		t.Fail("1rtt-packet", reqAck, fmt.Sprintf("The server never acknowledged the 1-RTT packet %d of the coalesced datagram nor answered its request, but acknowledged the tester's later 1-RTT packet %d sent alone.", appPkt.pn, appLater.pn), append(trig, events(Response, c.laterAck)...)...)
	case c.appAck != nil:
		t.Pass("1rtt-packet", reqAck, fmt.Sprintf("The server acknowledged the 1-RTT packet of the coalesced datagram in a 1-RTT ACK%s.", map[bool]string{true: fmt.Sprintf(" and answered its request (%d bytes)", len(body)), false: ""}[answered]), append(trig, events(Response, c.appAck)...)...)
	case c.appDone:
		t.Pass("1rtt-packet", reqAck, fmt.Sprintf("The server answered the request carried in the 1-RTT packet of the coalesced datagram (%d bytes).", len(body)), trig...)
	default:
		t.Check("1rtt-packet", Inconclusive, reqAck, fmt.Sprintf("The server neither acknowledged nor answered the 1-RTT packet of the coalesced datagram: %v.", err), trig...)
	}
}
