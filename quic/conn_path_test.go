package quic

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// TestPathResponseOnProbedPath: the client probes a new address with a
// PATH_CHALLENGE (and PADDING, both probing frames, so the server does not
// migrate, RFC 9000 §9.1). The PATH_RESPONSE must come back to the new
// address, once, padded within the amplification limit (§8.2.2: "An
// endpoint MUST NOT send more than one PATH_RESPONSE frame in response to
// one PATH_CHALLENGE frame"; §8.2: a response validates the path it is
// "sent on the network path where the PATH_CHALLENGE was received"), and
// nothing for it goes to the old address.
func TestPathResponseOnProbedPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := startPeerTest(t, testServerConfig(t, "hq-interop"))
		// Settle: acknowledge the server's flight.
		p.readFor(time.Second, ignoreFrames)
		p.writeFrames(appSpace, &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 0, Largest: p.largest[appSpace]}}})
		p.readFor(time.Second, ignoreFrames)

		old := p.pc
		probe := old.n.listen("10.0.0.3:6000")
		defer probe.Close()
		challenge := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
		p.pc = probe
		p.writeFrames(appSpace, &wire.PathChallengeFrame{Data: challenge}, &wire.PaddingFrame{Length: 1200})
		onNew, size := 0, 0
		deadline := time.After(500 * time.Millisecond)
	read:
		for {
			select {
			case pkt := <-probe.in:
				p.processDatagram(pkt.b, func(space spaceID, f wire.Frame) {
					if r, ok := f.(*wire.PathResponseFrame); ok && r.Data == challenge {
						onNew++
						size = len(pkt.b)
					}
				})
			case <-deadline:
				break read
			}
		}
		p.pc = old
		onOld := 0
		p.readFor(500*time.Millisecond, func(space spaceID, f wire.Frame) {
			if r, ok := f.(*wire.PathResponseFrame); ok && r.Data == challenge {
				onOld++
			}
		})
		if onNew != 1 || onOld != 0 {
			t.Fatalf("PATH_RESPONSE frames: %d on the probed path, %d on the old one; want 1 and 0", onNew, onOld)
		}
		if size < minInitialDatagramSize {
			t.Errorf("the PATH_RESPONSE datagram has %d bytes; RFC 9000 §8.2.2 wants 1200 when the limit allows (the challenge came in a 1200-byte datagram)", size)
		}
	})
}

// pathEvent is a datagram the server sent to one of two client sockets.
type pathEvent struct {
	at        time.Duration
	toNew     bool
	size      int
	challenge bool
}

// watchPaths reads both sockets for d and decodes what the server sends.
func watchPaths(p *testPeer, old, nw *memConn, start time.Time, d time.Duration) []pathEvent {
	var evs []pathEvent
	deadline := time.After(d)
	for {
		var pkt memPkt
		toNew := false
		select {
		case pkt = <-old.in:
		case pkt = <-nw.in:
			toNew = true
		case <-deadline:
			return evs
		}
		ev := pathEvent{at: time.Since(start), toNew: toNew, size: len(pkt.b)}
		p.processDatagram(pkt.b, func(space spaceID, f wire.Frame) {
			if _, ok := f.(*wire.PathChallengeFrame); ok {
				ev.challenge = true
			}
		})
		evs = append(evs, ev)
	}
}

// migrateTo settles the connection and has the client send a non-probing
// packet from a new socket: the server sees an apparent migration.
func migrateTo(t *testing.T, p *testPeer, addr string) (old, nw *memConn) {
	p.readFor(time.Second, ignoreFrames)
	p.writeFrames(appSpace, &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 0, Largest: p.largest[appSpace]}}})
	p.readFor(time.Second, ignoreFrames)
	old = p.pc
	nw = old.n.listen(addr)
	t.Cleanup(func() { nw.Close() })
	p.pc = nw
	p.writeFrames(appSpace, &wire.PingFrame{})
	p.pc = old
	return old, nw
}

// TestMigrationValidatesPreviousPath: RFC 9000 §9.3.3, "In response to an
// apparent migration, endpoints MUST validate the previously active path
// using a PATH_CHALLENGE frame", besides the new address (§9.3: "MUST
// initiate path validation"). The previous path was validated, so its
// challenge is padded to 1200 bytes (§8.2.1).
func TestMigrationValidatesPreviousPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := startPeerTest(t, testServerConfig(t, "hq-interop"))
		old, nw := migrateTo(t, p, "10.0.0.3:6000")
		evs := watchPaths(p, old, nw, time.Now(), 200*time.Millisecond)
		var onOld, onNew bool
		for _, e := range evs {
			t.Logf("%+v", e)
			if e.challenge && !e.toNew {
				onOld = true
				if e.size < minInitialDatagramSize {
					t.Errorf("the previous path's PATH_CHALLENGE came in %d bytes, want 1200", e.size)
				}
			}
			onNew = onNew || e.challenge && e.toNew
		}
		if !onNew || !onOld {
			t.Fatalf("PATH_CHALLENGE on the new path: %v, on the previous path: %v; want both", onNew, onOld)
		}
	})
}

// TestFailedPathValidationReverts: a packet from an attacker's address
// (here, one that never answers) moves the server, whose validation of
// that address then fails. RFC 9000 §9.3.2: "an endpoint MUST revert to
// using the last validated peer address when validation of a new peer
// address fails"; §8.2.4 recommends abandoning after three PTOs (at least
// three of the initial 1 s).
func TestFailedPathValidationReverts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, sc := startPeerTestConn(t, testServerConfig(t, "hq-interop"))
		old, nw := migrateTo(t, p, "10.0.0.66:6666")
		start := time.Now()
		// The genuine client keeps quiet on its old address: it only
		// answers nothing. Watch the server for 20 s.
		evs := watchPaths(p, old, nw, start, 20*time.Second)
		lastNew, lastOld := time.Duration(-1), time.Duration(-1)
		for _, e := range evs {
			if e.toNew {
				lastNew = e.at
			} else if !e.challenge {
				lastOld = e.at
			}
		}
		t.Logf("last datagram to the attacker's address at %v, last non-challenge one to the old address at %v (%d datagrams)", lastNew, lastOld, len(evs))
		if err := sc.Err(); err != nil {
			t.Fatalf("the connection ended: %v", err)
		}
		if lastNew > 5*time.Second {
			t.Errorf("the server still sent to the unvalidated address %v after the migration", lastNew)
		}
		if lastOld < 3*time.Second {
			t.Errorf("the server did not go back to the last validated address (last datagram there at %v)", lastOld)
		}
	})
}
