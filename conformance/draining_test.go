package conformance

import (
	"testing"

	"github.com/quiver-quic/quiver/quic/wire"
)

// TestClassifyDraining: after the tester's close (1-RTT packet 10), a
// client datagram whose ACK stops short of it left before the client read
// the close and is no sign of a client that went on; one acknowledging the
// close or later packets is, and so is one with no ACK at all (found on a
// loaded machine: cli-draining-silence failed Quiver's client for
// datagrams it had sent before the close reached it).
func TestClassifyDraining(t *testing.T) {
	ack := func(largest uint64) *wire.AckFrame {
		return &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 0, Largest: largest}}}
	}
	ds := []rawDatagram{{size: 1}, {size: 2}, {size: 3}, {size: 4}, {size: 5}}
	content := map[int][]spaceFrame{
		1: {{spaceApp, ack(9)}, {spaceApp, &wire.PingFrame{}}}, // before the close
		2: {{spaceApp, ack(12)}},                               // after it
		3: {{spaceApp, &wire.PingFrame{}}},                     // no evidence
		4: {{spaceApp, &wire.ConnectionCloseFrame{}}},
		5: {{spaceHandshake, ack(3)}}, // Handshake ACK: no 1-RTT evidence
	}
	closing, other := classifyDraining(ds, 10, func(d rawDatagram) []spaceFrame { return content[d.size] })
	var got []int
	for _, d := range other {
		got = append(got, d.size)
	}
	if len(closing) != 1 || closing[0].size != 4 {
		t.Errorf("closing %v, want datagram 4", closing)
	}
	if len(got) != 3 || got[0] != 2 || got[1] != 3 || got[2] != 5 {
		t.Errorf("others %v, want 2, 3 and 5 (1 left before the close)", got)
	}
}
