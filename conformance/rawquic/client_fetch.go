package rawquic

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic/wire"
)

// BodyDigest returns the digest of req's response body so far.
func (rc *Client[P]) BodyDigest(req *Request) Digest {
	var d Digest
	s := rc.Stream(req.ID)
	if s == nil {
		copy(d.Sum[:], sha256.New().Sum(nil))
		return d
	}
	if req.ALPN == h3.ALPNH3 {
		return s.BodyDigest()
	}
	return s.Digest()
}

func (rc *Client[P]) OnStream(f *wire.StreamFrame) {
	if rc.streams == nil {
		rc.streams = map[uint64]*Stream{}
	}
	s := rc.streams[f.StreamID]
	if s == nil {
		s = &Stream{}
		rc.streams[f.StreamID] = s
	}
	before := uint64(s.Received())
	s.Add(f.Offset, f.Data, f.Fin)
	if n := uint64(s.Received()); n > before {
		rc.credit.Consumed(s, f.StreamID, n, n-before)
	}
}

// stream returns the reassembly of stream id (nil before any data).
func (rc *Client[P]) Stream(id uint64) *Stream { return rc.streams[id] }

// Request is a request the raw client sent.
type Request struct {
	ID    uint64
	Frame *wire.StreamFrame
	ALPN  string
}

// Request asks for path on the next client bidirectional stream, over the
// connection's application protocol (hq-interop, or h3 with a control
// stream and a static-table QPACK field section), and returns it.
func (rc *Client[P]) Request(path string) *Request {
	id := 4 * rc.NextBidi
	rc.NextBidi++
	req := rc.PrepareRequest(id, path)
	rc.Send1RTT([]wire.Frame{req.Frame}, ShortOpts{})
	return req
}

// prepareRequest builds the request for path on client bidirectional
// stream id without sending it (over h3 it opens the control stream
// first), so that a scenario can split, reorder or delay its bytes. The
// frame carries the whole request with FIN.
func (rc *Client[P]) PrepareRequest(id uint64, path string) *Request {
	alpn := rc.NegotiatedALPN()
	var body []byte
	if alpn == h3.ALPNH3 {
		if !rc.H3Control {
			rc.H3Control = true
			ctl := append([]byte{0x00}, H3Frame(0x04, nil)...)
			rc.Send1RTT([]wire.Frame{&wire.StreamFrame{StreamID: 2, Data: ctl}}, ShortOpts{})
		}
		body = H3Frame(0x01, rawFieldSection(rc.serverName, path))
	} else {
		body = []byte("GET " + path + "\r\n")
	}
	if n := id/4 + 1; id%4 == 0 && n > rc.NextBidi {
		rc.NextBidi = n
	}
	return &Request{ID: id, Frame: &wire.StreamFrame{StreamID: id, Data: body, Fin: true}, ALPN: alpn}
}

// negotiatedALPN is the application protocol of the connection.
func (rc *Client[P]) NegotiatedALPN() string {
	alpn := rc.ALPN[0]
	if rc.tls != nil {
		if st := rc.tls.ConnectionState(); st.NegotiatedProtocol != "" {
			alpn = st.NegotiatedProtocol
		}
	}
	return alpn
}

// rawFieldSection encodes a GET request's field section with QPACK's
// static table and literals only.
func rawFieldSection(host, path string) []byte {
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
func (rc *Client[P]) Body(req *Request) (body []byte, done bool) {
	s := rc.Stream(req.ID)
	if s == nil {
		return nil, false
	}
	if req.ALPN != h3.ALPNH3 {
		return s.Data(), s.Complete()
	}
	b := s.Data()
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
			if typ == 0x00 && s.Received() > Keep {
				body = append(body, b[n+m:]...)
			}
			break
		}
		if typ == 0x00 {
			body = append(body, b[n+m:n+m+int(l)]...)
		}
		b = b[n+m+int(l):]
	}
	return body, s.Complete()
}

// responseDone reports that req's response stream is complete (cheaply:
// Body parses the kept bytes).
func (rc *Client[P]) ResponseDone(req *Request) bool {
	s := rc.Stream(req.ID)
	return s != nil && s.Complete()
}

// Fetch requests path and receives until the response is complete, d has
// passed or the server closed; it resends the request when nothing at all
// came back for a PTO (the raw client has no loss recovery).
func (rc *Client[P]) Fetch(ctx context.Context, path string, d time.Duration) ([]byte, error) {
	req := rc.Request(path)
	return rc.Await(ctx, req, d)
}

// Await receives until req's response is complete, d has passed or the
// server closed.
func (rc *Client[P]) Await(ctx context.Context, req *Request, d time.Duration) ([]byte, error) {
	deadline := time.Now().Add(d)
	resent := false
	for time.Now().Before(deadline) && ctx.Err() == nil && !rc.PeerClosed {
		rc.Receive(ctx, min(time.Until(deadline), rc.host.PTO()), func() bool {
			return rc.ResponseDone(req) || rc.PeerClosed
		})
		if rc.ResponseDone(req) {
			body, _ := rc.Body(req)
			return body, nil
		}
		if rc.Stream(req.ID) == nil && !resent {
			resent = true
			rc.Send1RTT([]wire.Frame{req.Frame}, ShortOpts{})
		}
	}
	body, _ := rc.Body(req)
	switch {
	case rc.PeerClosed:
		return body, errors.New("the server closed the connection")
	case ctx.Err() != nil:
		return body, ctx.Err()
	}
	got := 0
	if s := rc.Stream(req.ID); s != nil {
		got = s.Received()
	}
	return body, fmt.Errorf(
		"the response on stream %d was incomplete after %v (%d bytes of the stream arrived in order)",
		req.ID,
		d.Round(time.Millisecond),
		got,
	)
}
