package h3

import (
	"context"
	"io"
)

// Stream is a QUIC stream: bidirectional, or one direction of a
// unidirectional stream.
//
// Read returns io.EOF once the peer's FIN has been read. After the peer reset
// the stream, Read should return an error that implements [ResetError], so
// that h3 can tell a reset from a connection that went away.
type Stream interface {
	io.Reader
	io.Writer
	// CloseWrite ends the send side cleanly (FIN).
	CloseWrite() error
	// Reset abruptly ends the send side (RESET_STREAM with code).
	Reset(code uint64)
	// StopSending asks the peer to stop sending (STOP_SENDING with code);
	// pending and future Reads return an error.
	StopSending(code uint64)
	// ID is the QUIC stream ID.
	ID() int64
	// Close releases the stream: it finishes the send side if still open and
	// abandons the receive side; blocked Reads and Writes return.
	Close() error
}

// Conn is a QUIC connection as h3 uses it.
type Conn interface {
	// OpenStream opens a locally initiated bidirectional stream.
	OpenStream(ctx context.Context) (Stream, error)
	// OpenUniStream opens a locally initiated send-only stream.
	OpenUniStream(ctx context.Context) (Stream, error)
	// AcceptStream returns the next peer-initiated bidirectional stream.
	AcceptStream(ctx context.Context) (Stream, error)
	// AcceptUniStream returns the next peer-initiated (receive-only)
	// unidirectional stream.
	AcceptUniStream(ctx context.Context) (Stream, error)
	// Close closes the connection with an application CONNECTION_CLOSE.
	Close(code uint64, reason string) error
	// ALPN is the negotiated application protocol ("h3", "hq-interop").
	ALPN() string
}

// ResetError is implemented by the errors that Stream.Read returns after the
// peer reset the stream with RESET_STREAM. Engine adapters should return (or
// wrap) such an error; h3 needs it to apply RFC 9114 §6.2.1 ("If either
// control stream is closed at any point, this MUST be treated as a connection
// error of type H3_CLOSED_CRITICAL_STREAM") to resets as well as FINs.
type ResetError interface {
	error
	// ResetCode is the application error code carried by RESET_STREAM.
	ResetCode() uint64
}

// ALPN protocol identifiers.
const (
	// ALPNH3 is HTTP/3's ALPN token (RFC 9114 §3.1).
	ALPNH3 = "h3"
	// ALPNHQInterop is the interop runner's HTTP/0.9-over-QUIC token.
	ALPNHQInterop = "hq-interop"
)
