package quic

import (
	"errors"
	"fmt"

	"github.com/quiver-quic/quiver/quic/wire"
)

// TransportErrorCode is a QUIC transport error code (RFC 9000 §20.1). The
// constants live in package wire (wire.ProtocolViolation, …).
type TransportErrorCode = wire.TransportErrorCode

// A TransportError closed a connection with a transport error code
// (CONNECTION_CLOSE of type 0x1c). Remote tells whether the peer sent it.
type TransportError struct {
	Code      TransportErrorCode
	FrameType uint64 // frame type that triggered the error, 0 if unknown
	Reason    string
	Remote    bool
}

// Error says which side closed, with the error code, the frame type and the reason.
func (e *TransportError) Error() string {
	who := "local"
	if e.Remote {
		who = "remote"
	}
	s := fmt.Sprintf("quic: %s transport error %s", who, e.Code)
	if e.FrameType != 0 {
		s += fmt.Sprintf(" (frame 0x%x)", e.FrameType)
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// An ApplicationError closed a connection with an application error code
// (CONNECTION_CLOSE of type 0x1d), or reset a stream.
type ApplicationError struct {
	Code   uint64
	Reason string
	Remote bool
}

// Error says which side closed, with the application error code and the reason.
func (e *ApplicationError) Error() string {
	who := "local"
	if e.Remote {
		who = "remote"
	}
	if e.Reason == "" {
		return fmt.Sprintf("quic: %s application error 0x%x", who, e.Code)
	}
	return fmt.Sprintf("quic: %s application error 0x%x: %s", who, e.Code, e.Reason)
}

// IdleTimeoutError reports that a connection was closed silently because
// it stayed idle for the idle timeout (RFC 9000 §10.1).
type IdleTimeoutError struct{}

// Error returns "quic: idle timeout".
func (IdleTimeoutError) Error() string { return "quic: idle timeout" }

// Timeout reports true, so that IdleTimeoutError satisfies net.Error.
func (IdleTimeoutError) Timeout() bool { return true }

// Temporary reports false.
func (IdleTimeoutError) Temporary() bool { return false }

// VersionNegotiationError reports that a client and server share no QUIC
// version. Ours lists what the client offered, Theirs what the server
// announced in its Version Negotiation packet.
type VersionNegotiationError struct {
	Ours, Theirs []uint32
}

// Error says that no version is common, with the versions of each side.
func (e *VersionNegotiationError) Error() string {
	return fmt.Sprintf("quic: no common version: we offer %#x, server supports %#x; set Config.Versions to one the server supports", e.Ours, e.Theirs)
}

// StreamResetError is returned by Stream.Read after the peer reset the
// stream (RESET_STREAM), and by Stream.Write after the peer asked us to
// stop (STOP_SENDING).
type StreamResetError struct {
	Code   uint64
	Remote bool
}

// Error says which side reset the stream and with which application error code.
func (e *StreamResetError) Error() string {
	if e.Remote {
		return fmt.Sprintf("quic: stream reset by peer with code 0x%x", e.Code)
	}
	return fmt.Sprintf("quic: stream reset locally with code 0x%x", e.Code)
}

// ResetCode returns the application error code of the reset.
func (e *StreamResetError) ResetCode() uint64 { return e.Code }

// ErrClosed is returned by operations on a closed Endpoint or stream.
var ErrClosed = errors.New("quic: closed")

// errStatelessReset reports that the peer sent a stateless reset.
var errStatelessReset = errors.New("quic: stateless reset by peer")

// localTransportError builds the error for a violation found locally.
func localTransportError(code TransportErrorCode, frameType uint64, format string, args ...any) *TransportError {
	return &TransportError{Code: code, FrameType: frameType, Reason: fmt.Sprintf(format, args...)}
}
