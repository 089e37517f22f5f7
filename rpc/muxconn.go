package rpc

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// muxConn multiplexes calls over one byte stream (TCP+TLS or a Unix
// socket) with the framed format of frame.go. Calls are told apart by
// their ID; a client cancels one with a cancel frame.
type muxConn struct {
	conn     net.Conn
	fw       *frameWriter
	maxFrame int
	name     string

	mu     sync.Mutex
	calls  map[uint64]*callQueue         // client side
	cancel map[uint64]context.CancelFunc // server side
	input  map[uint64]*callQueue         // server side: request streams
	nextID uint64
	err    error
	done   chan struct{}
}

func newMuxConn(name string, conn net.Conn, maxMessage int) *muxConn {
	return &muxConn{
		conn: conn, fw: newFrameWriter(conn), maxFrame: maxMessage + frameOverhead, name: name,
		calls: map[uint64]*callQueue{}, cancel: map[uint64]context.CancelFunc{}, input: map[uint64]*callQueue{}, done: make(chan struct{}),
	}
}

// close ends the connection with err, failing every call on it.
func (m *muxConn) close(err error) {
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return
	}
	m.err = err
	calls, cancels, inputs := m.calls, m.cancel, m.input
	m.calls, m.cancel, m.input = nil, nil, nil
	close(m.done)
	m.mu.Unlock()
	m.fw.fail(err)
	m.conn.Close()
	for _, q := range calls {
		q.fail(unavailable(false, "%s connection lost: %v", m.name, err))
	}
	for _, c := range cancels {
		c()
	}
	for _, q := range inputs {
		q.fail(err)
	}
}

func (m *muxConn) alive() bool {
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// clientLoop reads answers and routes them to their calls.
func (m *muxConn) clientLoop() {
	br := bufio.NewReaderSize(m.conn, 64<<10)
	for {
		f, err := readFrame(br, m.maxFrame)
		if err != nil {
			m.close(err)
			return
		}
		m.deliver(f, false)
	}
}

// deliver pushes f to the queue of its call: a client's call (answers),
// or with input a server's request stream. The call's end frame removes
// it from the table. A call that is not there (ended, canceled, or the
// connection closed: the tables are nil) drops f.
func (m *muxConn) deliver(f frame, input bool) {
	m.mu.Lock()
	table := m.calls
	if input {
		table = m.input
	}
	q := table[f.callID]
	if f.typ == frameEnd {
		delete(table, f.callID)
	}
	m.mu.Unlock()
	if q != nil {
		q.push(f)
	}
}

func (m *muxConn) roundTrip(ctx context.Context, req *Request) (ResponseStream, error) {
	q := newCallQueue()
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return nil, unavailable(true, "%s connection lost: %v", m.name, m.err)
	}
	m.nextID++
	id := m.nextID
	m.calls[id] = q
	m.mu.Unlock()
	if err := m.fw.write(func(b []byte) []byte { return appendRequest(b, id, req) }); err != nil {
		m.forget(id)
		return nil, unavailable(false, "%s: send request: %v", m.name, err)
	}
	return &muxStream{m: m, id: id, q: q, ctx: ctx}, nil
}

// Send writes a request message of a stream call.
func (s *muxStream) Send(p []byte) error {
	if len(p) > s.m.maxFrame-frameOverhead {
		return &Status{Code: ResourceExhausted, Message: fmt.Sprintf("request message of %d bytes exceeds the %s transport's limit of %d", len(p), s.m.name, s.m.maxFrame-frameOverhead)}
	}
	id := s.id
	if err := s.m.fw.write(func(b []byte) []byte { return appendMessage(b, id, p) }); err != nil {
		return unavailable(false, "%s: send: %v", s.m.name, err)
	}
	return nil
}

// CloseSend ends the request stream with an end frame from the client.
func (s *muxStream) CloseSend() error {
	id := s.id
	if err := s.m.fw.write(func(b []byte) []byte { return appendEnd(b, id, nil) }); err != nil {
		return unavailable(false, "%s: close send: %v", s.m.name, err)
	}
	return nil
}

func (m *muxConn) forget(id uint64) {
	m.mu.Lock()
	if m.calls != nil {
		delete(m.calls, id)
	}
	m.mu.Unlock()
}

// muxStream is one client call on a muxConn.
type muxStream struct {
	m    *muxConn
	id   uint64
	q    *callQueue
	ctx  context.Context
	done bool
}

func (s *muxStream) Recv() ([]byte, error) {
	if s.done {
		return nil, io.EOF
	}
	f, err := s.q.pop(s.ctx)
	if err != nil {
		s.finish(true)
		if s.ctx.Err() != nil {
			return nil, ctxStatus(s.ctx)
		}
		return nil, err
	}
	switch f.typ {
	case frameMessage:
		return f.data, nil
	case frameEnd:
		s.done = true
		if f.status.Code == OK {
			return nil, io.EOF
		}
		return nil, f.status
	}
	s.finish(true)
	return nil, Errorf(Internal, "unexpected frame type %d", f.typ)
}

func (s *muxStream) Close() error {
	s.finish(true)
	return nil
}

// finish releases the call and, if the server has not ended it, cancels
// it there.
func (s *muxStream) finish(cancel bool) {
	if s.done {
		return
	}
	s.done = true
	s.m.forget(s.id)
	if cancel && s.m.alive() {
		id := s.id
		s.m.fw.write(func(b []byte) []byte { return appendCancel(b, id) })
	}
}

// serverLoop reads calls and runs each in its own goroutine.
func (m *muxConn) serverLoop(h Handler, base *Request) {
	br := bufio.NewReaderSize(m.conn, 64<<10)
	ctx, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		f, err := readFrame(br, m.maxFrame)
		if err != nil {
			m.close(err)
			return
		}
		switch f.typ {
		case frameRequest:
			req := f.req
			req.Transport, req.RemoteAddr, req.TLS = base.Transport, base.RemoteAddr, base.TLS
			cctx, cancel := context.WithCancel(ctx)
			m.mu.Lock()
			if m.cancel == nil {
				m.mu.Unlock()
				cancel()
				return
			}
			m.cancel[f.callID] = cancel
			if req.Stream {
				q := newCallQueue()
				m.input[f.callID] = q
				req.Recv = q.recvFunc(cctx, m.maxFrame-frameOverhead)
			}
			m.mu.Unlock()
			wg.Add(1)
			go func(id uint64) {
				defer wg.Done()
				m.serveCall(cctx, h, id, req)
				m.mu.Lock()
				if m.cancel != nil {
					delete(m.cancel, id)
					delete(m.input, id)
				}
				m.mu.Unlock()
				cancel()
			}(f.callID)
		case frameMessage, frameEnd:
			// A request stream's next message, or its end.
			m.deliver(f, true)
		case frameCancel:
			m.mu.Lock()
			cancel := m.cancel[f.callID]
			m.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	}
}

func (m *muxConn) serveCall(ctx context.Context, h Handler, id uint64, req *Request) {
	// A unary call's answer waits for its end frame, so that both go out
	// in one append (and, unless other frames join them, one write).
	unary := isUnary(h, req.Method)
	var held []byte
	st := h.HandleCall(ctx, req, func(p []byte) error {
		if unary && held == nil {
			held = p
			return nil
		}
		if err := m.fw.write(func(b []byte) []byte { return appendMessage(b, id, p) }); err != nil {
			return unavailable(false, "send answer: %v", err)
		}
		return nil
	})
	m.fw.write(func(b []byte) []byte {
		if held != nil {
			b = appendMessage(b, id, held)
		}
		return appendEnd(b, id, st)
	})
}

// streamTransport is the client side of TCP+TLS and Unix sockets: one
// connection, redialed when it breaks.
type streamTransport struct {
	name string
	dial func(ctx context.Context) (net.Conn, error)
	max  int

	mu     sync.Mutex
	conn   *muxConn
	closed bool
	wg     sync.WaitGroup
}

// DialTCP returns a transport to a TCP+TLS listener at addr. tlsConf must
// be set: calls never travel in clear text over a network.
func DialTCP(addr string, tlsConf *tls.Config) Transport {
	conf := withALPN(tlsConf, alpnRPC)
	return &streamTransport{name: "tcp", max: DefaultMaxMessageSize, dial: func(ctx context.Context) (net.Conn, error) {
		d := tls.Dialer{Config: conf, NetDialer: &net.Dialer{}}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*tls.Conn).NetConn().(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		return c, nil
	}}
}

// DialUnix returns a transport to a Unix socket listener at path. A Unix
// socket never leaves the machine, so it carries no TLS.
func DialUnix(path string) Transport {
	return &streamTransport{name: "unix", max: DefaultMaxMessageSize, dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
}

func (t *streamTransport) Name() string { return t.name }

func (t *streamTransport) Connect(ctx context.Context) error {
	_, err := t.get(ctx)
	return err
}

func (t *streamTransport) get(ctx context.Context) (*muxConn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, unavailable(true, "%s transport closed", t.name)
	}
	if t.conn != nil && t.conn.alive() {
		return t.conn, nil
	}
	// Dialing under the lock makes concurrent calls share one new
	// connection instead of racing to open many.
	c, err := t.dial(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxStatus(ctx)
		}
		return nil, unavailable(true, "%s: dial: %v", t.name, err)
	}
	m := newMuxConn(t.name, c, t.max)
	t.conn = m
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		m.clientLoop()
	}()
	return m, nil
}

func (t *streamTransport) RoundTrip(ctx context.Context, req *Request) (ResponseStream, error) {
	if len(req.Payload) > t.max {
		return nil, &Status{Code: ResourceExhausted, Message: fmt.Sprintf("request of %d bytes exceeds the %s transport's limit of %d", len(req.Payload), t.name, t.max)}
	}
	m, err := t.get(ctx)
	if err != nil {
		return nil, err
	}
	return m.roundTrip(ctx, req)
}

// OpenStream implements Streamer.
func (t *streamTransport) OpenStream(ctx context.Context, req *Request) (SendStream, error) {
	m, err := t.get(ctx)
	if err != nil {
		return nil, err
	}
	rs, err := m.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	return rs.(*muxStream), nil
}

func (t *streamTransport) Close() error {
	t.mu.Lock()
	t.closed = true
	c := t.conn
	t.mu.Unlock()
	if c != nil {
		c.close(errors.New("transport closed"))
	}
	t.wg.Wait()
	return nil
}

// streamListener is the server side of TCP+TLS and Unix sockets.
type streamListener struct {
	name    string
	l       net.Listener
	tlsConf *tls.Config
	max     int

	mu     sync.Mutex
	conns  map[*muxConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// ListenTCP listens for TCP+TLS connections on addr. tlsConf must carry a
// certificate.
func ListenTCP(addr string, tlsConf *tls.Config) (Listener, error) {
	if tlsConf == nil || (len(tlsConf.Certificates) == 0 && tlsConf.GetCertificate == nil) {
		return nil, errors.New("rpc: ListenTCP needs a TLS configuration with a certificate")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &streamListener{name: "tcp", l: l, tlsConf: withALPN(tlsConf, alpnRPC), max: DefaultMaxMessageSize, conns: map[*muxConn]struct{}{}}, nil
}

// ListenUnix listens on a Unix socket at path.
func ListenUnix(path string) (Listener, error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	return &streamListener{name: "unix", l: l, max: DefaultMaxMessageSize, conns: map[*muxConn]struct{}{}}, nil
}

func (l *streamListener) Addr() net.Addr { return l.l.Addr() }

func (l *streamListener) Serve(h Handler) error {
	if s, ok := h.(*Server); ok && (l.name != "udp" || s.maxMessage() < l.max) {
		l.max = s.maxMessage()
	}
	defer l.wg.Wait()
	for {
		c, err := l.l.Accept()
		if err != nil {
			l.mu.Lock()
			closed := l.closed
			l.mu.Unlock()
			if closed {
				return nil
			}
			return err
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.serveConn(c, h)
		}()
	}
}

func (l *streamListener) serveConn(c net.Conn, h Handler) {
	base := &Request{Transport: l.name, RemoteAddr: c.RemoteAddr()}
	if l.tlsConf != nil {
		tc := tls.Server(c, l.tlsConf)
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.Close()
			return
		}
		st := tc.ConnectionState()
		base.TLS = &st
		c = tc
	} else if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	m := newMuxConn(l.name, c, l.max)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		c.Close()
		return
	}
	l.conns[m] = struct{}{}
	l.mu.Unlock()
	m.serverLoop(h, base)
	l.mu.Lock()
	delete(l.conns, m)
	l.mu.Unlock()
}

func (l *streamListener) Close() error {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[*muxConn]struct{}{}
	l.mu.Unlock()
	err := l.l.Close()
	for m := range conns {
		m.close(errors.New("server closed"))
	}
	return err
}
