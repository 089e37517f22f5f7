package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// registerHelloWithout registers a scenario whose ClientHello lacks
// extension ext and which expects a close with TLS alert alert (the QUIC
// error 0x0100 + alert, RFC 9001 §4.8); reqs[0] is the requirement the
// close rests on.
func registerHelloWithout(id, title string, ext uint16, name string, alert uint8, reqs ...Requirement) {
	Register(&Scenario{
		ID: id, Title: title, Family: "B", Needs: []string{NeedApp}, Requirements: reqs,
		Run: func(ctx context.Context, t *T) {
			rc, mark := t.helloExchange(ctx, "no "+name, func(h *rawquic.ClientHello) error {
				if !h.Remove(ext) {
					return fmt.Errorf("the ClientHello carries no %s extension to remove", name)
				}
				return nil
			})
			t.judgeProvoked(rc.trace, true, mark, Expectation{Check: "close", Req: reqs[0],
				Codes: transportCodes(wire.CryptoError(alert)), Describe: fmt.Sprintf("a ClientHello without the %s extension", name)})
		},
	})
}

// helloExchange sends a ClientHello edited by edit in a 1200-byte Initial,
// then, once the server has answered, a 1200-byte Initial PING every PTO
// for one settle window (the provoked-error pattern of docs/conformance-model.md, Provoked errors, in
// the Initial space). It returns the raw client and the recorder mark
// before the ClientHello, for judgeProvoked.
func (t *T) helloExchange(ctx context.Context, label string, edit func(h *rawquic.ClientHello) error) (*rawClient, int) {
	var editErr error
	rc := t.newRaw(ctx, rawquic.Options{Label: label, RewriteHello: rawquic.EditClientHello(edit, &editErr)})
	rc.ClientHello(ctx)
	if editErr != nil {
		t.Errorf("rewrite the ClientHello: %v", editErr)
	}
	mark := t.mark()
	rc.SendClientHello(ctx, 1200)
	closed := func() bool {
		for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
			if p.closeFrame() != nil || p.ev.PacketType == "stateless_reset" {
				return true
			}
		}
		return false
	}
	for waited := time.Duration(0); waited < t.Settle() && ctx.Err() == nil; waited += t.PTO() {
		rc.Receive(ctx, t.PTO(), closed)
		if closed() {
			break
		}
		if rc.ServerSCID == nil {
			// Nothing from the server yet: the first flight again.
			pkt, _ := rc.LongPacket(0, []wire.Frame{&wire.CryptoFrame{Data: rc.ClientHello(ctx)}}, rawquic.LongOpts{PadTo: 1200})
			rc.Send(pkt)
			continue
		}
		pkt, _ := rc.LongPacket(0, []wire.Frame{&wire.PingFrame{}}, rawquic.LongOpts{PadTo: 1200})
		rc.Send(pkt)
	}
	return rc, mark
}

// serverHelloOf returns the server's ServerHello on the raw client's
// connection and the Initial packet that completed it.
func (t *T) serverHelloOf(rc *rawClient) (*rawquic.ServerHello, *packet) {
	for _, m := range rc.trace.serverMessages(spaceInitial) {
		if m[0] != 2 {
			continue
		}
		sh, err := rawquic.ParseServerHello(m)
		if err != nil {
			return nil, nil
		}
		var at *packet
		for _, p := range received(t.rec.snapshot(), rc.trace.id, 0) {
			if p.space == spaceInitial && p.has(wire.FrameTypeCrypto) {
				at = p
				break
			}
		}
		return sh, at
	}
	return nil, nil
}

func runTLSVersionBelow13(ctx context.Context, t *T) {
	rc, mark := t.helloExchange(ctx, "TLS 1.2 only", func(h *rawquic.ClientHello) error {
		// supported_versions (RFC 8446 §4.2.1): a 1-byte list length,
		// then TLS 1.2 alone.
		if _, ok := h.Ext(rawquic.ExtSupportedVersions); !ok {
			return errors.New("the ClientHello carries no supported_versions extension")
		}
		h.Set(rawquic.ExtSupportedVersions, []byte{2, 0x03, 0x03})
		return nil
	})
	req := t.sc.Requirements[0]
	rcv := received(t.rec.snapshot(), rc.trace.id, mark)
	sh, at := t.serverHelloOf(rc)
	if sh != nil && sh.Version() < tls.VersionTLS13 {
		t.Fail(
			"version",
			req,
			fmt.Sprintf("The server's ServerHello negotiated %s although QUIC needs TLS 1.3.", tls.VersionName(sh.Version())),
			events(Response, at)...)
		return
	}
	if firstClose(rcv) == nil {
		// The catalogue makes any reply other than a close or a
		// ServerHello selecting an old version observed.
		if sh != nil {
			t.Fact("tls.version-below-13", "ServerHello selecting "+tls.VersionName(sh.Version()))
			t.Observe(
				"version",
				fmt.Sprintf("Offered only TLS 1.2, the server answered with a ServerHello selecting %s and did not close.", tls.VersionName(sh.Version())),
				events(Response, at)...)
			return
		}
		if a := ackedLaterPing(t.rec.snapshot(), rc.trace.id, mark); a != nil {
			t.Observe(
				"version",
				"Offered only TLS 1.2, the server sent no ServerHello and no close, but kept acknowledging the tester's Initial packets.",
				events(Response, a)...)
			return
		}
	}
	// RFC 8446 §4.2.1 names protocol_version (70) for a server that
	// supports none of the offered versions.
	t.judgeProvoked(rc.trace, true, mark, Expectation{Check: "close", Req: req, Codes: transportCodes(wire.CryptoError(70)),
		Describe: "a ClientHello whose supported_versions offers only TLS 1.2"})
}

// ackedLaterPing returns a server packet that acknowledges one of the
// tester's PING packets sent on conn from index mark on.
func ackedLaterPing(ps []*packet, conn, mark int) *packet {
	for i, p := range ps {
		if i < mark || !p.sent || p.conn != conn || !p.has(wire.FrameTypePing) {
			continue
		}
		if a := ackedBy(ps, conn, p.space, p.pn); a != nil {
			return a
		}
	}
	return nil
}

// updateKeys starts a key update of the raw client (RFC 9001 §6.1): its
// next packets are sealed with the next generation under the flipped Key
// Phase bit. It returns the keys it leaves.
func (rc *rawClient) updateKeys() *protect.Keys {
	old := rc.Seal[2]
	next, err := old.Next()
	if err != nil {
		rc.t.Errorf("derive the next 1-RTT keys: %v", err)
	}
	rc.Seal[2] = next
	rc.WritePhase ^= 1
	rc.WriteGen++
	return old
}

// keyPhaseReady completes a raw handshake and waits one PTO, so that the
// server's own phase is stable (as tls-key-update-client does), and
// checks that a PING in the first phase is acknowledged.
func (t *T) keyPhaseReady(ctx context.Context) *rawClient {
	rc := t.rawHandshake(ctx)
	rc.Receive(ctx, t.PTO(), nil)
	m := t.mark()
	pg := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	if rc.receiveUntil(ctx, t.Settle(), m, acks(2, pg.pn)) == nil {
		t.Inconclusive("Before any key update, the server did not acknowledge a PING.", events(Trigger, pg)...)
	}
	return rc
}

func runKeyUpdateConsecutive(ctx context.Context, t *T) {
	rc := t.keyPhaseReady(ctx)
	mark := t.mark()
	// Two updates back to back, without reading anything in between: the
	// second leaves before the tester could have seen an acknowledgment
	// of the first.
	rc.updateKeys()
	first := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	rc.updateKeys()
	second := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	var later []*packet
	for waited := time.Duration(0); waited < t.Settle() && !rc.PeerClosed && ctx.Err() == nil; waited += t.PTO() {
		rc.Receive(ctx, t.PTO(), func() bool { return rc.PeerClosed })
		if !rc.PeerClosed {
			later = append(later, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{}))
		}
	}
	outcome, sentence, evs := judgeConsecutive(t.rec.snapshot(), rc.trace.id, mark, first, second, later)
	if outcome == "" {
		t.Inconclusive(sentence, evs...)
	}
	t.Fact("keyupdate.consecutive", outcome)
	t.Observe("consecutive", sentence, evs...)
}

// judgeConsecutive tells what the server made of two key updates in a
// row: first and second are the tester's packets of the first and the
// second new phase, later its PINGs in the second phase. An empty outcome
// means nothing came back.
func judgeConsecutive(ps []*packet, conn, mark int, first, second *packet, later []*packet) (outcome, sentence string, evs []PacketEvent) {
	trig := events(Trigger, first, second)
	if cl := firstClose(received(ps, conn, mark)); cl != nil {
		cc := cl.closeFrame()
		if !cc.Application && cc.ErrorCode == uint64(wire.KeyUpdateError) {
			return "close KEY_UPDATE_ERROR", "The server treated the second key update, sent before it had acknowledged the first, as a connection error of type KEY_UPDATE_ERROR, as RFC 9001 §6.2 allows.", append(
				trig,
				events(Response, cl)...)
		}
		return "close " + closeCode(
				cc,
			), fmt.Sprintf(
				"The server closed the connection with %s after two consecutive key updates; RFC 9001 §6.2 allows KEY_UPDATE_ERROR.",
				closeCode(cc),
			), append(
				trig,
				events(Response, cl)...)
	}
	if a := ackedBy(ps, conn, 2, second.pn); a != nil {
		return "followed both", fmt.Sprintf(
				"The server followed both key updates: it acknowledged the tester's packet of the second new phase (packet %d) in a packet with Key Phase %d.",
				second.pn,
				a.ev.KeyPhase,
			), append(
				trig,
				events(Response, a)...)
	}
	for _, pg := range later {
		if a := ackedBy(ps, conn, 2, pg.pn); a != nil {
			return "followed both", fmt.Sprintf(
					"The server dropped packet %d of the second update but acknowledged a later packet of that phase.",
					second.pn,
				), append(
					trig,
					events(Response, a)...)
		}
	}
	if a := ackedBy(ps, conn, 2, first.pn); a != nil {
		return "followed the first only", "The server acknowledged the packet of the first update but none of the second phase: it dropped the second update's packets without closing.", append(
			trig,
			events(Response, a)...)
	}
	if rcv := received(ps, conn, mark); len(rcv) > 0 {
		return "no acknowledgment", "After two consecutive key updates the server neither closed nor acknowledged any packet of either new phase.", append(
			trig,
			events(Context, lastN(rcv, 3)...)...)
	}
	return "", "Nothing came back after two consecutive key updates.", trig
}

func runKeyUpdateBogusPhase(ctx context.Context, t *T) {
	rc := t.keyPhaseReady(ctx)
	req := t.sc.Requirements[0]
	// Random packet protection keys of the same suite, under the real
	// header protection, so that the server reads the flipped Key Phase
	// bit and the packet number but cannot open the payload with any key
	// it has or could derive.
	k := rc.Seal[2]
	bogus, err := protect.NewKeys(k.Version(), k.Suite(), randomBytes(len(k.Secret())))
	if err != nil {
		t.Errorf("random 1-RTT keys: %v", err)
	}
	phase := rc.WritePhase
	mark := t.mark()
	var bad *packet
	t.discardedPacket(ctx, rc, "discarded", req, "a packet with the Key Phase bit flipped that no key can open", func() *packet {
		bad = rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{KeyPhase: true, Keys: bogus, HP: k.HeaderProtector()})
		return bad
	})
	if p := phaseSwitch(t.rec.snapshot(), rc.trace.id, mark, phase); p != nil {
		t.Fail(
			"phase",
			req,
			fmt.Sprintf(
				"After the unopenable packet with the flipped Key Phase bit, the server sent packet %d with Key Phase %d: it started a key update that never happened.",
				p.pn,
				p.ev.KeyPhase,
			),
			evidence(events(Trigger, bad), events(Response, p))...)
		return
	}
	t.Pass("phase", req, fmt.Sprintf("The server kept Key Phase %d in every packet it sent after the unopenable packet.", phase), events(Trigger, bad)...)
}

// phaseSwitch returns the first 1-RTT packet of the server on conn, from
// index mark on, whose Key Phase is not phase.
func phaseSwitch(ps []*packet, conn, mark, phase int) *packet {
	for _, p := range received(ps, conn, mark) {
		if p.space == 2 && p.ev.PacketType == "1RTT" && p.ev.KeyPhase != phase {
			return p
		}
	}
	return nil
}

func runKeyUpdateOldKeysAfterNew(ctx context.Context, t *T) {
	rc := t.keyPhaseReady(ctx)
	req := t.sc.Requirements[0]
	old := rc.updateKeys()
	m := t.mark()
	fresh := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	if rc.receiveUntil(ctx, t.Settle(), m, acks(2, fresh.pn)) == nil {
		t.Inconclusive(
			"The server did not acknowledge the tester's first packet under the new keys, so the key update never completed.",
			events(Trigger, fresh)...)
	}
	// Within one PTO of the update: a PING with a higher packet number,
	// protected with the keys of the previous phase.
	mark := t.mark()
	stale := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{KeyPhase: true, Keys: old})
	var later []*packet
	for waited := time.Duration(0); waited < t.Settle() && !rc.PeerClosed && ctx.Err() == nil; waited += t.PTO() {
		rc.Receive(ctx, t.PTO(), func() bool { return rc.PeerClosed })
		if !rc.PeerClosed {
			later = append(later, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{}))
		}
	}
	ps := t.rec.snapshot()
	if firstClose(received(ps, rc.trace.id, mark)) != nil {
		t.judgeProvoked(rc.trace, true, mark, Expectation{Check: "old-keys", Req: req, Codes: transportCodes(wire.KeyUpdateError),
			Describe: fmt.Sprintf("a packet protected with the old keys (packet %d) after packet %d used the new ones", stale.pn, fresh.pn)})
		return
	}
	v, sentence, evs := judgeOldKeys(ps, rc.trace.id, stale, later)
	switch v {
	case Fail:
		t.Fail("old-keys", req, sentence, evs...)
	case Pass:
		t.Pass("old-keys", req, sentence, evs...)
	default:
		t.Check("old-keys", Inconclusive, req, sentence, evs...)
	}
}

// judgeOldKeys judges a connection that did not close after the old-key
// packet stale: acknowledging it means the server opened it with old keys
// and went on (fail); acknowledging only the later PINGs means it dropped
// it, because its old keys were gone (pass).
func judgeOldKeys(ps []*packet, conn int, stale *packet, later []*packet) (Verdict, string, []PacketEvent) {
	if a := ackedBy(ps, conn, 2, stale.pn); a != nil {
		return Fail, fmt.Sprintf(
				"The server acknowledged packet %d, protected with the old keys after newer keys had protected lower packet numbers, and kept the connection open instead of closing with KEY_UPDATE_ERROR.",
				stale.pn,
			),
			evidence(
				events(Trigger, stale),
				events(Response, a),
			)
	}
	for _, pg := range later {
		if a := ackedBy(ps, conn, 2, pg.pn); a != nil {
			return Pass, fmt.Sprintf(
					"The server never acknowledged packet %d under the old keys but acknowledged later packets: it could not open it (its old keys were gone) and discarded it.",
					stale.pn,
				),
				evidence(
					events(Trigger, stale),
					events(Response, a),
				)
		}
	}
	return Inconclusive, "After the old-key packet the server neither closed nor acknowledged any later packet.", events(Trigger, stale)
}

// Family B, key updates the tester starts (RFC 9001 §6.2). The engine's
// ForceKeyUpdate moves the tester to the next 1-RTT keys; the probe hooks
// record the Key Phase bit of every 1-RTT packet both ways, and the ACK
// frames the server sends, so the check can see which phase the server's
// acknowledgment of a new-phase packet travelled in.

var (
	reqKURespond = rfc9001("6.2", Must, "The endpoint MUST update its send keys to the corresponding key phase in response")
	reqKUBefore  = rfc9001("6.2", Must, "Sending keys MUST be updated before sending an acknowledgment for the packet that was received with updated keys.")
)

// runKeyUpdates starts n key updates, each once the server's key phase has
// been stable for a PTO and a download under the previous phase has
// finished, downloads the large resource under each new phase, and judges
// the server's first acknowledgment of a new-phase packet and what it
// sends afterwards.
func (t *T) runKeyUpdates(ctx context.Context, n int) {
	t.judgesUnsummarised() // a packet in a new key phase and the server's ACK frames are never summarised
	log := &phaseLog{sent: map[uint64]bool{}}
	c := t.mustDial(ctx, DialOptions{Probe: log.probe()})
	defer c.Close(0, "")
	if ok, detail := t.fetchSmall(ctx, c); !ok {
		t.Inconclusive(fmt.Sprintf("Before any key update, %s.", detail))
	}
	for i := 1; i <= n; i++ {
		// Catalogue: the server's own phase must have been stable for one
		// PTO, so that an update of the server's cannot collide.
		// A repeated update also waits 3 × PTO after the previous one,
		// so that the server has discarded the old keys (RFC 9001 §6.5).
		wait := t.PTO()
		if i > 1 {
			wait = 3 * t.PTO()
		}
		if !sleep(ctx, wait) {
			t.Inconclusive("The scenario's deadline came before the key update could start.")
		}
		log.mu.Lock()
		mark := len(log.recv)
		var fromPN uint64 // tester packets from here on may carry the new keys
		for pn := range log.sent {
			fromPN = max(fromPN, pn+1)
		}
		log.mu.Unlock()
		gen := c.Stats().KeyGeneration
		if err := c.ForceKeyUpdate(); err != nil {
			t.Inconclusive(fmt.Sprintf("The tester could not start key update %d: %v.", i, err))
		}
		got, err := c.FetchLen(ctx, t.profile.Target.LargePath)
		if err != nil {
			t.Inconclusive(fmt.Sprintf("After key update %d the download of %s failed: %v.", i, t.profile.Target.LargePath, err))
		}
		// More key generations than the tester's one update: the server
		// updated its keys on its own during the download.
		serverUpdated := c.Stats().KeyGeneration > gen+1
		if serverUpdated {
			t.Fact(fmt.Sprintf("key-update.%d.server-updates", i), c.Stats().KeyGeneration-gen-1)
		}
		if verdict, msg, pn := log.judge(mark, fromPN, serverUpdated); verdict != Pass {
			evs := t.packetEvents(c, pn)
			switch verdict {
			case Fail:
				req := reqKUBefore
				if pn.afterAck {
					req = reqKURespond
				}
				t.Fail("key-update", req, fmt.Sprintf("Key update %d: %s", i, msg), evs...)
			default:
				t.Inconclusive(fmt.Sprintf("Key update %d: %s", i, msg), evs...)
			}
			return
		}
		t.Fact(fmt.Sprintf("key-update.%d.bytes", i), got)
	}
	t.Pass(
		"key-update",
		reqKURespond,
		fmt.Sprintf(
			"The server followed %d key update(s) of the tester: each acknowledgment of a new-phase packet, and every packet after it, carried the new key phase, and the large resource arrived under each.",
			n,
		),
	)
}

// packetEvents returns the recorded event of the server's packet j, if any.
func (t *T) packetEvents(c *Conn, j judgedPacket) []PacketEvent {
	if !j.ok {
		return nil
	}
	for _, p := range received(t.rec.snapshot(), c.ID(), 0) {
		if p.space == spaceApp && p.pn == j.pn {
			return events(Response, p)
		}
	}
	return nil
}

// Family B, encryption levels (RFC 9001 §4.1.3, §4.9.1, §5.7): what a
// server does with 1-RTT packets before the handshake is complete, with
// Initial packets once it has processed a Handshake packet, and with
// CRYPTO data at a level TLS has left. The raw client holds its Finished
// back (rawClient.BeforeFinished) or stays silent after the server's
// first flight (earlyFlight) to make room for the probe.

// tlsFinished is the Finished handshake message type (RFC 8446 §4).
const tlsFinished = 20

// finishedHold is how long the tester holds its Finished back: 2 × RTT as
// the catalogue says, but at least 200 ms, since on loopback 2 × RTT is
// too short for a server's timers or scheduler to show anything (as in
// hs-handshake-done-not-early).
func (t *T) finishedHold() time.Duration { return max(2*t.RTT(), 200*time.Millisecond) }

func runEarly1RTTNotProcessed(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "request before Finished"})
	var (
		req   *rawquic.Request
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
		t.Inconclusive(
			fmt.Sprintf("The handshake did not reach the tester's Finished: %v.", err),
			events(Context, lastN(received(ps, rc.trace.id, 0), 3)...)...)
	}
	reqReq := t.sc.Requirements[0]
	if p, what := earlyProcessed(ps, rc.trace.id, fin.at, early, req.ID); p != nil {
		t.Fail(
			"not-processed",
			reqReq,
			fmt.Sprintf(
				"While the tester held its Finished back (%v), the server %s: it processed a 1-RTT packet before the handshake was complete.",
				hold.Round(time.Millisecond),
				what,
			),
			evidence(events(Response, p), events(Context, fin))...)
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
	t.Pass(
		"not-processed",
		reqReq,
		fmt.Sprintf(
			"While the tester held its Finished back for %v, the server neither acknowledged nor answered the request the tester had sent in a 1-RTT packet.",
			hold.Round(time.Millisecond),
		),
		events(Context, fin)...)
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
	rc := t.newRaw(ctx, rawquic.Options{Label: "Initial after Handshake"})
	var hsPing, ack, initPing *packet
	rc.BeforeFinished = func() {
		// A Handshake packet the server must acknowledge, sent before the
		// Finished so that the server is still mid-handshake.
		m := t.mark()
		pkt, pn := rc.LongPacket(1, []wire.Frame{rc.AckFrame(1), &wire.PingFrame{}}, rawquic.LongOpts{})
		hsPing = rc.LastSent()
		rc.Send(pkt)
		if ack = rc.receiveUntil(ctx, t.Settle(), m, acks(1, pn)); ack == nil {
			return
		}
		// Catalogue: one more Initial packet, a padded PING.
		pkt, _ = rc.LongPacket(0, []wire.Frame{&wire.PingFrame{}}, rawquic.LongOpts{PadTo: 1200})
		initPing = rc.LastSent()
		rc.Send(pkt)
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
			t.Fail(
				"discarded",
				t.sc.Requirements[0],
				"The server acknowledged the tester's Initial PING, sent after the server had acknowledged a Handshake packet of the tester, so it kept its Initial keys.",
				evidence(events(Context, hsPing, ack), events(Trigger, initPing), events(Response, a))...)
			return
		}
	}
	if p := initialAfter(ps, rc.trace.id, ack.at.Add(t.RTT())); p != nil {
		t.Fail(
			"discarded",
			t.sc.Requirements[1],
			fmt.Sprintf(
				"The server sent an Initial packet %v after it had acknowledged the tester's Handshake packet, so it kept its Initial keys.",
				p.at.Sub(ack.at).Round(time.Microsecond),
			),
			evidence(events(Context, hsPing, ack, initPing), events(Response, p))...)
		return
	}
	t.Pass(
		"discarded",
		t.sc.Requirements[1],
		"After acknowledging the tester's Handshake packet the server sent no Initial packet, and ignored the tester's later Initial PING.",
		events(Context, hsPing, ack, initPing)...)
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
	rc := t.newRaw(ctx, rawquic.Options{Label: "Initial CRYPTO after Handshake flight"})
	if !rc.earlyFlight(ctx, t.Settle()) {
		t.Inconclusive(fmt.Sprintf("The server's first flight did not give the tester Handshake keys within %v.", t.Settle().Round(time.Millisecond)))
	}
	// The server has sent its Handshake flight, so for it the Initial
	// level is a previous one (docs/conformance-model.md, Ambiguities note 9). Bytes past the end
	// of the ClientHello: the header of a Finished message and part of
	// its body.
	mark := t.mark()
	extra := append([]byte{tlsFinished, 0, 0, 32}, randomBytes(16)...)
	pkt, _ := rc.LongPacket(0, []wire.Frame{rc.AckFrame(0), &wire.CryptoFrame{Offset: rc.CryptoOff[0], Data: extra}}, rawquic.LongOpts{PadTo: 1200})
	rc.Send(pkt)
	done := t.finishAfterOffence(ctx, rc, mark)
	t.judgeProvoked(rc.trace, done, mark, Expectation{Check: "close", Req: t.sc.Requirements[1], Codes: transportCodes(wire.ProtocolViolation),
		Describe: "Initial CRYPTO data past the end of the ClientHello, sent after the server's Handshake flight"})
}

// finishAfterOffence waits one settle window for a close after a
// handshake-time offence; without one, it lets the raw client finish the
// handshake and sends a 1-RTT PING every PTO for one more settle window
// (the provoked-error pattern of docs/conformance-model.md, Provoked errors). It reports whether the
// handshake completed.
func (t *T) finishAfterOffence(ctx context.Context, rc *rawClient, mark int) bool {
	closed := func() bool { return firstClose(received(t.rec.snapshot(), rc.trace.id, mark)) != nil }
	rc.Receive(ctx, t.Settle(), closed)
	if closed() {
		return rc.Confirmed
	}
	rc.Silent = false
	rc.Flush()
	rc.Receive(ctx, t.Settle(), func() bool { return rc.Confirmed || closed() })
	for waited := time.Duration(0); waited < t.Settle() && rc.Confirmed && !closed() && ctx.Err() == nil; waited += t.PTO() {
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
		rc.Receive(ctx, t.PTO(), closed)
	}
	return rc.Confirmed
}

func runTrailingCryptoData(ctx context.Context, t *T) {
	// The first bytes of a further handshake message: the type and two of
	// the three length bytes of a Finished.
	trailing := []byte{tlsFinished, 0, 0}
	rc := t.newRaw(ctx, rawquic.Options{Label: "ClientHello and trailing bytes", RewriteHello: func(ch []byte) []byte {
		return append(ch, trailing...)
	}})
	rc.ClientHello(ctx)
	mark := t.mark()
	rc.Silent = true
	rc.SendClientHello(ctx, 1200)
	req := t.sc.Requirements[0]
	done := t.finishAfterOffence(ctx, rc, mark)
	if cl := firstClose(received(t.rec.snapshot(), rc.trace.id, mark)); cl != nil {
		cc := cl.closeFrame()
		evs := evidence(events(Trigger, rc.firstSentAfter(mark)), events(Response, cl))
		if trailingCloseAccepted(cc) {
			t.Pass(
				"close",
				req,
				fmt.Sprintf("The server closed the connection with %s after a ClientHello followed by the start of another handshake message.", closeCode(cc)),
				evs...)
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

func runTLSResumption(ctx context.Context, t *T) {
	r := t.ticket(ctx, false, DialOptions{})
	c := t.mustDial(ctx, DialOptions{Label: "resumed", Config: func(cfg *quic.Config) { cfg.TLSConfig.ClientSessionCache = r.cache }})
	full := hasMessage(c.trace.serverMessages(1), tlsCertificate)
	t.Fact("tls.resumed", !full)
	if full {
		t.Observe("resumed", "The server answered the offered ticket with a full handshake (it sent a Certificate message).")
		return
	}
	t.Pass(
		"resumed",
		t.sc.Requirements[0],
		"Offered the ticket of the first connection, the server resumed the session: its Handshake flight carries no Certificate message.",
	)
}

func runTLSTicketMaxEarlyData(ctx context.Context, t *T) {
	r := t.ticket(ctx, true, DialOptions{})
	req := t.sc.Requirements[0]
	for _, m := range r.tickets {
		if v, ok := ticketEarlyData(m); ok && v != 0xffffffff {
			t.Fail("max-early-data", req, fmt.Sprintf("A NewSessionTicket carries early_data with max_early_data_size 0x%x.", v))
			return
		}
	}
	t.Pass(
		"max-early-data",
		req,
		fmt.Sprintf("Every early_data extension in the server's %d NewSessionTicket messages has max_early_data_size 0xffffffff.", len(r.tickets)),
	)
}

func runTLS0RTTAccepted(ctx context.Context, t *T) {
	r := t.ticket(ctx, true, DialOptions{})
	var body []byte
	var ferr error
	done := make(chan struct{})
	// The PING leaves in the first 0-RTT packet however fast the
	// handshake completes; the request may come too late for 0-RTT on
	// loopback.
	c, acc := t.early(ctx, r, "0-RTT", nil, []wire.Frame{&wire.PingFrame{}}, func(c *Conn) {
		go func() {
			defer close(done)
			body, ferr = c.Fetch(ctx, t.profile.SmallPath)
		}()
	})
	<-done
	t.rec.wait(ctx, t.PTO(), nil)
	ps := t.rec.snapshot()
	early, retried := afterRetry(ps, c.ID(), sent0RTT(ps, c.ID()))
	if len(early) == 0 && retried {
		t.Inconclusive(
			"The server answered with a Retry, which keeps no state, so the tester's 0-RTT packets before it were never processed, and the tester sent none after it.",
		)
	}
	if len(early) == 0 {
		t.Inconclusive("The tester sent no 0-RTT packet, although the ticket allows early data.")
	}
	if !acc {
		t.Observe("accepted", fmt.Sprintf("The server rejected the early data of %d 0-RTT packets (no early_data in EncryptedExtensions).", len(early)))
		return
	}
	for _, p := range received(ps, c.ID(), 0) {
		if p.ev.PacketType == "0RTT" {
			t.Fail("no-0rtt-from-server", t.sc.Requirements[1], "The server sent a packet with 0-RTT protection.", events(Response, p)...)
			return
		}
	}
	t.Pass("no-0rtt-from-server", t.sc.Requirements[1], "The server sent no 0-RTT packet.")
	unacked := 0
	for _, p := range early {
		if ackedBy(ps, c.ID(), 2, p.pn) == nil {
			unacked++
		}
	}
	if unacked == len(early) {
		t.Fail(
			"ack-in-1rtt",
			t.sc.Requirements[0],
			fmt.Sprintf("The server accepted early data but acknowledged none of the tester's %d 0-RTT packets in 1-RTT packets.", len(early)),
			events(Trigger, early...)...)
		return
	}
	detail := "the request was answered"
	if ferr != nil {
		detail = fmt.Sprintf("the request failed: %v", ferr)
	}
	t.Pass(
		"ack-in-1rtt",
		t.sc.Requirements[0],
		fmt.Sprintf(
			"The server accepted early data and acknowledged %d of the tester's %d 0-RTT packets in 1-RTT packets; %s (%d bytes).",
			len(early)-unacked,
			len(early),
			detail,
			len(body),
		),
	)
}

func runTLS0RTTTPNotReduced(ctx context.Context, t *T) {
	old, cur := t.earlyTP(ctx)
	type lim struct {
		name     string
		old, cur uint64
	}
	ls := []lim{
		{"initial_max_data", old.InitialMaxData, cur.InitialMaxData},
		{"initial_max_stream_data_bidi_local", old.InitialMaxStreamDataBidiLocal, cur.InitialMaxStreamDataBidiLocal},
		{"initial_max_stream_data_bidi_remote", old.InitialMaxStreamDataBidiRemote, cur.InitialMaxStreamDataBidiRemote},
		{"initial_max_stream_data_uni", old.InitialMaxStreamDataUni, cur.InitialMaxStreamDataUni},
		{"initial_max_streams_bidi", old.InitialMaxStreamsBidi, cur.InitialMaxStreamsBidi},
		{"initial_max_streams_uni", old.InitialMaxStreamsUni, cur.InitialMaxStreamsUni},
		{"active_connection_id_limit", old.ActiveConnectionIDLimit, cur.ActiveConnectionIDLimit},
	}
	req := t.sc.Requirements[0]
	for _, l := range ls {
		if l.cur < l.old {
			t.Fail(
				"limits",
				req,
				fmt.Sprintf("With early data accepted, the server's %s fell from %d (remembered with the ticket) to %d.", l.name, l.old, l.cur),
			)
			return
		}
	}
	t.Pass(
		"limits",
		req,
		"With early data accepted, none of the server's flow-control, stream and connection ID limits is smaller than on the connection that issued the ticket.",
	)
}

func runTLS0RTTLimitViolation(ctx context.Context, t *T) {
	t.provoke0RTT(ctx, func(r *resumption) (wire.Frame, Expectation) {
		if r.tp == nil {
			t.Inconclusive("The server's transport parameters could not be read.")
		}
		lim := r.tp.InitialMaxStreamDataBidiRemote
		return &wire.StreamFrame{StreamID: 0, Offset: lim, Data: []byte("x")}, Expectation{Check: "close", Req: t.sc.Requirements[0],
			Codes: transportCodes(wire.FlowControlError), GoesOnWarns: true,
			Describe: fmt.Sprintf("a 0-RTT STREAM frame ending at offset %d, one byte beyond the remembered initial_max_stream_data_bidi_remote", lim+1)}
	})
}

// helloRetryRandom is the ServerHello.random that marks a
// HelloRetryRequest (RFC 8446 §4.1.3: SHA-256 of "HelloRetryRequest").
var helloRetryRandom = []byte{
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
}

const tlsServerHello = 2

// isHelloRetryRequest reports whether a TLS handshake message is a
// ServerHello carrying the HelloRetryRequest random.
func isHelloRetryRequest(m []byte) bool {
	// type(1) length(3) legacy_version(2) random(32)
	return len(m) >= 38 && m[0] == tlsServerHello && bytes.Equal(m[6:38], helloRetryRandom)
}

// helloRetryInInitial returns the server's Initial CRYPTO messages of a
// connection and whether the first ServerHello was a HelloRetryRequest.
func helloRetryInInitial(c *connTrace) (hrr bool, serverHellos int) {
	c.r.mu.Lock()
	msgs := tlsMessages(append([]byte(nil), c.cryptoIn[0].Contiguous()...))
	c.r.mu.Unlock()
	for _, m := range msgs {
		if m[0] == tlsServerHello {
			serverHellos++
			if serverHellos == 1 && isHelloRetryRequest(m) {
				hrr = true
			}
		}
	}
	return hrr, serverHellos
}

func runTLSHelloRetryRequest(ctx context.Context, t *T) {
	// The catalogue asks for supported_groups secp384r1, x25519,
	// secp256r1 with a key share for secp384r1 only. crypto/tls cannot send
	// that: it ignores the order of CurvePreferences and sends a key share
	// for the first group of its own fixed order (hybrids, then X25519,
	// P-256, P-384), plus the hybrid's classical share when that group is
	// listed. The nearest it can send is a key share for the rarely
	// preferred P-384/ML-KEM-1024 hybrid alone (P-384 left out, so no
	// fallback share), with X25519 and P-256 listed: a server that does not
	// know the hybrid, or prefers a listed group, must ask again.
	c, err := t.Dial(ctx, DialOptions{Label: "SecP384r1MLKEM1024 key share", Config: func(cfg *quic.Config) {
		cfg.TLSConfig.CurvePreferences = []tls.CurveID{tls.SecP384r1MLKEM1024, tls.X25519, tls.CurveP256}
	}})
	hrr, shs := helloRetryInInitial(c.trace)
	t.Fact("tls.hrr", hrr)
	req := t.sc.Requirements[0]
	if err != nil {
		if hrr {
			t.Inconclusive(fmt.Sprintf("The server sent HelloRetryRequest in an Initial packet, but the handshake on the second ClientHello failed: %v.", err),
				events(Context, lastN(received(t.rec.snapshot(), c.ID(), 0), 3)...)...)
		}
		t.dialFailure(c, err)
	}
	group := c.ConnectionState().CurveID
	t.Fact("tls.group", group.String())
	if !hrr {
		t.Observe(
			"hrr",
			fmt.Sprintf(
				"Offered a key share for SecP384r1MLKEM1024 only (X25519 and P-256 listed), the server accepted it without HelloRetryRequest (group %s).",
				group,
			),
		)
		return
	}
	t.Pass(
		"hrr",
		req,
		fmt.Sprintf(
			"The server answered a SecP384r1MLKEM1024-only key share with HelloRetryRequest in an Initial packet, and the handshake completed on the second ClientHello (group %s, %d ServerHello messages).",
			group,
			shs,
		),
	)
}

// earlyData reports whether the kept ticket allows early data.
func (c *ticketCache) earlyData() (have, early bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil {
		return false, false
	}
	_, st, err := c.state.ResumptionState()
	return true, err == nil && st != nil && st.EarlyData
}

// rawTicket runs a raw connection with ALPN alpn and waits for a session
// ticket. It ends the scenario as unsupported when none comes, or when it
// does not allow early data.
func (t *T) rawTicket(ctx context.Context, alpn string) *ticketCache {
	cache := &ticketCache{}
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "ticket (" + alpn + ")", ALPN: []string{alpn}, Sessions: cache}, nil)
	rc.Receive(ctx, t.Settle(), func() bool { have, _ := cache.earlyData(); return have })
	have, early := cache.earlyData()
	if !have {
		t.Unsupported(fmt.Sprintf("The server sent no usable session ticket within %v of the handshake (needs resume).", t.Settle()))
	}
	if !early {
		t.Fact("tls.early-data", "tickets do not allow early data")
		t.Unsupported("The server's session ticket does not allow early data (needs 0rtt).")
	}
	return cache
}

// early0RTT is one resumed raw connection that sent 0-RTT packets.
type early0RTT struct {
	rc    *rawClient
	sent  []*packet // the tester's 0-RTT packets
	req   *rawquic.Request
	err   error
	label string
}

// dialEarly resumes with cache, offering alpns, and sends with the
// ClientHello a 0-RTT packet carrying a PING and a request for the small
// resource in protocol reqALPN.
func (t *T) dialEarly(ctx context.Context, label string, cache *ticketCache, alpns []string, reqALPN string) *early0RTT {
	e := &early0RTT{label: label}
	rc := t.newRaw(ctx, rawquic.Options{Label: label, ALPN: alpns, Sessions: cache})
	e.rc = rc
	rc.FirstFlight = func() {
		rc.SendClientHello(ctx, 1200)
		if rc.Seal0RTT == nil {
			return
		}
		req, r := rc.inlineRequest(reqALPN, t.profile.SmallPath)
		e.req = r
		frames := append([]wire.Frame{&wire.PingFrame{}}, req...)
		pkt, _ := rc.LongPacket(2, frames, rawquic.LongOpts{Type: wire.PacketType0RTT, Keys: rc.Seal0RTT})
		rc.Send(pkt)
		e.sent = append(e.sent, rc.LastSent())
	}
	e.err = rc.Handshake(ctx, t.Settle()+time.Second)
	return e
}

// rejected0RTT is what a server did with the 0-RTT packets of a
// connection whose early data it rejected.
type rejected0RTT struct {
	acked    *packet // a server packet acknowledging a 0-RTT packet
	answered bool    // data arrived on the 0-RTT request's stream
}

func judgeRejected0RTT(ps []*packet, conn int, sent []*packet, answered bool) rejected0RTT {
	r := rejected0RTT{answered: answered}
	for _, p := range sent {
		if a := ackedBy(ps, conn, 2, p.pn); a != nil {
			r.acked = a
			break
		}
	}
	return r
}

func runTLS0RTTRejectedNotProcessed(ctx context.Context, t *T) {
	// Ways to draw a rejection, in order: a ticket issued under one ALPN
	// offered with the other one first (RFC 8446 §4.2.10: early data is
	// accepted only with the ticket's ALPN), both ways round, then the
	// same ticket replayed twice.
	type attempt struct {
		ticketALPN string
		offer      []string
	}
	var attempts []attempt
	if t.profile.HasALPN(h3.ALPNHQInterop) && t.profile.HasALPN(h3.ALPNH3) {
		attempts = append(attempts, attempt{h3.ALPNH3, []string{h3.ALPNHQInterop, h3.ALPNH3}}, attempt{h3.ALPNHQInterop, []string{h3.ALPNH3, h3.ALPNHQInterop}})
	}
	var rej *early0RTT
	offered := 0
	tickets := map[string]*ticketCache{}
	for _, a := range attempts {
		cache := t.rawTicket(ctx, a.ticketALPN)
		tickets[a.ticketALPN] = cache
		e := t.dialEarly(ctx, fmt.Sprintf("ticket %s, offering %v", a.ticketALPN, a.offer), cache, a.offer, a.ticketALPN)
		offered += len(e.sent)
		if len(e.sent) > 0 && e.rc.EarlyRejected {
			rej = e
			break
		}
	}
	if rej == nil {
		alpn := t.alpn()
		cache := tickets[alpn]
		if cache == nil {
			cache = t.rawTicket(ctx, alpn)
		}
		for i := 0; i < 2 && rej == nil && ctx.Err() == nil; i++ {
			e := t.dialEarly(ctx, fmt.Sprintf("ticket replay %d", i+1), cache, []string{alpn}, alpn)
			offered += len(e.sent)
			if len(e.sent) > 0 && e.rc.EarlyRejected {
				rej = e
			}
		}
	}
	if rej == nil && offered == 0 {
		t.Inconclusive(
			"The tester's ClientHellos offered no early data (crypto/tls offers it only with the ticket's ALPN and cipher suite), so it sent no 0-RTT packet.",
		)
	}
	if rej == nil {
		t.Fact("tls.early-data", "accepted on every attempt")
		t.Inconclusive("The server accepted early data on every attempt (a ticket under the other ALPN, a replayed ticket), so no rejection could be provoked.")
	}
	t.Fact("tls.early-data", "rejected ("+rej.label+")")
	rc := rej.rc
	if rej.err == nil {
		// A 1-RTT PING draws an ACK frame in the application space, which
		// 0-RTT packets share: it must not name them.
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	}
	rc.Receive(ctx, t.Settle(), nil)
	answered := rej.req != nil && rc.Stream(rej.req.ID) != nil
	r := judgeRejected0RTT(t.rec.snapshot(), rc.trace.id, rej.sent, answered)
	req := t.sc.Requirements[0]
	trig := events(Trigger, rej.sent...)
	switch {
	case r.acked != nil:
		t.Fail(
			"not-processed",
			req,
			fmt.Sprintf("The server rejected early data (%s) but acknowledged the tester's 0-RTT packet.", rej.label),
			append(trig, events(Response, r.acked)...)...)
	case r.answered:
		t.Fail(
			"not-processed",
			req,
			fmt.Sprintf("The server rejected early data (%s) but answered the request sent only in a 0-RTT packet.", rej.label),
			trig...)
	case rej.err != nil:
		t.Inconclusive(fmt.Sprintf("The server rejected early data (%s), but the handshake did not complete: %v.", rej.label, rej.err), trig...)
	default:
		t.Pass(
			"not-processed",
			req,
			fmt.Sprintf(
				"The server rejected early data (%s) and neither acknowledged the tester's %d 0-RTT packet(s) nor answered their request within %v.",
				rej.label,
				len(rej.sent),
				t.Settle().Round(time.Millisecond),
			),
			trig...)
	}
}

func runTLS0RTTKeysDiscarded(ctx context.Context, t *T) {
	alpn := t.alpn()
	var e *early0RTT
	// Some servers (GnuTLS behind ngtcp2) reject early data now and then:
	// a second try, with a fresh ticket.
	for i := 0; i < 2 && ctx.Err() == nil; i++ {
		cache := t.rawTicket(ctx, alpn)
		e = t.dialEarly(ctx, fmt.Sprintf("0-RTT (try %d)", i+1), cache, []string{alpn}, alpn)
		if len(e.sent) > 0 && !e.rc.EarlyRejected && e.err == nil {
			break
		}
	}
	rc := e.rc
	switch {
	case len(e.sent) == 0:
		t.Inconclusive("The tester's ClientHello offered no early data, so it sent no 0-RTT packet.")
	case rc.EarlyRejected:
		t.Inconclusive("The server rejected early data, so it never used 0-RTT keys.")
	case e.err != nil:
		t.Inconclusive(fmt.Sprintf("The resumed handshake did not complete: %v.", e.err))
	}
	// The tester's first 1-RTT packet (an ACK or the PING below) marks the
	// start of the server's 3 × PTO; the late 0-RTT packet leaves 4 × PTO
	// after it.
	first := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	for _, p := range t.rec.snapshot() {
		if p.sent && p.conn == rc.trace.id && p.ev.PacketType == "1RTT" {
			first = p
			break
		}
	}
	wait := 4 * t.PTO()
	rc.Receive(ctx, time.Until(first.at.Add(wait)), nil)
	pkt, late := rc.LongPacket(2, []wire.Frame{&wire.PingFrame{}}, rawquic.LongOpts{Type: wire.PacketType0RTT, Keys: rc.Seal0RTT})
	rc.Send(pkt)
	latePkt := rc.LastSent()
	after := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	rc.Receive(ctx, t.Settle(), func() bool { return ackedBy(t.rec.snapshot(), rc.trace.id, 2, after.pn) != nil })
	rc.Receive(ctx, t.PTO(), nil)
	ps := t.rec.snapshot()
	req := t.sc.Requirements[0]
	trig := evidence(events(Context, first), events(Trigger, latePkt))
	if a := ackedBy(ps, rc.trace.id, 2, late); a != nil {
		t.Warn(
			"keys-discarded",
			req,
			fmt.Sprintf(
				"The server acknowledged a 0-RTT packet sent %v after the tester's first 1-RTT packet (4 × PTO, PTO %v): it still held 0-RTT keys past the recommended 3 × PTO.",
				latePkt.at.Sub(first.at).Round(time.Millisecond),
				t.PTO().Round(time.Millisecond),
			),
			append(trig, events(Response, a)...)...)
		return
	}
	if cc := firstClose(received(ps, rc.trace.id, 0)); cc != nil && ackedBy(ps, rc.trace.id, 2, after.pn) == nil {
		// RFC 9000 §17.2.3: "A client MUST NOT send 0-RTT packets once it
		// starts processing 1-RTT packets from the server." The late
		// packet breaks that on purpose, so a close is a fair answer; but
		// a close that names the packet shows the server could still read
		// it, so neither verdict fits.
		t.Fact("tls.late-0rtt", "connection closed")
		t.Observe(
			"keys-discarded",
			fmt.Sprintf(
				"The server did not acknowledge the 0-RTT packet sent %v after the tester's first 1-RTT packet, but closed the connection on it (%s, %q), which §17.2.3 allows for a client that sends 0-RTT that late.",
				latePkt.at.Sub(first.at).Round(time.Millisecond),
				closeCode(cc.closeFrame()),
				cc.closeFrame().Reason,
			),
			append(trig, events(Response, cc)...)...)
		return
	}
	if ackedBy(ps, rc.trace.id, 2, after.pn) == nil {
		t.Inconclusive(
			"The server acknowledged neither the late 0-RTT packet nor the 1-RTT PING after it.",
			append(trig, events(Context, lastN(received(ps, rc.trace.id, 0), 4)...)...)...)
	}
	t.Pass(
		"keys-discarded",
		req,
		fmt.Sprintf(
			"The server did not acknowledge a 0-RTT packet sent %v after the tester's first 1-RTT packet, but acknowledged the 1-RTT PING after it.",
			latePkt.at.Sub(first.at).Round(time.Millisecond),
		),
		trig...)
}

// Family B, key updates the server starts (RFC 9001 §6.1). The tester
// downloads the large resource again and again and watches the Key Phase
// bit of the server's 1-RTT packets. From the server's first update on it
// acknowledges nothing (Probe.NoKeyUpdateAck), so that a second update
// within the settle window that follows is one the server started without
// an acknowledgment of a packet of its current phase.
//
// The catalogue downloads for up to 60 s. Servers update after tens of
// thousands of packets or not at all, and the whole suite against one
// server must stay under a minute, so the tester downloads for at most
// serverKUWindow; a server that has not updated by then is observed, as
// the catalogue has it for one that never updates.
//
// The §6.4 rule (no older keys on higher packet numbers) is cited but
// seldom judged here: the engine cannot open such a packet (it tries the
// next keys for it) and drops it unseen. What is seen is a packet of the
// first phase with a higher number that the engine opened as the next
// generation, which counts as a second update.

// serverKUWindow bounds the downloads of tls-server-key-update.
const serverKUWindow = 6 * time.Second

func (l *serverPhases) onReceived(pi quic.PacketInfo) {
	if pi.Type != wire.PacketType1RTT {
		return
	}
	l.mu.Lock()
	l.recv = append(l.recv, phaseSeen{pn: pi.PacketNumber, phase: pi.KeyPhase, at: time.Now()})
	l.mu.Unlock()
}

// serverUpdates is what the Key Phase bits show: the packets that opened
// each new phase, in packet-number order of arrival. An update is the
// first packet whose phase differs from the phase of every lower-numbered
// packet before it; a lower-numbered packet of the previous phase that
// arrives late is reordering, not an update.
func serverUpdates(seen []phaseSeen) []phaseSeen {
	var ups []phaseSeen
	var cur bool
	var top uint64 // highest packet number of the current phase
	started := false
	for _, s := range seen {
		if !started {
			cur, top, started = s.phase, s.pn, true
			continue
		}
		if s.phase == cur {
			top = max(top, s.pn)
			continue
		}
		if s.pn > top {
			ups = append(ups, s)
			cur, top = s.phase, s.pn
		}
	}
	return ups
}

// judgeServerKeyUpdate judges the server's updates: none before the
// tester's Finished left (the server cannot have confirmed the handshake
// before it has the Finished), and no second one, since the tester
// acknowledged nothing from the first on. It returns the requirement
// index a fail rests on, or -1.
func judgeServerKeyUpdate(ups []phaseSeen, finAt time.Time) (Verdict, int, string) {
	if len(ups) == 0 {
		return Observed, -1, ""
	}
	if ups[0].at.Before(finAt) {
		return Fail, 0, fmt.Sprintf(
			"The server's packet %d carried a new key phase and reached the tester before the tester had even sent its Finished: the server started a key update before it could have confirmed the handshake.",
			ups[0].pn,
		)
	}
	if len(ups) > 1 {
		return Fail, 1, fmt.Sprintf(
			"The server started a key update with packet %d and another with packet %d %v later, although the tester had acknowledged no packet of the first new phase.",
			ups[0].pn,
			ups[1].pn,
			ups[1].at.Sub(ups[0].at).Round(time.Millisecond),
		)
	}
	return Pass, -1, fmt.Sprintf(
		"The server started one key update (packet %d) after the handshake and no second one while the tester withheld acknowledgments of the new phase.",
		ups[0].pn,
	)
}

func runServerKeyUpdate(ctx context.Context, t *T) {
	// The verdict rests on log, which sees every 1-RTT packet, not on the
	// record, which summarises a long download.
	t.ownEvidence()
	log := &serverPhases{}
	c := t.mustDial(ctx, DialOptions{Probe: quic.Probe{NoKeyUpdateAck: true, OnPacketReceived: log.onReceived}})
	defer c.Close(0, "")
	updated := func([]*packet) bool { return len(serverUpdates(log.snapshot())) > 0 }
	fctx, cancel := context.WithTimeout(ctx, serverKUWindow)
	defer cancel()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n := 0
		for fctx.Err() == nil {
			if _, err := c.Fetch(fctx, t.profile.Target.LargePath); err != nil {
				done <- result{n, err}
				return
			}
			n++
		}
		done <- result{n, nil}
	}()
	t.rec.wait(fctx, serverKUWindow, updated)
	first := updated(nil)
	if first {
		// Phase 2: the tester acknowledges nothing of the new phase; a
		// second update within one settle window is a violation.
		t.rec.wait(ctx, t.Settle(), func([]*packet) bool { return len(serverUpdates(log.snapshot())) > 1 })
	}
	cancel()
	res := <-done
	seen := log.snapshot()
	ups := serverUpdates(seen)
	var finAt time.Time
	if fin := finishedSent(t.rec.snapshot(), c.ID()); fin != nil {
		finAt = fin.at
	}
	if !first && res.n == 0 && res.err != nil && fctx.Err() == nil {
		t.Inconclusive(fmt.Sprintf("The download of %s failed before any key update of the server: %v.", t.profile.Target.LargePath, res.err))
	}
	v, idx, sentence := judgeServerKeyUpdate(ups, finAt)
	evs := t.phaseEvidence(c, ups)
	switch v {
	case Observed:
		t.Fact("keyupdate.server-cadence", fmt.Sprintf("no update in %d 1-RTT packets (%d downloads in %v)", len(seen), res.n, serverKUWindow))
		t.Observe(
			"server-update",
			fmt.Sprintf(
				"The server did not start a key update within %v of downloads (%d 1-RTT packets, %d complete downloads of %s).",
				serverKUWindow,
				len(seen),
				res.n,
				t.profile.Target.LargePath,
			),
		)
	case Fail:
		t.Fail("server-update", t.sc.Requirements[idx], sentence, evs...)
	default:
		t.Fact("keyupdate.server-cadence", fmt.Sprintf("first update at packet %d", ups[0].pn))
		t.Pass("server-update", t.sc.Requirements[1], sentence, evs...)
	}
}

// phaseEvidence returns the recorded events of the server packets that
// opened new phases.
func (t *T) phaseEvidence(c *Conn, ups []phaseSeen) []PacketEvent {
	var evs []PacketEvent
	for _, u := range ups {
		evs = append(evs, t.packetEvents(c, judgedPacket{pn: u.pn, ok: true})...)
	}
	return evs
}

// reqAEADAny is RFC 9001 §5.3's statement that any TLS 1.3 suite but CCM_8
// may protect QUIC packets.
var reqAEADAny = rfc9001("5.3", Descriptive, "QUIC can use any of the cipher suites defined in [TLS13] with the exception of TLS_AES_128_CCM_8_SHA256.")

// serverHelloSuite finds the cipher suite the server's ServerHello selected
// on connection c, from the server's Initial CRYPTO stream (RFC 8446 §4.1.3:
// legacy_version, random, legacy_session_id_echo, cipher_suite).
func (t *T) serverHelloSuite(c *Conn) (suite uint16, at *packet, ok bool) {
	for _, p := range received(t.rec.snapshot(), c.trace.id, 0) {
		if p.space == spaceInitial {
			at = p
		}
	}
	for _, m := range c.trace.serverMessages(spaceInitial) {
		if m[0] != 2 { // server_hello
			continue
		}
		b := m[4:]
		if len(b) < 2+32+1 {
			return 0, at, false
		}
		n := int(b[34])
		if len(b) < 35+n+2 {
			return 0, at, false
		}
		return uint16(b[35+n])<<8 | uint16(b[36+n]), at, true
	}
	return 0, at, false
}

func (t *T) runOnlySuite(ctx context.Context, suite uint16, name string) {
	req := t.sc.Requirements[0]
	t.withSuites([]uint16{suite}, func() {
		c, err := t.dialAgainIfSilent(ctx, DialOptions{Label: "only " + tls.CipherSuiteName(suite)})
		if err != nil {
			ps := received(t.rec.snapshot(), c.trace.id, 0)
			if cl := firstClose(ps); cl != nil {
				if cc := cl.closeFrame(); cc != nil && cc.ErrorCode == uint64(wire.CryptoError(40)) {
					t.Unsupported(
						fmt.Sprintf(
							"The server refused a ClientHello offering only %s with handshake_failure (0x0128); supporting this suite is a TLS-level choice.",
							tls.CipherSuiteName(suite),
						),
						events(Response, cl)...)
				}
			}
			if s, at, ok := t.serverHelloSuite(c); ok && s == suite {
				t.Inconclusive(
					fmt.Sprintf(
						"The server selected %s but the handshake then failed (%v); the raw packets are in the evidence.",
						tls.CipherSuiteName(suite),
						err,
					),
					events(Response, at)...)
			}
			t.dialFailure(c, err)
			return
		}
		defer c.Close(0, "")
		if got := c.ConnectionState().CipherSuite; got != suite {
			t.Errorf("the handshake completed with %s although only %s was offered", tls.CipherSuiteName(got), tls.CipherSuiteName(suite))
			return
		}
		path, what := t.profile.SmallPath, "the small resource"
		if t.profile.Target.LargePath != "" {
			path, what = t.profile.Target.LargePath, "the large resource"
		}
		got, err := c.FetchLen(ctx, path)
		ps := received(t.rec.snapshot(), c.trace.id, 0)
		if err != nil {
			t.Inconclusive(fmt.Sprintf("The handshake completed with %s, but fetching %s failed: %v.", name, what, err), events(Response, lastN(ps, 3)...)...)
		}
		t.Fact("tls.cipher-suite", tls.CipherSuiteName(suite))
		t.Pass(
			"suite",
			req,
			fmt.Sprintf(
				"The handshake completed with %s and %d bytes of %s arrived in %d packets protected with it (packet and header protection).",
				name,
				got,
				what,
				t.rec.seen(c.trace.id, false),
			),
			events(Response, lastN(ps, 2)...)...)
	})
}

func runCCM8Only(ctx context.Context, t *T) {
	req := t.sc.Requirements[0]
	t.withSuites([]uint16{quic.TLS_AES_128_CCM_8_SHA256}, func() {
		mark := len(t.rec.snapshot())
		c, err := t.Dial(ctx, DialOptions{Label: "only TLS_AES_128_CCM_8_SHA256"})
		if s, at, ok := t.serverHelloSuite(c); ok && s == quic.TLS_AES_128_CCM_8_SHA256 {
			t.Fail(
				"negotiated",
				req,
				"The server's ServerHello selected TLS_AES_128_CCM_8_SHA256, a suite with no QUIC header protection scheme.",
				events(Response, at)...)
			return
		}
		if err == nil {
			c.Close(0, "")
			t.Errorf("the handshake completed although only TLS_AES_128_CCM_8_SHA256 was offered")
			return
		}
		t.judgeProvoked(c.trace, false, mark, Expectation{
			Check: "close", Req: req, Codes: transportCodes(wire.CryptoError(40)),
			Describe: "a ClientHello offering only TLS_AES_128_CCM_8_SHA256"})
	})
}

func runCCM8OfferedFirst(ctx context.Context, t *T) {
	t.withSuites([]uint16{quic.TLS_AES_128_CCM_8_SHA256, tls.TLS_AES_128_GCM_SHA256}, func() {
		c, err := t.dialAgainIfSilent(ctx, DialOptions{Label: "CCM_8 first, then AES-128-GCM"})
		ps := received(t.rec.snapshot(), c.trace.id, 0)
		if s, at, ok := t.serverHelloSuite(c); ok && s == quic.TLS_AES_128_CCM_8_SHA256 {
			t.Fail(
				"negotiated",
				t.sc.Requirements[1],
				"The server's ServerHello selected TLS_AES_128_CCM_8_SHA256, a suite with no QUIC header protection scheme.",
				events(Response, at)...)
			return
		}
		if err != nil {
			if cl := firstClose(ps); cl != nil {
				t.Fail(
					"accepted",
					t.sc.Requirements[0],
					fmt.Sprintf(
						"The server closed the handshake (%s) because the ClientHello offered TLS_AES_128_CCM_8_SHA256 first, although TLS_AES_128_GCM_SHA256 was offered too.",
						closeCode(cl.closeFrame()),
					),
					events(Response, cl)...)
				return
			}
			t.dialFailure(c, err)
			return
		}
		defer c.Close(0, "")
		t.Pass(
			"accepted",
			t.sc.Requirements[0],
			fmt.Sprintf(
				"The server ignored the unsupported TLS_AES_128_CCM_8_SHA256 and completed the handshake with %s.",
				tls.CipherSuiteName(c.ConnectionState().CipherSuite),
			),
			events(Response, lastN(ps, 1)...)...)
	})
}

func runTLSHandshakeKeysDiscarded(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	rc.Receive(ctx, t.PTO(), nil)
	mark := len(t.rec.snapshot())
	pkt, pn := rc.LongPacket(1, []wire.Frame{&wire.PingFrame{}}, rawquic.LongOpts{})
	trig := rc.LastSent()
	rc.Send(pkt)
	rc.Receive(ctx, t.Settle(), nil)
	req := t.sc.Requirements[0]
	for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
		if p.space != 1 {
			continue
		}
		for _, f := range p.frames {
			if a, ok := f.(*wire.AckFrame); ok && a.Acks(pn) {
				t.Fail(
					"discarded",
					req,
					"After HANDSHAKE_DONE the server still acknowledged a Handshake packet, so it kept its Handshake keys.",
					evidence(events(Trigger, trig), events(Response, p))...)
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
	var buf rawquic.CryptoBuffer
	var last *packet
	for _, p := range received(t.rec.snapshot(), c.ID(), 0) {
		for _, f := range p.frames {
			if cf, ok := f.(*wire.CryptoFrame); ok && p.space == 2 {
				buf.Add(cf.Offset, cf.Data)
				last = p
			}
		}
	}
	msgs := tlsMessages(buf.Contiguous())
	for _, m := range msgs {
		if m[0] == typ {
			t.Fail("absent", t.sc.Requirements[0], fmt.Sprintf("The server sent a TLS %s message in its 1-RTT CRYPTO data.", name), events(Response, last)...)
			return
		}
	}
	t.Pass("absent", t.sc.Requirements[0], fmt.Sprintf("The server's %d post-handshake TLS message(s) include no %s.", len(msgs), name))
}

func init() {
	// Family B, ClientHello offers the server must refuse (RFC 9001 §4.2,
	// §8.1, §8.2, §8.4) and one it must accept (§5.3). The raw client edits
	// the ClientHello crypto/tls wrote (clienthello.go) before it is sent.
	// TLS keeps hashing the original, so a server that goes on with an edited
	// offer cannot finish the handshake; what it does is read from its
	// Initial packets instead, which both sides protect with keys derived
	// from the connection ID alone: a CONNECTION_CLOSE there, or ACKs of the
	// tester's later Initial PINGs (the connection goes on).
	registerHelloWithout("tls-alpn-absent", "ClientHello without ALPN", rawquic.ExtALPN, "ALPN", 120, // no_application_protocol
		rfc9001("8.1", Must, "Unless another mechanism is used for agreeing on an application protocol, endpoints MUST use ALPN for this purpose."),
		rfc9000("7", Must, "Endpoints MUST explicitly negotiate an application protocol."))
	Register(&Scenario{
		ID: "tls-version-below-13", Title: "ClientHello offering only TLS 1.2", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("4.2", Must, "An endpoint MUST terminate the connection if a version of TLS older than 1.3 is negotiated.")},
		Run:          runTLSVersionBelow13,
	})
	registerHelloWithout(
		"tls-missing-tp-extension",
		"ClientHello without quic_transport_parameters",
		extQUICTransportParams,
		"quic_transport_parameters",
		109, // missing_extension
		rfc9001(
			"8.2",
			Must,
			"endpoints that receive ClientHello or EncryptedExtensions messages without the quic_transport_parameters extension MUST close the connection with an error of type 0x016d",
		),
	)
	Register(&Scenario{
		ID: "tls-compat-session-id", Title: "ClientHello with a 32-byte legacy_session_id", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001(
				"8.4",
				Should,
				"A server SHOULD treat the receipt of a TLS ClientHello with a non-empty legacy_session_id field as a connection error of type PROTOCOL_VIOLATION.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			rc, mark := t.helloExchange(ctx, "legacy_session_id", func(h *rawquic.ClientHello) error {
				h.SessionID = randomBytes(32)
				return nil
			})
			// A server that answers with a ServerHello echoing the session
			// ID has not treated it as an error; the ACKs of the later
			// PINGs show the connection going on, which the SHOULD makes
			// a warn.
			t.judgeProvoked(rc.trace, true, mark, Expectation{Check: "close", Req: t.sc.Requirements[0], GoesOnWarns: true,
				Codes: transportCodes(wire.ProtocolViolation), Describe: "a ClientHello with a 32-byte legacy_session_id (middlebox compatibility mode)"})
		},
	})
	// Family B, key phases the raw client drives by hand (RFC 9001 §5.5, §6.2,
	// §6.4): a flipped Key Phase bit on a packet nobody can open, two updates
	// in a row, and an old-key packet after a completed update. The raw
	// client keeps its read and write generations apart (conformance/rawquic/client.go), so
	// it follows the server whichever way these go.
	Register(&Scenario{
		ID: "tls-key-update-consecutive", Title: "A second key update before the first was acknowledged", Family: "B", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9001("6.2", May, "An endpoint MAY treat such consecutive key updates as a connection error of type KEY_UPDATE_ERROR.")},
		Run:          runKeyUpdateConsecutive,
	})
	Register(&Scenario{
		ID: "tls-key-update-bogus-phase", Title: "Flipped Key Phase on a packet that cannot be opened", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001("5.5", Must, "a packet that appears to trigger a key update but cannot be unprotected successfully MUST be discarded."),
		},
		Run: runKeyUpdateBogusPhase,
	})
	Register(&Scenario{
		ID: "tls-key-update-old-keys-after-new", Title: "Old keys on a higher packet number after a key update", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001(
				"6.4",
				Must,
				"An endpoint that successfully removes protection with old keys when newer keys were used for packets with lower packet numbers MUST treat this as a connection error of type KEY_UPDATE_ERROR.",
			),
		},
		Run: runKeyUpdateOldKeysAfterNew,
	})
	Register(&Scenario{
		ID: "tls-key-update-client", Title: "The server follows a key update the tester starts", Family: "B", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqKURespond, reqKUBefore},
		Run:          func(ctx context.Context, t *T) { t.runKeyUpdates(ctx, 1) },
	})
	Register(&Scenario{
		ID: "tls-key-update-repeated", Title: "Three key updates in one connection", Family: "B", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqKURespond, reqKUBefore},
		Run:          func(ctx context.Context, t *T) { t.runKeyUpdates(ctx, 3) },
	})
	Register(&Scenario{
		ID: "tls-early-1rtt-not-processed", Title: "1-RTT request before the tester's Finished", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001("5.7", MustNot, "A server MUST NOT process incoming 1-RTT protected packets before the TLS handshake is complete."),
		},
		Run: runEarly1RTTNotProcessed,
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
			rfc9001(
				"4.1.3",
				MustNot,
				"If the packet is from a previously installed encryption level, it MUST NOT contain data that extends past the end of previously received data in that flow.",
			),
			rfc9001("4.1.3", Must, "Implementations MUST treat any violations of this requirement as a connection error of type PROTOCOL_VIOLATION."),
		},
		Run: runCryptoExtendsOldLevel,
	})
	Register(&Scenario{
		ID: "tls-trailing-crypto-data", Title: "ClientHello followed by the start of another message", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001(
				"4.1.3",
				Must,
				"if there is data from a previous encryption level that TLS has not consumed, this MUST be treated as a connection error of type PROTOCOL_VIOLATION.",
			),
		},
		Run: runTrailingCryptoData,
	})
	Register(&Scenario{
		ID: "tls-resumption", Title: "Session resumption", Family: "B", Needs: []string{NeedApp}, PassOnly: true,
		Requirements: []Requirement{rfc9001("4.5", Descriptive, "QUIC can use the session resumption feature of TLS 1.3.")},
		Run:          runTLSResumption,
	})
	Register(&Scenario{
		ID: "tls-ticket-max-early-data", Title: "max_early_data_size is 0xffffffff", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001(
				"4.6.1",
				MustNot,
				"Servers MUST NOT send the early_data extension with a max_early_data_size field set to any value other than 0xffffffff.",
			),
		},
		Run: runTLSTicketMaxEarlyData,
	})
	Register(&Scenario{
		ID: "tls-0rtt-accepted", Title: "0-RTT request accepted and acknowledged in 1-RTT", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"13.2.6",
				Must,
				"Packets that a client sends with 0-RTT packet protection MUST be acknowledged by the server in packets protected by 1-RTT keys.",
			),
			rfc9001("5.6", MustNot, "A server MUST NOT use 0-RTT keys to protect packets"),
		},
		Run: runTLS0RTTAccepted,
	})
	Register(&Scenario{
		ID: "tls-0rtt-tp-not-reduced", Title: "Remembered limits not reduced when 0-RTT is accepted", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"7.4.1",
				MustNot,
				"If 0-RTT data is accepted by the server, the server MUST NOT reduce any limits or alter any values that might be violated by the client with its 0-RTT data.",
			),
		},
		Run: runTLS0RTTTPNotReduced,
	})
	Register(&Scenario{
		ID: "tls-crypto-in-0rtt", Title: "CRYPTO frame in a 0-RTT packet", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001("8.3", Must, "A server MUST treat receipt of a CRYPTO frame in a 0-RTT packet as a connection error of type PROTOCOL_VIOLATION."),
		},
		Run: func(ctx context.Context, t *T) {
			t.provoke0RTT(ctx, func(*resumption) (wire.Frame, Expectation) {
				return &wire.CryptoFrame{Offset: 0, Data: []byte{tlsKeyUpdate, 0, 0, 1, 0}}, Expectation{
					Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation),
					Describe: "a CRYPTO frame in a 0-RTT packet"}
			})
		},
	})
	Register(&Scenario{
		ID: "tls-0rtt-limit-violation", Title: "0-RTT data beyond the remembered stream limit", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("17.2.3", Should, "A server SHOULD treat a violation of remembered limits … as a connection error of an appropriate type"),
		},
		Run: runTLS0RTTLimitViolation,
	})
	// Family B, TLS (docs/scenarios.md): tls-hello-retry-request.
	Register(&Scenario{
		ID: "tls-hello-retry-request", Title: "HelloRetryRequest for a key share the server does not prefer", Family: "B",
		Needs: []string{NeedApp}, PassOnly: true,
		Requirements: []Requirement{
			rfc9001(
				"4.7",
				Descriptive,
				"From the perspective of QUIC, HelloRetryRequest is not differentiated from other cryptographic handshake messages that are carried in Initial packets.",
			),
		},
		Run: runTLSHelloRetryRequest,
	})
	// Family B, 0-RTT on the raw client (docs/scenarios.md):
	// tls-0rtt-rejected-not-processed and tls-0rtt-keys-discarded. The engine
	// resends rejected 0-RTT data in 1-RTT packets, as RFC 9001 §4.6.2 has a
	// client do, and drops its 0-RTT keys with the handshake; the raw client
	// does neither, so a response or an acknowledgment can only come from a
	// 0-RTT packet, and a 0-RTT packet can still leave after the handshake.
	Register(&Scenario{
		ID: "tls-0rtt-rejected-not-processed", Title: "Rejected 0-RTT packets neither acknowledged nor processed", Family: "B",
		Needs:        []string{NeedApp, "0rtt"},
		Requirements: []Requirement{rfc9001("4.6.2", MustNot, "When rejecting 0-RTT, a server MUST NOT process any 0-RTT packets, even if it could.")},
		Run:          runTLS0RTTRejectedNotProcessed,
	})
	Register(&Scenario{
		ID: "tls-0rtt-keys-discarded", Title: "0-RTT keys discarded after the first 1-RTT packet", Family: "B",
		Needs: []string{NeedApp, "0rtt"},
		Requirements: []Requirement{
			rfc9001(
				"4.9.3",
				Recommended,
				"After receiving a 1-RTT packet, servers MUST discard 0-RTT keys within a short time; the RECOMMENDED time period is three times the Probe Timeout",
			),
		},
		Run: runTLS0RTTKeysDiscarded,
	})
	Register(&Scenario{
		ID: "tls-server-key-update", Title: "Key updates the server starts", Family: "B", Needs: []string{NeedApp, NeedLarge}, Long: true,
		Requirements: []Requirement{
			rfc9001("6.1", MustNot, "An endpoint MUST NOT initiate a key update prior to having confirmed the handshake"),
			rfc9001(
				"6.1",
				MustNot,
				"An endpoint MUST NOT initiate a subsequent key update unless it has received an acknowledgment for a packet that was sent protected with keys from the current key phase.",
			),
			rfc9001(
				"6.4",
				Must,
				"Packets with higher packet numbers MUST be protected with either the same or newer packet protection keys than packets with lower packet numbers.",
			),
		},
		Run: runServerKeyUpdate,
	})
	for _, s := range []struct {
		id, title, name string
		suite           uint16
		needs           []string
	}{
		{"tls-chacha20-only", "Only TLS_CHACHA20_POLY1305_SHA256 offered", "ChaCha20-Poly1305", tls.TLS_CHACHA20_POLY1305_SHA256, []string{NeedApp, NeedLarge}},
		{"tls-aes256-only", "Only TLS_AES_256_GCM_SHA384 offered", "AES-256-GCM", tls.TLS_AES_256_GCM_SHA384, []string{NeedApp}},
	} {
		Register(&Scenario{
			ID: s.id, Title: s.title, Family: "B", Needs: s.needs, PassOnly: true,
			Requirements: []Requirement{reqAEADAny},
			Run: func(ctx context.Context, t *T) {
				t.runOnlySuite(ctx, s.suite, s.name)
			},
		})
	}
	Register(&Scenario{
		ID: "tls-ccm8-only", Title: "Only TLS_AES_128_CCM_8_SHA256 offered", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001("5.3", MustNot, "A cipher suite MUST NOT be negotiated unless a header protection scheme is defined for the cipher suite."),
		},
		Run: runCCM8Only,
	})
	Register(&Scenario{
		ID: "tls-ccm8-offered-first", Title: "TLS_AES_128_CCM_8_SHA256 offered first", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001(
				"5.3",
				MustNot,
				"An endpoint MUST NOT reject a ClientHello that offers a cipher suite that it does not support, or it would be impossible to deploy a new cipher suite.  This also applies to TLS_AES_128_CCM_8_SHA256.",
			),
			rfc9001("5.3", MustNot, "A cipher suite MUST NOT be negotiated unless a header protection scheme is defined for the cipher suite."),
		},
		Run: runCCM8OfferedFirst,
	})
	// Family B (TLS) and family L (close, draining, stateless reset): the
	// scenarios the current hooks and the raw client can drive.
	Register(&Scenario{
		ID: "tls-alpn-unknown", Title: "Only an unknown ALPN offered", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001(
				"8.1",
				Must,
				"When using ALPN, endpoints MUST immediately close a connection … with a no_application_protocol TLS alert … if an application protocol is not negotiated.",
			),
		},
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
}

func (c *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil && cs != nil {
		c.key, c.state = key, cs
	}
}

// Family B, cipher-suite offers. crypto/tls builds the tester's ClientHello
// and has no per-connection choice of TLS 1.3 suites, so these scenarios
// narrow the process-wide list (quic.RestrictTLS13Suites) and run alone:

func (l *phaseLog) probe() quic.Probe {
	return quic.Probe{
		OnPacketSent: func(pi quic.PacketInfo) {
			if pi.Type != wire.PacketType1RTT {
				return
			}
			l.mu.Lock()
			l.sent[pi.PacketNumber] = pi.KeyPhase
			l.mu.Unlock()
		},
		OnPacketReceived: func(pi quic.PacketInfo) {
			if pi.Type != wire.PacketType1RTT {
				return
			}
			r := recvPhase{pn: pi.PacketNumber, phase: pi.KeyPhase}
			for rest := pi.Payload; len(rest) > 0; {
				f, n, err := wire.ParseFrame(rest)
				if err != nil || n == 0 {
					break
				}
				if a, ok := f.(*wire.AckFrame); ok {
					c := *a
					c.Ranges = append([]wire.AckRange(nil), a.Ranges...)
					r.acks = append(r.acks, &c)
				}
				rest = rest[n:]
			}
			l.mu.Lock()
			l.recv = append(l.recv, r)
			l.mu.Unlock()
		},
	}
}
