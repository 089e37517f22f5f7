package rpc

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// Request is one call as a transport carries it.
type Request struct {
	Method     string
	Codec      string
	Metadata   Metadata
	Timeout    time.Duration // 0: no deadline
	Idempotent bool
	Payload    []byte
	// Stream marks a call whose client sends a stream of messages after
	// the request (client and bidirectional streaming); Payload is then
	// empty.
	Stream bool
	// Recv is set by server-side transports on a Stream call: it returns
	// the client's next message, io.EOF after its last one, or an error
	// if the call broke.
	Recv func() ([]byte, error)

	// Set by server-side transports.
	Transport  string
	RemoteAddr net.Addr
	TLS        *tls.ConnectionState
}

// Transport is the client side of one way to reach a server. It connects
// lazily (or when Connect is called), reconnects after the connection
// broke, and multiplexes any number of concurrent calls.
type Transport interface {
	// Name says which transport this is ("tcp", "quic", ...).
	Name() string
	// Connect establishes the connection now, so that a later call does
	// not pay for the handshake.
	Connect(ctx context.Context) error
	// RoundTrip sends req and returns the stream of answers. A failure of
	// the transport is a *Status with code Unavailable.
	RoundTrip(ctx context.Context, req *Request) (ResponseStream, error)
	// Close ends every connection; calls in flight fail with Unavailable.
	Close() error
}

// ResponseStream is the answer to one call.
type ResponseStream interface {
	// Recv returns the next message. After the last one it returns io.EOF
	// if the call succeeded or its *Status if it failed.
	Recv() ([]byte, error)
	// Close releases the call; a call not yet finished is canceled.
	Close() error
}

// SendStream is the client side of a call whose request is a stream of
// messages.
type SendStream interface {
	ResponseStream
	// Send writes one request message.
	Send(payload []byte) error
	// CloseSend says the client has no more messages.
	CloseSend() error
}

// Streamer is implemented by transports that carry client and
// bidirectional streams; all seven of this package do (on UDP each
// message is limited to UDPMaxMessage). A Transport of another package
// may leave it out, and OpenStream then fails with Unimplemented.
type Streamer interface {
	// OpenStream starts a call with req.Stream set.
	OpenStream(ctx context.Context, req *Request) (SendStream, error)
}

// Handler serves calls that a Listener received. Server implements it.
type Handler interface {
	// HandleCall runs the call to its end. ctx is canceled when the client
	// cancels or goes away; send writes one answer message. It returns
	// the final status.
	HandleCall(ctx context.Context, req *Request, send func(payload []byte) error) *Status
}

// Listener is the server side of a transport.
type Listener interface {
	// Serve accepts calls and hands them to h until Close.
	Serve(h Handler) error
	// Addr is the address clients dial.
	Addr() net.Addr
	// Close stops accepting and ends every connection.
	Close() error
}
