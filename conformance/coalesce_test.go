package conformance

import (
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/quic/wire"
)

// TestJudgeCoalesceSameCID: zero bytes after the last packet of a datagram
// are padding, not a coalesced packet with an all-zero connection ID; a
// real 1-RTT packet for another ID behind a Handshake packet fails.
func TestJudgeCoalesceSameCID(t *testing.T) {
	dcid := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	hs := handshakePacketBytes(t, dcid, 40)
	padded := append(append([]byte(nil), hs...), make([]byte, 60)...)
	if n, bad := judgeCoalesceSameCID([]datagramRec{{b: padded}}); bad != "" || n != 0 {
		t.Fatalf("zero padding after a packet: coalesced %d, %q", n, bad)
	}
	short := append([]byte{0x41}, dcid...)
	short = append(short, make([]byte, 30)...)
	same := append(append([]byte(nil), hs...), short...)
	if n, bad := judgeCoalesceSameCID([]datagramRec{{b: same}}); bad != "" || n != 1 {
		t.Fatalf("same-ID 1-RTT packet behind: coalesced %d, %q", n, bad)
	}
	other := append([]byte{0x41}, 9, 9, 9, 9, 9, 9, 9, 9)
	other = append(other, make([]byte, 30)...)
	mixed := append(append([]byte(nil), hs...), other...)
	if _, bad := judgeCoalesceSameCID([]datagramRec{{b: mixed}}); !strings.Contains(bad, "0909090909090909") {
		t.Fatalf("different-ID 1-RTT packet behind: %q", bad)
	}
}

// handshakePacketBytes is a Handshake packet of version 1 with a packet
// number and payload of n bytes (contents do not matter to the judge).
func handshakePacketBytes(t *testing.T, dcid []byte, n int) []byte {
	t.Helper()
	b := []byte{0xe1, 0, 0, 0, 1, byte(len(dcid))}
	b = append(b, dcid...)
	b = append(b, 1, 7) // SCID
	b = wire.AppendVarint(b, uint64(n))
	b = append(b, make([]byte, n)...)
	if p, err := wire.ParseHeader(b, 0); err != nil || p.PacketLen != len(b) {
		t.Fatalf("test packet: %v", err)
	}
	return b
}
