package wire

// Packet type sets, one bit per PacketType, for RFC 9000 §12.4 Table 3's
// "Pkts" column.
const (
	pktI   = 1 << PacketTypeInitial
	pktH   = 1 << PacketTypeHandshake
	pkt0   = 1 << PacketType0RTT
	pkt1   = 1 << PacketType1RTT
	ih01   = pktI | pktH | pkt0 | pkt1
	ih_1   = pktI | pktH | pkt1
	__01   = pkt0 | pkt1
	___1   = pkt1
	fNoAck = 1 << 8  // N: not ack-eliciting
	fNoCC  = 1 << 9  // C: does not count toward bytes in flight
	fProbe = 1 << 10 // P: may be used to probe new paths
	fFlow  = 1 << 11 // F: flow controlled
	known  = 1 << 12
)

// frameInfo returns the Table 3 row of t.
func frameInfo(t FrameType) uint16 {
	switch {
	case t.IsStream():
		return known | __01 | fFlow
	case t <= FrameTypeImmediateAck:
		return frameTable[t]
	case t == FrameTypeDatagram || t == FrameTypeDatagramLen:
		// RFC 9221 §4: "DATAGRAM frames MUST NOT be sent in Initial or
		// Handshake packets"; they are ack-eliciting.
		return known | __01
	case t == FrameTypeAckFrequency:
		// draft-ietf-quic-ack-frequency-14 §3: the frames "cannot be sent
		// in 0-RTT packets"; Initial and Handshake carry only RFC 9000
		// handshake frames (docs/ack-frequency-engine.md §1).
		return known | ___1
	}
	return 0
}

var frameTable = [...]uint16{
	FrameTypePadding:                    known | ih01 | fNoAck | fProbe,
	FrameTypePing:                       known | ih01,
	FrameTypeAck:                        known | ih_1 | fNoAck | fNoCC,
	FrameTypeAckECN:                     known | ih_1 | fNoAck | fNoCC,
	FrameTypeResetStream:                known | __01,
	FrameTypeStopSending:                known | __01,
	FrameTypeCrypto:                     known | ih_1,
	FrameTypeNewToken:                   known | ___1,
	FrameTypeMaxData:                    known | __01,
	FrameTypeMaxStreamData:              known | __01,
	FrameTypeMaxStreamsBidi:             known | __01,
	FrameTypeMaxStreamsUni:              known | __01,
	FrameTypeDataBlocked:                known | __01,
	FrameTypeStreamDataBlocked:          known | __01,
	FrameTypeStreamsBlockedBidi:         known | __01,
	FrameTypeStreamsBlockedUni:          known | __01,
	FrameTypeNewConnectionID:            known | __01 | fProbe,
	FrameTypeRetireConnectionID:         known | __01,
	FrameTypePathChallenge:              known | __01 | fProbe,
	FrameTypePathResponse:               known | ___1 | fProbe,
	FrameTypeConnectionClose:            known | ih01 | fNoAck,
	FrameTypeConnectionCloseApplication: known | __01 | fNoAck, // "ih": only 0x1c in Initial/Handshake
	FrameTypeHandshakeDone:              known | ___1,
	FrameTypeImmediateAck:               known | ___1,
}

// Known reports whether t is a frame type this package parses.
func (t FrameType) Known() bool { return frameInfo(t)&known != 0 }

// AllowedIn reports whether a frame of type t may be carried in a packet
// of type pt, per the "Pkts" column of RFC 9000 §12.4 Table 3 (RFC 9221 for
// DATAGRAM; 1-RTT only for the ACK frequency frames). RFC 9000 §12.4:
// "An endpoint MUST treat receipt of a frame in a packet type that is not
// permitted as a connection error of type PROTOCOL_VIOLATION."
// Unknown types are allowed nowhere.
func (t FrameType) AllowedIn(pt PacketType) bool {
	return pt <= PacketType1RTT && frameInfo(t)&(1<<pt) != 0
}

// AckEliciting reports whether a frame of type t makes a packet
// ack-eliciting: all frames except ACK, PADDING and CONNECTION_CLOSE
// (RFC 9000 §13.2, Table 3 "N").
func (t FrameType) AckEliciting() bool {
	i := frameInfo(t)
	return i&known != 0 && i&fNoAck == 0
}

// CongestionControlled reports whether a packet containing only frames of
// type t counts toward bytes in flight: all frames except ACK (Table 3
// "C").
func (t FrameType) CongestionControlled() bool {
	i := frameInfo(t)
	return i&known != 0 && i&fNoCC == 0
}

// Probing reports whether t is a probing frame (PATH_CHALLENGE,
// PATH_RESPONSE, NEW_CONNECTION_ID, PADDING; RFC 9000 §9.1, Table 3 "P").
// A packet with only probing frames is a probing packet.
func (t FrameType) Probing() bool { return frameInfo(t)&fProbe != 0 }

// FlowControlled reports whether t is subject to flow control (STREAM,
// Table 3 "F").
func (t FrameType) FlowControlled() bool { return frameInfo(t)&fFlow != 0 }
