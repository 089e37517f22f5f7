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
