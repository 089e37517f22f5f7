package wire

import (
	"encoding/binary"
	"errors"
)

// MaxVarint is the largest value a variable-length integer can hold,
// 2^62-1 (RFC 9000 §16).
const MaxVarint = 1<<62 - 1

// ErrTruncated reports that the input ended before the end of the
// integer, header or structure being parsed. It is a sentinel, so parse
// paths do not allocate.
var ErrTruncated = errors.New("wire: truncated input")

// VarintLen returns the number of bytes of the shortest encoding of v:
// 1, 2, 4 or 8. Values above MaxVarint report 8; AppendVarint truncates
// them to 62 bits.
func VarintLen(v uint64) int {
	switch {
	case v < 1<<6:
		return 1
	case v < 1<<14:
		return 2
	case v < 1<<30:
		return 4
	default:
		return 8
	}
}

// AppendVarint appends the shortest encoding of v to b (RFC 9000 §16).
// Values above MaxVarint cannot be represented; only their low 62 bits
// are written.
func AppendVarint(b []byte, v uint64) []byte {
	switch {
	case v < 1<<6:
		return append(b, byte(v))
	case v < 1<<14:
		return append(b, 0x40|byte(v>>8), byte(v))
	case v < 1<<30:
		return append(b, 0x80|byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	default:
		return append(b, 0xc0|byte(v>>56)&0x3f, byte(v>>48), byte(v>>40), byte(v>>32),
			byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
}

// AppendVarintLen appends v encoded in exactly n bytes (1, 2, 4 or 8),
// even when a shorter encoding exists. It is used for Length placeholders
// patched later and for probes that send non-minimal encodings. The high
// bits of v that do not fit in n bytes are dropped. Any other n is
// treated as 8.
func AppendVarintLen(b []byte, v uint64, n int) []byte {
	switch n {
	case 1:
		return append(b, byte(v)&0x3f)
	case 2:
		return append(b, 0x40|byte(v>>8)&0x3f, byte(v))
	case 4:
		return append(b, 0x80|byte(v>>24)&0x3f, byte(v>>16), byte(v>>8), byte(v))
	default:
		return append(b, 0xc0|byte(v>>56)&0x3f, byte(v>>48), byte(v>>40), byte(v>>32),
			byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
}

// PutVarintLen overwrites b[:n] with v encoded in exactly n bytes (1, 2,
// 4 or 8). It fills a Length placeholder written by AppendVarintLen. It
// panics if b is shorter than n.
func PutVarintLen(b []byte, v uint64, n int) {
	_ = AppendVarintLen(b[:0:n], v, n)
}

// ConsumeVarint decodes the variable-length integer at the start of b and
// returns its value and the number of bytes it used. It accepts
// non-minimal encodings, as RFC 9000 §16 requires except where a rule says
// otherwise (frame types). It returns ErrTruncated if b is too short.
func ConsumeVarint(b []byte) (v uint64, n int, err error) {
	if len(b) == 0 {
		return 0, 0, ErrTruncated
	}
	switch b[0] >> 6 {
	case 0:
		return uint64(b[0]), 1, nil
	case 1:
		if len(b) < 2 {
			return 0, 0, ErrTruncated
		}
		return uint64(binary.BigEndian.Uint16(b)) & (1<<14 - 1), 2, nil
	case 2:
		if len(b) < 4 {
			return 0, 0, ErrTruncated
		}
		return uint64(binary.BigEndian.Uint32(b)) & (1<<30 - 1), 4, nil
	default:
		if len(b) < 8 {
			return 0, 0, ErrTruncated
		}
		return binary.BigEndian.Uint64(b) & MaxVarint, 8, nil
	}
}
