package protect

import "errors"

var (
	// ErrUnsupportedVersion is returned for a QUIC version whose packet
	// protection this package does not know (only v1 and v2 are defined).
	ErrUnsupportedVersion = errors.New("protect: unsupported QUIC version")

	// ErrUnsupportedSuite is returned for a TLS cipher suite that QUIC cannot
	// use or that this package does not implement.
	ErrUnsupportedSuite = errors.New("protect: unsupported cipher suite")

	// ErrDecrypt is returned when AEAD authentication of a packet fails.
	// RFC 9001 §5.3: "Packets that fail authentication ... MUST be
	// discarded" (the caller drops the packet; it is not a connection error).
	ErrDecrypt = errors.New("protect: packet authentication failed")

	// ErrSampleTooShort is returned when the packet is too short to take the
	// 16-byte header protection sample at pnOffset+4 (RFC 9001 §5.4.2).
	ErrSampleTooShort = errors.New("protect: packet too short for header protection sample")

	// ErrPacketNumberOffset is returned when the packet number offset given
	// for header protection lies outside the packet.
	ErrPacketNumberOffset = errors.New("protect: packet number offset out of range")

	// ErrInvalidRetry is returned when a Retry packet's integrity tag does not
	// verify or the packet is too short to carry one.
	ErrInvalidRetry = errors.New("protect: invalid Retry integrity tag")
)
