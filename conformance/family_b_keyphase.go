package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family B, key phases the raw client drives by hand (RFC 9001 §5.5, §6.2,
// §6.4): a flipped Key Phase bit on a packet nobody can open, two updates
// in a row, and an old-key packet after a completed update. The raw
// client keeps its read and write generations apart (rawclient.go), so
// it follows the server whichever way these go.

func init() {
	Register(&Scenario{
		ID: "tls-key-update-consecutive", Title: "A second key update before the first was acknowledged", Family: "B", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9001("6.2", May, "An endpoint MAY treat such consecutive key updates as a connection error of type KEY_UPDATE_ERROR.")},
		Run:          runKeyUpdateConsecutive,
	})
	Register(&Scenario{
		ID: "tls-key-update-bogus-phase", Title: "Flipped Key Phase on a packet that cannot be opened", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("5.5", Must, "a packet that appears to trigger a key update but cannot be unprotected successfully MUST be discarded.")},
		Run:          runKeyUpdateBogusPhase,
	})
	Register(&Scenario{
		ID: "tls-key-update-old-keys-after-new", Title: "Old keys on a higher packet number after a key update", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("6.4", Must, "An endpoint that successfully removes protection with old keys when newer keys were used for packets with lower packet numbers MUST treat this as a connection error of type KEY_UPDATE_ERROR.")},
		Run:          runKeyUpdateOldKeysAfterNew,
	})
}

// updateKeys starts a key update of the raw client (RFC 9001 §6.1): its
// next packets are sealed with the next generation under the flipped Key
// Phase bit. It returns the keys it leaves.
func (rc *rawClient) updateKeys() *protect.Keys {
	old := rc.seal[2]
	next, err := old.Next()
	if err != nil {
		rc.t.Errorf("derive the next 1-RTT keys: %v", err)
	}
	rc.seal[2] = next
	rc.writePhase ^= 1
	rc.writeGen++
	return old
}

// keyPhaseReady completes a raw handshake and waits one PTO, so that the
// server's own phase is stable (as tls-key-update-client does), and
// checks that a PING in the first phase is acknowledged.
func (t *T) keyPhaseReady(ctx context.Context) *rawClient {
	rc := t.rawHandshake(ctx)
	rc.Receive(ctx, t.PTO(), nil)
	m := t.mark()
	pg := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	if rc.receiveUntil(ctx, t.Settle(), m, acks(2, pg.pn)) == nil {
		t.Inconclusive("Before any key update, the server did not acknowledge a PING.", events(Trigger, pg)...)
	}
	return rc
}

// acks returns a predicate for server packets of space sp acknowledging pn.
func acks(sp int, pn uint64) func(p *packet) bool {
	return func(p *packet) bool {
		if p.space != sp {
			return false
		}
		for _, f := range p.frames {
			if a, ok := f.(*wire.AckFrame); ok && a.Acks(pn) {
				return true
			}
		}
		return false
	}
}

func runKeyUpdateConsecutive(ctx context.Context, t *T) {
	rc := t.keyPhaseReady(ctx)
	mark := t.mark()
	// Two updates back to back, without reading anything in between: the
	// second leaves before the tester could have seen an acknowledgment
	// of the first.
	rc.updateKeys()
	first := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	rc.updateKeys()
	second := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	var later []*packet
	for waited := time.Duration(0); waited < t.Settle() && !rc.peerClosed && ctx.Err() == nil; waited += t.PTO() {
		rc.Receive(ctx, t.PTO(), func() bool { return rc.peerClosed })
		if !rc.peerClosed {
			later = append(later, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{}))
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
			return "close KEY_UPDATE_ERROR", "The server treated the second key update, sent before it had acknowledged the first, as a connection error of type KEY_UPDATE_ERROR, as RFC 9001 §6.2 allows.", append(trig, events(Response, cl)...)
		}
		return "close " + closeCode(cc), fmt.Sprintf("The server closed the connection with %s after two consecutive key updates; RFC 9001 §6.2 allows KEY_UPDATE_ERROR.", closeCode(cc)), append(trig, events(Response, cl)...)
	}
	if a := ackedBy(ps, conn, 2, second.pn); a != nil {
		return "followed both", fmt.Sprintf("The server followed both key updates: it acknowledged the tester's packet of the second new phase (packet %d) in a packet with Key Phase %d.", second.pn, a.ev.KeyPhase), append(trig, events(Response, a)...)
	}
	for _, pg := range later {
		if a := ackedBy(ps, conn, 2, pg.pn); a != nil {
			return "followed both", fmt.Sprintf("The server dropped packet %d of the second update but acknowledged a later packet of that phase.", second.pn), append(trig, events(Response, a)...)
		}
	}
	if a := ackedBy(ps, conn, 2, first.pn); a != nil {
		return "followed the first only", "The server acknowledged the packet of the first update but none of the second phase: it dropped the second update's packets without closing.", append(trig, events(Response, a)...)
	}
	if rcv := received(ps, conn, mark); len(rcv) > 0 {
		return "no acknowledgment", "After two consecutive key updates the server neither closed nor acknowledged any packet of either new phase.", append(trig, events(Context, lastN(rcv, 3)...)...)
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
	k := rc.seal[2]
	bogus, err := protect.NewKeys(k.Version(), k.Suite(), randomBytes(len(k.Secret())))
	if err != nil {
		t.Errorf("random 1-RTT keys: %v", err)
	}
	phase := rc.writePhase
	mark := t.mark()
	var bad *packet
	t.discardedPacket(ctx, rc, "discarded", req, "a packet with the Key Phase bit flipped that no key can open", func() *packet {
		bad = rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{KeyPhase: true, Keys: bogus, HP: k.HeaderProtector()})
		return bad
	})
	if p := phaseSwitch(t.rec.snapshot(), rc.trace.id, mark, phase); p != nil {
		t.Fail("phase", req, fmt.Sprintf("After the unopenable packet with the flipped Key Phase bit, the server sent packet %d with Key Phase %d: it started a key update that never happened.", p.pn, p.ev.KeyPhase), append(events(Trigger, bad), events(Response, p)...)...)
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
	fresh := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	if rc.receiveUntil(ctx, t.Settle(), m, acks(2, fresh.pn)) == nil {
		t.Inconclusive("The server did not acknowledge the tester's first packet under the new keys, so the key update never completed.", events(Trigger, fresh)...)
	}
	// Within one PTO of the update: a PING with a higher packet number,
	// protected with the keys of the previous phase.
	mark := t.mark()
	stale := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{KeyPhase: true, Keys: old})
	var later []*packet
	for waited := time.Duration(0); waited < t.Settle() && !rc.peerClosed && ctx.Err() == nil; waited += t.PTO() {
		rc.Receive(ctx, t.PTO(), func() bool { return rc.peerClosed })
		if !rc.peerClosed {
			later = append(later, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{}))
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
		return Fail, fmt.Sprintf("The server acknowledged packet %d, protected with the old keys after newer keys had protected lower packet numbers, and kept the connection open instead of closing with KEY_UPDATE_ERROR.", stale.pn),
			append(events(Trigger, stale), events(Response, a)...)
	}
	for _, pg := range later {
		if a := ackedBy(ps, conn, 2, pg.pn); a != nil {
			return Pass, fmt.Sprintf("The server never acknowledged packet %d under the old keys but acknowledged later packets: it could not open it (its old keys were gone) and discarded it.", stale.pn),
				append(events(Trigger, stale), events(Response, a)...)
		}
	}
	return Inconclusive, "After the old-key packet the server neither closed nor acknowledged any later packet.", events(Trigger, stale)
}
