package rpc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The HTTP mapping, shared by HTTP/1.1, HTTP/2 and HTTP/3: a call is
// POST /rpc/METHOD with the call's fields in headers and the request
// payload as the body; the response body is a sequence of frames (message
// frames, then one end frame) in the format of frame.go. On HTTP/3 the
// request body is "duplex": a 4-byte length, the payload, then nothing
// until the call ends, so that a canceled call resets the request stream
// and the server notices even though the handler is still running.
const (
	httpPathPrefix   = "/rpc/"
	hdrCodec         = "Quiver-Codec"
	hdrTimeout       = "Quiver-Timeout" // microseconds
	hdrIdempotent    = "Quiver-Idempotent"
	hdrDuplex        = "Quiver-Duplex"
	hdrStream        = "Quiver-Stream" // the body is a stream of message frames
	hdrMetaPrefix    = "Quiver-Md-"
	httpContentType  = "application/quiver-frames"
	alpnHTTP2        = "h2"
	alpnHTTP1        = "http/1.1"
	transportHTTP1   = "http1"
	transportHTTP2   = "http2"
	transportHTTP3   = "http3"
	httpFrameMaxPlus = frameOverhead
)

// httpHandler serves calls on any HTTP version.
type httpHandler struct {
	h   Handler
	max int
}

func (hh *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, httpPathPrefix) {
		http.Error(w, "quiver rpc: POST /rpc/Service.Method", http.StatusNotFound)
		return
	}
	req := &Request{
		Method:     strings.TrimPrefix(r.URL.Path, httpPathPrefix),
		Codec:      r.Header.Get(hdrCodec),
		Idempotent: r.Header.Get(hdrIdempotent) == "1",
		RemoteAddr: stringAddr(r.RemoteAddr),
		TLS:        r.TLS,
	}
	switch r.ProtoMajor {
	case 1:
		req.Transport = transportHTTP1
	case 2:
		req.Transport = transportHTTP2
	default:
		req.Transport = transportHTTP3
	}
	if v := r.Header.Get(hdrTimeout); v != "" {
		us, err := strconv.ParseInt(v, 10, 64)
		if err != nil || us < 0 {
			http.Error(w, "bad "+hdrTimeout, http.StatusBadRequest)
			return
		}
		req.Timeout = time.Duration(us) * time.Microsecond
	}
	for k, vs := range r.Header {
		if strings.HasPrefix(k, hdrMetaPrefix) {
			if req.Metadata == nil {
				req.Metadata = Metadata{}
			}
			key := strings.ToLower(strings.TrimPrefix(k, hdrMetaPrefix))
			req.Metadata[key] = append(req.Metadata[key], vs...)
		}
	}
	ctx := r.Context()
	var err error
	streamed := false
	if r.Header.Get(hdrStream) == "1" {
		// The body carries the client's messages as message frames; its
		// end ends them, and an error (a reset, a broken connection)
		// cancels the call. HTTP/1.1 needs full duplex to read the body
		// while answering.
		req.Stream, streamed = true, true
		http.NewResponseController(w).EnableFullDuplex()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		q := newCallQueue()
		req.Recv = q.recvFunc(ctx, hh.max)
		br := getReader(r.Body)
		go func() {
			defer putReader(br)
			for {
				f, err := readFrame(br, hh.max+frameOverhead)
				if err == io.EOF {
					q.push(streamEnd)
					return
				}
				if err != nil || f.typ != frameMessage {
					q.fail(errors.New("request stream broken"))
					cancel()
					return
				}
				q.push(f)
			}
		}()
	} else if r.Header.Get(hdrDuplex) == "1" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		var hdr [4]byte
		if _, err = io.ReadFull(r.Body, hdr[:]); err == nil {
			n := binary.BigEndian.Uint32(hdr[:])
			if int64(n) > int64(hh.max) {
				err = fmt.Errorf("request of %d bytes exceeds the limit of %d", n, hh.max)
			} else {
				req.Payload = make([]byte, n)
				_, err = io.ReadFull(r.Body, req.Payload)
			}
		}
		if err == nil {
			// The rest of the body ends when the client is done with the
			// call; an error before that means it canceled.
			go func() {
				io.Copy(io.Discard, r.Body)
				cancel()
			}()
		}
	} else {
		req.Payload, err = io.ReadAll(io.LimitReader(r.Body, int64(hh.max)+1))
	}
	w.Header()["Content-Type"] = valueContentType
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if streamed && flusher != nil {
		// The client's OpenStream returns with the response headers.
		flusher.Flush()
	}
	var st *Status
	var held []byte
	switch {
	case err != nil:
		st = &Status{Code: ResourceExhausted, Message: err.Error()}
	case len(req.Payload) > hh.max:
		st = &Status{Code: ResourceExhausted, Message: fmt.Sprintf("request exceeds the server's limit of %d bytes", hh.max)}
	default:
		unary := isUnary(hh.h, req.Method)
		var buf []byte
		st = hh.h.HandleCall(ctx, req, func(p []byte) error {
			if unary && held == nil {
				// Sent with the end frame, in one write.
				held = p
				return nil
			}
			buf = appendMessage(buf[:0], 0, p)
			if _, err := w.Write(buf); err != nil {
				return unavailable(false, "send answer: %v", err)
			}
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		})
	}
	var end []byte
	if held != nil {
		end = appendMessage(end, 0, held)
	}
	w.Write(appendEnd(end, 0, st))
}

// Shared header values. Neither net/http nor h3 changes a value slice in
// place (Header.Add appends to a slice of capacity one, so it copies).
var (
	valueOne         = []string{"1"}
	valueContentType = []string{httpContentType}
	valueJSON        = []string{JSON.Name()}
	valueProto       = []string{Proto.Name()}
)

// headerValue returns v as a header value, shared when v is a codec name.
func headerValue(v string) []string {
	switch v {
	case JSON.Name():
		return valueJSON
	case Proto.Name():
		return valueProto
	}
	return []string{v}
}

type stringAddr string

func (a stringAddr) Network() string { return "tcp" }
func (a stringAddr) String() string  { return string(a) }

// httpTransport is the client side of HTTP/1.1, HTTP/2 and HTTP/3.
type httpTransport struct {
	name    string
	baseURL string
	duplex  bool
	rt      http.RoundTripper
	connect func(ctx context.Context) error
	close   func() error
}

// DialHTTP1 returns a transport that sends calls as HTTP/1.1 requests over
// TLS to addr, on a pool of connections (one call per connection at a time).
func DialHTTP1(addr string, tlsConf *tls.Config) Transport {
	return dialNetHTTP(transportHTTP1, addr, tlsConf)
}

// DialHTTP2 returns a transport that multiplexes calls as HTTP/2 streams
// over one TLS connection to addr (ALPN h2).
func DialHTTP2(addr string, tlsConf *tls.Config) Transport {
	return dialNetHTTP(transportHTTP2, addr, tlsConf)
}

func dialNetHTTP(name, addr string, tlsConf *tls.Config) Transport {
	var p http.Protocols
	tr := &http.Transport{
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DialContext:         (&net.Dialer{}).DialContext,
	}
	if name == transportHTTP1 {
		p.SetHTTP1(true)
		tr.TLSClientConfig = withALPN(tlsConf, alpnHTTP1)
	} else {
		p.SetHTTP2(true)
		tr.TLSClientConfig = withALPN(tlsConf, alpnHTTP2)
		tr.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1000}
	}
	tr.Protocols = &p
	t := &httpTransport{name: name, baseURL: "https://" + addr + httpPathPrefix, rt: tr}
	t.connect = func(ctx context.Context) error {
		// A ping opens (and keeps) a connection.
		rs, err := t.RoundTrip(ctx, &Request{Method: PingMethod})
		if err != nil {
			return err
		}
		defer rs.Close()
		if _, err := rs.Recv(); err != io.EOF {
			return err
		}
		return nil
	}
	t.close = func() error { tr.CloseIdleConnections(); return nil }
	return t
}

func (t *httpTransport) Name() string                      { return t.name }
func (t *httpTransport) Connect(ctx context.Context) error { return t.connect(ctx) }
func (t *httpTransport) Close() error                      { return t.close() }

// OpenStream implements Streamer: the request body is a pipe of message
// frames, closed by CloseSend.
func (t *httpTransport) OpenStream(ctx context.Context, req *Request) (SendStream, error) {
	pr, pw := io.Pipe()
	rs, err := t.roundTrip(ctx, req, pr)
	if err != nil {
		pw.CloseWithError(err)
		return nil, err
	}
	hs := rs.(*httpStream)
	hs.pw = pw
	return hs, nil
}

// Send writes a request message of a stream call.
func (s *httpStream) Send(p []byte) error {
	if _, err := s.pw.Write(appendMessage(nil, 0, p)); err != nil {
		if s.ctx.Err() != nil {
			return ctxStatus(s.ctx)
		}
		return unavailable(false, "%s: send: %v", s.name, err)
	}
	return nil
}

// CloseSend ends the request body.
func (s *httpStream) CloseSend() error { return s.pw.Close() }

func (t *httpTransport) RoundTrip(ctx context.Context, req *Request) (ResponseStream, error) {
	return t.roundTrip(ctx, req, nil)
}

func (t *httpTransport) roundTrip(ctx context.Context, req *Request, stream io.ReadCloser) (ResponseStream, error) {
	var body io.ReadCloser
	var done chan struct{}
	if stream != nil {
		body = stream
	} else if t.duplex {
		done = make(chan struct{})
		body = &duplexBody{ctx: ctx, done: done, head: binary.BigEndian.AppendUint32(nil, uint32(len(req.Payload))), payload: req.Payload}
	} else {
		body = io.NopCloser(bytes.NewReader(req.Payload))
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, t.baseURL+req.Method, body)
	if err != nil {
		return nil, Errorf(Internal, "build request: %v", err)
	}
	// The header's names are canonical already and its fixed values are
	// shared slices (headerValue): Header.Set allocated a slice for each,
	// five per call.
	if stream != nil {
		hr.ContentLength = -1
		hr.Header[hdrStream] = valueOne
	} else if !t.duplex {
		hr.ContentLength = int64(len(req.Payload))
	}
	hr.Header["Content-Type"] = valueContentType
	hr.Header[hdrCodec] = headerValue(req.Codec)
	if req.Timeout > 0 {
		hr.Header.Set(hdrTimeout, strconv.FormatInt(int64(req.Timeout/time.Microsecond), 10))
	}
	if req.Idempotent {
		hr.Header[hdrIdempotent] = valueOne
	}
	if t.duplex && stream == nil {
		hr.Header[hdrDuplex] = valueOne
	}
	for k, vs := range req.Metadata {
		for _, v := range vs {
			hr.Header.Add(hdrMetaPrefix+k, v)
		}
	}
	resp, err := t.rt.RoundTrip(hr)
	if err != nil {
		if done != nil {
			close(done)
		}
		if ctx.Err() != nil {
			return nil, ctxStatus(ctx)
		}
		if st := (*Status)(nil); errors.As(err, &st) {
			return nil, st
		}
		var op *net.OpError
		notSent := errors.As(err, &op) && op.Op == "dial"
		return nil, unavailable(notSent, "%s: %v", t.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		if done != nil {
			close(done)
		}
		return nil, Errorf(Internal, "%s: HTTP status %s", t.name, resp.Status)
	}
	return &httpStream{name: t.name, ctx: ctx, resp: resp, br: getReader(resp.Body), done: done}, nil
}

// duplexBody is a request body that stays open until the call ends.
type duplexBody struct {
	ctx           context.Context
	done          chan struct{}
	head, payload []byte
}

func (b *duplexBody) Read(p []byte) (int, error) {
	if len(b.head)+len(b.payload) > 0 {
		// Length and payload in one read, so that they go out as one
		// DATA frame in one stream write.
		n := copy(p, b.head)
		b.head = b.head[n:]
		m := copy(p[n:], b.payload)
		b.payload = b.payload[m:]
		return n + m, nil
	}
	select {
	case <-b.done:
		return 0, io.EOF
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	}
}

func (b *duplexBody) Close() error { return nil }

type httpStream struct {
	name     string
	ctx      context.Context
	resp     *http.Response
	br       *bufio.Reader // nil once the answer ended (Recv gives it back)
	done     chan struct{}
	pw       *io.PipeWriter // request body of a stream call
	finished bool
	once     sync.Once
}

func (s *httpStream) Recv() ([]byte, error) {
	if s.finished || s.br == nil {
		return nil, io.EOF
	}
	f, err := readFrame(s.br, DefaultMaxMessageSize*16+httpFrameMaxPlus)
	if err != nil || f.typ != frameMessage {
		putReader(s.br)
		s.br = nil
	}
	if err != nil {
		s.Close()
		if s.ctx.Err() != nil {
			return nil, ctxStatus(s.ctx)
		}
		return nil, unavailable(false, "%s: read answer: %v", s.name, err)
	}
	switch f.typ {
	case frameMessage:
		return f.data, nil
	case frameEnd:
		s.Close()
		if f.status.Code == OK {
			return nil, io.EOF
		}
		return nil, f.status
	}
	s.Close()
	return nil, Errorf(Internal, "unexpected frame type %d", f.typ)
}

func (s *httpStream) Close() error {
	s.once.Do(func() {
		s.finished = true
		if s.done != nil {
			close(s.done)
		}
		if s.pw != nil {
			s.pw.CloseWithError(errors.New("call ended"))
		}
		s.resp.Body.Close()
	})
	return nil
}

// httpListener serves HTTP/1.1 and HTTP/2 over TLS on one port.
type httpListener struct {
	l   net.Listener
	srv *http.Server
}

// ListenHTTP listens on addr for calls over HTTP/1.1 and HTTP/2 (chosen by
// TLS ALPN). tlsConf must carry a certificate.
func ListenHTTP(addr string, tlsConf *tls.Config) (Listener, error) {
	if tlsConf == nil || (len(tlsConf.Certificates) == 0 && tlsConf.GetCertificate == nil) {
		return nil, errors.New("rpc: ListenHTTP needs a TLS configuration with a certificate")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	srv := &http.Server{
		TLSConfig:         withALPN(tlsConf, alpnHTTP2, alpnHTTP1),
		Protocols:         &p,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 1000},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
	}
	return &httpListener{l: l, srv: srv}, nil
}

func (l *httpListener) Addr() net.Addr { return l.l.Addr() }

func (l *httpListener) Serve(h Handler) error {
	max := DefaultMaxMessageSize
	if s, ok := h.(*Server); ok {
		max = s.maxMessage()
	}
	l.srv.Handler = &httpHandler{h: h, max: max}
	err := l.srv.ServeTLS(l.l, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (l *httpListener) Close() error { return l.srv.Close() }
