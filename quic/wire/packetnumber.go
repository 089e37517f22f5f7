package wire

// NoPacketNumber stands for "no packet number yet": pass it as largestAcked
// to EncodedPacketNumberLen before any packet was acknowledged, and as
// largest to DecodePacketNumber before any packet was received.
const NoPacketNumber = ^uint64(0)

// MaxPacketNumber is the largest packet number, 2^62-1 (RFC 9000 §12.3).
const MaxPacketNumber = MaxVarint

// EncodedPacketNumberLen returns how many bytes (1 to 4) the truncated
// packet number must take when sending packet number full while the
// largest acknowledged packet number is largestAcked (RFC 9000 §17.1 and
// Appendix A.2): enough to represent more than twice the number of
// unacknowledged packets.
func EncodedPacketNumberLen(full, largestAcked uint64) int {
	// RFC 9000 A.2: num_unacked = full_pn - largest_acked, or full_pn + 1
	// when nothing was acknowledged. NoPacketNumber+1 wraps to 0, so the
	// subtraction below covers both cases.
	numUnacked := full - largestAcked
	// min_bits = log(num_unacked, 2) + 1; num_bytes = ceil(min_bits / 8),
	// so k bytes suffice while num_unacked <= 2^(8k-1).
	switch {
	case numUnacked <= 1<<7:
		return 1
	case numUnacked <= 1<<15:
		return 2
	case numUnacked <= 1<<23:
		return 3
	default:
		return 4
	}
}

// AppendPacketNumber appends the low n bytes (1 to 4) of pn, most
// significant first (RFC 9000 §17.1). Other values of n write 4 bytes.
func AppendPacketNumber(b []byte, pn uint64, n int) []byte {
	switch n {
	case 1:
		return append(b, byte(pn))
	case 2:
		return append(b, byte(pn>>8), byte(pn))
	case 3:
		return append(b, byte(pn>>16), byte(pn>>8), byte(pn))
	default:
		return append(b, byte(pn>>24), byte(pn>>16), byte(pn>>8), byte(pn))
	}
}

// ReadPacketNumber reads an n-byte (1 to 4) truncated packet number from
// the start of b. It panics if b is shorter than n.
func ReadPacketNumber(b []byte, n int) uint64 {
	var v uint64
	for _, c := range b[:n] {
		v = v<<8 | uint64(c)
	}
	return v
}

// DecodePacketNumber recovers a full packet number from its truncated
// value of nbits bits (8, 16, 24 or 32), given the largest packet number
// received so far in the same space (RFC 9000 Appendix A.3). Pass
// NoPacketNumber as largest when nothing was received yet.
func DecodePacketNumber(largest, truncated uint64, nbits int) uint64 {
	expected := largest + 1 // NoPacketNumber + 1 == 0
	win := uint64(1) << nbits
	hwin := win / 2
	mask := win - 1
	// The incoming packet number should be greater than expected - hwin
	// and less than or equal to expected + hwin.
	candidate := (expected &^ mask) | truncated
	if expected >= hwin && candidate+hwin <= expected && candidate < (1<<62)-win {
		return candidate + win
	}
	if candidate > expected+hwin && candidate >= win {
		return candidate - win
	}
	return candidate
}
