package h3

import "io"

// HTTP/3 uses QUIC's variable-length integers (RFC 9000 §16) for frame types,
// lengths, stream types and settings. This small copy keeps h3 independent of
// the engine's wire package.

// maxVarint is the largest value a variable-length integer can hold.
const maxVarint = 1<<62 - 1

// varintLen is the number of bytes of the shortest encoding of v.
func varintLen(v uint64) int {
	switch {
	case v <= 63:
		return 1
	case v <= 16383:
		return 2
	case v <= 1073741823:
		return 4
	default:
		return 8
	}
}

// appendVarint appends the shortest encoding of v. Values above 2^62-1 cannot
// be encoded; their top two bits are dropped.
func appendVarint(b []byte, v uint64) []byte {
	switch varintLen(v) {
	case 1:
		return append(b, byte(v))
	case 2:
		return append(b, byte(v>>8)|0x40, byte(v))
	case 4:
		return append(b, byte(v>>24)|0x80, byte(v>>16), byte(v>>8), byte(v))
	default:
		return append(b, byte(v>>56)&0x3f|0xc0, byte(v>>48), byte(v>>40), byte(v>>32),
			byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
}

// parseVarint decodes a variable-length integer at the start of b. It returns
// the value and the number of bytes used, or n = 0 if b is too short.
func parseVarint(b []byte) (v uint64, n int) {
	if len(b) == 0 {
		return 0, 0
	}
	n = 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0
	}
	v = uint64(b[0] & 0x3f)
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
	}
	return v, n
}

// readVarint reads a variable-length integer from r. It returns io.EOF if r
// ends before the first byte and io.ErrUnexpectedEOF if it ends inside the
// integer.
func readVarint(r io.ByteReader) (uint64, error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	n := 1 << (c >> 6)
	v := uint64(c & 0x3f)
	for i := 1; i < n; i++ {
		c, err = r.ReadByte()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		v = v<<8 | uint64(c)
	}
	return v, nil
}
