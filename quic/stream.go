package quic

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/quiver-quic/quiver/quic/streams"
)

// A Stream is a QUIC stream. Read and Write block; they are safe to call
// from one reader and one writer goroutine at a time.
type Stream struct {
	c  *Conn
	id int64

	// Guarded by c.mu.
	send         streams.SendStream
	recv         streams.RecvStream
	canSend      bool
	canRecv      bool
	queued       bool // on c.sendQueue
	lazy         bool // on c.streams.lazyReset (conn_lazyreset.go)
	ctlQueued    bool // on c.ctlQueue
	forgotten    bool
	readDL       time.Time
	writeDL      time.Time
	localReset   bool
	stopped      bool
	writeClosed  bool
	readPending  bool // on streamsState.readable
	writePending bool // on streamsState.writable

	readWake  chan struct{}
	writeWake chan struct{}
}

func newStream(c *Conn, id int64) *Stream {
	return &Stream{c: c, id: id, readWake: make(chan struct{}, 1), writeWake: make(chan struct{}, 1)}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// ID returns the stream ID.
func (s *Stream) ID() int64 { return s.id }

// Read reads stream data. It returns io.EOF after the peer's FIN, a
// *StreamResetError after a RESET_STREAM, and the connection's error once
// it has closed.
func (s *Stream) Read(p []byte) (int, error) {
	return s.ReadContext(context.Background(), p)
}

// ReadContext is Read with a context.
func (s *Stream) ReadContext(ctx context.Context, p []byte) (int, error) {
	c := s.c
	if !s.canRecvStatic() {
		return 0, &StreamStateError{ID: s.id, Op: "read from a send-only stream"}
	}
	for {
		c.mu.Lock()
		n, fin := s.recv.Read(p)
		if n > 0 || fin {
			if s.recv.WantsMaxStreamData() || c.streams.flow.WantsMaxData() {
				c.queueControlLocked(s)
			}
			c.mu.Unlock()
			if fin {
				c.post(func(now time.Time) { c.streams.maybeForget(s) })
				if n > 0 {
					return n, nil
				}
				return 0, io.EOF
			}
			return n, nil
		}
		if code, ok := s.recv.ResetReceived(); ok {
			c.mu.Unlock()
			return 0, &StreamResetError{Code: code, Remote: true}
		}
		if s.stopped {
			c.mu.Unlock()
			return 0, ErrClosed
		}
		dl := s.readDL
		c.mu.Unlock()
		if err := c.Err(); err != nil {
			return 0, err
		}
		if len(p) == 0 {
			return 0, nil
		}
		if err := waitFor(ctx, s.readWake, c.loopDone, dl); err != nil {
			return 0, err
		}
	}
}

func (s *Stream) canRecvStatic() bool {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.canRecv
}

// waitFor blocks until wake fires, done closes (nil), the deadline passes
// or ctx ends.
func waitFor(ctx context.Context, wake, done chan struct{}, deadline time.Time) error {
	var tc <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-wake:
	case <-done:
	case <-tc:
		return os.ErrDeadlineExceeded
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Write writes data to the stream. It blocks while the send buffer is
// full, and returns the error that stopped it: a *StreamResetError after
// the peer's STOP_SENDING, the connection's error once it has closed.
func (s *Stream) Write(p []byte) (int, error) {
	return s.WriteContext(context.Background(), p)
}

// WriteContext is Write with a context.
func (s *Stream) WriteContext(ctx context.Context, p []byte) (int, error) {
	c := s.c
	total := 0
	for {
		c.mu.Lock()
		if !s.canSend {
			c.mu.Unlock()
			return total, &StreamStateError{ID: s.id, Op: "write to a receive-only stream"}
		}
		if code, ok := s.send.ResetCode(); ok {
			c.mu.Unlock()
			return total, &StreamResetError{Code: code, Remote: !s.localReset}
		}
		if s.writeClosed {
			c.mu.Unlock()
			return total, ErrClosed
		}
		n := s.send.Write(p[total:])
		total += n
		if n > 0 {
			c.queueSendLocked(s)
		}
		dl := s.writeDL
		c.mu.Unlock()
		if n > 0 {
			c.wake()
		}
		if total == len(p) {
			return total, nil
		}
		if err := c.Err(); err != nil {
			return total, err
		}
		if err := waitFor(ctx, s.writeWake, c.loopDone, dl); err != nil {
			return total, err
		}
	}
}

// CloseWrite sends a FIN after the data written so far.
func (s *Stream) CloseWrite() error {
	c := s.c
	c.mu.Lock()
	if !s.canSend {
		c.mu.Unlock()
		return nil
	}
	s.writeClosed = true
	s.send.CloseWrite()
	if !s.lazy { // a reset waiting to go makes the FIN moot
		c.queueSendLocked(s)
	}
	c.mu.Unlock()
	signal(s.writeWake)
	c.wake()
	return nil
}

// Close closes the sending part (CloseWrite) and, when the receiving part
// has not ended, asks the peer to stop sending with code 0.
func (s *Stream) Close() error {
	s.CloseWrite()
	c := s.c
	c.mu.Lock()
	// Only a stream whose final size is still unknown needs STOP_SENDING:
	// once the FIN has arrived, the peer has nothing left to send.
	stop := s.canRecv && !s.stopped && s.recv.State() == streams.RecvRecv
	c.mu.Unlock()
	if stop {
		s.StopSending(0)
	}
	return nil
}

// Reset abandons the sending part with RESET_STREAM and code.
func (s *Stream) Reset(code uint64) {
	c := s.c
	c.mu.Lock()
	if s.canSend {
		s.localReset = true
		s.send.Reset(code)
		c.queueSendLocked(s)
	}
	c.mu.Unlock()
	signal(s.writeWake)
	c.wake()
}

// StopSending abandons the receiving part and asks the peer with
// STOP_SENDING and code to stop sending.
func (s *Stream) StopSending(code uint64) {
	c := s.c
	c.mu.Lock()
	if s.canRecv {
		s.stopped = true
		s.recv.StopSending(code)
		c.queueControlLocked(s)
	}
	c.mu.Unlock()
	signal(s.readWake)
	c.wake()
}

// SetReadDeadline sets the deadline for Read.
func (s *Stream) SetReadDeadline(t time.Time) error {
	s.c.mu.Lock()
	s.readDL = t
	s.c.mu.Unlock()
	signal(s.readWake)
	return nil
}

// SetWriteDeadline sets the deadline for Write.
func (s *Stream) SetWriteDeadline(t time.Time) error {
	s.c.mu.Lock()
	s.writeDL = t
	s.c.mu.Unlock()
	signal(s.writeWake)
	return nil
}

// SetDeadline sets both deadlines.
func (s *Stream) SetDeadline(t time.Time) error {
	s.SetReadDeadline(t)
	return s.SetWriteDeadline(t)
}

// StreamStateError reports an operation the stream's direction forbids.
type StreamStateError struct {
	ID int64
	Op string
}

// Error says which operation the stream's state refused.
func (e *StreamStateError) Error() string {
	return "quic: stream " + itoa(e.ID) + ": cannot " + e.Op
}

func itoa(v int64) string {
	var b [20]byte
	i := len(b)
	neg := v < 0
	if neg {
		v = -v
	}
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

var _ io.ReadWriteCloser = (*Stream)(nil)
