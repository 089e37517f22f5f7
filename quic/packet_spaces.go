package quic

import (
	"crypto/tls"

	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// spaceID names a packet number space (RFC 9000 §12.3).
type spaceID uint8

const (
	initialSpace spaceID = iota
	handshakeSpace
	appSpace
	numSpaces
)

func (s spaceID) String() string {
	switch s {
	case initialSpace:
		return "initial"
	case handshakeSpace:
		return "handshake"
	}
	return "application_data"
}

func (s spaceID) tlsLevel() tls.QUICEncryptionLevel {
	switch s {
	case initialSpace:
		return tls.QUICEncryptionLevelInitial
	case handshakeSpace:
		return tls.QUICEncryptionLevelHandshake
	}
	return tls.QUICEncryptionLevelApplication
}

func (s spaceID) packetType() wire.PacketType {
	switch s {
	case initialSpace:
		return wire.PacketTypeInitial
	case handshakeSpace:
		return wire.PacketTypeHandshake
	}
	return wire.PacketType1RTT
}

// packetSpace is the state of one packet number space: keys (Initial and
// Handshake; 1-RTT keys live in connState.appKeys), the next packet number
// to send, the CRYPTO stream and what has been received.
type packetSpace struct {
	id        spaceID
	readKeys  *protect.Keys
	writeKeys *protect.Keys
	discarded bool

	nextPN      uint64
	largestRecv uint64 // wire.NoPacketNumber until a packet arrives
	crypto      cryptoStream
	acks        ackState
}

func (s *packetSpace) init(id spaceID) {
	s.id = id
	s.largestRecv = wire.NoPacketNumber
}

func (s *packetSpace) canWrite() bool { return s.writeKeys != nil && !s.discarded }
