package wire

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVarintRFC9000A1 uses the examples of RFC 9000 Appendix A.1:
// "the eight-byte sequence 0xc2197c5eff14e88c decodes to the decimal value
// 151,288,809,941,952,652; the four-byte sequence 0x9d7f3e7d decodes to
// 494,878,333; the two-byte sequence 0x7bbd decodes to 15,293; and the
// single byte 0x25 decodes to 37 (as does the two-byte sequence 0x4025)."
func TestVarintRFC9000A1(t *testing.T) {
	for _, tc := range []struct {
		hex     string
		v       uint64
		minimal bool
	}{
		{"c2197c5eff14e88c", 151288809941952652, true},
		{"9d7f3e7d", 494878333, true},
		{"7bbd", 15293, true},
		{"25", 37, true},
		{"4025", 37, false},
	} {
		b := unhex(t, tc.hex)
		v, n, err := ConsumeVarint(b)
		if err != nil || v != tc.v || n != len(b) {
			t.Errorf("ConsumeVarint(%s) = %d, %d, %v; want %d, %d", tc.hex, v, n, err, tc.v, len(b))
		}
		if tc.minimal {
			if got := AppendVarint(nil, tc.v); !bytes.Equal(got, b) {
				t.Errorf("AppendVarint(%d) = %x, want %s", tc.v, got, tc.hex)
			}
			if VarintLen(tc.v) != len(b) {
				t.Errorf("VarintLen(%d) = %d, want %d", tc.v, VarintLen(tc.v), len(b))
			}
		}
		if got := AppendVarintLen(nil, tc.v, len(b)); !bytes.Equal(got, b) {
			t.Errorf("AppendVarintLen(%d, %d) = %x, want %s", tc.v, len(b), got, tc.hex)
		}
		// Every prefix is truncated.
		for i := range len(b) {
			if _, _, err := ConsumeVarint(b[:i]); err != ErrTruncated {
				t.Errorf("ConsumeVarint(%x) err = %v, want ErrTruncated", b[:i], err)
			}
		}
	}
}

func TestVarintBoundaries(t *testing.T) {
	for _, v := range []uint64{0, 63, 64, 16383, 16384, 1<<30 - 1, 1 << 30, MaxVarint} {
		b := AppendVarint(nil, v)
		if len(b) != VarintLen(v) {
			t.Errorf("len(AppendVarint(%d)) = %d, VarintLen = %d", v, len(b), VarintLen(v))
		}
		got, n, err := ConsumeVarint(b)
		if err != nil || got != v || n != len(b) {
			t.Errorf("round trip %d: got %d, %d, %v", v, got, n, err)
		}
		for _, l := range []int{1, 2, 4, 8} {
			if l < VarintLen(v) {
				continue
			}
			b := AppendVarintLen(nil, v, l)
			got, n, err := ConsumeVarint(b)
			if err != nil || got != v || n != l {
				t.Errorf("forced %d bytes for %d: got %d, %d, %v", l, v, got, n, err)
			}
			buf := make([]byte, l)
			PutVarintLen(buf, v, l)
			if !bytes.Equal(buf, b) {
				t.Errorf("PutVarintLen(%d, %d) = %x, want %x", v, l, buf, b)
			}
		}
	}
	// Values that do not fit are truncated to 62 bits, never panic.
	if got := AppendVarint(nil, 1<<63|5); len(got) != 8 {
		t.Errorf("AppendVarint(2^63+5) = %x", got)
	}
}

func TestPacketNumberRFC9000A2(t *testing.T) {
	// RFC 9000 Appendix A.2: "if an endpoint has received an acknowledgment
	// for packet 0xabe8b3 and is sending a packet with a number of
	// 0xac5c02, there are 29,519 (0x734f) outstanding packet numbers. In
	// order to represent at least twice this range (59,038 packets, or
	// 0xe69e), 16 bits are required. In the same state, sending a packet
	// with a number of 0xace8fe uses the 24-bit encoding".
	if n := EncodedPacketNumberLen(0xac5c02, 0xabe8b3); n != 2 {
		t.Errorf("EncodedPacketNumberLen(0xac5c02, 0xabe8b3) = %d, want 2", n)
	}
	if n := EncodedPacketNumberLen(0xace8fe, 0xabe8b3); n != 3 {
		t.Errorf("EncodedPacketNumberLen(0xace8fe, 0xabe8b3) = %d, want 3", n)
	}
	if n := EncodedPacketNumberLen(0, NoPacketNumber); n != 1 {
		t.Errorf("EncodedPacketNumberLen(0, none) = %d, want 1", n)
	}
	if n := EncodedPacketNumberLen(1<<40, 0); n != 4 {
		t.Errorf("EncodedPacketNumberLen(2^40, 0) = %d, want 4", n)
	}
}

func TestPacketNumberRFC9000A3(t *testing.T) {
	// RFC 9000 Appendix A.3: "if the highest successfully authenticated
	// packet had a packet number of 0xa82f30ea, then a packet containing a
	// 16-bit value of 0x9b32 will be decoded as 0xa82f9b32."
	if got := DecodePacketNumber(0xa82f30ea, 0x9b32, 16); got != 0xa82f9b32 {
		t.Errorf("DecodePacketNumber = %#x, want 0xa82f9b32", got)
	}
	if got := DecodePacketNumber(NoPacketNumber, 0, 8); got != 0 {
		t.Errorf("first packet: got %d", got)
	}
}

// TestPacketNumberRoundTrip encodes with EncodedPacketNumberLen and checks
// that the receiver, knowing at least the acknowledged packet, decodes the
// right number.
func TestPacketNumberRoundTrip(t *testing.T) {
	for _, tc := range []struct{ acked, full uint64 }{
		{NoPacketNumber, 0}, {NoPacketNumber, 127}, {0, 128}, {0, 129}, {100, 228}, {100, 229},
		{0xabe8b3, 0xac5c02}, {0xabe8b3, 0xace8fe}, {1 << 20, 1<<20 + 1<<22}, {MaxPacketNumber - 300, MaxPacketNumber},
	} {
		n := EncodedPacketNumberLen(tc.full, tc.acked)
		b := AppendPacketNumber(nil, tc.full, n)
		trunc := ReadPacketNumber(b, n)
		// The receiver may have seen anything between acked and full-1.
		for _, largest := range []uint64{tc.acked, tc.full - 1} {
			if got := DecodePacketNumber(largest, trunc, 8*n); got != tc.full {
				t.Errorf("acked %d full %d: %d bytes, largest %d decodes to %d", tc.acked, tc.full, n, largest, got)
			}
		}
	}
}
