package rpc

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic"
)

// QUIC carries one call per bidirectional stream: the client writes the
// request frame and keeps its side open until the call ends (a cancel
// frame, a reset or the stream's end cancels the call on the server); the
// server writes message frames and an end frame, then closes.

// Stream error codes.
const (
	codeCallCanceled = 0x1
	alpnH3           = h3.ALPNH3
)

func quicConfig(tlsConf *tls.Config, protos ...string) *quic.Config {
	return &quic.Config{
		TLSConfig:      withALPN(tlsConf, protos...),
		MaxBidiStreams: 1024,
		MaxIdleTimeout: 30 * time.Second,
	}
}

// quicListener serves the framed protocol and HTTP/3 on one UDP port; the
// ALPN of each connection says which.
type quicListener struct {
	ep     *quic.Endpoint
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// ListenQUIC listens on the UDP address addr for calls over QUIC (ALPN
// quiver-rpc, a stream per call) and HTTP/3 (ALPN h3). tlsConf must carry
// a certificate.
func ListenQUIC(addr string, tlsConf *tls.Config) (Listener, error) {
	if tlsConf == nil || (len(tlsConf.Certificates) == 0 && tlsConf.GetCertificate == nil) {
		return nil, errors.New("rpc: ListenQUIC needs a TLS configuration with a certificate")
	}
	ep, err := quic.Listen("udp", addr, quicConfig(tlsConf, alpnRPC, alpnH3))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &quicListener{ep: ep, ctx: ctx, cancel: cancel}, nil
}

func (l *quicListener) Addr() net.Addr { return l.ep.Addr() }

func (l *quicListener) Close() error {
	l.cancel()
	return l.ep.Close()
}

func (l *quicListener) Serve(h Handler) error {
	max := DefaultMaxMessageSize
	if s, ok := h.(*Server); ok {
		max = s.maxMessage()
	}
	defer l.wg.Wait()
	for {
		c, err := l.ep.Accept(l.ctx)
		if err != nil {
			if l.ctx.Err() != nil {
				return nil
			}
			return err
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			if c.ALPN() == alpnH3 {
				srv := &h3.Server{Handler: &httpHandler{h: h, max: max}, ShutdownGrace: 100 * time.Millisecond,
					QPACKMaxTableCapacity: -1, QPACKBlockedStreams: -1}
				srv.ServeConn(l.ctx, h3Conn{c})
				return
			}
			l.serveConn(c, h, max)
		}()
	}
}

func (l *quicListener) serveConn(c *quic.Conn, h Handler, max int) {
	st := c.ConnectionState()
	base := &Request{Transport: "quic", RemoteAddr: c.RemoteAddr(), TLS: &st}
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(l.ctx, func() { c.Close(0, "server closed") })
	defer stop()
	for {
		s, err := c.AcceptStream(l.ctx)
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveQUICStream(s, h, base, max)
		}()
	}
}

func serveQUICStream(s *quic.Stream, h Handler, base *Request, max int) {
	defer s.Close()
	br := getReader(s)
	f, err := readFrame(br, max+frameOverhead)
	if err != nil || f.typ != frameRequest {
		putReader(br)
		s.Reset(codeCallCanceled)
		return
	}
	// From here on the goroutine below is the reader's last user, and
	// returns it to the pool when it is done.
	req := f.req
	req.Transport, req.RemoteAddr, req.TLS = base.Transport, base.RemoteAddr, base.TLS
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if req.Stream {
		// The client's messages follow the request; its end of the
		// stream (FIN) ends them, and a reset cancels the call.
		q := newCallQueue()
		req.Recv = q.recvFunc(ctx, max)
		go func() {
			defer putReader(br)
			for {
				f, err := readFrame(br, max+frameOverhead)
				if err == io.EOF {
					q.push(streamEnd)
					return
				}
				if err != nil || f.typ != frameMessage {
					q.fail(errors.New("request stream reset"))
					cancel()
					return
				}
				q.push(f)
			}
		}()
	} else {
		go func() {
			// Anything after the request (a cancel frame, the stream's
			// end, a reset, the connection's end) means the client is
			// done.
			readFrame(br, frameOverhead)
			cancel()
			putReader(br)
		}()
	}
	// A unary call's answer and end frame go out in one write, so that
	// they can share a packet.
	unary := isUnary(h, req.Method)
	var buf, held []byte
	st := h.HandleCall(ctx, req, func(p []byte) error {
		if unary && held == nil {
			held = p
			return nil
		}
		buf = appendMessage(buf[:0], 0, p)
		if _, err := s.Write(buf); err != nil {
			return unavailable(false, "send answer: %v", err)
		}
		return nil
	})
	buf = buf[:0]
	if held != nil {
		buf = appendMessage(buf, 0, held)
	}
	s.Write(appendEnd(buf, 0, st))
}

// streamReadBuffer sizes the reader of one call's stream. Headers and end
// frames fit in it; a payload larger than it is read straight into its
// frame. bufio's default of 4 KB was zeroed for every call and cost 7 %
// of the CPU at concurrency 64 (docs/rpc.md, profile).
const streamReadBuffer = 512

// streamReaders holds the readers of calls' streams: each call took a
// fresh one at each end, four of a QUIC call's 59 allocations
// (docs/highway.md). A reader goes back only from the goroutine that read
// it last.
var streamReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, streamReadBuffer) }}

func getReader(r io.Reader) *bufio.Reader {
	br := streamReaders.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

func putReader(br *bufio.Reader) {
	br.Reset(nil)
	streamReaders.Put(br)
}

// quicTransport is the client side of the framed protocol over QUIC.
type quicTransport struct {
	addr string
	conf *quic.Config

	mu     sync.Mutex
	conn   *quic.Conn
	closed bool
}

// DialQUIC returns a transport to a QUIC listener at the UDP address addr;
// every call is a stream of one connection.
func DialQUIC(addr string, tlsConf *tls.Config) Transport {
	return &quicTransport{addr: addr, conf: quicConfig(tlsConf, alpnRPC)}
}

func (t *quicTransport) Name() string { return "quic" }

func (t *quicTransport) Connect(ctx context.Context) error {
	_, err := t.get(ctx)
	return err
}

func (t *quicTransport) get(ctx context.Context) (*quic.Conn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, unavailable(true, "quic transport closed")
	}
	if t.conn != nil && t.conn.Err() == nil {
		return t.conn, nil
	}
	if t.conn != nil {
		t.conn.Close(0, "")
	}
	c, err := quic.Dial(ctx, "udp", t.addr, t.conf)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxStatus(ctx)
		}
		return nil, unavailable(true, "quic: dial %s: %v", t.addr, err)
	}
	t.conn = c
	return c, nil
}

func (t *quicTransport) Close() error {
	t.mu.Lock()
	t.closed = true
	c := t.conn
	t.mu.Unlock()
	if c != nil {
		return c.Close(0, "")
	}
	return nil
}

func (t *quicTransport) RoundTrip(ctx context.Context, req *Request) (ResponseStream, error) {
	c, err := t.get(ctx)
	if err != nil {
		return nil, err
	}
	s, err := c.OpenStream(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxStatus(ctx)
		}
		return nil, unavailable(true, "quic: open stream: %v", err)
	}
	if _, err := s.WriteContext(ctx, appendRequest(nil, 0, req)); err != nil {
		s.Reset(codeCallCanceled)
		s.Close()
		if ctx.Err() != nil {
			return nil, ctxStatus(ctx)
		}
		return nil, unavailable(false, "quic: send request: %v", err)
	}
	qs := &quicStream{s: s, ctx: ctx, cr: ctxReader{ctx, s}}
	qs.br = getReader(&qs.cr)
	return qs, nil
}

// OpenStream implements Streamer: the request frame, then a message frame
// per Send, then the stream's FIN at CloseSend.
func (t *quicTransport) OpenStream(ctx context.Context, req *Request) (SendStream, error) {
	rs, err := t.RoundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	return rs.(*quicStream), nil
}

// Send writes a request message of a stream call.
func (q *quicStream) Send(p []byte) error {
	if _, err := q.s.WriteContext(q.ctx, appendMessage(nil, 0, p)); err != nil {
		if q.ctx.Err() != nil {
			return ctxStatus(q.ctx)
		}
		return unavailable(false, "quic: send: %v", err)
	}
	return nil
}

// CloseSend ends the request stream (FIN).
func (q *quicStream) CloseSend() error {
	if err := q.s.CloseWrite(); err != nil {
		return unavailable(false, "quic: close send: %v", err)
	}
	return nil
}

type ctxReader struct {
	ctx context.Context
	s   *quic.Stream
}

func (r ctxReader) Read(p []byte) (int, error) { return r.s.ReadContext(r.ctx, p) }

type quicStream struct {
	s    *quic.Stream
	ctx  context.Context
	cr   ctxReader
	br   *bufio.Reader // nil once the answer ended
	done bool
}

// Recv reads the next answer. It gives the reader back when the answer
// ends: only Recv reads it, and calls to Recv do not overlap (Close may
// run beside one, and leaves the reader alone).
func (q *quicStream) Recv() ([]byte, error) {
	if q.done || q.br == nil {
		return nil, io.EOF
	}
	f, err := readFrame(q.br, 1<<30)
	if err != nil || f.typ != frameMessage {
		putReader(q.br)
		q.br = nil
	}
	if err != nil {
		q.abort()
		if q.ctx.Err() != nil {
			return nil, ctxStatus(q.ctx)
		}
		return nil, unavailable(false, "quic: read answer: %v", err)
	}
	switch f.typ {
	case frameMessage:
		return f.data, nil
	case frameEnd:
		q.done = true
		q.s.Close()
		if f.status.Code == OK {
			return nil, io.EOF
		}
		return nil, f.status
	}
	q.abort()
	return nil, Errorf(Internal, "unexpected frame type %d", f.typ)
}

// abort cancels the call on the server: the reset ends the server's read
// of the request stream.
func (q *quicStream) abort() {
	if !q.done {
		q.done = true
		q.s.Reset(codeCallCanceled)
		q.s.StopSending(codeCallCanceled)
	}
}

func (q *quicStream) Close() error {
	q.abort()
	return nil
}

// h3Conn adapts a *quic.Conn to the h3 package's connection interface.
type h3Conn struct{ c *quic.Conn }

func (a h3Conn) OpenStream(ctx context.Context) (h3.Stream, error) {
	s, err := a.c.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (a h3Conn) OpenUniStream(ctx context.Context) (h3.Stream, error) {
	s, err := a.c.OpenUniStream(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (a h3Conn) AcceptStream(ctx context.Context) (h3.Stream, error) {
	s, err := a.c.AcceptStream(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (a h3Conn) AcceptUniStream(ctx context.Context) (h3.Stream, error) {
	s, err := a.c.AcceptUniStream(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (a h3Conn) Close(code uint64, reason string) error { return a.c.Close(code, reason) }
func (a h3Conn) ALPN() string                           { return a.c.ALPN() }

// rpcH3Config turns the QPACK dynamic table off both ways (with the
// listener's h3.Server): an RPC's header section is small and mostly in
// the static table, and a section that refers to the dynamic table makes
// its decoder send a Section Acknowledgment (RFC 9204 §4.4.1), one more
// packet each way per call.
var rpcH3Config = &h3.ClientConfig{QPACKMaxTableCapacity: -1, QPACKBlockedStreams: -1}

// h3RoundTripper keeps one HTTP/3 connection, redialed when it ends.
type h3RoundTripper struct {
	addr string
	conf *quic.Config

	mu     sync.Mutex
	cc     *h3.ClientConn
	qc     *quic.Conn
	closed bool
}

// DialHTTP3 returns a transport that sends calls as HTTP/3 requests (a
// QUIC stream each) to a QUIC listener at the UDP address addr.
func DialHTTP3(addr string, tlsConf *tls.Config) Transport {
	rt := &h3RoundTripper{addr: addr, conf: quicConfig(tlsConf, alpnH3)}
	return &httpTransport{
		name: transportHTTP3, baseURL: "https://" + addr + httpPathPrefix, duplex: true, rt: rt,
		connect: func(ctx context.Context) error { _, err := rt.get(ctx); return err },
		close:   rt.Close,
	}
}

func (r *h3RoundTripper) get(ctx context.Context) (*h3.ClientConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, unavailable(true, "http3 transport closed")
	}
	if r.cc != nil && r.cc.Err() == nil {
		if away, _ := r.cc.GoAway(); !away {
			return r.cc, nil
		}
	}
	if r.cc != nil {
		// Closing the QUIC connection too releases its socket even when
		// the HTTP/3 layer already gave up on it.
		r.cc.Close()
		r.qc.Close(0, "")
	}
	c, err := quic.Dial(ctx, "udp", r.addr, r.conf)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxStatus(ctx)
		}
		return nil, unavailable(true, "http3: dial %s: %v", r.addr, err)
	}
	cc, err := h3.NewClientConn(ctx, h3Conn{c}, rpcH3Config)
	if err != nil {
		c.Close(0, "")
		return nil, unavailable(true, "http3: %v", err)
	}
	r.cc, r.qc = cc, c
	return cc, nil
}

func (r *h3RoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	cc, err := r.get(req.Context())
	if err != nil {
		return nil, err
	}
	return cc.RoundTrip(req)
}

func (r *h3RoundTripper) Close() error {
	r.mu.Lock()
	r.closed = true
	cc, qc := r.cc, r.qc
	r.mu.Unlock()
	if cc != nil {
		cc.Close()
		return qc.Close(0, "")
	}
	return nil
}
