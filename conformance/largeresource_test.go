package conformance

import (
	"testing"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic/wire"
)

// TestLargeResourceBeyondWindows downloads a large resource bigger than the
// raw client's initial windows (4 MiB per stream, 16 MiB per connection):
// the raw client must raise its limits as it reads, or the transfer
// scenarios stall and come out inconclusive (issue: a 5 MB --large left
// them inconclusive on every server).
func TestLargeResourceBeyondWindows(t *testing.T) {
	s := newQuiverServerRoot(t, "127.0.0.1:0", writeRootSize(t, 24<<20), nil)
	t.Cleanup(s.stop)
	for _, alpn := range []string{"hq-interop", "h3"} {
		t.Run(alpn, func(t *testing.T) {
			expectVerdictsALPN(t, "quiver-24MiB", s.addr, alpn, map[string][]Verdict{
				"rec-transfer-with-loss": {Pass},
				"rec-blackhole-recovery": {Pass},
			})
		})
	}
}

// TestRawBodyPastKeep: an h3 response whose DATA frame runs past what the
// stream keeps still has a body (the kept bytes) once complete; a DATA
// frame still arriving is not part of the body yet. (A 1 MiB resource
// over h3 left the rebinding scenarios with "the download did not start".)
func TestRawBodyPastKeep(t *testing.T) {
	size := rawquic.Keep + 100
	head := []byte{0x01, 0x02, 0xd9, 0xc1} // HEADERS, 2 bytes
	data := wire.AppendVarint([]byte{0x00}, uint64(size))
	rc := &rawCore[*packet]{}
	req := &rawRequest{ID: 0, ALPN: h3.ALPNH3}
	rc.OnStream(&wire.StreamFrame{StreamID: 0, Data: append(append([]byte(nil), head...), data...)})
	rc.OnStream(&wire.StreamFrame{StreamID: 0, Offset: uint64(len(head) + len(data)), Data: make([]byte, 1000)})
	if body, done := rc.Body(req); len(body) != 0 || done {
		t.Fatalf("a DATA frame still arriving gave %d bytes of body", len(body))
	}
	off := uint64(len(head) + len(data) + 1000)
	rc.OnStream(&wire.StreamFrame{StreamID: 0, Offset: off, Data: make([]byte, size-1000), Fin: true})
	body, done := rc.Body(req)
	if !done || len(body) != rawquic.Keep-len(head)-len(data) {
		t.Fatalf("complete response: done %v, %d bytes of body", done, len(body))
	}
	if d := rc.BodyDigest(req); d.Len != uint64(size) {
		t.Fatalf("digest covers %d bytes, want %d", d.Len, size)
	}
}
