package h3

import (
	"errors"
	"fmt"
)

// FrameType is an HTTP/3 frame type (RFC 9114 §7.2).
type FrameType uint64

// HTTP/3 frame types.
const (
	FrameData        FrameType = 0x0
	FrameHeaders     FrameType = 0x1
	FrameCancelPush  FrameType = 0x3
	FrameSettings    FrameType = 0x4
	FramePushPromise FrameType = 0x5
	FrameGoAway      FrameType = 0x7
	FrameMaxPushID   FrameType = 0xd
)

// String returns the frame type's name, e.g. "HEADERS".
func (t FrameType) String() string {
	switch t {
	case FrameData:
		return "DATA"
	case FrameHeaders:
		return "HEADERS"
	case FrameCancelPush:
		return "CANCEL_PUSH"
	case FrameSettings:
		return "SETTINGS"
	case FramePushPromise:
		return "PUSH_PROMISE"
	case FrameGoAway:
		return "GOAWAY"
	case FrameMaxPushID:
		return "MAX_PUSH_ID"
	}
	if isReserved(uint64(t)) {
		return fmt.Sprintf("reserved(%#x)", uint64(t))
	}
	return fmt.Sprintf("unknown(%#x)", uint64(t))
}

// isHTTP2Frame reports frame types that HTTP/2 used and HTTP/3 reserved
// (PRIORITY, PING, WINDOW_UPDATE, CONTINUATION).
func isHTTP2Frame(t FrameType) bool {
	return t == 0x2 || t == 0x6 || t == 0x8 || t == 0x9
}

// Setting identifiers (RFC 9114 §7.2.4.1, RFC 9204 §5, RFC 9297 §2.1.1).
const (
	SettingQPACKMaxTableCapacity uint64 = 0x1
	SettingMaxFieldSectionSize   uint64 = 0x6
	SettingQPACKBlockedStreams   uint64 = 0x7
	SettingEnableConnectProtocol uint64 = 0x8
	SettingH3Datagram            uint64 = 0x33
)

// Frame is an HTTP/3 frame. Append encodes it exactly as its fields say: the
// encoder never validates, so tests and conformance probes can send invalid
// frames on purpose.
type Frame interface {
	// Type is the frame type on the wire.
	Type() FrameType
	// Append appends the whole frame (type, length, payload) to b.
	Append(b []byte) []byte
}

// DataFrame is a DATA frame. When read by a stream reader only the header is
// parsed and the payload is streamed; ParseFrame fills Data.
type DataFrame struct{ Data []byte }

// HeadersFrame carries a QPACK-encoded field section.
type HeadersFrame struct{ FieldSection []byte }

// CancelPushFrame is a CANCEL_PUSH frame.
type CancelPushFrame struct{ PushID uint64 }

// Setting is one SETTINGS parameter.
type Setting struct{ ID, Value uint64 }

// SettingsFrame is a SETTINGS frame. Settings keeps wire order and can hold
// duplicates when built by hand; ParseFrame rejects duplicates.
type SettingsFrame struct{ Settings []Setting }

// PushPromiseFrame is a PUSH_PROMISE frame.
type PushPromiseFrame struct {
	PushID       uint64
	FieldSection []byte
}

// GoAwayFrame is a GOAWAY frame: a client-initiated bidirectional stream ID
// from a server, a push ID from a client.
type GoAwayFrame struct{ ID uint64 }

// MaxPushIDFrame is a MAX_PUSH_ID frame.
type MaxPushIDFrame struct{ PushID uint64 }

// UnknownFrame is a frame of a type this package does not know, including the
// reserved grease types 0x1f*N+0x21.
type UnknownFrame struct {
	FrameType FrameType
	Payload   []byte
}

// Type implements Frame.
func (f *DataFrame) Type() FrameType { return FrameData }

// Type implements Frame.
func (f *HeadersFrame) Type() FrameType { return FrameHeaders }

// Type implements Frame.
func (f *CancelPushFrame) Type() FrameType { return FrameCancelPush }

// Type implements Frame.
func (f *SettingsFrame) Type() FrameType { return FrameSettings }

// Type implements Frame.
func (f *PushPromiseFrame) Type() FrameType { return FramePushPromise }

// Type implements Frame.
func (f *GoAwayFrame) Type() FrameType { return FrameGoAway }

// Type implements Frame.
func (f *MaxPushIDFrame) Type() FrameType { return FrameMaxPushID }

// Type implements Frame.
func (f *UnknownFrame) Type() FrameType { return f.FrameType }

// appendFrameHeader appends a frame's type and length.
func appendFrameHeader(b []byte, t FrameType, length uint64) []byte {
	return appendVarint(appendVarint(b, uint64(t)), length)
}

// Append implements Frame.
func (f *DataFrame) Append(b []byte) []byte {
	return append(appendFrameHeader(b, FrameData, uint64(len(f.Data))), f.Data...)
}

// Append implements Frame.
func (f *HeadersFrame) Append(b []byte) []byte {
	return append(appendFrameHeader(b, FrameHeaders, uint64(len(f.FieldSection))), f.FieldSection...)
}

// Append implements Frame.
func (f *CancelPushFrame) Append(b []byte) []byte {
	return appendVarint(appendFrameHeader(b, FrameCancelPush, uint64(varintLen(f.PushID))), f.PushID)
}

// Append implements Frame.
func (f *SettingsFrame) Append(b []byte) []byte {
	n := 0
	for _, s := range f.Settings {
		n += varintLen(s.ID) + varintLen(s.Value)
	}
	b = appendFrameHeader(b, FrameSettings, uint64(n))
	for _, s := range f.Settings {
		b = appendVarint(appendVarint(b, s.ID), s.Value)
	}
	return b
}

// Append implements Frame.
func (f *PushPromiseFrame) Append(b []byte) []byte {
	b = appendFrameHeader(b, FramePushPromise, uint64(varintLen(f.PushID)+len(f.FieldSection)))
	return append(appendVarint(b, f.PushID), f.FieldSection...)
}

// Append implements Frame.
func (f *GoAwayFrame) Append(b []byte) []byte {
	return appendVarint(appendFrameHeader(b, FrameGoAway, uint64(varintLen(f.ID))), f.ID)
}

// Append implements Frame.
func (f *MaxPushIDFrame) Append(b []byte) []byte {
	return appendVarint(appendFrameHeader(b, FrameMaxPushID, uint64(varintLen(f.PushID))), f.PushID)
}

// Append implements Frame.
func (f *UnknownFrame) Append(b []byte) []byte {
	return append(appendFrameHeader(b, f.FrameType, uint64(len(f.Payload))), f.Payload...)
}

// Get returns the value of setting id and whether it is present.
func (f *SettingsFrame) Get(id uint64) (uint64, bool) {
	for _, s := range f.Settings {
		if s.ID == id {
			return s.Value, true
		}
	}
	return 0, false
}

// ErrShortFrame is returned by ParseFrame when b ends inside the frame.
var ErrShortFrame = errors.New("h3: incomplete frame")

// ParseFrame parses the frame at the start of b and returns it with the
// number of bytes it used. If b ends inside the frame it returns
// ErrShortFrame; callers reading a stream that ended cleanly must turn that
// into H3_FRAME_ERROR (RFC 9114 §7.1).
// Layout violations are returned as an *Error (connection error). The
// returned frame's byte slices alias b.
//
// ParseFrame checks what can be checked without knowing the stream: whether
// a frame is allowed where it arrived is the caller's business.
func ParseFrame(b []byte) (Frame, int, error) {
	t, n1 := parseVarint(b)
	if n1 == 0 {
		return nil, 0, ErrShortFrame
	}
	length, n2 := parseVarint(b[n1:])
	if n2 == 0 {
		return nil, 0, ErrShortFrame
	}
	hdr := n1 + n2
	if length > uint64(len(b)-hdr) {
		return nil, 0, ErrShortFrame
	}
	f, err := parseFramePayload(FrameType(t), b[hdr:hdr+int(length)])
	if err != nil {
		return nil, 0, err
	}
	return f, hdr + int(length), nil
}

// ruleExactPayload quotes RFC 9114 §7.1 for payload layout errors.
const ruleExactPayload = `RFC 9114 §7.1: "A frame payload that contains additional bytes after the identified fields or a frame payload that terminates before the end of the identified fields MUST be treated as a connection error of type H3_FRAME_ERROR"`

// parseFramePayload parses the payload of a frame of type t. DATA payloads
// are returned as they are.
func parseFramePayload(t FrameType, p []byte) (Frame, error) {
	switch t {
	case FrameData:
		return &DataFrame{Data: p}, nil
	case FrameHeaders:
		return &HeadersFrame{FieldSection: p}, nil
	case FrameCancelPush:
		v, err := parseSingleVarint(t, p)
		if err != nil {
			return nil, err
		}
		return &CancelPushFrame{PushID: v}, nil
	case FrameGoAway:
		v, err := parseSingleVarint(t, p)
		if err != nil {
			return nil, err
		}
		return &GoAwayFrame{ID: v}, nil
	case FrameMaxPushID:
		v, err := parseSingleVarint(t, p)
		if err != nil {
			return nil, err
		}
		return &MaxPushIDFrame{PushID: v}, nil
	case FramePushPromise:
		v, n := parseVarint(p)
		if n == 0 {
			return nil, connError(ErrCodeFrameError, "PUSH_PROMISE without a complete push ID; %s", ruleExactPayload)
		}
		return &PushPromiseFrame{PushID: v, FieldSection: p[n:]}, nil
	case FrameSettings:
		return parseSettings(p)
	}
	if isHTTP2Frame(t) {
		return nil, connError(ErrCodeFrameUnexpected, `received HTTP/2 frame type %#x; RFC 9114 §7.2.8: "These frame types MUST NOT be sent, and their receipt MUST be treated as a connection error of type H3_FRAME_UNEXPECTED"`, uint64(t))
	}
	return &UnknownFrame{FrameType: t, Payload: p}, nil
}

// parseSingleVarint parses a payload made of exactly one varint.
func parseSingleVarint(t FrameType, p []byte) (uint64, error) {
	v, n := parseVarint(p)
	if n == 0 || n != len(p) {
		return 0, connError(ErrCodeFrameError, "%v payload of %d bytes is not exactly one varint; %s", t, len(p), ruleExactPayload)
	}
	return v, nil
}

// parseSettings parses a SETTINGS payload.
func parseSettings(p []byte) (*SettingsFrame, error) {
	f := &SettingsFrame{}
	for len(p) > 0 {
		id, n := parseVarint(p)
		if n == 0 {
			return nil, connError(ErrCodeFrameError, "SETTINGS ends inside a setting identifier; %s", ruleExactPayload)
		}
		p = p[n:]
		v, n := parseVarint(p)
		if n == 0 {
			return nil, connError(ErrCodeFrameError, "SETTINGS ends inside the value of setting %#x; %s", id, ruleExactPayload)
		}
		p = p[n:]
		if _, dup := f.Get(id); dup {
			// RFC 9114 §7.2.4: "The same setting identifier MUST NOT occur
			// more than once in the SETTINGS frame. A receiver MAY treat the
			// presence of duplicate setting identifiers as a connection error
			// of type H3_SETTINGS_ERROR."
			return nil, connError(ErrCodeSettingsError, `setting %#x occurs twice; RFC 9114 §7.2.4: "The same setting identifier MUST NOT occur more than once in the SETTINGS frame"`, id)
		}
		if id >= 0x2 && id <= 0x5 {
			return nil, connError(ErrCodeSettingsError, `received HTTP/2 setting %#x; RFC 9114 §7.2.4.1: "These reserved settings MUST NOT be sent, and their receipt MUST be treated as a connection error of type H3_SETTINGS_ERROR"`, id)
		}
		if id == SettingH3Datagram && v > 1 {
			return nil, connError(ErrCodeSettingsError, `SETTINGS_H3_DATAGRAM = %d; RFC 9297 §2.1.1: "Receipt of SETTINGS_H3_DATAGRAM with a value that is neither 0 or 1 MUST be treated as a connection error of type H3_SETTINGS_ERROR"`, v)
		}
		f.Settings = append(f.Settings, Setting{ID: id, Value: v})
	}
	return f, nil
}
