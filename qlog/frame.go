package qlog

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FrameType is the qlog name of a QUIC frame type.
type FrameType string

// Frame types of RFC 9000, RFC 9221 and draft-ietf-quic-ack-frequency.
const (
	FramePadding            FrameType = "padding"
	FramePing               FrameType = "ping"
	FrameAck                FrameType = "ack"
	FrameResetStream        FrameType = "reset_stream"
	FrameStopSending        FrameType = "stop_sending"
	FrameCrypto             FrameType = "crypto"
	FrameNewToken           FrameType = "new_token"
	FrameStream             FrameType = "stream"
	FrameMaxData            FrameType = "max_data"
	FrameMaxStreamData      FrameType = "max_stream_data"
	FrameMaxStreams         FrameType = "max_streams"
	FrameDataBlocked        FrameType = "data_blocked"
	FrameStreamDataBlocked  FrameType = "stream_data_blocked"
	FrameStreamsBlocked     FrameType = "streams_blocked"
	FrameNewConnectionID    FrameType = "new_connection_id"
	FrameRetireConnectionID FrameType = "retire_connection_id"
	FramePathChallenge      FrameType = "path_challenge"
	FramePathResponse       FrameType = "path_response"
	FrameConnectionClose    FrameType = "connection_close"
	FrameHandshakeDone      FrameType = "handshake_done"
	FrameDatagram           FrameType = "datagram"
	FrameAckFrequency       FrameType = "ack_frequency"
	FrameImmediateAck       FrameType = "immediate_ack"
	FrameUnknown            FrameType = "unknown"
)

// Error spaces of CONNECTION_CLOSE frames.
const (
	ErrorSpaceTransport   = "transport"
	ErrorSpaceApplication = "application"
)

// Stream types of MAX_STREAMS and STREAMS_BLOCKED frames.
const (
	StreamTypeBidirectional  = "bidirectional"
	StreamTypeUnidirectional = "unidirectional"
)

// FrameInfo describes one frame. It is a single flat struct rather than one
// type per frame so that the engine can fill a reusable slice of them without
// boxing each frame in an interface. Only the members that belong to
// FrameType are written:
//
//	padding              Length
//	ack                  AckDelay, AckedRanges, ECT0/ECT1/CE (when any is set)
//	reset_stream         StreamID, ErrorCode, FinalSize
//	stop_sending         StreamID, ErrorCode
//	crypto               Offset, Length
//	new_token            Token
//	stream               StreamID, Offset, Length, Fin
//	max_data             Maximum
//	max_stream_data      StreamID, Maximum
//	max_streams          StreamType, Maximum
//	data_blocked         Limit
//	stream_data_blocked  StreamID, Limit
//	streams_blocked      StreamType, Limit
//	new_connection_id    SequenceNumber, RetirePriorTo, ConnectionID, StatelessResetToken
//	retire_connection_id SequenceNumber
//	path_challenge/response Data
//	connection_close     ErrorSpace, ErrorCode, Reason, TriggerFrameType
//	datagram             Length
//	ack_frequency        SequenceNumber, AckElicitingThreshold, RequestMaxAckDelay, ReorderingThreshold
//	unknown              RawFrameType, Length
type FrameInfo struct {
	FrameType FrameType `json:"frame_type"`

	StreamID uint64 `json:"stream_id"`
	Offset   uint64 `json:"offset"`
	Length   uint64 `json:"length"`
	Fin      bool   `json:"fin"`

	AckDelay    time.Duration `json:"-"`
	AckedRanges []AckRange    `json:"acked_ranges"`
	ECT0        uint64        `json:"ect0"`
	ECT1        uint64        `json:"ect1"`
	CE          uint64        `json:"ce"`

	// ErrorSpace is ErrorSpaceTransport or ErrorSpaceApplication.
	ErrorSpace string `json:"error_space"`
	// ErrorCode is the numeric code; for the transport space the writer
	// also gives the RFC 9000 name.
	ErrorCode        uint64 `json:"-"`
	Reason           string `json:"reason"`
	TriggerFrameType uint64 `json:"trigger_frame_type"`
	FinalSize        uint64 `json:"final_size"`

	Maximum    uint64 `json:"maximum"`
	Limit      uint64 `json:"limit"`
	StreamType string `json:"stream_type"`

	SequenceNumber      uint64   `json:"sequence_number"`
	RetirePriorTo       uint64   `json:"retire_prior_to"`
	ConnectionID        HexBytes `json:"connection_id"`
	StatelessResetToken HexBytes `json:"stateless_reset_token"`
	Token               *Token   `json:"token"`
	Data                HexBytes `json:"data"`

	AckElicitingThreshold uint64        `json:"ack_eliciting_threshold"`
	RequestMaxAckDelay    time.Duration `json:"-"`
	ReorderingThreshold   uint64        `json:"reordering_threshold"`

	RawFrameType uint64 `json:"raw_frame_type"`
}

func (e *enc) frames(k string, fs []FrameInfo) {
	e.arrayStart(k)
	for i := range fs {
		e.elemObject()
		e.frame(&fs[i])
		e.close()
	}
	e.arrayEnd()
}

func (e *enc) frame(f *FrameInfo) {
	e.str("frame_type", string(f.FrameType))
	switch f.FrameType {
	case FramePadding:
		e.uint("length", f.Length)
		e.uint("payload_length", f.Length)
	case FrameAck:
		e.ms("ack_delay", f.AckDelay)
		e.ackRanges("acked_ranges", f.AckedRanges)
		if f.ECT0 != 0 || f.ECT1 != 0 || f.CE != 0 {
			e.uint("ect1", f.ECT1)
			e.uint("ect0", f.ECT0)
			e.uint("ce", f.CE)
		}
	case FrameResetStream:
		e.uint("stream_id", f.StreamID)
		e.uint("error_code", f.ErrorCode)
		e.uint("final_size", f.FinalSize)
	case FrameStopSending:
		e.uint("stream_id", f.StreamID)
		e.uint("error_code", f.ErrorCode)
	case FrameCrypto:
		e.uint("offset", f.Offset)
		e.uint("length", f.Length)
	case FrameNewToken:
		if f.Token != nil {
			e.token("token", f.Token)
		}
	case FrameStream:
		e.uint("stream_id", f.StreamID)
		e.uint("offset", f.Offset)
		e.uint("length", f.Length)
		if f.Fin {
			e.bool("fin", true)
		}
	case FrameMaxData:
		e.uint("maximum", f.Maximum)
	case FrameMaxStreamData:
		e.uint("stream_id", f.StreamID)
		e.uint("maximum", f.Maximum)
	case FrameMaxStreams:
		e.str("stream_type", f.StreamType)
		e.uint("maximum", f.Maximum)
	case FrameDataBlocked:
		e.uint("limit", f.Limit)
	case FrameStreamDataBlocked:
		e.uint("stream_id", f.StreamID)
		e.uint("limit", f.Limit)
	case FrameStreamsBlocked:
		e.str("stream_type", f.StreamType)
		e.uint("limit", f.Limit)
	case FrameNewConnectionID:
		e.uint("sequence_number", f.SequenceNumber)
		e.uint("retire_prior_to", f.RetirePriorTo)
		e.uint("connection_id_length", uint64(len(f.ConnectionID)))
		e.hex("connection_id", f.ConnectionID)
		e.hex("stateless_reset_token", f.StatelessResetToken)
	case FrameRetireConnectionID:
		e.uint("sequence_number", f.SequenceNumber)
	case FramePathChallenge, FramePathResponse:
		e.hex("data", f.Data)
	case FrameConnectionClose:
		space := f.ErrorSpace
		if space == "" {
			space = ErrorSpaceTransport
		}
		e.str("error_space", space)
		e.key("error_code")
		if space == ErrorSpaceTransport {
			e.b = appendQuoted(e.b, TransportErrorName(f.ErrorCode))
		} else {
			e.b = strconv.AppendUint(e.b, f.ErrorCode, 10)
		}
		e.uint("raw_error_code", f.ErrorCode)
		e.str("reason", f.Reason)
		if space == ErrorSpaceTransport && f.TriggerFrameType != 0 {
			e.uint("trigger_frame_type", f.TriggerFrameType)
		}
	case FrameDatagram:
		e.uint("length", f.Length)
	case FrameAckFrequency:
		e.uint("sequence_number", f.SequenceNumber)
		e.uint("ack_eliciting_threshold", f.AckElicitingThreshold)
		e.ms("request_max_ack_delay", f.RequestMaxAckDelay)
		e.uint("reordering_threshold", f.ReorderingThreshold)
	case FrameUnknown:
		e.uint("raw_frame_type", f.RawFrameType)
		if f.Length != 0 {
			e.uint("length", f.Length)
		}
	}
}

// UnmarshalJSON decodes a frame written by this package or by another qlog
// 0.3 writer: durations in float milliseconds, and error codes given either
// as a number or as an RFC 9000 name.
func (f *FrameInfo) UnmarshalJSON(b []byte) error {
	type plain FrameInfo // drops the method, so the inner decode does not recurse
	aux := struct {
		*plain
		AckDelay           msField         `json:"ack_delay"`
		RequestMaxAckDelay msField         `json:"request_max_ack_delay"`
		ErrorCode          json.RawMessage `json:"error_code"`
		RawErrorCode       *uint64         `json:"raw_error_code"`
	}{plain: (*plain)(f)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	setMs(&f.AckDelay, aux.AckDelay)
	setMs(&f.RequestMaxAckDelay, aux.RequestMaxAckDelay)
	switch {
	case aux.RawErrorCode != nil:
		f.ErrorCode = *aux.RawErrorCode
	case len(aux.ErrorCode) > 0:
		code, err := decodeErrorCode(aux.ErrorCode)
		if err != nil {
			return err
		}
		f.ErrorCode = code
	}
	return nil
}

// decodeErrorCode accepts a number or a transport error name.
func decodeErrorCode(raw json.RawMessage) (uint64, error) {
	var n uint64
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("qlog: error code %s is neither a number nor a name", raw)
	}
	code, ok := TransportErrorCode(s)
	if !ok {
		return 0, fmt.Errorf("qlog: unknown error code name %q", s)
	}
	return code, nil
}

// transportErrorNames are the qlog names of the RFC 9000 section 20.1 codes.
var transportErrorNames = [...]string{
	0x0:  "no_error",
	0x1:  "internal_error",
	0x2:  "connection_refused",
	0x3:  "flow_control_error",
	0x4:  "stream_limit_error",
	0x5:  "stream_state_error",
	0x6:  "final_size_error",
	0x7:  "frame_encoding_error",
	0x8:  "transport_parameter_error",
	0x9:  "connection_id_limit_error",
	0xa:  "protocol_violation",
	0xb:  "invalid_token",
	0xc:  "application_error",
	0xd:  "crypto_buffer_exceeded",
	0xe:  "key_update_error",
	0xf:  "aead_limit_reached",
	0x10: "no_viable_path",
}

// TransportErrorName returns the qlog name of a transport error code:
// "protocol_violation", "crypto_error_0x12a" for TLS alerts, or "unknown".
func TransportErrorName(code uint64) string {
	if code < uint64(len(transportErrorNames)) {
		return transportErrorNames[code]
	}
	if code >= 0x100 && code <= 0x1ff {
		return "crypto_error_0x" + strconv.FormatUint(code, 16)
	}
	return "unknown"
}

// TransportErrorCode is the inverse of TransportErrorName. It reports false
// for "unknown" and names it does not know.
func TransportErrorCode(name string) (uint64, bool) {
	for i, n := range transportErrorNames {
		if n == name {
			return uint64(i), true
		}
	}
	if hexCode, ok := strings.CutPrefix(name, "crypto_error_0x"); ok {
		n, err := strconv.ParseUint(hexCode, 16, 64)
		if err == nil && n >= 0x100 && n <= 0x1ff {
			return n, true
		}
	}
	return 0, false
}
