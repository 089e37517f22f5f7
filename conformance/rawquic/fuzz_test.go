package rawquic

import (
	"bytes"
	"crypto/sha256"
	"testing"
)

// FuzzH3BodyHash: however the bytes of a response stream are split across
// writes, the DATA digest is the same, and hostile framing never panics.
func FuzzH3BodyHash(f *testing.F) {
	f.Add([]byte{0x01, 0x02, 0xaa, 0xbb, 0x00, 0x05, 'h', 'e', 'l', 'l', 'o', 0x21, 0x01, 0xcc}, uint8(3))
	f.Add(bytes.Repeat([]byte{0xff}, 40), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, step uint8) {
		var whole, split h3BodyHash
		whole.write(b)
		k := int(step) + 1
		for i := 0; i < len(b); i += k {
			split.write(b[i:min(i+k, len(b))])
		}
		if whole.n != split.n || whole.invalid != split.invalid || digestOf(whole.sum, whole.n) != digestOf(split.sum, split.n) {
			t.Fatalf("split every %d bytes: %d DATA bytes (invalid %v), whole: %d (invalid %v)", k, split.n, split.invalid, whole.n, whole.invalid)
		}
		if whole.n > uint64(len(b)) {
			t.Fatalf("%d DATA bytes out of %d", whole.n, len(b))
		}
	})
}

// FuzzStream: segments of a stream delivered in any order, overlapping or
// repeated, reassemble to the stream's bytes.
func FuzzStream(f *testing.F) {
	f.Add([]byte("hello, world, the stream's bytes"), []byte{5, 0, 20, 3, 9, 9, 1})
	f.Fuzz(func(t *testing.T, data []byte, cuts []byte) {
		var s Stream
		// Each cut byte names a segment start; each segment runs 7 bytes.
		for _, c := range cuts {
			if len(data) == 0 {
				break
			}
			off := int(c) % len(data)
			end := min(off+7, len(data))
			s.Add(uint64(off), data[off:end], end == len(data))
		}
		s.Add(0, data, true) // then all of it, so that it completes
		if !s.Complete() || s.Received() != len(data) || !bytes.Equal(s.Data(), data) {
			t.Fatalf("complete %v, received %d of %d", s.Complete(), s.Received(), len(data))
		}
		if d := s.Digest(); d.Len != uint64(len(data)) || d.Sum != sha256.Sum256(data) {
			t.Fatalf("digest %v", d)
		}
		if len(s.pending) != 0 {
			t.Fatalf("%d segments still pending", len(s.pending))
		}
	})
}

// FuzzControlMessages: the control-message readers take whatever the
// kernel (or a corrupted buffer) hands them without panicking.
func FuzzControlMessages(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, oob []byte) {
		if cp := ECNFromOOB(oob); cp > 3 {
			t.Fatalf("ECN codepoint %d", cp)
		}
		kernelTimeFromOOB(oob)
		if fl, ok := flowLabelFromOOB(oob); ok && fl > 0xfffff {
			t.Fatalf("flow label %#x", fl)
		}
	})
}
