package rpc

import (
	"context"
	"io"
)

// BidiStream is the client side of a client-streaming or bidirectionally
// streaming call: Send request messages, CloseSend after the last, Recv
// answers (a client-streaming method answers once), and always Close.
// Send and Recv may run in different goroutines; each by one at a time.
type BidiStream[Req, Resp any] struct {
	c    *Client
	b    *binding
	s    SendStream
	done bool
}

// OpenStream starts a client-streaming or bidirectional call (methods
// registered with RegisterClientStream or RegisterBidiStream). Only the
// opening is retried; a stream never moves to another transport once
// open, so a Switch lets it finish where it started. A transport that
// does not implement Streamer fails with Unimplemented.
func OpenStream[Req, Resp any](ctx context.Context, c *Client, method string, opts ...CallOption) (*BidiStream[Req, Resp], error) {
	r, o, err := c.newRequest(ctx, method, nil, opts)
	if err != nil {
		return nil, err
	}
	r.Stream = true
	for attempt := 0; ; attempt++ {
		if err := setTimeout(ctx, r); err != nil {
			return nil, err
		}
		b := c.acquire(o)
		st, ok := b.t.(Streamer)
		if !ok {
			b.release()
			return nil, Errorf(Unimplemented, "the %s transport cannot carry a stream of requests", b.t.Name())
		}
		s, err := st.OpenStream(ctx, r)
		if err == nil {
			return &BidiStream[Req, Resp]{c: c, b: b, s: s}, nil
		}
		b.release()
		if err := c.retry(ctx, err, r, attempt, b); err != nil {
			return nil, err
		}
	}
}

// Send writes one request message.
func (s *BidiStream[Req, Resp]) Send(req *Req) error {
	b, err := s.c.codec.Marshal(req)
	if err != nil {
		return Errorf(Internal, "encode %T: %v", req, err)
	}
	if len(b) > s.c.max {
		return Errorf(ResourceExhausted, "request message of %d bytes exceeds the limit of %d", len(b), s.c.max)
	}
	return s.s.Send(b)
}

// CloseSend tells the server that no more requests come.
func (s *BidiStream[Req, Resp]) CloseSend() error { return s.s.CloseSend() }

// Recv returns the next answer, io.EOF after the last one, or the call's
// error.
func (s *BidiStream[Req, Resp]) Recv() (*Resp, error) {
	if s.done {
		return nil, io.EOF
	}
	b, err := limitStream{s.s, s.c.max}.Recv()
	if err != nil {
		s.finish()
		return nil, err
	}
	r, err := decode[Resp](s.c.codec, b, Internal)
	if err != nil {
		s.finish()
	}
	return r, err
}

// CloseAndRecv ends the requests and returns the one answer of a
// client-streaming call.
func (s *BidiStream[Req, Resp]) CloseAndRecv() (*Resp, error) {
	if err := s.CloseSend(); err != nil {
		s.finish()
		return nil, err
	}
	r, err := s.Recv()
	if err != nil {
		if err == io.EOF {
			err = Errorf(Internal, "server ended the call without an answer")
		}
		return nil, err
	}
	if _, err := s.Recv(); err != io.EOF {
		if err == nil {
			err = Errorf(Internal, "client-streaming call answered with several messages")
		}
		return nil, err
	}
	return r, nil
}

// Close ends the call, canceling it if it has not ended.
func (s *BidiStream[Req, Resp]) Close() error {
	s.finish()
	return nil
}

func (s *BidiStream[Req, Resp]) finish() {
	if !s.done {
		s.done = true
		s.s.Close()
		s.b.release()
	}
}
