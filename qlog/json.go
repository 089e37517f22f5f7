package qlog

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// enc appends a JSON object to a byte slice without reflection, so that
// encoding an event on the connection's hot path costs no allocation beyond
// growing the Writer's reusable buffer.
//
// A single flag is enough to place commas: after a nested object or array
// closes we are always inside a parent that already holds one member.
type enc struct {
	b     []byte
	first bool
}

func (e *enc) open()  { e.b = append(e.b, '{'); e.first = true }
func (e *enc) close() { e.b = append(e.b, '}'); e.first = false }

func (e *enc) sep() {
	if !e.first {
		e.b = append(e.b, ',')
	}
	e.first = false
}

func (e *enc) key(k string) {
	e.sep()
	e.b = append(e.b, '"')
	e.b = append(e.b, k...) // keys are package constants and need no escaping
	e.b = append(e.b, '"', ':')
}

func (e *enc) objectStart(k string) { e.key(k); e.b = append(e.b, '{'); e.first = true }
func (e *enc) arrayStart(k string)  { e.key(k); e.b = append(e.b, '['); e.first = true }
func (e *enc) arrayEnd()            { e.b = append(e.b, ']'); e.first = false }

// list writes vs as an array of scalars encoded by appendOne; a nil slice
// is omitted, an empty one written as [].
func list[T any](e *enc, k string, vs []T, appendOne func([]byte, T) []byte) {
	if vs == nil {
		return
	}
	e.arrayStart(k)
	for _, v := range vs {
		e.sep()
		e.b = appendOne(e.b, v)
	}
	e.arrayEnd()
}

// elemObject starts an object that is an element of the current array.
func (e *enc) elemObject() { e.sep(); e.b = append(e.b, '{'); e.first = true }

func (e *enc) str(k, v string) { e.key(k); e.b = appendQuoted(e.b, v) }

// optStr writes a string member unless it is empty, the usual rule for
// optional qlog text fields.
func (e *enc) optStr(k, v string) {
	if v != "" {
		e.str(k, v)
	}
}

func (e *enc) uint(k string, v uint64) {
	e.key(k)
	e.b = strconv.AppendUint(e.b, v, 10)
}
func (e *enc) bool(k string, v bool) { e.key(k); e.b = strconv.AppendBool(e.b, v) }
func (e *enc) hex(k string, v []byte) {
	e.key(k)
	e.b = appendHexString(e.b, v)
}

// ms writes a duration as float milliseconds, the unit of every qlog 0.3
// duration field.
func (e *enc) ms(k string, d time.Duration) { e.key(k); e.b = appendMillis(e.b, d) }

func appendMillis(b []byte, d time.Duration) []byte {
	return strconv.AppendFloat(b, float64(d)/float64(time.Millisecond), 'f', -1, 64)
}

func appendHexString(b []byte, v []byte) []byte {
	b = append(b, '"')
	b = hex.AppendEncode(b, v)
	return append(b, '"')
}

// appendQuoted appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does, so a peer's garbage reason phrase cannot make the file
// unreadable.
func appendQuoted(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// HexBytes is a byte string that qlog serialises as lowercase hex, as it does
// connection IDs, tokens and secrets. It implements encoding.TextUnmarshaler
// so that typed decoding in the Reader can use encoding/json.
type HexBytes []byte

// String returns the hex form.
func (h HexBytes) String() string { return hex.EncodeToString(h) }

// MarshalText encodes h as hex.
func (h HexBytes) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, h), nil }

// UnmarshalText decodes hex. An empty string gives an empty, non-nil value so
// that a zero-length connection ID stays distinguishable from an absent one.
func (h *HexBytes) UnmarshalText(b []byte) error {
	v, err := hex.AppendDecode(make([]byte, 0, len(b)/2), b)
	if err != nil {
		return fmt.Errorf("qlog: bad hex %q: %w", b, err)
	}
	*h = v
	return nil
}

// Version is a QUIC version; qlog writes it as 8 hex digits.
type Version uint32

// String returns the version as 8 lowercase hex digits.
func (v Version) String() string { return fmt.Sprintf("%08x", uint32(v)) }

// MarshalText encodes v as 8 hex digits.
func (v Version) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText decodes a hex version, with or without a 0x prefix, because
// other implementations' qlogs use both forms.
func (v *Version) UnmarshalText(b []byte) error {
	s := string(b)
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		s = s[2:]
	}
	n, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return fmt.Errorf("qlog: bad version %q", b)
	}
	*v = Version(n)
	return nil
}

func appendVersion(b []byte, v Version) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for shift := 28; shift >= 0; shift -= 4 {
		b = append(b, hexDigits[(v>>uint(shift))&0xf])
	}
	return append(b, '"')
}

// AckRange is an inclusive range of acknowledged packet numbers. qlog writes
// [n] when both ends are equal, as draft-ietf-quic-qlog-quic-events asks, and
// [first, last] otherwise; both forms decode.
type AckRange struct {
	First, Last uint64
}

// UnmarshalJSON accepts [n] and [first, last].
func (r *AckRange) UnmarshalJSON(b []byte) error {
	var v []uint64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch len(v) {
	case 1:
		*r = AckRange{v[0], v[0]}
	case 2:
		*r = AckRange{v[0], v[1]}
	default:
		return errors.New("qlog: ack range must have one or two elements")
	}
	return nil
}

func (e *enc) ackRanges(k string, rs []AckRange) {
	e.arrayStart(k)
	for _, r := range rs {
		e.sep()
		e.b = append(e.b, '[')
		e.b = strconv.AppendUint(e.b, r.First, 10)
		if r.Last != r.First {
			e.b = append(e.b, ',')
			e.b = strconv.AppendUint(e.b, r.Last, 10)
		}
		e.b = append(e.b, ']')
	}
	e.arrayEnd()
}

// msField is used by typed decoding for duration fields written in float ms.
type msField struct {
	set bool
	d   time.Duration
}

func (m *msField) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	m.set = true
	m.d = time.Duration(math.Round(f * float64(time.Millisecond)))
	return nil
}
