// Package qpack is Quiver's QPACK (RFC 9204): field section encoding and
// decoding with the static table and a dynamic table, the encoder and
// decoder stream instructions, and the state that keeps both ends in step
// (Known Received Count, Section Acknowledgment, blocked streams).
//
// An Encoder and a Decoder belong to one HTTP/3 connection. Each writes
// its stream's instructions through an emit function that must not block
// (h3 queues them for a writer goroutine); each reads the peer's stream
// through a Write method that returns a connection error when the peer
// breaks the rules.
package qpack

import "fmt"

// HeaderField is one field line: a lowercase name and a value.
type HeaderField struct {
	Name, Value string
}

// Size is the entry size of RFC 9204 §3.2.1: "The size of an entry is the
// sum of its name's length in bytes, its value's length in bytes, and 32
// additional bytes."
func (f HeaderField) Size() uint64 { return uint64(len(f.Name)+len(f.Value)) + 32 }

// Error codes of RFC 9204 §6.
const (
	ErrDecompressionFailed uint64 = 0x200
	ErrEncoderStream       uint64 = 0x201
	ErrDecoderStream       uint64 = 0x202
)

// Error is a QPACK connection error with its code.
type Error struct {
	Code   uint64
	Reason string
}

func (e *Error) Error() string {
	name := map[uint64]string{ErrDecompressionFailed: "QPACK_DECOMPRESSION_FAILED", ErrEncoderStream: "QPACK_ENCODER_STREAM_ERROR",
		ErrDecoderStream: "QPACK_DECODER_STREAM_ERROR"}[e.Code]
	return name + ": " + e.Reason
}

func errorf(code uint64, format string, args ...any) *Error {
	return &Error{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// TooLargeError reports a field section whose decoded size (RFC 9114
// §4.2.2: names, values and 32 per field) exceeds the caller's limit.
type TooLargeError struct{ Size, Limit uint64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("qpack: field section of at least %d bytes exceeds the limit of %d", e.Size, e.Limit)
}
