package h3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// An in-memory QUIC connection: two memConn endpoints joined by a memLink,
// each stream direction a bounded pipe (a stand-in for flow control). It
// blocks only on sync.Cond and channels, so tests run it inside
// testing/synctest bubbles.

const pipeCapacity = 256 << 10

// memLink is the state both endpoints share.
type memLink struct {
	mu      sync.Mutex
	closed  bool
	closer  string // "client" or "server"
	code    uint64
	reason  string
	done    chan struct{}
	pipes   []*pipe
	streams int // streams opened, for tests
}

// connClosedError is what stream and connection operations return after
// CONNECTION_CLOSE.
type connClosedError struct {
	code   uint64
	reason string
	by     string
}

func (e *connClosedError) Error() string {
	return fmt.Sprintf("connection closed by %s with code %#x (%s)", e.by, e.code, e.reason)
}

// memResetError is the error Read returns after RESET_STREAM.
type memResetError struct{ code uint64 }

func (e *memResetError) Error() string     { return fmt.Sprintf("stream reset with code %#x", e.code) }
func (e *memResetError) ResetCode() uint64 { return e.code }

var errStopped = errors.New("read side stopped locally")

// pipe is one direction of a stream.
type pipe struct {
	mu      sync.Mutex
	cond    sync.Cond
	buf     []byte
	r       int // read offset in buf
	fin     bool
	reset   *uint64 // RESET_STREAM from the writer
	stop    *uint64 // STOP_SENDING from the reader
	connErr error
}

func newPipe(l *memLink) *pipe {
	p := &pipe{}
	p.cond.L = &p.mu
	l.mu.Lock()
	l.pipes = append(l.pipes, p)
	if l.closed {
		p.connErr = &connClosedError{l.code, l.reason, l.closer}
	}
	l.mu.Unlock()
	return p
}

func (p *pipe) write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for len(b) > 0 {
		for len(p.buf)-p.r >= pipeCapacity && p.stop == nil && p.connErr == nil && p.reset == nil {
			p.cond.Wait()
		}
		switch {
		case p.connErr != nil:
			return n, p.connErr
		case p.stop != nil:
			return n, fmt.Errorf("peer sent STOP_SENDING with code %#x", *p.stop)
		case p.reset != nil || p.fin:
			return n, errors.New("write after FIN or reset")
		}
		if p.r > 0 && len(p.buf)+len(b) > cap(p.buf) {
			m := copy(p.buf, p.buf[p.r:])
			p.buf, p.r = p.buf[:m], 0
		}
		m := min(len(b), pipeCapacity-(len(p.buf)-p.r))
		p.buf = append(p.buf, b[:m]...)
		b = b[m:]
		n += m
		p.cond.Broadcast()
	}
	return n, nil
}

func (p *pipe) read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.buf) == p.r && !p.fin && p.reset == nil && p.stop == nil && p.connErr == nil {
		p.cond.Wait()
	}
	switch {
	case p.stop != nil:
		return 0, errStopped
	case p.reset != nil:
		return 0, &memResetError{*p.reset}
	case p.connErr != nil:
		return 0, p.connErr
	case len(p.buf) > p.r:
		n := copy(b, p.buf[p.r:])
		p.r += n
		if p.r == len(p.buf) {
			p.buf, p.r = p.buf[:0], 0
		}
		p.cond.Broadcast()
		return n, nil
	}
	return 0, io.EOF
}

func (p *pipe) update(f func()) {
	p.mu.Lock()
	f()
	p.cond.Broadcast()
	p.mu.Unlock()
}

// memStream is one endpoint's view of a stream.
type memStream struct {
	id      int64
	in, out *pipe // nil for the missing direction of a unidirectional stream
}

func (s *memStream) Read(b []byte) (int, error) {
	if s.in == nil {
		return 0, errors.New("read on a send-only stream")
	}
	return s.in.read(b)
}

func (s *memStream) Write(b []byte) (int, error) {
	if s.out == nil {
		return 0, errors.New("write on a receive-only stream")
	}
	return s.out.write(b)
}

func (s *memStream) CloseWrite() error {
	if s.out == nil {
		return errors.New("CloseWrite on a receive-only stream")
	}
	s.out.update(func() { s.out.fin = true })
	return nil
}

func (s *memStream) Reset(code uint64) {
	if s.out != nil {
		s.out.update(func() {
			if !s.out.fin && s.out.reset == nil {
				s.out.reset = &code
				s.out.buf, s.out.r = nil, 0
			}
		})
	}
}

func (s *memStream) StopSending(code uint64) {
	if s.in != nil {
		s.in.update(func() {
			if s.in.stop == nil {
				s.in.stop = &code
			}
		})
	}
}

func (s *memStream) ID() int64 { return s.id }

func (s *memStream) Close() error {
	if s.out != nil {
		s.out.update(func() { s.out.fin = true })
	}
	s.StopSending(0)
	return nil
}

// memConn is one endpoint.
type memConn struct {
	link       *memLink
	name       string
	peer       *memConn
	alpn       string
	mu         sync.Mutex
	nextBidi   int64
	nextUni    int64
	acceptBidi chan Stream
	acceptUni  chan Stream
}

// newMemPair returns the client and server ends of a new connection.
func newMemPair(alpn string) (client, server *memConn) {
	l := &memLink{done: make(chan struct{})}
	client = &memConn{link: l, name: "client", alpn: alpn, nextBidi: 0, nextUni: 2,
		acceptBidi: make(chan Stream, 4096), acceptUni: make(chan Stream, 64)}
	server = &memConn{link: l, name: "server", alpn: alpn, nextBidi: 1, nextUni: 3,
		acceptBidi: make(chan Stream, 4096), acceptUni: make(chan Stream, 64)}
	client.peer, server.peer = server, client
	return client, server
}

func (c *memConn) err() error {
	c.link.mu.Lock()
	defer c.link.mu.Unlock()
	if c.link.closed {
		return &connClosedError{c.link.code, c.link.reason, c.link.closer}
	}
	return nil
}

func (c *memConn) open(ctx context.Context, bidi bool) (Stream, error) {
	if err := c.err(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	var id int64
	if bidi {
		id = c.nextBidi
		c.nextBidi += 4
	} else {
		id = c.nextUni
		c.nextUni += 4
	}
	c.mu.Unlock()
	c.link.mu.Lock()
	c.link.streams++
	c.link.mu.Unlock()
	out := newPipe(c.link)
	local, remote := &memStream{id: id, out: out}, &memStream{id: id, in: out}
	q := c.peer.acceptUni
	if bidi {
		in := newPipe(c.link)
		local.in, remote.out = in, in
		q = c.peer.acceptBidi
	}
	select {
	case q <- remote:
	default:
		return nil, errors.New("peer's accept queue is full")
	}
	return local, nil
}

func (c *memConn) accept(ctx context.Context, q chan Stream) (Stream, error) {
	select {
	case s := <-q:
		return s, nil
	case <-c.link.done:
		return nil, c.err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *memConn) OpenStream(ctx context.Context) (Stream, error)    { return c.open(ctx, true) }
func (c *memConn) OpenUniStream(ctx context.Context) (Stream, error) { return c.open(ctx, false) }
func (c *memConn) AcceptStream(ctx context.Context) (Stream, error) {
	return c.accept(ctx, c.acceptBidi)
}
func (c *memConn) AcceptUniStream(ctx context.Context) (Stream, error) {
	return c.accept(ctx, c.acceptUni)
}
func (c *memConn) ALPN() string { return c.alpn }

func (c *memConn) Close(code uint64, reason string) error {
	l := c.link
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return errors.New("connection already closed")
	}
	l.closed, l.closer, l.code, l.reason = true, c.name, code, reason
	close(l.done)
	pipes := l.pipes
	l.mu.Unlock()
	err := &connClosedError{code, reason, c.name}
	for _, p := range pipes {
		p.update(func() { p.connErr = err })
	}
	return nil
}

// closedWith reports who closed the connection, with which code.
func (l *memLink) closedWith() (by string, code uint64, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closer, l.code, l.reason
}
