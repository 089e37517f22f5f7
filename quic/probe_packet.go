package quic

import (
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// CustomPacket chooses the header fields of a packet sent with
// Conn.SendCustomPacket. Zero values mean "as the engine would send it".
type CustomPacket struct {
	// Type overrides the long header packet type of the space (e.g.
	// wire.PacketType0RTT); zero keeps it.
	Type wire.PacketType
	// Version overrides the version field of a long header.
	Version uint32
	// DCID and SCID override the connection IDs (SCID: long headers).
	DCID, SCID []byte
	// Token is the Initial packet's token.
	Token []byte
	// ClearFixedBit sends the QUIC bit as 0.
	ClearFixedBit bool
	// ReservedBits are written (protected) in the reserved header bits.
	ReservedBits byte
	// PacketNumber, when set, is used instead of the next number. The
	// engine's counter does not move, so the number may repeat.
	PacketNumber *uint64
	// PNLen is the packet number length, 1 to 4 (default 4).
	PNLen int
	// FlipKeyPhase sends a 1-RTT packet with the other key phase bit (with
	// the current keys, so the peer fails to open it or takes it as a key
	// update).
	FlipKeyPhase bool
	// SpinBit sets the latency spin bit of a 1-RTT packet.
	SpinBit bool
	// PadTo pads the datagram to this size with PADDING frames.
	PadTo int
}

// SendCustomPacket seals frames in one packet of space (SpaceInitial,
// SpaceHandshake or SpaceApplication) with the connection's current keys
// and the header fields of opts, and sends it alone in a datagram. The
// frames are not tracked for loss or acknowledgment. It is for probes.
func (c *Conn) SendCustomPacket(space int, opts CustomPacket, frames ...wire.Frame) error {
	var err error
	if !c.run(contextBackground, func(now time.Time) { err = c.sendCustomPacket(spaceID(space), opts, frames) }) {
		return c.Err()
	}
	return err
}

func (c *Conn) sendCustomPacket(space spaceID, o CustomPacket, frames []wire.Frame) error {
	if space >= numSpaces {
		return fmt.Errorf("quic: no packet number space %d", space)
	}
	sp := &c.spaces[space]
	pn := sp.nextPN
	if o.PacketNumber != nil {
		pn = *o.PacketNumber
	} else {
		sp.nextPN++
	}
	pnLen := o.PNLen
	if pnLen < 1 || pnLen > 4 {
		pnLen = 4
	}
	dcid, scid := c.peerCID, c.localCID
	if o.DCID != nil {
		dcid = o.DCID
	}
	if o.SCID != nil {
		scid = o.SCID
	}
	var payload []byte
	for _, f := range frames {
		payload = f.Append(payload)
	}
	var b []byte
	var pnOff, lenOff int = 0, -1
	early := o.Type == wire.PacketType0RTT
	if space == appSpace && !early {
		h := wire.ShortHeader{ClearFixedBit: o.ClearFixedBit, SpinBit: o.SpinBit, ReservedBits: o.ReservedBits,
			KeyPhase: (c.appKeys.Phase() == 1) != o.FlipKeyPhase, DCID: dcid, PacketNumber: pn, PNLen: pnLen}
		b, pnOff = h.Append(nil)
	} else {
		typ := space.packetType()
		if o.Type != 0 {
			typ = o.Type
		}
		v := c.version
		if o.Version != 0 {
			v = o.Version
		}
		h := wire.LongHeader{Version: wire.Version(v), Type: typ, ClearFixedBit: o.ClearFixedBit, ReservedBits: o.ReservedBits,
			DCID: dcid, SCID: scid, Token: o.Token, PacketNumber: pn, PNLen: pnLen, LengthLen: 2}
		b, lenOff, pnOff = h.Append(nil)
	}
	for len(b)+len(payload)+16 < o.PadTo || len(payload)+pnLen < 4 {
		payload = append(payload, 0)
	}
	if lenOff >= 0 {
		wire.PutVarintLen(b[lenOff:], uint64(pnLen+len(payload)+16), 2)
	}
	b = append(b, payload...)
	b = append(b, make([]byte, 16)...)[:len(b)]
	var err error
	switch {
	case early:
		if c.earlyWrite == nil {
			return fmt.Errorf("quic: no 0-RTT keys")
		}
		_, err = c.earlyWrite.SealPacket(b, pnOff, pn)
	case space == appSpace:
		if c.appKeys.Write() == nil {
			return fmt.Errorf("quic: no 1-RTT keys yet")
		}
		_, err = c.appKeys.Write().SealPacket(b, pnOff, pn)
	default:
		if sp.writeKeys == nil {
			return fmt.Errorf("quic: no %v keys (not yet, or discarded)", space)
		}
		_, err = sp.writeKeys.SealPacket(b, pnOff, pn)
	}
	if err != nil {
		return err
	}
	return c.ep.writeTo(b[:len(b)+16], c.peerAddr)
}
