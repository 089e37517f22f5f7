package qpack

import (
	"errors"

	"github.com/quiver-quic/quiver/internal/strcache"
	"golang.org/x/net/http2/hpack"
)

// Primitives (RFC 9204 §4.1): prefixed integers and string literals, both
// as RFC 7541 §5 defines them.

// errIncomplete means more bytes are needed: on a stream, wait for them;
// in a field section, the section is truncated.
var errIncomplete = errors.New("qpack: incomplete")

// errIntTooLarge: RFC 9204 §4.1.1: "QPACK implementations MUST be able to
// decode integers up to and including 62 bits long"; longer ones are
// beyond what this decoder accepts (§7.4: "If an implementation encounters
// a value larger than it is able to decode, this MUST be treated as a
// stream error of type QPACK_DECOMPRESSION_FAILED if on a request stream
// or a connection error of the appropriate type if on the encoder or
// decoder stream").
var errIntTooLarge = errors.New("qpack: integer above 2^62-1")

// errStringTooLarge: a string literal longer than the caller's limit.
var errStringTooLarge = errors.New("qpack: string literal too long")

// errHuffman: an invalid Huffman encoding.
var errHuffman = errors.New("qpack: invalid Huffman encoding")

const maxInt = 1<<62 - 1

// readInt reads an integer with an n-bit prefix; b[0] holds the prefix.
func readInt(b []byte, n int) (uint64, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errIncomplete
	}
	max := uint64(1)<<n - 1
	v := uint64(b[0]) & max
	b = b[1:]
	if v < max {
		return v, b, nil
	}
	for shift := uint(0); ; shift += 7 {
		if len(b) == 0 {
			return 0, nil, errIncomplete
		}
		c := b[0]
		b = b[1:]
		if shift > 56 {
			return 0, nil, errIntTooLarge
		}
		v += uint64(c&0x7f) << shift
		if v > maxInt {
			return 0, nil, errIntTooLarge
		}
		if c&0x80 == 0 {
			return v, b, nil
		}
	}
}

// appendInt appends v with an n-bit prefix; flags fill the first byte's
// other bits.
func appendInt(b []byte, n int, flags byte, v uint64) []byte {
	max := uint64(1)<<n - 1
	if v < max {
		return append(b, flags|byte(v))
	}
	b = append(b, flags|byte(max))
	v -= max
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// readString reads a string literal whose length has an n-bit prefix, the
// Huffman flag being the bit above it. Strings longer than limit, encoded
// or decoded, are refused.
func readString(b []byte, n int, limit uint64) (string, []byte, error) {
	if len(b) == 0 {
		return "", nil, errIncomplete
	}
	huff := b[0]&(1<<n) != 0
	l, b, err := readInt(b, n)
	if err != nil {
		return "", nil, err
	}
	if l > limit {
		return "", nil, errStringTooLarge
	}
	if uint64(len(b)) < l {
		return "", nil, errIncomplete
	}
	raw, b := b[:l], b[l:]
	if !huff {
		return string(raw), b, nil
	}
	s, ok := huffmanDecoded.Get(raw)
	if !ok {
		s, err = hpack.HuffmanDecodeToString(raw)
		if err != nil {
			return "", nil, errHuffman
		}
		huffmanDecoded.Put(raw, s)
	}
	if uint64(len(s)) > limit {
		return "", nil, errStringTooLarge
	}
	return s, b, nil
}

// appendString appends s with an n-bit length prefix, Huffman-encoded
// when that is shorter.
func appendString(b []byte, n int, flags byte, s string) []byte {
	if h, ok := huffmanEncoded.GetString(s); ok {
		if len(h) < len(s) {
			b = appendInt(b, n, flags|1<<n, uint64(len(h)))
			return append(b, h...)
		}
	} else if hl := hpack.HuffmanEncodeLength(s); hl < uint64(len(s)) {
		b = appendInt(b, n, flags|1<<n, hl)
		start := len(b)
		b = hpack.AppendHuffmanString(b, s)
		huffmanEncoded.PutString(s, string(b[start:]))
		return b
	} else {
		huffmanEncoded.PutString(s, s)
	}
	b = appendInt(b, n, flags, uint64(len(s)))
	return append(b, s...)
}

// huffmanDecoded and huffmanEncoded remember the Huffman codes of short
// strings seen: header sections repeat the same names and values (an
// RPC's path, content type, authority), and coding them again was a
// twentieth of an HTTP/3 RPC's CPU (docs/highway.md). huffmanEncoded holds
// the string itself when its code is not shorter.
var (
	huffmanDecoded = strcache.Cache{MaxEntries: maxCachedStrings, MaxKeyLen: maxCachedString}
	huffmanEncoded = strcache.Cache{MaxEntries: maxCachedStrings, MaxKeyLen: maxCachedString}
)

const (
	maxCachedStrings = 1024
	maxCachedString  = 64 // bytes of key
)
