package quic

import (
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// peerCID is a connection ID the peer issued to us.
type peerCIDEntry struct {
	seq   uint64
	cid   []byte
	token [16]byte
}

// cidState tracks connection IDs (RFC 9000 §5.1). The engine issues a
// single connection ID of its own for now, and keeps those the peer
// issues, retiring them when asked.
type cidState struct {
	c                  *Conn
	peerResetToken     [16]byte
	havePeerResetToken bool
	peerLimit          uint64 // the peer's active_connection_id_limit
	peer               []peerCIDEntry
	retirePriorTo      uint64
	retire             []uint64 // sequence numbers to send RETIRE_CONNECTION_ID for
	pathResponse       [][8]byte
}

func (s *cidState) init(c *Conn) { s.c = c }

func (s *cidState) hasPending() bool { return len(s.retire) > 0 || len(s.pathResponse) > 0 }

func (s *cidState) onNewConnectionID(now time.Time, f *wire.NewConnectionIDFrame) error {
	// RFC 9000 §19.15: "An endpoint that is sending packets with a
	// zero-length Destination Connection ID MUST treat receipt of a
	// NEW_CONNECTION_ID frame as a connection error of type
	// PROTOCOL_VIOLATION."
	if len(s.c.peerCID) == 0 {
		return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "RFC 9000 §19.15: NEW_CONNECTION_ID while using a zero-length connection ID")
	}
	if f.SequenceNumber < s.retirePriorTo {
		// RFC 9000 §19.15: "An endpoint that receives a NEW_CONNECTION_ID
		// frame with a sequence number smaller than the Retire Prior To
		// field of a previously received NEW_CONNECTION_ID frame MUST send
		// a corresponding RETIRE_CONNECTION_ID frame".
		s.retire = append(s.retire, f.SequenceNumber)
		return nil
	}
	for _, e := range s.peer {
		if e.seq == f.SequenceNumber {
			return nil // duplicate
		}
	}
	s.peer = append(s.peer, peerCIDEntry{seq: f.SequenceNumber, cid: append([]byte(nil), f.ConnectionID...), token: f.StatelessResetToken})
	s.c.ep.registerResetToken(f.StatelessResetToken, s.c)
	if f.RetirePriorTo > s.retirePriorTo {
		s.retirePriorTo = f.RetirePriorTo
		kept := s.peer[:0]
		for _, e := range s.peer {
			if e.seq < s.retirePriorTo {
				s.retire = append(s.retire, e.seq)
			} else {
				kept = append(kept, e)
			}
		}
		s.peer = kept
		// Our current DCID (sequence 0) is retired: move to a new one.
		if s.retirePriorTo > 0 && len(s.peer) > 0 {
			s.c.peerCID = s.peer[0].cid
		}
	}
	// RFC 9000 §5.1.1: "After processing a NEW_CONNECTION_ID frame and
	// adding and retiring active connection IDs, if the number of active
	// connection IDs exceeds the value advertised in its
	// active_connection_id_limit transport parameter, an endpoint MUST
	// close the connection with an error of type CONNECTION_ID_LIMIT_ERROR."
	// The connection ID in use (sequence 0) counts too.
	active := uint64(len(s.peer))
	if s.retirePriorTo == 0 {
		active++
	}
	if active > s.c.config.activeCIDLimit() {
		return localTransportError(wire.ConnectionIDLimitError, uint64(f.Type()), "RFC 9000 §5.1.1: %d active connection IDs exceed our limit of %d", active, s.c.config.activeCIDLimit())
	}
	return nil
}

func (s *cidState) onRetireConnectionID(now time.Time, f *wire.RetireConnectionIDFrame) error {
	// RFC 9000 §19.16: "Receipt of a RETIRE_CONNECTION_ID frame containing
	// a sequence number greater than any previously sent to the peer MUST
	// be treated as a connection error of type PROTOCOL_VIOLATION." We
	// have only issued sequence number 0.
	if f.SequenceNumber > 0 {
		return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "RFC 9000 §19.16: RETIRE_CONNECTION_ID for sequence %d never issued", f.SequenceNumber)
	}
	return nil
}

func (s *cidState) onLost(f *sentFrame) {
	if f.kind == frRetireConnectionID {
		s.retire = append(s.retire, f.id)
	}
}

func (s *cidState) appendFrames(buf []byte, end int, log *sentLog, p *builtPacket) []byte {
	for len(s.pathResponse) > 0 && end-len(buf) >= 9 {
		f := wire.PathResponseFrame{Data: s.pathResponse[0]}
		buf = f.Append(buf)
		log.add(sentFrame{kind: frOther})
		s.pathResponse = s.pathResponse[1:]
		p.ackElic = true
	}
	for len(s.retire) > 0 && end-len(buf) >= 9 {
		f := wire.RetireConnectionIDFrame{SequenceNumber: s.retire[0]}
		buf = f.Append(buf)
		log.add(sentFrame{kind: frRetireConnectionID, id: s.retire[0]})
		s.retire = s.retire[1:]
		p.ackElic = true
	}
	return buf
}
