package streams

import (
	"fmt"
	"strconv"
)

// Transport error codes from RFC 9000 §20.1 that this package reports.
const (
	// FlowControlError: "An endpoint received more data than it permitted
	// in its advertised data limits".
	FlowControlError uint64 = 0x03
	// StreamLimitError: "An endpoint received a frame for a stream
	// identifier that exceeded its advertised stream limit".
	StreamLimitError uint64 = 0x04
	// StreamStateError: "An endpoint received a frame for a stream that
	// was not in a state that permitted that frame".
	StreamStateError uint64 = 0x05
	// FinalSizeError: an endpoint received data beyond a stream's final
	// size, or a final size that differs from one already established.
	FinalSizeError uint64 = 0x06
	// FrameEncodingError: "An endpoint received a frame that was badly
	// formatted", e.g. MAX_STREAMS above 2^60.
	FrameEncodingError uint64 = 0x07
	// TransportParameterError: a transport parameter had an invalid value,
	// e.g. initial_max_streams_* above 2^60.
	TransportParameterError uint64 = 0x08
)

// Error is a connection error detected by stream or flow-control state.
// Code is an RFC 9000 transport error code; Reason quotes the rule broken.
type Error struct {
	Code   uint64
	Reason string
}

// Error gives the transport error code by name and number, and the reason.
func (e *Error) Error() string {
	return fmt.Sprintf("%s (0x%x): %s", codeName(e.Code), e.Code, e.Reason)
}

func codeName(code uint64) string {
	switch code {
	case FlowControlError:
		return "FLOW_CONTROL_ERROR"
	case StreamLimitError:
		return "STREAM_LIMIT_ERROR"
	case StreamStateError:
		return "STREAM_STATE_ERROR"
	case FinalSizeError:
		return "FINAL_SIZE_ERROR"
	case FrameEncodingError:
		return "FRAME_ENCODING_ERROR"
	case TransportParameterError:
		return "TRANSPORT_PARAMETER_ERROR"
	}
	return "transport error"
}

func errorf(code uint64, format string, args ...any) *Error {
	return &Error{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// maxVarint is the largest value a variable-length integer can hold and so
// the largest stream offset: "The largest offset delivered on a stream --
// the sum of the offset and data length -- cannot exceed 2^62-1" (§19.8).
const maxVarint = 1<<62 - 1

// stateName returns the RFC 9000 §3 name of state i of an enum.
func stateName(names []string, i int, typ string) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return typ + "(" + strconv.Itoa(i) + ")"
}
