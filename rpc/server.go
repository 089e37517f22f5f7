package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
)

// DefaultMaxMessageSize is the message size limit when none is set.
const DefaultMaxMessageSize = 4 << 20

// PingMethod is answered by every server; clients use it to probe a
// transport's round-trip time.
const PingMethod = "rpc.Ping"

// CallInfo is what an authentication hook learns of a call.
type CallInfo struct {
	Method     string
	Metadata   Metadata
	Transport  string
	RemoteAddr net.Addr
	// TLS is the connection's TLS state (nil on Unix sockets); a hook that
	// checks client certificates reads TLS.PeerCertificates.
	TLS *tls.ConnectionState
}

// AuthFunc decides whether a call may run. It returns the context the
// handler will see (for example with the caller's identity attached), or
// an error: a *Status chooses the code, anything else becomes
// Unauthenticated.
type AuthFunc func(ctx context.Context, info *CallInfo) (context.Context, error)

// Server holds handlers and serves them on any number of listeners.
type Server struct {
	// MaxMessageSize bounds request and response payloads; zero means
	// DefaultMaxMessageSize. A larger request fails with
	// ResourceExhausted.
	MaxMessageSize int
	// Auth, when set, runs before every call except pings.
	Auth AuthFunc
	// Logger receives handler panics; nil means slog.Default().
	Logger *slog.Logger

	mu        sync.RWMutex
	handlers  map[string]*method
	listeners map[Listener]struct{}
	closed    bool
	serving   sync.WaitGroup
}

type method struct {
	stream bool // answers with a stream of messages
	input  bool // reads a stream of request messages (req.Recv)
	call   func(ctx context.Context, codec Codec, req *Request, send func(any) error) (any, error)
}

// NewServer returns an empty server.
func NewServer() *Server {
	return &Server{handlers: map[string]*method{}, listeners: map[Listener]struct{}{}}
}

// Register adds a unary handler for name ("Service.Method"). It panics if
// the name is taken, as a duplicate is a programming error.
func Register[Req, Resp any](s *Server, name string, h func(ctx context.Context, req *Req) (*Resp, error)) {
	s.register(name, &method{call: func(ctx context.Context, codec Codec, r *Request, _ func(any) error) (any, error) {
		req, err := decode[Req](codec, r.Payload, InvalidArgument)
		if err != nil {
			return nil, err
		}
		return h(ctx, req)
	}})
}

// RegisterStream adds a server-streaming handler: it answers one request
// with any number of messages, each passed to send.
func RegisterStream[Req, Resp any](s *Server, name string, h func(ctx context.Context, req *Req, send func(*Resp) error) error) {
	s.register(name, &method{stream: true, call: func(ctx context.Context, codec Codec, r *Request, send func(any) error) (any, error) {
		req, err := decode[Req](codec, r.Payload, InvalidArgument)
		if err != nil {
			return nil, err
		}
		return nil, h(ctx, req, func(r *Resp) error { return send(r) })
	}})
}

// RegisterClientStream adds a client-streaming handler: it reads any
// number of request messages with recv (io.EOF after the client's last)
// and answers with one message. Clients call it with OpenStream.
func RegisterClientStream[Req, Resp any](s *Server, name string, h func(ctx context.Context, recv func() (*Req, error)) (*Resp, error)) {
	s.register(name, &method{input: true, call: func(ctx context.Context, codec Codec, r *Request, _ func(any) error) (any, error) {
		return h(ctx, decodingRecv[Req](codec, r.Recv))
	}})
}

// RegisterBidiStream adds a bidirectionally streaming handler: it reads
// request messages with recv and writes answers with send, in any order.
// Clients call it with OpenStream.
func RegisterBidiStream[Req, Resp any](s *Server, name string, h func(ctx context.Context, recv func() (*Req, error), send func(*Resp) error) error) {
	s.register(name, &method{input: true, stream: true, call: func(ctx context.Context, codec Codec, r *Request, send func(any) error) (any, error) {
		return nil, h(ctx, decodingRecv[Req](codec, r.Recv), func(r *Resp) error { return send(r) })
	}})
}

func decodingRecv[Req any](codec Codec, recv func() ([]byte, error)) func() (*Req, error) {
	return func() (*Req, error) {
		b, err := recv()
		if err != nil {
			return nil, err
		}
		return decode[Req](codec, b, InvalidArgument)
	}
}

func (s *Server) register(name string, m *method) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.handlers[name]; dup {
		panic(fmt.Sprintf("rpc: method %q registered twice", name))
	}
	s.handlers[name] = m
}

func (s *Server) maxMessage() int {
	if s.MaxMessageSize > 0 {
		return s.MaxMessageSize
	}
	return DefaultMaxMessageSize
}

// Serve serves calls from l until l or the server is closed. Call it once
// per listener, each in its own goroutine; all listeners share the
// handlers.
func (s *Server) Serve(l Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return errServerClosed
	}
	s.listeners[l] = struct{}{}
	s.serving.Add(1)
	s.mu.Unlock()
	defer s.serving.Done()
	err := l.Serve(s)
	s.mu.Lock()
	delete(s.listeners, l)
	s.mu.Unlock()
	return err
}

var errServerClosed = errors.New("rpc: server closed")

// Close closes every listener, which ends their connections, and waits for
// the Serve calls to return.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	ls := make([]Listener, 0, len(s.listeners))
	for l := range s.listeners {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	s.serving.Wait()
	return nil
}

// isUnary says whether h answers method with exactly one message, so
// that a transport may hold that message back until the call's end.
func isUnary(h Handler, method string) bool {
	s, ok := h.(*Server)
	if !ok {
		return false
	}
	if method == PingMethod {
		return true
	}
	s.mu.RLock()
	m := s.handlers[method]
	s.mu.RUnlock()
	return m != nil && !m.stream
}

// HandleCall implements Handler: it applies the deadline, the size limit
// and the authentication hook, decodes the request and runs the handler.
func (s *Server) HandleCall(ctx context.Context, req *Request, send func([]byte) error) (st *Status) {
	if req.Method == PingMethod {
		return nil
	}
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	max := s.maxMessage()
	if len(req.Payload) > max {
		return &Status{Code: ResourceExhausted, Message: fmt.Sprintf("request of %d bytes exceeds the server's limit of %d", len(req.Payload), max)}
	}
	s.mu.RLock()
	m := s.handlers[req.Method]
	s.mu.RUnlock()
	if m == nil {
		return &Status{Code: Unimplemented, Message: fmt.Sprintf("unknown method %q", req.Method)}
	}
	if m.input != req.Stream {
		if m.input {
			return &Status{Code: Unimplemented, Message: fmt.Sprintf("method %q reads a stream of requests: call it with OpenStream", req.Method)}
		}
		return &Status{Code: Unimplemented, Message: fmt.Sprintf("method %q takes one request, not a stream", req.Method)}
	}
	if req.Stream && req.Recv == nil {
		return &Status{Code: Unimplemented, Message: fmt.Sprintf("the %s transport cannot carry a stream of requests", req.Transport)}
	}
	codec := codecs[req.Codec]
	if codec == nil {
		return &Status{Code: InvalidArgument, Message: fmt.Sprintf("unknown codec %q", req.Codec)}
	}
	md := req.Metadata
	if md == nil {
		md = Metadata{}
	}
	ctx = context.WithValue(ctx, incomingKey{}, md)
	if s.Auth != nil {
		info := &CallInfo{Method: req.Method, Metadata: md, Transport: req.Transport, RemoteAddr: req.RemoteAddr, TLS: req.TLS}
		actx, err := s.Auth(ctx, info)
		if err != nil {
			st := statusOf(err)
			if st.Code == Unknown {
				st = &Status{Code: Unauthenticated, Message: err.Error()}
			}
			return st
		}
		ctx = actx
	}
	defer func() {
		if v := recover(); v != nil {
			logger := s.Logger
			if logger == nil {
				logger = slog.Default()
			}
			logger.Error("rpc: handler panic", "method", req.Method, "panic", v, "stack", string(debug.Stack()))
			st = &Status{Code: Internal, Message: "handler panicked"}
		}
	}()
	sendMsg := func(v any) error {
		if err := ctx.Err(); err != nil {
			return ctxStatus(ctx)
		}
		b, err := codec.Marshal(v)
		if err != nil {
			return Errorf(Internal, "encode %T: %v", v, err)
		}
		if len(b) > max {
			return &Status{Code: ResourceExhausted, Message: fmt.Sprintf("response of %d bytes exceeds the limit of %d", len(b), max)}
		}
		return send(b)
	}
	resp, err := m.call(ctx, codec, req, sendMsg)
	if err != nil {
		if ctx.Err() != nil && CodeOf(err) == Unknown {
			return ctxStatus(ctx)
		}
		return statusOf(err)
	}
	if !m.stream {
		if err := sendMsg(resp); err != nil {
			return statusOf(err)
		}
	}
	return nil
}
