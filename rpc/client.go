package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Client sends calls through one transport at a time. It is safe for
// concurrent use.
type Client struct {
	codec   Codec
	max     int
	retries int
	observe func(transport string, rtt time.Duration, err error)

	mu      sync.Mutex // serialises Switch and Close
	cur     atomic.Pointer[binding]
	closed  bool
	drained sync.WaitGroup // goroutines closing retired transports
}

// binding is a transport as the client uses it: it counts the calls in
// flight so that a switched-away transport is closed only once they end.
type binding struct {
	t      Transport
	pinned bool         // a call's own transport (WithTransport), not the client's
	state  atomic.Int64 // calls in flight, plus retiredBit once retired
	once   sync.Once
	idle   chan struct{} // closed when retired and no call is in flight
}

const retiredBit = int64(1) << 40

func newBinding(t Transport) *binding { return &binding{t: t, idle: make(chan struct{})} }

func (b *binding) acquire() bool {
	if b.state.Add(1)&retiredBit != 0 {
		b.release()
		return false
	}
	return true
}

func (b *binding) release() {
	if b.state.Add(-1) == retiredBit {
		b.once.Do(func() { close(b.idle) })
	}
}

func (b *binding) retire() {
	if b.state.Or(retiredBit) == 0 {
		b.once.Do(func() { close(b.idle) })
	}
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithCodec selects the codec (default JSON).
func WithCodec(c Codec) ClientOption { return func(cl *Client) { cl.codec = c } }

// WithMaxMessageSize bounds request and response payloads (default
// DefaultMaxMessageSize).
func WithMaxMessageSize(n int) ClientOption { return func(cl *Client) { cl.max = n } }

// WithRetries sets how many times a call that failed with Unavailable is
// retried when that is safe: always when the request never left the
// client, and for calls marked Idempotent otherwise. Default 8.
func WithRetries(n int) ClientOption { return func(cl *Client) { cl.retries = n } }

// withObserver reports each attempt's latency and error (used by Adaptive).
func withObserver(f func(string, time.Duration, error)) ClientOption {
	return func(cl *Client) { cl.observe = f }
}

// NewClient returns a client that sends calls through t.
func NewClient(t Transport, opts ...ClientOption) *Client {
	c := &Client{codec: JSON, max: DefaultMaxMessageSize, retries: 8}
	for _, o := range opts {
		o(c)
	}
	c.cur.Store(newBinding(t))
	return c
}

// Transport returns the transport new calls go to.
func (c *Client) Transport() Transport { return c.cur.Load().t }

// Switch makes t the transport of every new call, at once. Calls in flight
// on the old transport finish there; Switch waits for them (until ctx is
// done) and then closes the old transport. If ctx ends first, the old
// transport is closed anyway: its calls fail with Unavailable, and those
// marked Idempotent are retried on t. Switch connects t before it takes
// over, so a transport that cannot connect is never switched to.
func (c *Client) Switch(ctx context.Context, t Transport) error {
	if err := warm(ctx, t); err != nil {
		t.Close()
		return fmt.Errorf("rpc: switch to %s: %w", t.Name(), err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		t.Close()
		return errors.New("rpc: client closed")
	}
	old := c.cur.Swap(newBinding(t))
	old.retire()
	c.mu.Unlock()
	select {
	case <-old.idle:
	case <-ctx.Done():
	}
	return old.t.Close()
}

// warm connects t and sends one ping through it, so that the first calls
// after a switch find a connection that has finished its handshake on
// both sides (QUIC's handshake is confirmed, the server's reader runs)
// instead of paying for it: in the switching experiment the calls near a
// swap were slower mainly because the first calls on the new connection
// waited for its set-up.
func warm(ctx context.Context, t Transport) error {
	if err := t.Connect(ctx); err != nil {
		return err
	}
	rs, err := t.RoundTrip(ctx, &Request{Method: PingMethod, Codec: JSON.Name()})
	if err != nil {
		return err
	}
	defer rs.Close()
	for {
		if _, err := rs.Recv(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// SwitchAsync is Switch without waiting: the old transport is closed in
// the background once its calls end, or after grace.
func (c *Client) SwitchAsync(t Transport, grace time.Duration) error {
	ctx := context.Background()
	if err := warm(ctx, t); err != nil {
		t.Close()
		return fmt.Errorf("rpc: switch to %s: %w", t.Name(), err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		t.Close()
		return errors.New("rpc: client closed")
	}
	old := c.cur.Swap(newBinding(t))
	old.retire()
	c.drained.Add(1)
	go func() {
		defer c.drained.Done()
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-old.idle:
		case <-timer.C:
		}
		old.t.Close()
	}()
	return nil
}

// Close closes the current transport and waits for retired ones to close.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	b := c.cur.Load()
	c.mu.Unlock()
	b.retire()
	err := b.t.Close()
	c.drained.Wait()
	return err
}

// acquire returns the binding of a call with the call counted on it: the
// transport the call chose (WithTransport), else the client's current one.
func (c *Client) acquire(o *callOptions) *binding {
	if o != nil && o.transport != nil {
		b := &binding{t: o.transport, pinned: true}
		b.state.Store(1)
		return b
	}
	for {
		b := c.cur.Load()
		if b.acquire() {
			return b
		}
	}
}

// CallOption changes one call.
type CallOption func(*callOptions)

type callOptions struct {
	idempotent bool
	transport  Transport
}

// Idempotent marks a call that may run twice, so that it is retried on the
// new transport when a switch or a broken connection interrupts it.
func Idempotent() CallOption { return func(o *callOptions) { o.idempotent = true } }

// WithTransport sends this call through t instead of the client's current
// transport: the transport is chosen per call. The client's codec, limits
// and retries apply; retries stay on t, and Switch does not move the call.
// The caller owns t: the client neither closes it nor switches to it, so
// one t can serve calls of several clients. For example:
//
//	quic := rpc.DialQUIC(addr, tlsConf) // beside the client's TCP transport
//	resp, err := rpc.Call[Req, Resp](ctx, client, "Svc.Method", req, rpc.WithTransport(quic))
func WithTransport(t Transport) CallOption { return func(o *callOptions) { o.transport = t } }

// Call sends a unary call and decodes its answer.
func Call[Req, Resp any](ctx context.Context, c *Client, method string, req *Req, opts ...CallOption) (*Resp, error) {
	payload, err := c.codec.Marshal(req)
	if err != nil {
		return nil, Errorf(Internal, "encode %T: %v", req, err)
	}
	var resp *Resp
	err = c.invoke(ctx, method, payload, opts, func(rs ResponseStream) error {
		b, err := rs.Recv()
		if err != nil {
			if err == io.EOF {
				return Errorf(Internal, "server ended the call without an answer")
			}
			return err
		}
		if resp, err = decode[Resp](c.codec, b, Internal); err != nil {
			return err
		}
		if _, err := rs.Recv(); err != io.EOF {
			if err == nil {
				return Errorf(Internal, "unary call answered with several messages")
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// Ping sends a call that every server answers without running a handler,
// and returns its round-trip time.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	err := c.invoke(ctx, PingMethod, nil, nil, func(rs ResponseStream) error {
		_, err := rs.Recv()
		if err == io.EOF {
			return nil
		}
		return err
	})
	return time.Since(start), err
}

// newRequest builds the request of a call, or fails it before sending.
func (c *Client) newRequest(ctx context.Context, method string, payload []byte, opts []CallOption) (*Request, *callOptions, error) {
	o := &callOptions{}
	for _, f := range opts {
		f(o)
	}
	if len(payload) > c.max {
		return nil, nil, &Status{Code: ResourceExhausted, Message: fmt.Sprintf("request of %d bytes exceeds the limit of %d", len(payload), c.max)}
	}
	return &Request{Method: method, Codec: c.codec.Name(), Metadata: outgoingMetadata(ctx), Idempotent: o.idempotent, Payload: payload}, o, nil
}

// setTimeout refreshes the remaining time the request carries.
func setTimeout(ctx context.Context, req *Request) error {
	if d, ok := ctx.Deadline(); ok {
		req.Timeout = time.Until(d)
		if req.Timeout <= 0 {
			return ctxStatus(ctx)
		}
	}
	return nil
}

// retry decides whether a failed attempt is tried again, and pauses before
// it when the transport that failed is still the current one.
func (c *Client) retry(ctx context.Context, err error, req *Request, attempt int, b *binding) error {
	if ctx.Err() != nil {
		return ctxStatus(ctx)
	}
	st := statusOf(err)
	if st.Code != Unavailable || !(st.notSent || req.Idempotent) || attempt >= c.retries {
		return err
	}
	// The call broke with its transport; retry on whatever transport is
	// current now (after a switch, the new one). A failing transport that
	// is still current gets a short, growing pause instead of a busy loop.
	if (b.pinned || c.cur.Load() == b) && attempt > 0 {
		t := time.NewTimer(time.Duration(attempt) * 10 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctxStatus(ctx)
		}
	}
	return nil
}

// invoke runs one call with retries; use consumes the answers and reports
// the call's outcome.
func (c *Client) invoke(ctx context.Context, method string, payload []byte, opts []CallOption, use func(ResponseStream) error) error {
	req, o, err := c.newRequest(ctx, method, payload, opts)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		if err := setTimeout(ctx, req); err != nil {
			return err
		}
		b := c.acquire(o)
		start := time.Now()
		err = c.attempt(ctx, b.t, req, use)
		b.release()
		if c.observe != nil {
			c.observe(b.t.Name(), time.Since(start), err)
		}
		if err == nil {
			return nil
		}
		if err := c.retry(ctx, err, req, attempt, b); err != nil {
			return err
		}
	}
}

func (c *Client) attempt(ctx context.Context, t Transport, req *Request, use func(ResponseStream) error) error {
	rs, err := t.RoundTrip(ctx, req)
	if err != nil {
		return err
	}
	defer rs.Close()
	return use(limitStream{rs, c.max})
}

// limitStream enforces the client's message size limit on answers.
type limitStream struct {
	ResponseStream
	max int
}

func (l limitStream) Recv() ([]byte, error) {
	b, err := l.ResponseStream.Recv()
	if err == nil && len(b) > l.max {
		return nil, &Status{Code: ResourceExhausted, Message: fmt.Sprintf("response of %d bytes exceeds the limit of %d", len(b), l.max)}
	}
	return b, err
}

// Stream is the client side of a server-streaming call.
type Stream[Resp any] struct {
	c    *Client
	b    *binding
	rs   ResponseStream
	done bool
}

// CallStream starts a server-streaming call. Read its answers with Recv
// and always Close it. Only the opening of a stream is retried, never a
// stream that has delivered answers.
func CallStream[Req, Resp any](ctx context.Context, c *Client, method string, req *Req, opts ...CallOption) (*Stream[Resp], error) {
	payload, err := c.codec.Marshal(req)
	if err != nil {
		return nil, Errorf(Internal, "encode %T: %v", req, err)
	}
	r, o, err := c.newRequest(ctx, method, payload, opts)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		if err := setTimeout(ctx, r); err != nil {
			return nil, err
		}
		b := c.acquire(o)
		rs, err := b.t.RoundTrip(ctx, r)
		if err == nil {
			return &Stream[Resp]{c: c, b: b, rs: limitStream{rs, c.max}}, nil
		}
		b.release()
		if err := c.retry(ctx, err, r, attempt, b); err != nil {
			return nil, err
		}
	}
}

// Recv returns the next answer, io.EOF after the last one, or the call's
// error.
func (s *Stream[Resp]) Recv() (*Resp, error) {
	if s.done {
		return nil, io.EOF
	}
	b, err := s.rs.Recv()
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

// Close ends the call, canceling it if answers are still coming.
func (s *Stream[Resp]) Close() error {
	s.finish()
	return nil
}

func (s *Stream[Resp]) finish() {
	if !s.done {
		s.done = true
		s.rs.Close()
		s.b.release()
	}
}
