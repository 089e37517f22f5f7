// Package streams holds the per-stream and flow-control state that a QUIC
// connection's goroutine drives: the sending and receiving parts of streams
// (RFC 9000 §3), stream and connection flow control (RFC 9000 §4) and stream
// ID bookkeeping and limits (RFC 9000 §2.1, §4.6).
//
// Everything here is plain state. There are no goroutines, no locks, no I/O
// and no clock: methods that depend on time take the connection loop's now.
// Values are owned by exactly one connection goroutine and must not be shared.
//
// The package does not import the wire package. Frames appear as their
// fields (offsets, lengths, limits, codes); the engine encodes and decodes
// them. Protocol violations are reported as *Error values carrying the RFC 9000
// transport error code that the connection must close with.
//
// Control frames follow one pattern throughout: a Next method returns the
// value to put in a frame and records it as sent, and an On...Lost method
// asks for it to be sent again if it is still current.
package streams
