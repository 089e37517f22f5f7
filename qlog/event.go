package qlog

import (
	"encoding/json"
	"time"
)

// Event is one qlog event. Name returns the namespaced name
// ("transport:packet_sent"); AppendData appends the event's "data" member as
// a JSON object. The interface is exported so that other packages (HTTP/3)
// can define their own events and record them through the same Recorder.
type Event interface {
	Name() string
	AppendData(b []byte) []byte
}

// Owner says which endpoint a value belongs to, from the vantage point.
type Owner string

// Owners.
const (
	OwnerLocal  Owner = "local"
	OwnerRemote Owner = "remote"
)

// PacketType is the qlog name of a QUIC packet type.
type PacketType string

// Packet types, spelled as qlog 0.3 and qvis expect.
const (
	PacketTypeInitial            PacketType = "initial"
	PacketTypeHandshake          PacketType = "handshake"
	PacketType0RTT               PacketType = "0RTT"
	PacketType1RTT               PacketType = "1RTT"
	PacketTypeRetry              PacketType = "retry"
	PacketTypeVersionNegotiation PacketType = "version_negotiation"
	PacketTypeStatelessReset     PacketType = "stateless_reset"
	PacketTypeUnknown            PacketType = "unknown"
)

func (t PacketType) isLong() bool {
	switch t {
	case PacketTypeInitial, PacketTypeHandshake, PacketType0RTT, PacketTypeRetry, PacketTypeVersionNegotiation:
		return true
	}
	return false
}

func (t PacketType) hasPacketNumber() bool {
	switch t {
	case PacketTypeInitial, PacketTypeHandshake, PacketType0RTT, PacketType1RTT:
		return true
	}
	return false
}

// Token is an Initial or Retry token, or the token of a NEW_TOKEN frame.
type Token struct {
	// Type is "retry" or "resumption" when known, else empty.
	Type string   `json:"type"`
	Data HexBytes `json:"data"`
}

func (e *enc) token(k string, t *Token) {
	e.objectStart(k)
	if t.Type != "" {
		e.str("type", t.Type)
	}
	e.uint("length", uint64(len(t.Data)))
	e.hex("data", t.Data)
	e.close()
}

// PacketHeader describes a QUIC packet header. Which members are written
// depends on PacketType: a version and a source connection ID only for long
// headers, a packet number only for packet types that carry one, and the key
// phase bit only for 1-RTT packets.
type PacketHeader struct {
	PacketType   PacketType `json:"packet_type"`
	PacketNumber uint64     `json:"packet_number"`
	Version      Version    `json:"version"`
	DCID         HexBytes   `json:"dcid"`
	SCID         HexBytes   `json:"scid"`
	// Token is written for Initial and Retry packets when not nil.
	Token *Token `json:"token"`
	// Length is the long header Length field; zero omits it.
	Length uint64 `json:"length"`
	// KeyPhaseBit is the key phase bit of a 1-RTT packet.
	KeyPhaseBit bool `json:"key_phase_bit"`
}

func (e *enc) header(k string, h *PacketHeader) {
	e.objectStart(k)
	e.str("packet_type", string(h.PacketType))
	if h.PacketType.hasPacketNumber() {
		e.uint("packet_number", h.PacketNumber)
	}
	if h.PacketType.isLong() {
		e.key("version")
		e.b = appendVersion(e.b, h.Version)
		e.hex("scid", h.SCID)
	}
	e.hex("dcid", h.DCID)
	if h.Token != nil && (h.PacketType == PacketTypeInitial || h.PacketType == PacketTypeRetry) {
		e.token("token", h.Token)
	}
	if h.Length != 0 {
		e.uint("length", h.Length)
	}
	if h.PacketType == PacketType1RTT {
		e.bool("key_phase_bit", h.KeyPhaseBit)
	}
	e.close()
}

// RawInfo gives the sizes of a packet or datagram. Zero values are omitted.
type RawInfo struct {
	// Length is the whole size on the wire, including headers.
	Length uint64 `json:"length"`
	// PayloadLength is the size without the header (and AEAD tag).
	PayloadLength uint64 `json:"payload_length"`
}

func (r RawInfo) isZero() bool { return r == RawInfo{} }

func (e *enc) raw(k string, r RawInfo) {
	e.objectStart(k)
	if r.Length != 0 {
		e.uint("length", r.Length)
	}
	if r.PayloadLength != 0 {
		e.uint("payload_length", r.PayloadLength)
	}
	e.close()
}

// Custom is an event this package does not define: Data is encoded with
// encoding/json. It is meant for rare events, not hot paths.
type Custom struct {
	EventName string
	Data      any
}

// Name returns c.EventName.
func (c Custom) Name() string { return c.EventName }

// AppendData appends Data as JSON, or an empty object if it cannot be encoded
// (a recorder cannot return errors, and a broken event must not break the file).
func (c Custom) AppendData(b []byte) []byte {
	if c.Data == nil {
		return append(b, '{', '}')
	}
	j, err := json.Marshal(c.Data)
	if err != nil || len(j) == 0 || j[0] != '{' {
		return append(b, '{', '}')
	}
	return append(b, j...)
}

// ms is a helper for events holding durations, so that decoders can turn the
// float milliseconds back into a time.Duration.
func setMs(dst *time.Duration, m msField) {
	if m.set {
		*dst = m.d
	}
}
