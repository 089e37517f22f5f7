package rawquic

import "github.com/quiver-quic/quiver/quic/wire"

// SpaceOf is the packet number space of a packet type: 0 Initial, 1
// Handshake, 2 Application (0-RTT and 1-RTT), -1 for none.
func SpaceOf(t wire.PacketType) int {
	switch t {
	case wire.PacketTypeInitial:
		return 0
	case wire.PacketTypeHandshake:
		return 1
	case wire.PacketType0RTT, wire.PacketType1RTT:
		return 2
	}
	return -1
}

// H3Frame encodes one HTTP/3 frame: type, length, payload.
func H3Frame(typ uint64, payload []byte) []byte {
	b := wire.AppendVarint(nil, typ)
	b = wire.AppendVarint(b, uint64(len(payload)))
	return append(b, payload...)
}
