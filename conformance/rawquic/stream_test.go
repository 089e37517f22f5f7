package rawquic

import "testing"

// TestStreamBounded: past its first Keep bytes a stream keeps only a
// count and a digest, so a download of any size costs bounded memory, and
// the digest of an h3 response covers its DATA payload only.
func TestStreamBounded(t *testing.T) {
	var s Stream
	chunk := make([]byte, 64<<10)
	var total uint64
	// Out of order: the second chunk first.
	s.Add(uint64(len(chunk)), chunk, false)
	if s.Received() != 0 || s.End() != uint64(2*len(chunk)) {
		t.Fatalf("after a gap: received %d, end %d", s.Received(), s.End())
	}
	s.Add(0, chunk, false)
	total = uint64(2 * len(chunk))
	for total < 3*Keep {
		s.Add(total, chunk, false)
		total += uint64(len(chunk))
	}
	s.Add(total, nil, true)
	if !s.Complete() || s.Received() != int(total) {
		t.Fatalf("complete %v, received %d of %d", s.Complete(), s.Received(), total)
	}
	if len(s.Data()) != Keep || len(s.pending) != 0 {
		t.Fatalf("kept %d bytes and %d pending segments", len(s.Data()), len(s.pending))
	}
	// Beyond the pending bound, data is a flow-control violation: dropped.
	var f Stream
	f.Add(pendingMax+1, []byte("x"), false)
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
