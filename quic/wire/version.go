package wire

import "strconv"

// Version is a QUIC version number (RFC 9000 §15).
type Version uint32

// Known versions.
const (
	// VersionNegotiationVersion is the version field of a Version
	// Negotiation packet (RFC 9000 §17.2.1).
	VersionNegotiationVersion Version = 0
	// Version1 is QUIC version 1 (RFC 9000).
	Version1 Version = 0x00000001
	// Version2 is QUIC version 2 (RFC 9369 §3.1).
	Version2 Version = 0x6b3343cf
	// VersionDraft29 is draft-ietf-quic-transport-29, still seen in the
	// wild. Drafts 29 to 34 share version 1's header layout.
	VersionDraft29 Version = 0xff00001d
	// VersionDraft32 is draft-ietf-quic-transport-32.
	VersionDraft32 Version = 0xff000020
	// VersionDraft34 is draft-ietf-quic-transport-34.
	VersionDraft34 Version = 0xff000022
)

// IsGrease reports whether v follows the reserved 0x?a?a?a?a pattern used
// to exercise version negotiation (RFC 9000 §15).
func IsGrease(v Version) bool {
	return v&0x0f0f0f0f == 0x0a0a0a0a
}

// IsDraft reports whether v is an IETF draft version 0xff0000xx.
func (v Version) IsDraft() bool { return v&0xffffff00 == 0xff000000 }

// HasKnownLayout reports whether this package knows the long-header layout
// of v: version 1, version 2 and drafts 29 to 34.
func (v Version) HasKnownLayout() bool {
	return v == Version1 || v == Version2 || (v >= 0xff00001d && v <= 0xff000022)
}

// String returns a readable name such as "v1", "v2", "draft-29" or the
// number in hex.
func (v Version) String() string {
	switch {
	case v == Version1:
		return "v1"
	case v == Version2:
		return "v2"
	case v.IsDraft():
		return "draft-" + strconv.Itoa(int(v&0xff))
	}
	return "0x" + strconv.FormatUint(uint64(v), 16)
}

// PacketType is the type of a QUIC packet, independent of the version's
// encoding of the long-header type bits. The zero value is
// PacketTypeUnknown.
type PacketType uint8

// Packet types.
const (
	PacketTypeUnknown PacketType = iota
	PacketTypeInitial
	PacketType0RTT
	PacketTypeHandshake
	PacketTypeRetry
	PacketTypeVersionNegotiation
	PacketType1RTT
)

var packetTypeNames = [...]string{"unknown", "Initial", "0-RTT", "Handshake", "Retry", "VersionNegotiation", "1-RTT"}

// String returns the packet type's name as the RFC writes it.
func (t PacketType) String() string {
	if int(t) < len(packetTypeNames) {
		return packetTypeNames[t]
	}
	return "PacketType(" + strconv.Itoa(int(t)) + ")"
}

// IsLong reports whether packets of type t carry a long header.
func (t PacketType) IsLong() bool {
	return t >= PacketTypeInitial && t <= PacketTypeVersionNegotiation
}

// LongTypeBits returns the two long-header type bits (the value of bits
// 0x30 shifted down, 0-3) that encode t in version v: RFC 9000 §17.2 for
// version 1 and the drafts, RFC 9369 §3.2 for version 2. ok is false when
// t is not one of Initial, 0-RTT, Handshake or Retry. For versions whose
// layout is unknown, the version 1 mapping is used.
func LongTypeBits(v Version, t PacketType) (bits byte, ok bool) {
	if t < PacketTypeInitial || t > PacketTypeRetry {
		return 0, false
	}
	bits = byte(t - PacketTypeInitial) // version 1: Initial 0, 0-RTT 1, Handshake 2, Retry 3
	if v == Version2 {
		// RFC 9369 §3.2: "Initial: 0b01, 0-RTT: 0b10, Handshake: 0b11,
		// Retry: 0b00".
		bits = (bits + 1) & 3
	}
	return bits, true
}

// PacketTypeFromLongTypeBits returns the packet type that the two
// long-header type bits (0-3) encode in version v. It is the inverse of
// LongTypeBits.
func PacketTypeFromLongTypeBits(v Version, bits byte) PacketType {
	bits &= 3
	if v == Version2 {
		bits = (bits + 3) & 3
	}
	return PacketTypeInitial + PacketType(bits)
}
