package conformance

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Family L: the closing state, where CONNECTION_CLOSE frames travel, and
// the close during the handshake (catalogue §3.L).

var (
	reqClosingRate      = rfc9000("10.2.1", Should, "An endpoint SHOULD limit the rate at which it generates packets in the closing state.")
	reqClose1dReplaced  = rfc9000("10.2.3", Must, "A CONNECTION_CLOSE of type 0x1d MUST be replaced by a CONNECTION_CLOSE of type 0x1c when sending the frame in Initial or Handshake packets.")
	reqCloseReasonClear = rfc9000("10.2.3", Must, "Endpoints MUST clear the value of the Reason Phrase field … when converting to a CONNECTION_CLOSE of type 0x1c.")
	reqCloseAppError    = rfc9000("10.2.3", Should, "SHOULD use the APPLICATION_ERROR code when converting to a CONNECTION_CLOSE of type 0x1c.")
	reqClose1RTTOnly    = rfc9000("10.2.3", Must, "After the handshake is confirmed … an endpoint MUST send any CONNECTION_CLOSE frames in a 1-RTT packet.")
	reqCloseBothLevels  = rfc9000("10.2.3", Should, "Under these circumstances, a server SHOULD send a CONNECTION_CLOSE frame in both Handshake and Initial packets to ensure that at least one of them is processable by the client.")
)

func init() {
	Register(&Scenario{
		ID: "close-closing-state", Title: "Closing packets are rate-limited", Family: "L", Needs: []string{NeedApp},
		Requirements: []Requirement{reqClosingRate},
		Run:          runCloseClosingState,
	})
	Register(&Scenario{
		ID: "close-frame-placement", Title: "CONNECTION_CLOSE in the right packet types", Family: "L", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{reqClose1dReplaced, reqCloseReasonClear, reqCloseAppError, reqClose1RTTOnly},
		Run:          runCloseFramePlacement,
	})
	Register(&Scenario{
		ID: "close-handshake-both-levels", Title: "Handshake-time close in Initial and Handshake packets", Family: "L", Needs: []string{NeedApp},
		Requirements: []Requirement{reqCloseBothLevels, reqFrameNotPermitted},
		Run:          runCloseHandshakeBothLevels,
	})
	// close-frame-placement also judges every connection of the run.
	runWideChecks = append(runWideChecks,
		passiveCheck{id: "close-frame-placement", req: 0, judge: placementJudge(placement1dInLong)},
		passiveCheck{id: "close-frame-placement", req: 1, judge: placementJudge(placementReason)},
		passiveCheck{id: "close-frame-placement", req: 2, warn: true, judge: placementJudge(placementCode)},
		passiveCheck{id: "close-frame-placement", req: 3, judge: placementJudge(placementAfterConfirmed)},
	)
}

// closingBurst is how many packets the tester sends in the closing state
// within 50 ms.
const closingBurst = 50

func runCloseClosingState(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	rc.Receive(ctx, t.PTO(), nil)
	mark := t.mark()
	trig := rc.Send1RTT([]wire.Frame{&wire.RawFrame{Bytes: wire.AppendVarint(nil, unknownFrameType)}}, shortOpts{})
	cl := rc.receiveUntil(ctx, t.Settle(), mark, func(p *packet) bool { return p.closeFrame() != nil })
	if cl == nil {
		t.Inconclusive(fmt.Sprintf("The server did not close the connection within %v of a frame of unknown type 0x%x, so there was no closing state to probe.", t.Settle().Round(time.Millisecond), unknownFrameType), events(Trigger, trig)...)
	}
	// The closing state lasts three PTO from the close (RFC 9000 §10.2):
	// the burst goes out at once.
	burst := t.mark()
	start := time.Now()
	var pings []*packet
	for i := 0; i < closingBurst && time.Since(start) < 50*time.Millisecond; i++ {
		pings = append(pings, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{}))
	}
	rc.Receive(ctx, 150*time.Millisecond, nil)
	burstEnd := t.mark()
	later := 0
	for i := 0; i < 4 && ctx.Err() == nil; i++ {
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
		later++
		rc.Receive(ctx, 200*time.Millisecond, nil)
	}
	ps := t.rec.snapshot()
	var inBurst, afterBurst []*packet
	for i, p := range ps {
		if i < burst || p.sent || p.conn != rc.trace.id {
			continue
		}
		if i < burstEnd {
			inBurst = append(inBurst, p)
		} else {
			afterBurst = append(afterBurst, p)
		}
	}
	closes, other := 0, 0
	for _, p := range inBurst {
		if p.closeFrame() != nil {
			closes++
		} else {
			other++
		}
	}
	// Identical answers: the same bytes as the first closing datagram.
	var first []byte
	identical := 0
	t.rec.mu.Lock()
	for _, d := range t.rec.datagrams {
		if d.sent || d.local != rc.local || d.at.Before(cl.at) {
			continue
		}
		if first == nil {
			first = d.b
		} else if bytes.Equal(d.b, first) {
			identical++
		}
	}
	t.rec.mu.Unlock()
	t.Fact("close.closing-answers", map[string]int{"burst": len(pings), "closes-to-burst": closes, "other-to-burst": other, "later-pings": later, "answers-to-later": len(afterBurst), "identical-repeats": identical})
	v, sentence := judgeClosingRate(len(pings), closes)
	sentence += fmt.Sprintf(" Answers to %d later PINGs over the next 800 ms: %d; repeats identical to the first closing datagram: %d.", later, len(afterBurst), identical)
	evs := append(events(Trigger, trig, pings[0], pings[len(pings)-1]), events(Response, append([]*packet{cl}, lastN(inBurst, 3)...)...)...)
	if v == Warn {
		t.Warn("rate", reqClosingRate, sentence, evs...)
		return
	}
	t.Pass("rate", reqClosingRate, sentence, evs...)
}

// judgeClosingRate judges how many closing packets answered a burst of
// packets in the closing state: one for each is no limit at all.
func judgeClosingRate(burst, closes int) (Verdict, string) {
	if closes >= burst {
		return Warn, fmt.Sprintf("In the closing state the server answered each of the %d packets of a 50 ms burst with its own closing packet (%d); limit the rate, for instance by answering the 1st, 2nd, 4th, 8th … packet.", burst, closes)
	}
	return Pass, fmt.Sprintf("In the closing state the server answered a 50 ms burst of %d packets with %d closing packet(s).", burst, closes)
}

func runCloseFramePlacement(ctx context.Context, t *T) {
	// After the handshake: a transport error.
	if c, err := t.Dial(ctx, DialOptions{Label: "after-handshake"}); err == nil {
		mark := t.mark()
		c.Inject(spaceApp, &wire.RawFrame{Bytes: wire.AppendVarint(nil, unknownFrameType)})
		t.rec.wait(ctx, t.Settle(), func(ps []*packet) bool { return firstClose(received(ps, c.ID(), mark)) != nil })
	}
	// During the handshake: an Initial carrying a STREAM frame.
	rc := t.newRaw(ctx, rawOptions{Label: "during-handshake"})
	if rc.earlyFlight(ctx, t.Settle()) {
		m := t.mark()
		rc.sendInitialStream()
		rc.receiveUntil(ctx, t.Settle(), m, func(p *packet) bool { return p.closeFrame() != nil })
	}
	// An HTTP/3 error after the handshake (a second control stream): a
	// close of type 0x1d.
	if t.profile.HasALPN("h3") {
		if c, err := t.Dial(ctx, DialOptions{Label: "h3-error", ALPN: []string{"h3"}}); err == nil {
			mark := t.mark()
			settings := []byte{0x00, 0x04, 0x00}
			c.Inject(spaceApp, &wire.StreamFrame{StreamID: 2, Data: settings}, &wire.StreamFrame{StreamID: 6, Data: settings})
			t.rec.wait(ctx, t.Settle(), func(ps []*packet) bool { return firstClose(received(ps, c.ID(), mark)) != nil })
		}
	}
	closes := 0
	for _, p := range received(t.rec.snapshot(), -1, 0) {
		if p.closeFrame() != nil && p.space >= 0 {
			closes++
		}
	}
	if closes == 0 {
		t.Inconclusive("The server sent no CONNECTION_CLOSE the tester could read, so there was nothing to judge.")
	}
	sc := t.sc
	for _, c := range t.records() {
		for _, pc := range runWideChecks {
			if pc.id != sc.ID {
				continue
			}
			if sentence, ps := pc.judge(c); sentence != "" {
				v := Fail
				if pc.warn {
					v = Warn
				}
				t.Check("placement", v, sc.Requirements[pc.req], fmt.Sprintf("Connection %d (%s): %s", c.conn, c.label, sentence), events(Response, ps...)...)
			}
		}
	}
	if !t.hasChecks() {
		t.Pass("placement", reqClose1dReplaced, fmt.Sprintf("The server's %d CONNECTION_CLOSE frame(s) (after the handshake, during it, and on an HTTP/3 error where h3 is spoken) travelled in allowed packet types.", closes))
	}
}

// placementRule judges one CONNECTION_CLOSE p carries (cc) against the
// server packets of its epoch; it returns a sentence on a violation.
type placementRule func(epoch []*packet, p *packet, cc *wire.ConnectionCloseFrame) string

// placementJudge applies rule to every CONNECTION_CLOSE the server sent
// on a connection. The connection is cut into epochs at each new server
// Source Connection ID (a scenario that restarts its handshake).
func placementJudge(rule placementRule) func(c connRecord) (string, []*packet) {
	return func(c connRecord) (string, []*packet) {
		// Each close is judged against its own epoch.
		start := 0
		var scid []byte
		var pkts []*packet
		for _, p := range c.packets {
			if !p.sent && p.space >= 0 && p.ev.PacketType != "unknown" {
				pkts = append(pkts, p)
			}
		}
		for i, p := range pkts {
			if len(p.scid) > 0 && !bytes.Equal(p.scid, scid) {
				if scid != nil {
					start = i
				}
				scid = p.scid
			}
			cc := p.closeFrame()
			if cc == nil {
				continue
			}
			if s := rule(pkts[start:], p, cc); s != "" {
				return s, []*packet{p}
			}
		}
		return "", nil
	}
}

// isLongSpace reports whether a packet is an Initial or Handshake packet.
func isLongSpace(p *packet) bool { return p.space == 0 || p.space == 1 }

func placement1dInLong(_ []*packet, p *packet, cc *wire.ConnectionCloseFrame) string {
	if isLongSpace(p) && cc.Application {
		return fmt.Sprintf("the server sent a CONNECTION_CLOSE of type 0x1d (code 0x%x) in a %s packet.", cc.ErrorCode, p.ev.PacketType)
	}
	return ""
}

// converted reports whether a type-0x1c close in an Initial or Handshake
// packet stands for an application close: it carries APPLICATION_ERROR,
// or a type-0x1d close left in 1-RTT within 5 ms of it.
func converted(epoch []*packet, p *packet, cc *wire.ConnectionCloseFrame) bool {
	if !isLongSpace(p) || cc.Application {
		return false
	}
	if cc.ErrorCode == uint64(wire.ApplicationError) {
		return true
	}
	for _, q := range epoch {
		if qc := q.closeFrame(); qc != nil && qc.Application && q.space == 2 && q.at.Sub(p.at).Abs() <= 5*time.Millisecond {
			return true
		}
	}
	return false
}

func placementReason(epoch []*packet, p *packet, cc *wire.ConnectionCloseFrame) string {
	if converted(epoch, p, cc) && len(cc.Reason) > 0 {
		return fmt.Sprintf("the server's CONNECTION_CLOSE converted from an application close in a %s packet keeps the reason phrase %q; clear it.", p.ev.PacketType, cc.Reason)
	}
	return ""
}

func placementCode(epoch []*packet, p *packet, cc *wire.ConnectionCloseFrame) string {
	if converted(epoch, p, cc) && cc.ErrorCode != uint64(wire.ApplicationError) {
		return fmt.Sprintf("the server converted an application close to type 0x1c in a %s packet with %s instead of APPLICATION_ERROR.", p.ev.PacketType, wire.TransportErrorCode(cc.ErrorCode))
	}
	return ""
}

// placementAfterConfirmed: once the server sent HANDSHAKE_DONE its
// handshake is confirmed (RFC 9001 §4.1.2), so a close in an Initial or
// Handshake packet after it breaks §10.2.3.
func placementAfterConfirmed(epoch []*packet, p *packet, cc *wire.ConnectionCloseFrame) string {
	if !isLongSpace(p) {
		return ""
	}
	for _, q := range epoch {
		if q == p {
			break
		}
		if q.has(wire.FrameTypeHandshakeDone) {
			return fmt.Sprintf("the server sent CONNECTION_CLOSE in a %s packet %v after its HANDSHAKE_DONE, when the handshake was confirmed.", p.ev.PacketType, p.at.Sub(q.at).Round(time.Microsecond))
		}
	}
	return ""
}

// earlyFlight sends the ClientHello and receives the server's first
// flight without answering anything (no ACK, no Finished), until the
// client's TLS handshake is done or d passes. It reports whether the
// client holds Handshake keys, so that the server has them too.
func (rc *rawClient) earlyFlight(ctx context.Context, d time.Duration) bool {
	rc.Silent = true
	rc.sendClientHello(ctx, 1200)
	rc.Receive(ctx, d, func() bool { return rc.tlsDone || rc.peerClosed || rc.tlsErr != nil })
	return rc.seal[1] != nil && !rc.peerClosed
}

// sendInitialStream sends an Initial packet carrying an ACK of the
// server's Initial packets and a STREAM frame, which Initial packets do
// not allow (RFC 9000 §12.4, Table 3).
func (rc *rawClient) sendInitialStream() *packet {
	pkt, _ := rc.longPacket(0, []wire.Frame{rc.ackFrame(0), &wire.StreamFrame{StreamID: 0, Data: []byte("GET /\r\n"), Fin: true}}, longOpts{PadTo: 1200})
	p := rc.lastSent()
	rc.send(pkt)
	return p
}

func runCloseHandshakeBothLevels(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "stream-in-initial"})
	if !rc.earlyFlight(ctx, t.Settle()) {
		t.Inconclusive(fmt.Sprintf("The server's first flight did not give the tester Handshake keys within %v.", t.Settle().Round(time.Millisecond)))
	}
	mark := t.mark()
	trig := rc.sendInitialStream()
	both := func() bool {
		in, hs := closesBySpace(received(t.rec.snapshot(), rc.trace.id, mark))
		return in != nil && hs != nil
	}
	rc.Receive(ctx, t.Settle(), both)
	in, hs := closesBySpace(received(t.rec.snapshot(), rc.trace.id, mark))
	if in == nil && hs == nil {
		// Did the connection go on? Finish the handshake.
		rc.Silent = false
		rc.flush()
		rc.Receive(ctx, t.Settle(), func() bool { return rc.confirmed || rc.peerClosed })
		// An acknowledgment proves the packet was processed (RFC 9000
		// §13.1); a server that dropped it unread is not judged.
		if a := ackedBy(t.rec.snapshot(), rc.trace.id, 0, trig.pn); rc.confirmed && a != nil {
			t.Fail("close", reqFrameNotPermitted, "The server acknowledged an Initial packet carrying a STREAM frame and completed the handshake instead of closing with PROTOCOL_VIOLATION.", append(events(Trigger, trig), events(Response, a)...)...)
			return
		}
		if rc.confirmed {
			t.Inconclusive("The server never acknowledged the Initial packet carrying a STREAM frame and completed the handshake: it may have dropped the packet unread.", events(Trigger, trig)...)
		}
		t.Inconclusive(fmt.Sprintf("No CONNECTION_CLOSE arrived within %v of an Initial packet carrying a STREAM frame, and the handshake did not complete either.", t.Settle().Round(time.Millisecond)), events(Trigger, trig)...)
	}
	first := in
	if first == nil {
		first = hs
	}
	cc := first.closeFrame()
	if !cc.Application && cc.ErrorCode == uint64(wire.ProtocolViolation) {
		t.Pass("close", reqFrameNotPermitted, "The server closed with PROTOCOL_VIOLATION after an Initial packet carrying a STREAM frame.", append(events(Trigger, trig), events(Response, first)...)...)
	} else {
		t.Warn("close", reqMostAppropriate, fmt.Sprintf("The server closed after an Initial packet carrying a STREAM frame, but with %s instead of PROTOCOL_VIOLATION; use the specific code.", closeCode(cc)), append(events(Trigger, trig), events(Response, first)...)...)
	}
	switch {
	case in != nil && hs != nil:
		t.Pass("both-levels", reqCloseBothLevels, "Before the handshake was confirmed the server sent CONNECTION_CLOSE in both an Initial and a Handshake packet.", events(Response, in, hs)...)
	case in != nil:
		t.Warn("both-levels", reqCloseBothLevels, "The server sent CONNECTION_CLOSE only in an Initial packet, although the tester may already hold Handshake keys; send it in a Handshake packet too.", events(Response, in)...)
	default:
		t.Warn("both-levels", reqCloseBothLevels, "The server sent CONNECTION_CLOSE only in a Handshake packet, although the tester may not hold Handshake keys yet; send it in an Initial packet too.", events(Response, hs)...)
	}
}

// closesBySpace returns the first received Initial and Handshake packets
// carrying CONNECTION_CLOSE.
func closesBySpace(ps []*packet) (in, hs *packet) {
	for _, p := range ps {
		if p.closeFrame() == nil {
			continue
		}
		if p.space == 0 && in == nil {
			in = p
		}
		if p.space == 1 && hs == nil {
			hs = p
		}
	}
	return in, hs
}
