package conformance

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

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

func init() {
	Register(&Scenario{
		ID: "tls-server-key-update", Title: "Key updates the server starts", Family: "B", Needs: []string{NeedApp, NeedLarge}, Long: true,
		Requirements: []Requirement{
			rfc9001("6.1", MustNot, "An endpoint MUST NOT initiate a key update prior to having confirmed the handshake"),
			rfc9001("6.1", MustNot, "An endpoint MUST NOT initiate a subsequent key update unless it has received an acknowledgment for a packet that was sent protected with keys from the current key phase."),
			rfc9001("6.4", Must, "Packets with higher packet numbers MUST be protected with either the same or newer packet protection keys than packets with lower packet numbers."),
		},
		Run: runServerKeyUpdate,
	})
}

// serverPhases records the Key Phase bit of the server's 1-RTT packets as
// the engine opened them (its goroutine writes, the scenario reads).
type serverPhases struct {
	mu   sync.Mutex
	recv []phaseSeen
}

type phaseSeen struct {
	pn    uint64
	phase bool
	at    time.Time
}

func (l *serverPhases) onReceived(pi quic.PacketInfo) {
	if pi.Type != wire.PacketType1RTT {
		return
	}
	l.mu.Lock()
	l.recv = append(l.recv, phaseSeen{pn: pi.PacketNumber, phase: pi.KeyPhase, at: time.Now()})
	l.mu.Unlock()
}

func (l *serverPhases) snapshot() []phaseSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]phaseSeen(nil), l.recv...)
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
		return Fail, 0, fmt.Sprintf("The server's packet %d carried a new key phase and reached the tester before the tester had even sent its Finished: the server started a key update before it could have confirmed the handshake.", ups[0].pn)
	}
	if len(ups) > 1 {
		return Fail, 1, fmt.Sprintf("The server started a key update with packet %d and another with packet %d %v later, although the tester had acknowledged no packet of the first new phase.", ups[0].pn, ups[1].pn, ups[1].at.Sub(ups[0].at).Round(time.Millisecond))
	}
	return Pass, -1, fmt.Sprintf("The server started one key update (packet %d) after the handshake and no second one while the tester withheld acknowledgments of the new phase.", ups[0].pn)
}

func runServerKeyUpdate(ctx context.Context, t *T) {
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
		t.Observe("server-update", fmt.Sprintf("The server did not start a key update within %v of downloads (%d 1-RTT packets, %d complete downloads of %s).", serverKUWindow, len(seen), res.n, t.profile.Target.LargePath))
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
