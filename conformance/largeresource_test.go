package conformance

import (
	"testing"

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

// TestRawStreamBounded: past its first rawKeep bytes a stream keeps only a
// count and a digest, so a download of any size costs bounded memory, and
// the digest of an h3 response covers its DATA payload only.
func TestRawStreamBounded(t *testing.T) {
	var s rawStream
	chunk := make([]byte, 64<<10)
	var total uint64
	// Out of order: the second chunk first.
	s.add(uint64(len(chunk)), chunk, false)
	if s.received() != 0 || s.end() != uint64(2*len(chunk)) {
		t.Fatalf("after a gap: received %d, end %d", s.received(), s.end())
	}
	s.add(0, chunk, false)
	total = uint64(2 * len(chunk))
	for total < 3*rawKeep {
		s.add(total, chunk, false)
		total += uint64(len(chunk))
	}
	s.add(total, nil, true)
	if !s.complete() || s.received() != int(total) {
		t.Fatalf("complete %v, received %d of %d", s.complete(), s.received(), total)
	}
	if len(s.data()) != rawKeep || len(s.pending) != 0 {
		t.Fatalf("kept %d bytes and %d pending segments", len(s.data()), len(s.pending))
	}
	// Beyond the pending bound, data is a flow-control violation: dropped.
	var f rawStream
	f.add(rawPendingMax+1, []byte("x"), false)
	if len(f.pending) != 0 {
		t.Fatal("data far past the window was kept")
	}
	// h3: a HEADERS frame, then DATA split across writes, then an unknown frame.
	var a, b h3BodyHash
	payload := []byte("hello, world")
	stream := append([]byte{0x01, 0x02, 0xaa, 0xbb, 0x00, byte(len(payload))}, payload...)
	stream = append(stream, 0x21, 0x01, 0xcc)
	for _, c := range stream {
		a.write([]byte{c})
	}
	b.write(append([]byte{0x00, 0x05}, payload[:5]...))
	b.write(append([]byte{0x00, byte(len(payload) - 5)}, payload[5:]...))
	if a.n != uint64(len(payload)) || b.n != a.n || string(a.sum.Sum(nil)) != string(b.sum.Sum(nil)) {
		t.Fatalf("DATA digests differ: %d vs %d bytes", a.n, b.n)
	}
}

// TestRawBodyPastKeep: an h3 response whose DATA frame runs past what the
// stream keeps still has a body (the kept bytes) once complete; a DATA
// frame still arriving is not part of the body yet. (A 1 MiB resource
// over h3 left the rebinding scenarios with "the download did not start".)
func TestRawBodyPastKeep(t *testing.T) {
	size := rawKeep + 100
	head := []byte{0x01, 0x02, 0xd9, 0xc1} // HEADERS, 2 bytes
	data := wire.AppendVarint([]byte{0x00}, uint64(size))
	rc := &rawClient{}
	req := &rawRequest{id: 0, alpn: h3.ALPNH3}
	rc.onStream(&wire.StreamFrame{StreamID: 0, Data: append(append([]byte(nil), head...), data...)})
	rc.onStream(&wire.StreamFrame{StreamID: 0, Offset: uint64(len(head) + len(data)), Data: make([]byte, 1000)})
	if body, done := rc.Body(req); len(body) != 0 || done {
		t.Fatalf("a DATA frame still arriving gave %d bytes of body", len(body))
	}
	off := uint64(len(head) + len(data) + 1000)
	rc.onStream(&wire.StreamFrame{StreamID: 0, Offset: off, Data: make([]byte, size-1000), Fin: true})
	body, done := rc.Body(req)
	if !done || len(body) != rawKeep-len(head)-len(data) {
		t.Fatalf("complete response: done %v, %d bytes of body", done, len(body))
	}
	if d := rc.BodyDigest(req); d.Len != uint64(size) {
		t.Fatalf("digest covers %d bytes, want %d", d.Len, size)
	}
}
