package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic/wire"
)

// rawStream reassembles one stream of the server's data on the raw client.
// It keeps the first rawKeep bytes (enough for every response a scenario
// reads: headers, control streams, the small resource) and, past them,
// only a count and a SHA-256 of the bytes in order, so that a download of
// any size runs in bounded memory. Out-of-order data waits in pending,
// which the flow-control window bounds (rawPendingMax past the contiguous
// end; data further out is a flow-control violation and is dropped).
type rawStream struct {
	prefix  []byte            // the first rawKeep contiguous bytes
	n       uint64            // contiguous bytes received from offset 0
	sum     hash.Hash         // SHA-256 of the n contiguous bytes
	body    h3BodyHash        // DATA payload of an h3 response, hashed in order
	pending map[uint64][]byte // out-of-order data past n
	fin     bool
	final   uint64
	reset   bool
	// last is when new contiguous data last arrived.
	last time.Time
}

const (
	// rawKeep is how much of a stream the raw client keeps.
	rawKeep = 1 << 20
	// rawPendingMax bounds out-of-order data kept past the contiguous end.
	rawPendingMax = 32 << 20
)

func (s *rawStream) add(off uint64, d []byte, fin bool) {
	end := off + uint64(len(d))
	if fin {
		s.fin, s.final = true, end
	}
	if end <= s.n {
		return
	}
	if off > s.n {
		if end-s.n > rawPendingMax {
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
func (s *rawStream) deliver(d []byte) {
	if s.sum == nil {
		s.sum = sha256.New()
	}
	if len(s.prefix) < rawKeep {
		s.prefix = append(s.prefix, d[:min(len(d), rawKeep-len(s.prefix))]...)
	}
	s.sum.Write(d)
	s.body.write(d)
	s.n += uint64(len(d))
	s.last = time.Now()
}

// data is what the stream keeps of its first bytes (all of them for a
// stream shorter than rawKeep).
func (s *rawStream) data() []byte { return s.prefix }

// received is how many contiguous bytes arrived.
func (s *rawStream) received() int { return int(s.n) }

// end is how far the stream's data reaches, contiguous or not.
func (s *rawStream) end() uint64 {
	e := s.n
	for o, d := range s.pending {
		e = max(e, o+uint64(len(d)))
	}
	return e
}

func (s *rawStream) complete() bool { return s.fin && s.n == s.final }

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

// BodyDigest returns the digest of req's response body so far.
func (rc *rawClient) BodyDigest(req *rawRequest) Digest {
	var d Digest
	s := rc.stream(req.id)
	if s == nil {
		copy(d.Sum[:], sha256.New().Sum(nil))
		return d
	}
	h, n := s.sum, s.n
	if req.alpn == h3.ALPNH3 {
		h, n = s.body.sum, s.body.n
	}
	if h == nil {
		h = sha256.New()
	}
	d.Len = n
	copy(d.Sum[:], h.Sum(nil))
	return d
}

func (rc *rawClient) onStream(f *wire.StreamFrame) {
	if rc.streams == nil {
		rc.streams = map[uint64]*rawStream{}
	}
	s := rc.streams[f.StreamID]
	if s == nil {
		s = &rawStream{}
		rc.streams[f.StreamID] = s
	}
	before := s.n
	s.add(f.Offset, f.Data, f.Fin)
	if s.n > before {
		rc.credit.consumed(s, f.StreamID, s.n, s.n-before)
	}
}

// stream returns the reassembly of stream id (nil before any data).
func (rc *rawClient) stream(id uint64) *rawStream { return rc.streams[id] }

// rawRequest is a request the raw client sent.
type rawRequest struct {
	id    uint64
	frame *wire.StreamFrame
	alpn  string
}

// Request asks for path on the next client bidirectional stream, over the
// connection's application protocol (hq-interop, or h3 with a control
// stream and a static-table QPACK field section), and returns it.
func (rc *rawClient) Request(path string) *rawRequest {
	id := 4 * rc.nextBidi
	rc.nextBidi++
	req := rc.prepareRequest(id, path)
	rc.Send1RTT([]wire.Frame{req.frame}, shortOpts{})
	return req
}

// prepareRequest builds the request for path on client bidirectional
// stream id without sending it (over h3 it opens the control stream
// first), so that a scenario can split, reorder or delay its bytes. The
// frame carries the whole request with FIN.
func (rc *rawClient) prepareRequest(id uint64, path string) *rawRequest {
	alpn := rc.negotiatedALPN()
	var body []byte
	if alpn == h3.ALPNH3 {
		if !rc.h3Control {
			rc.h3Control = true
			ctl := append([]byte{0x00}, h3Frame(0x04, nil)...)
			rc.Send1RTT([]wire.Frame{&wire.StreamFrame{StreamID: 2, Data: ctl}}, shortOpts{})
		}
		body = h3Frame(0x01, rawFieldSection(rc.t.profile, path))
	} else {
		body = []byte("GET " + path + "\r\n")
	}
	if n := id/4 + 1; id%4 == 0 && n > rc.nextBidi {
		rc.nextBidi = n
	}
	return &rawRequest{id: id, frame: &wire.StreamFrame{StreamID: id, Data: body, Fin: true}, alpn: alpn}
}

// negotiatedALPN is the application protocol of the connection.
func (rc *rawClient) negotiatedALPN() string {
	alpn := rc.alpn[0]
	if rc.tls != nil {
		if st := rc.tls.ConnectionState(); st.NegotiatedProtocol != "" {
			alpn = st.NegotiatedProtocol
		}
	}
	return alpn
}

// rawFieldSection encodes a GET request's field section with QPACK's
// static table and literals only.
func rawFieldSection(p *Profile, path string) []byte {
	host := p.sni()
	if host == "" {
		host = "localhost"
	}
	var buf bytes.Buffer
	enc := qpack.NewEncoder(&buf)
	for _, f := range []qpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: host}, {Name: ":path", Value: path}} {
		enc.WriteField(f)
	}
	return buf.Bytes()
}

// Body returns the response body of req so far: the stream's bytes for
// hq-interop, the DATA frames' payloads for h3. done reports that the
// whole response arrived.
func (rc *rawClient) Body(req *rawRequest) (body []byte, done bool) {
	s := rc.stream(req.id)
	if s == nil {
		return nil, false
	}
	if req.alpn != h3.ALPNH3 {
		return s.data(), s.complete()
	}
	b := s.data()
	for len(b) > 0 {
		typ, n, err := wire.ConsumeVarint(b)
		if err != nil {
			break
		}
		l, m, err := wire.ConsumeVarint(b[n:])
		if err != nil {
			break
		}
		if uint64(len(b)) < uint64(n+m)+l {
			// A frame not all there yet is not part of the body yet; one
			// that runs past what the stream keeps (rawKeep) gives the
			// bytes kept.
			if typ == 0x00 && s.n > rawKeep {
				body = append(body, b[n+m:]...)
			}
			break
		}
		if typ == 0x00 {
			body = append(body, b[n+m:n+m+int(l)]...)
		}
		b = b[n+m+int(l):]
	}
	return body, s.complete()
}

// responseDone reports that req's response stream is complete (cheaply:
// Body parses the kept bytes).
func (rc *rawClient) responseDone(req *rawRequest) bool {
	s := rc.stream(req.id)
	return s != nil && s.complete()
}

// Fetch requests path and receives until the response is complete, d has
// passed or the server closed; it resends the request when nothing at all
// came back for a PTO (the raw client has no loss recovery).
func (rc *rawClient) Fetch(ctx context.Context, path string, d time.Duration) ([]byte, error) {
	req := rc.Request(path)
	return rc.Await(ctx, req, d)
}

// Await receives until req's response is complete, d has passed or the
// server closed.
func (rc *rawClient) Await(ctx context.Context, req *rawRequest, d time.Duration) ([]byte, error) {
	deadline := time.Now().Add(d)
	resent := false
	for time.Now().Before(deadline) && ctx.Err() == nil && !rc.peerClosed {
		rc.Receive(ctx, min(time.Until(deadline), rc.t.PTO()), func() bool {
			return rc.responseDone(req) || rc.peerClosed
		})
		if rc.responseDone(req) {
			body, _ := rc.Body(req)
			return body, nil
		}
		if rc.stream(req.id) == nil && !resent {
			resent = true
			rc.Send1RTT([]wire.Frame{req.frame}, shortOpts{})
		}
	}
	body, _ := rc.Body(req)
	switch {
	case rc.peerClosed:
		return body, errors.New("the server closed the connection")
	case ctx.Err() != nil:
		return body, ctx.Err()
	}
	got := 0
	if s := rc.stream(req.id); s != nil {
		got = s.received()
	}
	return body, fmt.Errorf("the response on stream %d was incomplete after %v (%d bytes of the stream arrived in order)", req.id, d.Round(time.Millisecond), got)
}
