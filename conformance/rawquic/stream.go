package rawquic

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Stream reassembles one stream of the server's data on the raw client.
// It keeps the first Keep bytes (enough for every response a scenario
// reads: headers, control streams, the small resource) and, past them,
// only a count and a SHA-256 of the bytes in order, so that a download of
// any size runs in bounded memory. Out-of-order data waits in pending,
// which the flow-control window bounds (pendingMax past the contiguous
// end; data further out is a flow-control violation and is dropped).
type Stream struct {
	prefix  []byte            // the first Keep contiguous bytes
	n       uint64            // contiguous bytes received from offset 0
	sum     hash.Hash         // SHA-256 of the n contiguous bytes
	body    h3BodyHash        // DATA payload of an h3 response, hashed in order
	pending map[uint64][]byte // out-of-order data past n
	Fin     bool              // the final size is known
	final   uint64
	reset   bool
	// last is when new contiguous data last arrived.
	last time.Time
}

const (
	// Keep is how much of a stream the raw client keeps.
	Keep = 1 << 20
	// pendingMax bounds out-of-order data kept past the contiguous end.
	pendingMax = 32 << 20
)

// Add takes d, the stream's data at offset off, fin when the frame carried
// FIN.
func (s *Stream) Add(off uint64, d []byte, fin bool) {
	end := off + uint64(len(d))
	if fin {
		s.Fin, s.final = true, end
	}
	if end <= s.n {
		return
	}
	if off > s.n {
		if end-s.n > pendingMax {
			return
		}
		if s.pending == nil {
			s.pending = map[uint64][]byte{}
		}
		if old, ok := s.pending[off]; !ok || len(old) < len(d) {
			s.pending[off] = append([]byte(nil), d...)
		}
		return
	}
	s.deliver(d[s.n-off:])
	for progress := true; progress; {
		progress = false
		for o, p := range s.pending {
			if o > s.n {
				continue
			}
			if e := o + uint64(len(p)); e > s.n {
				s.deliver(p[s.n-o:])
			}
			delete(s.pending, o)
			progress = true
		}
	}
}

// deliver takes the next contiguous bytes of the stream.
func (s *Stream) deliver(d []byte) {
	if s.sum == nil {
		s.sum = sha256.New()
	}
	if len(s.prefix) < Keep {
		s.prefix = append(s.prefix, d[:min(len(d), Keep-len(s.prefix))]...)
	}
	s.sum.Write(d)
	s.body.write(d)
	s.n += uint64(len(d))
	s.last = time.Now()
}

// Data is what the stream keeps of its first bytes (all of them for a
// stream shorter than Keep).
func (s *Stream) Data() []byte { return s.prefix }

// Received is how many contiguous bytes arrived.
func (s *Stream) Received() int { return int(s.n) }

// End is how far the stream's data reaches, contiguous or not.
func (s *Stream) End() uint64 {
	e := s.n
	for o, d := range s.pending {
		e = max(e, o+uint64(len(d)))
	}
	return e
}

// Complete reports that every byte up to the final size arrived.
func (s *Stream) Complete() bool { return s.Fin && s.n == s.final }

// h3BodyHash follows the HTTP/3 frames of a response stream as they arrive
// in order and hashes the payload of its DATA frames (RFC 9114 §7.2.1), so
// that two downloads of one resource compare whatever their framing.
type h3BodyHash struct {
	hdr     []byte // a frame header being read
	left    uint64 // payload bytes left in the current frame
	data    bool   // the current frame is DATA
	n       uint64 // DATA payload bytes
	sum     hash.Hash
	invalid bool
}

func (h *h3BodyHash) write(d []byte) {
	if h.sum == nil {
		h.sum = sha256.New()
	}
	for len(d) > 0 && !h.invalid {
		if h.left > 0 {
			k := min(uint64(len(d)), h.left)
			if h.data {
				h.sum.Write(d[:k])
				h.n += k
			}
			h.left -= k
			d = d[k:]
			continue
		}
		h.hdr = append(h.hdr, d[0])
		d = d[1:]
		typ, n, err := wire.ConsumeVarint(h.hdr)
		if err != nil {
			continue
		}
		l, m, err := wire.ConsumeVarint(h.hdr[n:])
		if err != nil {
			if len(h.hdr) > 16 {
				h.invalid = true
			}
			continue
		}
		_ = m
		h.hdr = h.hdr[:0]
		h.data, h.left = typ == 0x00, l
	}
}

// Digest is the length and SHA-256 of a response body received in full
// or in part: the stream's bytes for hq-interop, the DATA frames' payload
// for h3.
type Digest struct {
	Len uint64
	Sum [sha256.Size]byte
}

func (d Digest) String() string { return fmt.Sprintf("%d bytes, sha256 %x…", d.Len, d.Sum[:6]) }

// Digest is the length and SHA-256 of the stream's contiguous bytes.
func (s *Stream) Digest() Digest { return digestOf(s.sum, s.n) }

// BodyDigest is the length and SHA-256 of the DATA payload of the h3
// response the stream carries.
func (s *Stream) BodyDigest() Digest { return digestOf(s.body.sum, s.body.n) }

func digestOf(h hash.Hash, n uint64) Digest {
	if h == nil {
		h = sha256.New()
	}
	d := Digest{Len: n}
	copy(d.Sum[:], h.Sum(nil))
	return d
}
