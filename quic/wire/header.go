package wire

import (
	"encoding/binary"
	"errors"
	"iter"
)

// Header bits of the first byte (RFC 9000 §17.2, §17.3.1).
const (
	HeaderFormBit          = 0x80 // 1 for long headers
	FixedBit               = 0x40 // "MUST be set to 1" unless grease_quic_bit was negotiated
	LongTypeMask           = 0x30 // long header packet type bits
	LongReserved           = 0x0c // long header reserved bits (protected)
	ShortSpinBit           = 0x20 // latency spin bit
	ShortReserved          = 0x18 // short header reserved bits (protected)
	ShortKeyPhase          = 0x04 // key phase bit (protected)
	PNLenMask              = 0x03 // packet number length minus one (protected)
	MaxCIDLen              = 20   // RFC 9000 §17.2: "In QUIC version 1, this value MUST NOT exceed 20 bytes."
	RetryTagLen            = 16   // RFC 9001 §5.8 Retry Integrity Tag
	StatelessResetTokenLen = 16
)

// Header parsing errors. They are sentinels, so parsing never allocates;
// the engine drops packets that fail to parse.
var (
	// ErrUnsupportedVersion is returned by ParseHeader with a Header
	// whose version-independent fields (RFC 8999: form, version, DCID,
	// SCID) are filled, for a long header whose version layout this
	// package does not know. A server answers it with Version
	// Negotiation.
	ErrUnsupportedVersion = errors.New("wire: unsupported version")
	// ErrConnectionIDTooLong reports a connection ID longer than 20 bytes
	// in a version 1 or 2 long header (RFC 9000 §17.2).
	ErrConnectionIDTooLong = errors.New("wire: connection ID longer than 20 bytes")
	// ErrInvalidHeader reports a header that cannot be parsed for another
	// reason (for example a Version Negotiation packet whose version list
	// is not a multiple of 4 bytes).
	ErrInvalidHeader = errors.New("wire: invalid packet header")
)

// Header holds what can be read from a packet header before header
// protection is removed. Byte slices are sub-slices of the parsed buffer.
type Header struct {
	// Long is the header form bit.
	Long bool
	// FirstByte is the first byte as received; its low bits (reserved
	// bits, key phase, packet number length) are still protected.
	FirstByte byte
	// FixedBit is the value of the QUIC bit; 0 is only valid when the
	// peer negotiated grease_quic_bit (RFC 9287).
	FixedBit bool
	// Type is the packet type; PacketTypeUnknown for long headers of
	// unknown versions.
	Type PacketType
	// Version is the long-header version field (0 for short headers).
	Version Version
	// DCID and SCID are the connection IDs; SCID is nil for short
	// headers.
	DCID, SCID []byte
	// Token is the Initial packet's token or the Retry packet's token.
	Token []byte
	// Length is the long-header Length field: packet number plus payload.
	Length uint64
	// PNOffset is the offset in the parsed buffer of the packet number
	// field (Initial, 0-RTT, Handshake, 1-RTT), where header protection
	// sampling starts from (RFC 9001 §5.4.2).
	PNOffset int
	// PacketLen is the length of this packet within the datagram: for
	// long headers with a Length field PNOffset+Length; otherwise the rest
	// of the buffer (short headers, Retry, Version Negotiation).
	PacketLen int
	// RetryTag is the Retry Integrity Tag (16 bytes) of a Retry packet.
	RetryTag []byte
	// Versions is the supported-version list of a Version Negotiation
	// packet.
	Versions VersionList
}

// SpinBit returns the latency spin bit of a short header (it is not
// header-protected).
func (h *Header) SpinBit() bool { return !h.Long && h.FirstByte&ShortSpinBit != 0 }

// PacketNumberLen returns the packet number length (1 to 4) encoded in a
// first byte from which header protection has been removed.
func PacketNumberLen(unprotectedFirst byte) int { return int(unprotectedFirst&PNLenMask) + 1 }

// KeyPhase returns the key phase bit of a short-header first byte from
// which header protection has been removed.
func KeyPhase(unprotectedFirst byte) bool { return unprotectedFirst&ShortKeyPhase != 0 }

// ReservedBits returns the reserved bits of an unprotected first byte,
// shifted down (0-3). RFC 9000 §17.2: "The value included prior to
// protection MUST be set to 0. An endpoint MUST treat receipt of a packet
// that has a non-zero value for these bits after removing both packet and
// header protection as a connection error of type PROTOCOL_VIOLATION."
func ReservedBits(unprotectedFirst byte, long bool) byte {
	if long {
		return unprotectedFirst & LongReserved >> 2
	}
	return unprotectedFirst & ShortReserved >> 3
}

// IsLongHeader reports whether a datagram or packet starting with b has a
// long header.
func IsLongHeader(b []byte) bool { return len(b) > 0 && b[0]&HeaderFormBit != 0 }

// ParseHeader parses the header of the first packet in b, a datagram that
// may hold several coalesced packets. shortDCIDLen is the length of the
// connection IDs this endpoint issued, needed to parse a short header.
//
// It reads only what header protection leaves readable. After it the
// caller removes header protection from b[0] and the packet number at
// b[h.PNOffset:], decrypts b[:h.PacketLen], and parses the next packet at
// b[h.PacketLen:].
//
// For a long header of an unknown version it returns the
// version-independent fields and ErrUnsupportedVersion.
func ParseHeader(b []byte, shortDCIDLen int) (Header, error) {
	var h Header
	if len(b) == 0 {
		return h, ErrTruncated
	}
	h.FirstByte = b[0]
	h.FixedBit = b[0]&FixedBit != 0
	if b[0]&HeaderFormBit == 0 {
		if len(b) < 1+shortDCIDLen {
			return h, ErrTruncated
		}
		h.Type = PacketType1RTT
		h.DCID = b[1 : 1+shortDCIDLen]
		h.PNOffset = 1 + shortDCIDLen
		h.PacketLen = len(b)
		return h, nil
	}
	h.Long = true
	if len(b) < 7 {
		return h, ErrTruncated
	}
	h.Version = Version(binary.BigEndian.Uint32(b[1:5]))
	p := 5
	dl := int(b[p])
	p++
	if len(b) < p+dl+1 {
		return h, ErrTruncated
	}
	h.DCID = b[p : p+dl]
	p += dl
	sl := int(b[p])
	p++
	if len(b) < p+sl {
		return h, ErrTruncated
	}
	h.SCID = b[p : p+sl]
	p += sl
	if h.Version == VersionNegotiationVersion {
		h.Type = PacketTypeVersionNegotiation
		h.PacketLen = len(b)
		rest := b[p:]
		if len(rest)%4 != 0 {
			return h, ErrInvalidHeader
		}
		h.Versions = VersionList(rest)
		return h, nil
	}
	if !h.Version.HasKnownLayout() {
		h.PacketLen = len(b)
		return h, ErrUnsupportedVersion
	}
	// RFC 9000 §17.2: "Endpoints that receive a version 1 long header with
	// a value larger than 20 MUST drop the packet."
	if dl > MaxCIDLen || sl > MaxCIDLen {
		return h, ErrConnectionIDTooLong
	}
	h.Type = PacketTypeFromLongTypeBits(h.Version, (b[0]&LongTypeMask)>>4)
	switch h.Type {
	case PacketTypeRetry:
		if len(b)-p < RetryTagLen {
			return h, ErrTruncated
		}
		h.Token = b[p : len(b)-RetryTagLen]
		h.RetryTag = b[len(b)-RetryTagLen:]
		h.PacketLen = len(b)
		return h, nil
	case PacketTypeInitial:
		tl, n, err := ConsumeVarint(b[p:])
		if err != nil {
			return h, ErrTruncated
		}
		p += n
		if uint64(len(b)-p) < tl {
			return h, ErrTruncated
		}
		h.Token = b[p : p+int(tl)]
		p += int(tl)
	}
	l, n, err := ConsumeVarint(b[p:])
	if err != nil {
		return h, ErrTruncated
	}
	p += n
	h.Length = l
	h.PNOffset = p
	if uint64(len(b)-p) < l {
		return h, ErrTruncated
	}
	h.PacketLen = p + int(l)
	return h, nil
}

// VersionList is the supported-version list of a Version Negotiation
// packet, 4 bytes per version, read in place without allocation.
type VersionList []byte

// Len returns the number of versions in the list.
func (l VersionList) Len() int { return len(l) / 4 }

// At returns the i-th version.
func (l VersionList) At(i int) Version { return Version(binary.BigEndian.Uint32(l[4*i:])) }

// All iterates over the versions in order.
func (l VersionList) All() iter.Seq[Version] {
	return func(yield func(Version) bool) {
		for i := 0; i+4 <= len(l); i += 4 {
			if !yield(Version(binary.BigEndian.Uint32(l[i:]))) {
				return
			}
		}
	}
}

// Contains reports whether v is in the list.
func (l VersionList) Contains(v Version) bool {
	for i := 0; i+4 <= len(l); i += 4 {
		if Version(binary.BigEndian.Uint32(l[i:])) == v {
			return true
		}
	}
	return false
}

// VersionNegotiation is a parsed Version Negotiation packet
// (RFC 9000 §17.2.1).
type VersionNegotiation struct {
	// FirstByte carries the form bit and seven unused bits.
	FirstByte byte
	DCID      []byte
	SCID      []byte
	Versions  VersionList
}

// ParseVersionNegotiation parses a Version Negotiation packet. The
// connection IDs may be up to 255 bytes long (RFC 8999 §6).
func ParseVersionNegotiation(b []byte) (VersionNegotiation, error) {
	h, err := ParseHeader(b, 0)
	if err != nil {
		return VersionNegotiation{}, err
	}
	if h.Type != PacketTypeVersionNegotiation {
		return VersionNegotiation{}, ErrInvalidHeader
	}
	return VersionNegotiation{FirstByte: h.FirstByte, DCID: h.DCID, SCID: h.SCID, Versions: h.Versions}, nil
}

// AppendVersionNegotiation appends a Version Negotiation packet. firstByte
// is written as given: RFC 9000 §17.2.1 wants the form bit (0x80) set and
// the other bits chosen at random. Connection IDs of any length up to 255
// bytes are written as given.
func AppendVersionNegotiation(b []byte, firstByte byte, dcid, scid []byte, versions ...Version) []byte {
	b = appendLongPrefix(b, firstByte, VersionNegotiationVersion, dcid, scid)
	for _, v := range versions {
		b = binary.BigEndian.AppendUint32(b, uint32(v))
	}
	return b
}

// appendLongPrefix appends the version-independent start of a long header
// (RFC 8999 §5.1): first byte, version, and the two connection IDs with
// their one-byte lengths.
func appendLongPrefix(b []byte, first byte, v Version, dcid, scid []byte) []byte {
	b = append(b, first)
	b = binary.BigEndian.AppendUint32(b, uint32(v))
	b = append(b, byte(len(dcid)))
	b = append(b, dcid...)
	b = append(b, byte(len(scid)))
	return append(b, scid...)
}

// LongHeader describes a long header to encode (Initial, 0-RTT or
// Handshake). Any value is written as given, including invalid ones.
type LongHeader struct {
	Version Version
	// Type selects the type bits through LongTypeBits(Version, Type).
	// Retry and Version Negotiation have their own encoders.
	Type PacketType
	// ClearFixedBit sends the QUIC bit as 0 (RFC 9287 greasing, or an
	// invalid packet).
	ClearFixedBit bool
	// ReservedBits is placed in the two reserved bits (0-3); RFC 9000
	// requires 0.
	ReservedBits byte
	DCID, SCID   []byte
	// Token is written, with its length, in Initial packets only.
	Token []byte
	// Length is the value of the Length field; it is usually a
	// placeholder that the caller fills with PutVarintLen once the
	// payload size is known.
	Length uint64
	// LengthLen is the size of the Length field in bytes (1, 2, 4 or 8);
	// 0 means 2, enough for any datagram up to 16383 bytes.
	LengthLen int
	// PacketNumber is the full packet number; its low PNLen bytes are
	// written.
	PacketNumber uint64
	// PNLen is the packet number length, 1 to 4; other values mean 4.
	PNLen int
}

func (h *LongHeader) lengthLen() int {
	if h.LengthLen == 0 {
		return 2
	}
	return h.LengthLen
}

// Len returns the encoded length of the header, packet number included.
func (h *LongHeader) Len() int {
	n := 1 + 4 + 1 + len(h.DCID) + 1 + len(h.SCID)
	if h.Type == PacketTypeInitial {
		n += VarintLen(uint64(len(h.Token))) + len(h.Token)
	}
	return n + h.lengthLen() + pnLen(h.PNLen)
}

// pnLen maps a packet number length outside 1-4 to 4, as
// AppendPacketNumber does.
func pnLen(n int) int {
	if n < 1 || n > 4 {
		return 4
	}
	return n
}

// Append appends the header and packet number to b. It returns the
// offsets, relative to the returned slice, of the Length field (to fill
// with PutVarintLen(out[lengthOff:], length, h.LengthLen)) and of the
// packet number (the start of header protection sampling, RFC 9001
// §5.4.2).
func (h *LongHeader) Append(b []byte) (out []byte, lengthOff, pnOff int) {
	bits, _ := LongTypeBits(h.Version, h.Type)
	first := byte(HeaderFormBit|FixedBit) | bits<<4 | (h.ReservedBits&3)<<2 | byte(pnLen(h.PNLen)-1)
	if h.ClearFixedBit {
		first &^= FixedBit
	}
	b = appendLongPrefix(b, first, h.Version, h.DCID, h.SCID)
	if h.Type == PacketTypeInitial {
		b = AppendVarint(b, uint64(len(h.Token)))
		b = append(b, h.Token...)
	}
	lengthOff = len(b)
	b = AppendVarintLen(b, h.Length, h.lengthLen())
	pnOff = len(b)
	b = AppendPacketNumber(b, h.PacketNumber, h.PNLen)
	return b, lengthOff, pnOff
}

// ShortHeader describes a 1-RTT short header to encode (RFC 9000 §17.3.1).
// Any value is written as given.
type ShortHeader struct {
	ClearFixedBit bool
	SpinBit       bool
	// ReservedBits is placed in the two reserved bits (0-3); RFC 9000
	// requires 0.
	ReservedBits byte
	KeyPhase     bool
	DCID         []byte
	PacketNumber uint64
	// PNLen is the packet number length, 1 to 4; other values mean 4.
	PNLen int
}

// Len returns the encoded length of the header, packet number included.
func (h *ShortHeader) Len() int { return 1 + len(h.DCID) + pnLen(h.PNLen) }

// Append appends the header and packet number to b and returns the
// offset of the packet number relative to the returned slice.
func (h *ShortHeader) Append(b []byte) (out []byte, pnOff int) {
	first := byte(FixedBit) | (h.ReservedBits&3)<<3 | byte(pnLen(h.PNLen)-1)
	if h.ClearFixedBit {
		first &^= FixedBit
	}
	if h.SpinBit {
		first |= ShortSpinBit
	}
	if h.KeyPhase {
		first |= ShortKeyPhase
	}
	b = append(b, first)
	b = append(b, h.DCID...)
	pnOff = len(b)
	b = AppendPacketNumber(b, h.PacketNumber, h.PNLen)
	return b, pnOff
}

// Retry is a Retry packet (RFC 9000 §17.2.5).
type Retry struct {
	Version Version
	// Unused holds the four unused low bits of the first byte (0-15);
	// RFC 9000 wants them random.
	Unused       byte
	DCID, SCID   []byte
	Token        []byte
	IntegrityTag []byte // 16 bytes, set by ParseRetry
}

// ParseRetry parses a Retry packet of version 1, 2 or a draft.
func ParseRetry(b []byte) (Retry, error) {
	h, err := ParseHeader(b, 0)
	if err != nil {
		return Retry{}, err
	}
	if h.Type != PacketTypeRetry {
		return Retry{}, ErrInvalidHeader
	}
	return Retry{Version: h.Version, Unused: h.FirstByte & 0x0f, DCID: h.DCID, SCID: h.SCID,
		Token: h.Token, IntegrityTag: h.RetryTag}, nil
}

// AppendWithoutTag appends the Retry packet without its integrity tag; the
// protect package computes the tag over the pseudo-packet built by
// AppendRetryPseudoPacket and the caller appends it.
func (r *Retry) AppendWithoutTag(b []byte) []byte {
	bits, _ := LongTypeBits(r.Version, PacketTypeRetry)
	b = appendLongPrefix(b, HeaderFormBit|FixedBit|bits<<4|r.Unused&0x0f, r.Version, r.DCID, r.SCID)
	return append(b, r.Token...)
}

// AppendRetryPseudoPacket appends the Retry Pseudo-Packet of RFC 9001
// §5.8: the original destination connection ID with its one-byte length,
// followed by the Retry packet without its tag (retryWithoutTag, as
// written by AppendWithoutTag or received minus its last 16 bytes).
func AppendRetryPseudoPacket(b, odcid, retryWithoutTag []byte) []byte {
	b = append(b, byte(len(odcid)))
	b = append(b, odcid...)
	return append(b, retryWithoutTag...)
}
