package wire

import "strconv"

// TransportErrorCode is a QUIC transport error code, carried in a
// CONNECTION_CLOSE frame of type 0x1c (RFC 9000 §20.1).
type TransportErrorCode uint64

// Transport error codes (RFC 9000 §20.1, RFC 9368 §10.2).
const (
	NoError                 TransportErrorCode = 0x00
	InternalError           TransportErrorCode = 0x01
	ConnectionRefused       TransportErrorCode = 0x02
	FlowControlError        TransportErrorCode = 0x03
	StreamLimitError        TransportErrorCode = 0x04
	StreamStateError        TransportErrorCode = 0x05
	FinalSizeError          TransportErrorCode = 0x06
	FrameEncodingError      TransportErrorCode = 0x07
	TransportParameterError TransportErrorCode = 0x08
	ConnectionIDLimitError  TransportErrorCode = 0x09
	ProtocolViolation       TransportErrorCode = 0x0a
	InvalidToken            TransportErrorCode = 0x0b
	ApplicationError        TransportErrorCode = 0x0c
	CryptoBufferExceeded    TransportErrorCode = 0x0d
	KeyUpdateError          TransportErrorCode = 0x0e
	AEADLimitReached        TransportErrorCode = 0x0f
	NoViablePath            TransportErrorCode = 0x10
	VersionNegotiationError TransportErrorCode = 0x11 // RFC 9368 §10.2

	// CryptoErrorBase is the first code of the CRYPTO_ERROR range
	// 0x0100-0x01ff; the low byte is a TLS alert (RFC 9000 §20.1).
	CryptoErrorBase TransportErrorCode = 0x0100
)

// CryptoError returns the CRYPTO_ERROR code that carries TLS alert a.
func CryptoError(alert uint8) TransportErrorCode {
	return CryptoErrorBase + TransportErrorCode(alert)
}

// IsCryptoError reports whether c is in the CRYPTO_ERROR range
// 0x0100-0x01ff.
func (c TransportErrorCode) IsCryptoError() bool {
	return c >= 0x0100 && c <= 0x01ff
}

// TLSAlert returns the TLS alert carried by a CRYPTO_ERROR code, and false
// for any other code.
func (c TransportErrorCode) TLSAlert() (uint8, bool) {
	if !c.IsCryptoError() {
		return 0, false
	}
	return uint8(c), true
}

var transportErrorNames = [...]string{
	"NO_ERROR", "INTERNAL_ERROR", "CONNECTION_REFUSED", "FLOW_CONTROL_ERROR",
	"STREAM_LIMIT_ERROR", "STREAM_STATE_ERROR", "FINAL_SIZE_ERROR",
	"FRAME_ENCODING_ERROR", "TRANSPORT_PARAMETER_ERROR",
	"CONNECTION_ID_LIMIT_ERROR", "PROTOCOL_VIOLATION", "INVALID_TOKEN",
	"APPLICATION_ERROR", "CRYPTO_BUFFER_EXCEEDED", "KEY_UPDATE_ERROR",
	"AEAD_LIMIT_REACHED", "NO_VIABLE_PATH", "VERSION_NEGOTIATION_ERROR",
}

// String returns the RFC name of the code, such as "PROTOCOL_VIOLATION" or
// "CRYPTO_ERROR(0x178)", or the code in hex when it is not registered.
func (c TransportErrorCode) String() string {
	if c < TransportErrorCode(len(transportErrorNames)) {
		return transportErrorNames[c]
	}
	if c.IsCryptoError() {
		return "CRYPTO_ERROR(0x" + strconv.FormatUint(uint64(c), 16) + ")"
	}
	return "0x" + strconv.FormatUint(uint64(c), 16)
}

// Error is a violation of a QUIC rule found while parsing: the transport
// error code the connection must close with, the frame type that was
// being parsed (0 when none applies) and a reason that names the rule,
// for example "RFC 9000 §19.3.1: ACK range underflows packet number 0".
type Error struct {
	Code      TransportErrorCode
	FrameType FrameType
	Reason    string
}

// Error formats the code, the frame type and the reason.
func (e *Error) Error() string {
	s := "quic: " + e.Code.String()
	if e.FrameType != 0 || e.Code == FrameEncodingError {
		s += " in frame 0x" + strconv.FormatUint(uint64(e.FrameType), 16)
	}
	return s + ": " + e.Reason
}

func frameErr(code TransportErrorCode, t FrameType, reason string) *Error {
	return &Error{Code: code, FrameType: t, Reason: reason}
}

func tpErr(reason string) *Error {
	return &Error{Code: TransportParameterError, Reason: reason}
}
