package conformance

import (
	"testing"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

func TestEarlyProcessed(t *testing.T) {
	fin := time.Unix(0, 100)
	before := func(f wire.Frame) *packet { p := fakePacket(false, 2, 1, f); p.at = time.Unix(0, 50); return p }
	after := func(f wire.Frame) *packet { p := fakePacket(false, 2, 1, f); p.at = time.Unix(0, 150); return p }
	for _, tc := range []struct {
		name string
		p    *packet
		want bool
	}{
		{"ACK of the early request before the Finished", before(ackOf([]uint64{3})), true},
		{"response data before the Finished", before(&wire.StreamFrame{StreamID: 0, Data: []byte("x")}), true},
		{"ACK of the early request after the Finished", after(ackOf([]uint64{3})), false},
		{"0.5-RTT data on another stream", before(&wire.StreamFrame{StreamID: 3, Data: []byte("x")}), false},
		{"ACK of other packets", before(ackOf([]uint64{7})), false},
	} {
		p, _ := earlyProcessed([]*packet{tc.p}, 0, fin, []uint64{3}, 0)
		if (p != nil) != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, p != nil, tc.want)
		}
	}
}

func TestInitialAfter(t *testing.T) {
	in := fakePacket(false, 0, 1, &wire.PingFrame{})
	in.at = time.Unix(0, 200)
	if initialAfter([]*packet{in}, 0, time.Unix(0, 100)) != in {
		t.Error("an Initial packet after the point was not found")
	}
	if initialAfter([]*packet{in}, 0, time.Unix(0, 300)) != nil {
		t.Error("an Initial packet before the point counted")
	}
	hs := fakePacket(false, 1, 1, &wire.PingFrame{})
	hs.at = time.Unix(0, 200)
	if initialAfter([]*packet{hs}, 0, time.Unix(0, 100)) != nil {
		t.Error("a Handshake packet counted as Initial")
	}
}

func TestTrailingCloseAccepted(t *testing.T) {
	for code, want := range map[uint64]bool{uint64(wire.ProtocolViolation): true, 0x10a: true, 0x100: true, 0x1ff: true, 0x200: false, uint64(wire.InternalError): false} {
		if got := trailingCloseAccepted(&wire.ConnectionCloseFrame{ErrorCode: code}); got != want {
			t.Errorf("code %#x: %v, want %v", code, got, want)
		}
	}
	if trailingCloseAccepted(&wire.ConnectionCloseFrame{Application: true, ErrorCode: 0x10a}) {
		t.Error("an application close counted")
	}
}
