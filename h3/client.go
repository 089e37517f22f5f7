package h3

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"sync"

	"github.com/quiver-quic/quiver/h3/qpack"
)

// ClientConfig configures a ClientConn. The zero value is usable.
type ClientConfig struct {
	// MaxHeaderBytes bounds a response's header section and is advertised
	// as SETTINGS_MAX_FIELD_SECTION_SIZE; zero means DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// EnableDatagrams advertises SETTINGS_H3_DATAGRAM = 1 (RFC 9297).
	EnableDatagrams bool
	// QPACKMaxTableCapacity and QPACKBlockedStreams are the dynamic table
	// the server's encoder may use (RFC 9204 §5): zero means
	// DefaultQPACKMaxTableCapacity and DefaultQPACKBlockedStreams, a
	// negative value none.
	QPACKMaxTableCapacity int
	QPACKBlockedStreams   int
}

// ClientConn is the client side of one HTTP/3 connection. It is an
// http.RoundTripper whose requests all go to that connection's server; it
// is safe for concurrent use, each request on its own stream.
type ClientConn struct {
	s *session

	mu      sync.Mutex
	streams map[int64]Stream // requests in flight, for GOAWAY
}

var _ http.RoundTripper = (*ClientConn)(nil)

// NewClientConn starts HTTP/3 on conn: it opens the control stream with
// SETTINGS and the QPACK streams, and reads the server's streams in the
// background. ctx bounds only the opening of the streams.
func NewClientConn(ctx context.Context, conn Conn, cfg *ClientConfig) (*ClientConn, error) {
	if cfg == nil {
		cfg = &ClientConfig{}
	}
	c := &ClientConn{
		s:       newSession(conn, false, cfg.MaxHeaderBytes, cfg.EnableDatagrams, qpackLimits{cfg.QPACKMaxTableCapacity, cfg.QPACKBlockedStreams}),
		streams: make(map[int64]Stream),
	}
	c.s.onGoAway = c.goAway
	if err := c.s.start(ctx); err != nil {
		conn.Close(uint64(ErrCodeInternalError), "")
		c.s.cancel()
		return nil, err
	}
	go c.rejectServerStreams()
	return c, nil
}

// QPACKStats says how the connection's QPACK dynamic tables were used.
type QPACKStats struct {
	// Inserts is how many entries our encoder inserted, KnownReceived how
	// many of them the peer acknowledged, AckedSections how many of our
	// field sections that referred to them the peer acknowledged.
	Inserts, KnownReceived, AckedSections uint64
	// DynamicSections is how many of the peer's field sections referred
	// to the table the peer's encoder built.
	DynamicSections uint64
}

// QPACKStats reports the connection's use of QPACK dynamic tables.
func (c *ClientConn) QPACKStats() QPACKStats {
	return QPACKStats{Inserts: c.s.enc.InsertCount(), KnownReceived: c.s.enc.KnownReceivedCount(),
		AckedSections: c.s.enc.AckedSections(), DynamicSections: c.s.dec.DynamicSections()}
}

// rejectServerStreams ends the connection at the first server-initiated
// bidirectional stream. RFC 9114 §6.1: "Clients MUST treat receipt of a
// server-initiated bidirectional stream as a connection error of type
// H3_STREAM_CREATION_ERROR unless such an extension has been negotiated."
func (c *ClientConn) rejectServerStreams() {
	if _, err := c.s.conn.AcceptStream(c.s.ctx); err != nil {
		return
	}
	c.s.fail(connError(ErrCodeStreamCreationError, `server-initiated bidirectional stream; RFC 9114 §6.1: "Clients MUST treat receipt of a server-initiated bidirectional stream as a connection error of type H3_STREAM_CREATION_ERROR"`))
}

// PeerSettings waits for the server's SETTINGS frame and returns it.
func (c *ClientConn) PeerSettings(ctx context.Context) (*SettingsFrame, error) {
	return c.s.waitSettings(ctx)
}

// Done is closed when the connection has ended.
func (c *ClientConn) Done() <-chan struct{} { return c.s.ctx.Done() }

// Err returns why the connection ended, or nil while it is usable. A
// protocol violation by the server is an *Error.
func (c *ClientConn) Err() error { return c.s.Err() }

// GoAway reports whether the server sent GOAWAY and the last stream ID it
// carried: requests on streams at or above it were not processed.
func (c *ClientConn) GoAway() (bool, uint64) { return c.s.goingAway() }

// Close closes the connection with H3_NO_ERROR. In-flight requests fail.
func (c *ClientConn) Close() error {
	// The client's GOAWAY carries a push ID; no push was ever allowed, so 0.
	c.s.sendGoAway(0)
	c.s.closeNoError()
	return nil
}

// goAway cancels requests that a GOAWAY says will not be processed.
func (c *ClientConn) goAway(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.streams) == 0 {
		go c.Close()
		return
	}
	for sid, st := range c.streams {
		if uint64(sid) >= id {
			// RFC 9114 §5.2: "if the client has already sent requests with
			// a stream ID greater than or equal to the identifier contained
			// in the GOAWAY frame, those requests will not be processed."
			st.StopSending(uint64(ErrCodeRequestCancelled))
			st.Reset(uint64(ErrCodeRequestCancelled))
		}
	}
}

// rejectedByGoAway reports whether the request on stream id fell under a
// GOAWAY.
func (c *ClientConn) rejectedByGoAway(id int64) bool {
	gone, last := c.s.goingAway()
	return gone && uint64(id) >= last
}

// RoundTrip sends req on a new stream and returns the response once its
// header section has arrived; the body streams as DATA frames arrive.
// Request trailers are not sent. Closing the response body before EOF
// cancels the request with H3_REQUEST_CANCELLED, as does cancelling the
// request's context.
func (c *ClientConn) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("h3: request has no URL")
	}
	if err := c.s.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	// RFC 9114 §5.2: "Endpoints MUST NOT initiate new requests or promise
	// new pushes on the connection after receipt of a GOAWAY frame from the
	// peer."
	if gone, _ := c.s.goingAway(); gone {
		closeBody(req)
		return nil, ErrGoAway
	}
	fields, err := requestHeadFields(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	st, err := c.s.conn.OpenStream(ctx)
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("h3: open request stream: %w", err)
	}
	c.mu.Lock()
	c.streams[st.ID()] = st
	c.mu.Unlock()
	if c.rejectedByGoAway(st.ID()) {
		closeBody(req)
		c.forget(st)
		st.Reset(uint64(ErrCodeRequestCancelled))
		st.StopSending(uint64(ErrCodeRequestCancelled))
		return nil, ErrGoAway
	}
	stopCancel := context.AfterFunc(ctx, func() {
		st.StopSending(uint64(ErrCodeRequestCancelled))
		st.Reset(uint64(ErrCodeRequestCancelled))
	})
	fail := func(err error) (*http.Response, error) {
		stopCancel()
		c.forget(st)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if c.rejectedByGoAway(st.ID()) {
			return nil, ErrGoAway
		}
		if e, ok := asH3Error(err); ok && !e.Remote {
			if e.Stream {
				st.StopSending(uint64(e.Code))
				st.Reset(uint64(e.Code))
			} else {
				c.s.fail(e)
			}
			return nil, err
		}
		if serr := c.s.Err(); serr != nil {
			return nil, serr
		}
		return nil, err
	}

	hf := headersFrame(c.s.encodeFields(st.ID(), fields))
	hasBody := req.Body != nil && req.Body != http.NoBody
	if _, err := st.Write(hf); err != nil {
		closeBody(req)
		return fail(fmt.Errorf("h3: write request: %w", peerReset(err)))
	}
	if hasBody {
		go sendRequestBody(st, req.Body)
	} else {
		// RFC 9114 §4.1: "After sending a request, a client MUST close the
		// stream for sending."
		st.CloseWrite()
	}

	fr := newFrameReader(bufio.NewReaderSize(st, streamReadBuffer), c.s.maxFieldSection)
	trace := httptrace.ContextClientTrace(ctx)
	for {
		fields, err := readHeaderSection(ctx, c.s, st, fr, false)
		if err == io.EOF {
			return fail(streamError(ErrCodeRequestIncomplete, "server closed the stream without a response"))
		}
		if errors.As(err, new(errFieldSectionTooLarge)) {
			return fail(streamError(ErrCodeExcessiveLoad, "%v", err))
		}
		if err != nil {
			return fail(err)
		}
		rh, err := parseResponseHead(fields)
		if err != nil {
			// RFC 9114 §4.1.2: "Clients MUST NOT accept a malformed
			// response."
			return fail(err)
		}
		if rh.status < 200 {
			if trace != nil && trace.Got1xxResponse != nil {
				if err := trace.Got1xxResponse(rh.status, textproto.MIMEHeader(rh.header)); err != nil {
					return fail(err)
				}
			}
			continue
		}
		return c.newResponse(req, st, fr, rh, stopCancel), nil
	}
}

// newResponse wraps a final response head and its streaming body.
func (c *ClientConn) newResponse(req *http.Request, st Stream, fr *frameReader, rh *responseHead, stopCancel func() bool) *http.Response {
	resp := &http.Response{
		Status:        strconv.Itoa(rh.status) + " " + http.StatusText(rh.status),
		StatusCode:    rh.status,
		Proto:         "HTTP/3.0",
		ProtoMajor:    3,
		Header:        rh.header,
		ContentLength: rh.contentLength,
		Request:       req,
		Trailer:       make(http.Header),
	}
	body := &clientBody{
		c:          c,
		st:         st,
		stopCancel: stopCancel,
		r:          bodyReader{s: c.s, st: st, fr: fr, contentLength: rh.contentLength, trailer: resp.Trailer},
	}
	noBody := req.Method == http.MethodHead || rh.status == http.StatusNoContent || rh.status == http.StatusNotModified
	if noBody {
		// The content of these responses is empty whatever Content-Length
		// says (RFC 9114 §4.1.2); the stream is still read to its end.
		body.r.contentLength = -1
		resp.Body = http.NoBody
		go func() {
			io.Copy(io.Discard, body)
			body.Close()
		}()
	} else {
		resp.Body = body
	}
	return resp
}

// forget removes a finished request from the in-flight set. After a GOAWAY,
// the last one to finish closes the connection: RFC 9114 §5.2, "Once all
// accepted requests and pushes have been processed, the endpoint can permit
// the connection to become idle, or it MAY initiate an immediate closure of
// the connection."
func (c *ClientConn) forget(st Stream) {
	c.mu.Lock()
	delete(c.streams, st.ID())
	idle := len(c.streams) == 0
	c.mu.Unlock()
	if gone, _ := c.s.goingAway(); gone && idle {
		c.Close()
	}
}

// clientBody is a response body.
type clientBody struct {
	c          *ClientConn
	st         Stream
	stopCancel func() bool
	r          bodyReader
	closeOnce  sync.Once
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil {
		if err != io.EOF && b.c.rejectedByGoAway(b.st.ID()) {
			err = ErrGoAway
		}
		b.release()
	}
	return n, err
}

// release ends the request's bookkeeping once.
func (b *clientBody) release() {
	b.closeOnce.Do(func() {
		b.stopCancel()
		b.c.forget(b.st)
	})
}

// Close releases the stream; before EOF it cancels the rest of the
// response with H3_REQUEST_CANCELLED.
func (b *clientBody) Close() error {
	if b.r.getErr() == nil {
		b.st.StopSending(uint64(ErrCodeRequestCancelled))
		b.r.closeRead(errors.New("h3: read on closed response body"))
	}
	b.release()
	return nil
}

// sendRequestBody writes the request content as DATA frames, then FIN.
func sendRequestBody(st Stream, body io.ReadCloser) {
	defer body.Close()
	// The buffer is pooled: a request of a few hundred bytes (an RPC) paid
	// a fresh, zeroed 32 KiB per request. st.Write copies (io.Writer must
	// not retain p), so the buffer is free again when this returns.
	bp := requestBodyBufs.Get().(*[]byte)
	defer requestBodyBufs.Put(bp)
	buf := *bp
	for {
		n, err := body.Read(buf[16:])
		if n > 0 {
			var hdr [16]byte
			h := appendFrameHeader(hdr[:0], FrameData, uint64(n))
			start := 16 - len(h)
			copy(buf[start:], h)
			if _, werr := st.Write(buf[start : 16+n]); werr != nil {
				return
			}
		}
		if err == io.EOF {
			st.CloseWrite()
			return
		}
		if err != nil {
			// The request cannot be completed: RFC 9114 §4.1.1 lets a
			// client cancel it by resetting the stream.
			st.Reset(uint64(ErrCodeRequestCancelled))
			return
		}
	}
}

// requestBodyBufs holds sendRequestBody's buffers: room for a DATA frame
// header and 32 KiB of body.
var requestBodyBufs = sync.Pool{New: func() any { b := make([]byte, 16+32<<10); return &b }}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// requestHeadFields lists the request's header section (RFC 9114 §4.3.1).
func requestHeadFields(req *http.Request) ([]qpack.HeaderField, error) {
	authority := req.Host
	if authority == "" {
		authority = req.URL.Host
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	var pseudo []qpack.HeaderField
	if method == http.MethodConnect {
		if authority == "" {
			return nil, errors.New("h3: CONNECT request without a host")
		}
		pseudo = []qpack.HeaderField{{Name: ":method", Value: method}, {Name: ":authority", Value: authority}}
	} else {
		scheme := req.URL.Scheme
		if scheme == "" {
			scheme = "https"
		}
		path := req.URL.RequestURI()
		if path == "" {
			path = "/"
		}
		pseudo = []qpack.HeaderField{
			{Name: ":method", Value: method},
			{Name: ":scheme", Value: scheme},
		}
		if authority != "" {
			pseudo = append(pseudo, qpack.HeaderField{Name: ":authority", Value: authority})
		}
		pseudo = append(pseudo, qpack.HeaderField{Name: ":path", Value: path})
	}
	h := req.Header
	if req.ContentLength > 0 && h.Get("Content-Length") == "" {
		h = h.Clone()
		if h == nil {
			h = make(http.Header)
		}
		h.Set("Content-Length", strconv.FormatInt(req.ContentLength, 10))
	}
	for k, vs := range h {
		for _, v := range vs {
			if !validFieldValue(v) || !validFieldName(strings.ToLower(k)) {
				return nil, fmt.Errorf("h3: invalid header field %q", k)
			}
		}
	}
	// :authority replaces Host (RFC 9114 §4.3.1: clients "SHOULD use the
	// :authority pseudo-header field instead of the Host header field").
	return fieldList(pseudo, h, func(name string) bool { return name == "host" }), nil
}
