package conformance

import (
	"context"
	"fmt"
	"sync"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family B, key updates the tester starts (RFC 9001 §6.2). The engine's
// ForceKeyUpdate moves the tester to the next 1-RTT keys; the probe hooks
// record the Key Phase bit of every 1-RTT packet both ways, and the ACK
// frames the server sends, so the check can see which phase the server's
// acknowledgment of a new-phase packet travelled in.

var (
	reqKURespond = rfc9001("6.2", Must, "The endpoint MUST update its send keys to the corresponding key phase in response")
	reqKUBefore  = rfc9001("6.2", Must, "Sending keys MUST be updated before sending an acknowledgment for the packet that was received with updated keys.")
)

func init() {
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
}

// phaseLog is the 1-RTT packets of one connection with their Key Phase
// bits, as the hooks saw them (the engine's goroutine writes, the scenario
// reads).
type phaseLog struct {
	mu   sync.Mutex
	sent map[uint64]bool // packet number -> key phase bit
	recv []recvPhase
}

type recvPhase struct {
	pn    uint64
	phase bool
	acks  []*wire.AckFrame
}

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

// runKeyUpdates starts n key updates, each once the server's key phase has
// been stable for a PTO and a download under the previous phase has
// finished, downloads the large resource under each new phase, and judges
// the server's first acknowledgment of a new-phase packet and what it
// sends afterwards.
func (t *T) runKeyUpdates(ctx context.Context, n int) {
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
		if err := c.ForceKeyUpdate(); err != nil {
			t.Inconclusive(fmt.Sprintf("The tester could not start key update %d: %v.", i, err))
		}
		body, err := c.Fetch(ctx, t.profile.Target.LargePath)
		if err != nil {
			t.Inconclusive(fmt.Sprintf("After key update %d the download of %s failed: %v.", i, t.profile.Target.LargePath, err))
		}
		if verdict, msg, pn := log.judge(mark, fromPN); verdict != Pass {
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
		t.Fact(fmt.Sprintf("key-update.%d.bytes", i), len(body))
	}
	t.Pass("key-update", reqKURespond, fmt.Sprintf("The server followed %d key update(s) of the tester: each acknowledgment of a new-phase packet, and every packet after it, carried the new key phase, and the large resource arrived under each.", n))
}

// judgedPacket names the server packet a verdict rests on.
type judgedPacket struct {
	pn       uint64
	afterAck bool // an old-phase packet sent after the first acknowledgment
	ok       bool
}

// judge looks at the server packets received since mark: the first one
// that acknowledges a tester packet of the new phase must carry the new
// phase, and so must every packet after it.
func (l *phaseLog) judge(mark int, fromPN uint64) (Verdict, string, judgedPacket) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// The new phase is the phase of the tester's last 1-RTT packet; the
	// packets of this update are those from fromPN on with that phase.
	var newPhase bool
	var largest uint64
	found := false
	for pn, ph := range l.sent {
		if pn >= fromPN && (!found || pn > largest) {
			largest, newPhase, found = pn, ph, true
		}
	}
	if !found {
		return Inconclusive, "the tester sent no 1-RTT packet after the update.", judgedPacket{}
	}
	var fresh []uint64
	for pn, ph := range l.sent {
		if pn >= fromPN && ph == newPhase {
			fresh = append(fresh, pn)
		}
	}
	acked := false
	for _, r := range l.recv[mark:] {
		if !acked {
			for _, a := range r.acks {
				for _, pn := range fresh {
					if a.Acks(pn) {
						acked = true
						break
					}
				}
			}
			if acked && r.phase != newPhase {
				return Fail, fmt.Sprintf("the server acknowledged a packet protected with the new keys in packet %d, which still carries the old key phase.", r.pn), judgedPacket{pn: r.pn, ok: true}
			}
			continue
		}
		if r.phase != newPhase {
			return Fail, fmt.Sprintf("after acknowledging the tester's new-phase packets, the server still sent packet %d in the old key phase.", r.pn), judgedPacket{pn: r.pn, afterAck: true, ok: true}
		}
	}
	if !acked {
		return Inconclusive, "no packet of the server acknowledged a packet sent with the new keys.", judgedPacket{}
	}
	return Pass, "", judgedPacket{}
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
