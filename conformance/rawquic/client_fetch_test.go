package rawquic

import (
	"testing"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic/wire"
)

// testPacket is a host's record of a packet for tests that drive a Client
// without a host.
type testPacket struct{}

func (testPacket) Frames() []wire.Frame { return nil }
func (testPacket) AckEliciting() bool   { return false }

// TestRawBodyPastKeep: an h3 response whose DATA frame runs past what the
// stream keeps still has a body (the kept bytes) once complete; a DATA
// frame still arriving is not part of the body yet. (A 1 MiB resource
// over h3 left the rebinding scenarios with "the download did not start".)
func TestRawBodyPastKeep(t *testing.T) {
	size := Keep + 100
	head := []byte{0x01, 0x02, 0xd9, 0xc1} // HEADERS, 2 bytes
	data := wire.AppendVarint([]byte{0x00}, uint64(size))
	rc := &Client[testPacket]{}
	req := &Request{ID: 0, ALPN: h3.ALPNH3}
	rc.OnStream(&wire.StreamFrame{StreamID: 0, Data: append(append([]byte(nil), head...), data...)})
	rc.OnStream(&wire.StreamFrame{StreamID: 0, Offset: uint64(len(head) + len(data)), Data: make([]byte, 1000)})
	if body, done := rc.Body(req); len(body) != 0 || done {
		t.Fatalf("a DATA frame still arriving gave %d bytes of body", len(body))
	}
	off := uint64(len(head) + len(data) + 1000)
	rc.OnStream(&wire.StreamFrame{StreamID: 0, Offset: off, Data: make([]byte, size-1000), Fin: true})
	body, done := rc.Body(req)
	if !done || len(body) != Keep-len(head)-len(data) {
		t.Fatalf("complete response: done %v, %d bytes of body", done, len(body))
	}
	if d := rc.BodyDigest(req); d.Len != uint64(size) {
		t.Fatalf("digest covers %d bytes, want %d", d.Len, size)
	}
}
