package quic

import (
	"bytes"
	"crypto/rand"
	"net/netip"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// peerCID is a connection ID the peer issued to us.
type peerCIDEntry struct {
	seq   uint64
	cid   []byte
	token [16]byte
}

// localCIDEntry is a connection ID we issued.
type localCIDEntry struct {
	seq  uint64
	cid  []byte
	sent bool // NEW_CONNECTION_ID sent (and not lost since)
}

// maxIssuedCIDs bounds how many connection IDs we keep active at once,
// whatever the peer's active_connection_id_limit.
const maxIssuedCIDs = 4

// cidState tracks connection IDs (RFC 9000 §5.1): those we issue (sequence
// 0 in the handshake, more with NEW_CONNECTION_ID once the handshake is
// complete, replaced as the peer retires them) and those the peer issues.
type cidState struct {
	local   []localCIDEntry
	nextSeq uint64
	// peerSeq is the sequence number of the peer CID in use.
	peerSeq uint64

	c                  *Conn
	peerResetToken     [16]byte
	havePeerResetToken bool
	peerLimit          uint64 // the peer's active_connection_id_limit
	peer               []peerCIDEntry
	retirePriorTo      uint64
	retire             []uint64 // sequence numbers to send RETIRE_CONNECTION_ID for
	pathResponse       []pathResponse
	pathChallenge      [][8]byte
	// challenge is the data of the PATH_CHALLENGE sent on the peer's new
	// address, until a PATH_RESPONSE echoes it.
	challenge        [8]byte
	challengePending bool
	// challengeDeadline is when validation of the peer's new address is
	// abandoned (onPathValidationTimer); lastValidated is the address to
	// go back to then.
	challengeDeadline time.Time
	lastValidated     netip.AddrPort
	// prevPathChallenge holds the PATH_CHALLENGE for the path the peer
	// just left, until it is sent; prevChallenge is its data.
	prevPathChallenge []pathResponse
	prevChallenge     [8]byte
	// newAddrIP: the peer's new address differs from the old one in more
	// than the port, so validating it resets congestion control and RTT
	// (RFC 9000 §9.4); recoveryResets counts those resets.
	newAddrIP      bool
	recoveryResets int
	// retiredRoutes are connection IDs the peer retired that still route
	// to the connection, oldest first, at most maxRetiredRoutes: packets
	// the peer sent under them before it retired them can arrive after
	// the retirement (RFC 9000 §9.4: "There could be apparent reordering
	// at the receiver when an endpoint sends data and probes from/to
	// multiple addresses during the migration period"), and must not
	// draw a stateless reset from a server that holds the connection.
	retiredRoutes [][]byte
}

// maxRetiredRoutes bounds the retired connection IDs kept routable, so
// that a peer retiring without end cannot grow the endpoint's table.
const maxRetiredRoutes = maxIssuedCIDs

// usePeerCID switches to an unused connection ID from the peer, retiring
// the current one, as an endpoint must when the peer's address changes
// (RFC 9000 §9.5: "an endpoint MUST NOT reuse a connection ID when sending
// to more than one destination address"). It keeps the current one when
// the peer gave no spare, and reports whether it switched.
func (s *cidState) usePeerCID() bool {
	if len(s.peer) == 0 {
		return false
	}
	s.retire = append(s.retire, s.peerSeq)
	e := s.peer[0]
	s.peer = s.peer[1:]
	s.peerSeq = e.seq
	s.c.peerCID = e.cid
	// The new ID's token is the one a stateless reset now carries; the
	// retired one's no longer counts (RFC 9000 §10.3.1).
	s.peerResetToken, s.havePeerResetToken = e.token, true
	return true
}

func (s *cidState) init(c *Conn) {
	s.c = c
	s.local = []localCIDEntry{{seq: 0, cid: c.localCID, sent: true}}
	s.nextSeq = 1
}

func (s *cidState) hasPending() bool {
	if len(s.retire) > 0 || len(s.pathResponse) > 0 || len(s.pathChallenge) > 0 {
		return true
	}
	for _, e := range s.local {
		if !e.sent {
			return true
		}
	}
	return false
}

// issue creates connection IDs up to the peer's limit (RFC 9000 §5.1.1:
// "An endpoint SHOULD ensure that its peer has a sufficient number of
// available and unused connection IDs"; it MUST NOT exceed the peer's
// active_connection_id_limit).
func (s *cidState) issue() {
	if s.c.ep.cidLen == 0 {
		// RFC 9000 §5.1.1: an endpoint using zero-length connection IDs
		// has none to issue.
		return
	}
	limit := min(s.peerLimit, maxIssuedCIDs)
	for uint64(len(s.local)) < limit {
		cid := s.c.ep.claimCID(s.c.ep.cidLen, s.c)
		if cid == nil {
			// No free ID (short IDs, many connections): the limit is a
			// maximum, fewer IDs will do.
			return
		}
		s.local = append(s.local, localCIDEntry{seq: s.nextSeq, cid: cid})
		s.nextSeq++
	}
}

// onIssuedByProbe records a connection ID sent with a chosen sequence
// number (Conn.IssueConnectionID). RFC 9000 §5.1.1: "The sequence number
// on each newly issued connection ID MUST increase by 1"; the engine's own
// IDs continue after the largest number used, so that no number names two
// IDs. A number already in use (a probe of the peer's checks) is not
// recorded twice.
func (s *cidState) onIssuedByProbe(seq uint64, cid []byte) {
	if seq >= s.nextSeq {
		s.nextSeq = seq + 1
	}
	for _, e := range s.local {
		if e.seq == seq {
			return
		}
	}
	s.local = append(s.local, localCIDEntry{seq: seq, cid: cid, sent: true})
}

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
	if f.SequenceNumber == s.peerSeq {
		return nil // duplicate of the one in use
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
		// RFC 9000 §5.1.2: "Upon receipt of an increased Retire Prior To
		// field, the peer MUST stop using the corresponding connection IDs
		// and retire them with RETIRE_CONNECTION_ID frames".
		if s.peerSeq < s.retirePriorTo {
			s.usePeerCID()
		}
	}
	// RFC 9000 §5.1.1: "After processing a NEW_CONNECTION_ID frame and
	// adding and retiring active connection IDs, if the number of active
	// connection IDs exceeds the value advertised in its
	// active_connection_id_limit transport parameter, an endpoint MUST
	// close the connection with an error of type CONNECTION_ID_LIMIT_ERROR."
	// The connection ID in use (sequence 0) counts too.
	active := uint64(len(s.peer)) + 1 // the spares and the one in use
	if active > s.c.config.activeCIDLimit() {
		return localTransportError(wire.ConnectionIDLimitError, uint64(f.Type()), "RFC 9000 §5.1.1: %d active connection IDs exceed our limit of %d", active, s.c.config.activeCIDLimit())
	}
	return nil
}

func (s *cidState) onRetireConnectionID(now time.Time, f *wire.RetireConnectionIDFrame, dcid []byte) error {
	// RFC 9000 §19.16: "Receipt of a RETIRE_CONNECTION_ID frame containing
	// a sequence number greater than any previously sent to the peer MUST
	// be treated as a connection error of type PROTOCOL_VIOLATION."
	if f.SequenceNumber >= s.nextSeq {
		return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "RFC 9000 §19.16: RETIRE_CONNECTION_ID for sequence %d never issued", f.SequenceNumber)
	}
	for i, e := range s.local {
		if e.seq != f.SequenceNumber {
			continue
		}
		// "The sequence number specified in a RETIRE_CONNECTION_ID frame
		// MUST NOT refer to the Destination Connection ID field of the
		// packet in which the frame is contained. The peer MAY treat this
		// as a connection error of type PROTOCOL_VIOLATION."
		if bytes.Equal(e.cid, dcid) {
			return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "RFC 9000 §19.16: RETIRE_CONNECTION_ID for the connection ID the packet was sent to")
		}
		s.retiredRoutes = append(s.retiredRoutes, e.cid)
		if len(s.retiredRoutes) > maxRetiredRoutes {
			s.c.ep.unregister(s.retiredRoutes[0], s.c)
			s.retiredRoutes = s.retiredRoutes[1:]
		}
		s.local = append(s.local[:i], s.local[i+1:]...)
		s.issue()
		return nil
	}
	return nil // already retired
}

func (s *cidState) onLost(f *sentFrame) {
	switch f.kind {
	case frRetireConnectionID:
		s.retire = append(s.retire, f.id)
	case frNewConnectionID:
		for i := range s.local {
			if s.local[i].seq == f.id {
				s.local[i].sent = false
			}
		}
	}
}

func (s *cidState) appendFrames(buf []byte, end int, log *sentLog, p *builtPacket) []byte {
	if len(s.pathResponse) > 0 && end-len(buf) >= 10 {
		// RFC 9000 §9.3.3: "An endpoint that receives a PATH_CHALLENGE on
		// an active path SHOULD send a non-probing packet in response", so
		// that the path an attacker forwarded packets from loses the race:
		// a PING makes the packet non-probing.
		buf = append(buf, byte(wire.FrameTypePing))
		log.add(sentFrame{kind: frPing})
	}
	for len(s.pathResponse) > 0 && end-len(buf) >= 9 {
		f := wire.PathResponseFrame{Data: s.pathResponse[0].data}
		buf = f.Append(buf)
		log.add(sentFrame{kind: frOther})
		s.pathResponse = s.pathResponse[1:]
		p.ackElic = true
		p.pathFrame = true
	}
	for len(s.pathChallenge) > 0 && end-len(buf) >= 9 {
		f := wire.PathChallengeFrame{Data: s.pathChallenge[0]}
		buf = f.Append(buf)
		log.add(sentFrame{kind: frOther})
		s.pathChallenge = s.pathChallenge[1:]
		p.ackElic = true
		p.pathFrame = true
	}
	for i := range s.local {
		e := &s.local[i]
		if e.sent {
			continue
		}
		f := wire.NewConnectionIDFrame{SequenceNumber: e.seq, ConnectionID: e.cid, StatelessResetToken: s.c.ep.resetToken(e.cid)}
		if end-len(buf) < f.Len() {
			break
		}
		buf = f.Append(buf)
		log.add(sentFrame{kind: frNewConnectionID, id: e.seq})
		e.sent = true
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

// onPeerAddressChange follows a peer that moved to addr (NAT rebinding or
// migration, RFC 9000 §9): send there from now on, under a new connection
// ID when the peer gave us one, limited to three times what arrives from
// addr until a PATH_CHALLENGE round trip validates it (§9.3: "an endpoint
// MUST perform path validation ... if it has not previously validated that
// address"; §8.1 amplification limit applies).
func (c *Conn) onPeerAddressChange(now time.Time, addr netip.AddrPort) {
	debugf("peer moved from %v to %v", c.peerAddr, addr)
	s := &c.cids
	prev, prevValidated := c.peerAddr, c.addrValidated
	if prevValidated {
		s.lastValidated = prev
	}
	c.mu.Lock()
	s.newAddrIP = c.peerAddr.Addr() != addr.Addr()
	c.peerAddr = addr
	c.mu.Unlock()
	s.usePeerCID()
	if s.newAddrIP {
		c.pmtudReset(now)
	}
	c.stats.migrations++
	// §9.3.3: "In response to an apparent migration, endpoints MUST
	// validate the previously active path using a PATH_CHALLENGE frame.
	// This induces the sending of new packets on that path", so that a
	// genuine peer on it moves the connection back when an attacker
	// forwarded its packets from elsewhere. A previous path that was not
	// validated gets the challenge without padding (§8.1).
	rand.Read(s.prevChallenge[:])
	limit := 0
	if prevValidated {
		limit = minInitialDatagramSize
	}
	s.prevPathChallenge = append(s.prevPathChallenge[:0], pathResponse{data: s.prevChallenge, addr: prev, recvd: limit})
	if addr == s.lastValidated {
		// §9.3: "An endpoint MAY skip validation of a peer address if
		// that address has been seen recently. In particular, if an
		// endpoint returns to a previously validated path after
		// detecting some form of spurious migration, skipping address
		// validation and restoring loss detection and congestion state
		// can reduce the performance impact of the attack."
		s.newAddrIP = false
		s.challengePending = false
		s.challengeDeadline = time.Time{}
		c.addrValidated = true
		return
	}
	c.addrValidated = false
	c.bytesRecv, c.bytesSent = uint64(c.lastDgramSize), 0
	rand.Read(s.challenge[:])
	s.challengePending = true
	s.challengeDeadline = now.Add(c.pathValidationTimeout())
	s.pathChallenge = append(s.pathChallenge, s.challenge)
}

// pathValidated ends the amplification limit on the peer's new address.
func (c *Conn) pathValidated(now time.Time) {
	c.addrValidated = true
	c.newTokenAfterMigration(now)
	c.cids.challengeDeadline = time.Time{}
	c.cids.lastValidated = c.peerAddr
	// RFC 9000 §9.4: "On confirming a peer's ownership of its new
	// address, an endpoint MUST immediately reset the congestion
	// controller and round-trip time estimator for the new path to
	// initial values ... unless the only change in the peer's address is
	// its port number." Port-only changes (NAT rebinding) keep them, as
	// the same section allows.
	if c.cids.newAddrIP {
		c.cids.newAddrIP = false
		c.cids.recoveryResets++
		c.loss.ld.RTT().Reset(0)
		if r, ok := c.loss.cc.(interface{ Reset() }); ok {
			r.Reset()
		}
	}
}
