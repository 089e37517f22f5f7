package h3

import (
	"errors"
	"fmt"
)

// ErrCode is an HTTP/3 (RFC 9114 §8.1) or QPACK (RFC 9204 §6) application
// error code, carried by CONNECTION_CLOSE, RESET_STREAM and STOP_SENDING.
type ErrCode uint64

// HTTP/3 and QPACK error codes.
const (
	ErrCodeNoError              ErrCode = 0x100
	ErrCodeGeneralProtocolError ErrCode = 0x101
	ErrCodeInternalError        ErrCode = 0x102
	ErrCodeStreamCreationError  ErrCode = 0x103
	ErrCodeClosedCriticalStream ErrCode = 0x104
	ErrCodeFrameUnexpected      ErrCode = 0x105
	ErrCodeFrameError           ErrCode = 0x106
	ErrCodeExcessiveLoad        ErrCode = 0x107
	ErrCodeIDError              ErrCode = 0x108
	ErrCodeSettingsError        ErrCode = 0x109
	ErrCodeMissingSettings      ErrCode = 0x10a
	ErrCodeRequestRejected      ErrCode = 0x10b
	ErrCodeRequestCancelled     ErrCode = 0x10c
	ErrCodeRequestIncomplete    ErrCode = 0x10d
	ErrCodeMessageError         ErrCode = 0x10e
	ErrCodeConnectError         ErrCode = 0x10f
	ErrCodeVersionFallback      ErrCode = 0x110
	ErrCodeQPACKDecompression   ErrCode = 0x200
	ErrCodeQPACKEncoderStream   ErrCode = 0x201
	ErrCodeQPACKDecoderStream   ErrCode = 0x202
)

var errCodeNames = map[ErrCode]string{
	ErrCodeNoError:              "H3_NO_ERROR",
	ErrCodeGeneralProtocolError: "H3_GENERAL_PROTOCOL_ERROR",
	ErrCodeInternalError:        "H3_INTERNAL_ERROR",
	ErrCodeStreamCreationError:  "H3_STREAM_CREATION_ERROR",
	ErrCodeClosedCriticalStream: "H3_CLOSED_CRITICAL_STREAM",
	ErrCodeFrameUnexpected:      "H3_FRAME_UNEXPECTED",
	ErrCodeFrameError:           "H3_FRAME_ERROR",
	ErrCodeExcessiveLoad:        "H3_EXCESSIVE_LOAD",
	ErrCodeIDError:              "H3_ID_ERROR",
	ErrCodeSettingsError:        "H3_SETTINGS_ERROR",
	ErrCodeMissingSettings:      "H3_MISSING_SETTINGS",
	ErrCodeRequestRejected:      "H3_REQUEST_REJECTED",
	ErrCodeRequestCancelled:     "H3_REQUEST_CANCELLED",
	ErrCodeRequestIncomplete:    "H3_REQUEST_INCOMPLETE",
	ErrCodeMessageError:         "H3_MESSAGE_ERROR",
	ErrCodeConnectError:         "H3_CONNECT_ERROR",
	ErrCodeVersionFallback:      "H3_VERSION_FALLBACK",
	ErrCodeQPACKDecompression:   "QPACK_DECOMPRESSION_FAILED",
	ErrCodeQPACKEncoderStream:   "QPACK_ENCODER_STREAM_ERROR",
	ErrCodeQPACKDecoderStream:   "QPACK_DECODER_STREAM_ERROR",
}

// String returns the code's name from the RFC, or its hex value.
func (c ErrCode) String() string {
	if n, ok := errCodeNames[c]; ok {
		return n
	}
	if isReserved(uint64(c)) {
		return fmt.Sprintf("reserved(%#x)", uint64(c))
	}
	return fmt.Sprintf("H3_ERROR(%#x)", uint64(c))
}

// isReserved reports whether v has the form 0x1f*N + 0x21 that RFC 9114
// reserves for greasing frame types, stream types, settings and error codes.
func isReserved(v uint64) bool {
	return v >= 0x21 && (v-0x21)%0x1f == 0
}

// Error is an HTTP/3 error. A connection error closes the whole connection
// with Code; a stream error resets one request stream with Code. Reason says
// what happened, quoting the requirement it rests on.
type Error struct {
	Code ErrCode
	// Stream is true for a stream error, false for a connection error.
	Stream bool
	// Remote is true when the peer signalled the error (it reset the stream
	// or closed the connection), false when this endpoint detected it.
	Remote bool
	// Reason is a human-readable account of the violation.
	Reason string
}

// Error says which side found the error, whether it ends the stream or the connection, the code and the reason.
func (e *Error) Error() string {
	kind := "connection"
	if e.Stream {
		kind = "stream"
	}
	who := "local"
	if e.Remote {
		who = "peer"
	}
	if e.Reason == "" {
		return fmt.Sprintf("h3: %s %s error %v", who, kind, e.Code)
	}
	return fmt.Sprintf("h3: %s %s error %v: %s", who, kind, e.Code, e.Reason)
}

// connError builds a locally detected connection error.
func connError(code ErrCode, format string, args ...any) *Error {
	return &Error{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// streamError builds a locally detected stream error.
func streamError(code ErrCode, format string, args ...any) *Error {
	return &Error{Code: code, Stream: true, Reason: fmt.Sprintf(format, args...)}
}

// asH3Error returns err as an *Error if it is one.
func asH3Error(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// peerReset converts a Read error caused by the peer's RESET_STREAM into a
// remote stream error; other errors are returned unchanged.
func peerReset(err error) error {
	var re ResetError
	if errors.As(err, &re) {
		return &Error{Code: ErrCode(re.ResetCode()), Stream: true, Remote: true, Reason: "peer reset the stream"}
	}
	return err
}

// ErrGoAway is returned by RoundTrip for requests that the client may not
// send, or that the server did not process, because the server sent GOAWAY
// (RFC 9114 §5.2). Such requests can be retried on a new connection.
var ErrGoAway = errors.New("h3: connection is going away (GOAWAY); retry on a new connection")
