package quic

import (
	"crypto/rand"
	"net/netip"
	"time"

	"github.com/quiver-quic/quiver/quic/recovery"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Server's preferred address (RFC 9000 §9.6, §18.2).
//
// A server with Config.PreferredAddress listens on a second socket (per
// address family) that routes into the same connection table, and offers
// that address in the preferred_address transport parameter with a
// connection ID of sequence 1 (§5.1.1: "If the preferred_address
// transport parameter is sent, the sequence number of the supplied
// connection ID is 1"). Once the handshake is confirmed the client
// validates the address with PATH_CHALLENGE under that connection ID
// and, when a PATH_RESPONSE comes back, sends everything there (§9.6.1).
// The server answers from the socket the challenge arrived on, and when
// a non-probing packet arrives on the preferred socket it validates the
// path from that socket (§9.6.2: "The server MUST probe on the path
// toward the client from its preferred address") before it moves its own
// sending there.

// PreferredAddress is the address a server asks clients to move to after
// the handshake (RFC 9000 §9.6). A zero AddrPort leaves that family out;
// a zero port is replaced by the port of the socket opened for it.
type PreferredAddress struct {
	IPv4 netip.AddrPort
	IPv6 netip.AddrPort
}

// pathProbe validates one path other than the one in use: PATH_CHALLENGE
// frames in lone packets, padded to 1200 bytes (RFC 9000 §8.2.1), sent
// from ep to addr under dcid until a PATH_RESPONSE echoes one of them or
// the validation times out.
type pathProbe struct {
	active   bool
	ep       *Endpoint
	addr     netip.AddrPort
	dcid     []byte
	dcidSeq  uint64
	dcidTok  [16]byte
	data     [][8]byte
	sends    int
	nextSend time.Time
	deadline time.Time
}

// pathProbeSends is how many PATH_CHALLENGE packets a validation sends,
// spread over its timeout.
const pathProbeSends = 3

// kInitialRTTPTO is the PTO of a path without an RTT sample: RFC 9002
// kInitialRtt (333 ms) plus four times half of it, plus the default
// max_ack_delay.
const kInitialRTTPTO = 333*time.Millisecond + 4*333*time.Millisecond/2 + 25*time.Millisecond

func (p *pathProbe) start(now time.Time, pto time.Duration, ep *Endpoint, addr netip.AddrPort, dcid []byte, seq uint64, tok [16]byte) {
	// RFC 9000 §8.2.4: "endpoints SHOULD abandon path validation based on
	// a timer. ... a value of three times the larger of the current PTO
	// or the PTO for the new path (using kInitialRtt, as defined in
	// [QUIC-RECOVERY]) is RECOMMENDED."
	*p = pathProbe{active: true, ep: ep, addr: addr, dcid: dcid, dcidSeq: seq, dcidTok: tok, nextSend: now,
		deadline: now.Add(3 * max(pto, kInitialRTTPTO))}
}

// due returns the data of the next PATH_CHALLENGE when one is due.
func (p *pathProbe) due(now time.Time) ([8]byte, bool) {
	var d [8]byte
	if !p.active || p.sends >= pathProbeSends || now.Before(p.nextSend) {
		return d, false
	}
	rand.Read(d[:])
	p.data = append(p.data, d)
	p.sends++
	p.nextSend = now.Add(p.deadline.Sub(now) / time.Duration(pathProbeSends-p.sends+1))
	return d, true
}

// matches reports whether a PATH_RESPONSE answers one of the challenges.
func (p *pathProbe) matches(data [8]byte) bool {
	if !p.active {
		return false
	}
	for _, d := range p.data {
		if d == data {
			return true
		}
	}
	return false
}

func (p *pathProbe) timer() time.Time {
	if !p.active {
		return time.Time{}
	}
	if p.sends < pathProbeSends && p.nextSend.Before(p.deadline) {
		return p.nextSend
	}
	return p.deadline
}

// prefAddrState is a connection's side of the preferred address.
type prefAddrState struct {
	// Server: the connection ID of sequence 1 offered with the addresses.
	cid   []byte
	offer []netip.AddrPort
	// Client: the parameter, what became of it, and whether the client
	// moved (then disable_active_migration no longer holds, §18.2).
	have     bool
	addr     netip.AddrPort
	peerCID  []byte
	peerTok  [16]byte
	probe    pathProbe
	migrated bool
	failed   bool
	// Server: the preferred socket once the client sent a non-probing
	// packet to it, and whether sending moved there.
	moved bool
}

// prefAddrInit gives a server connection the connection ID of sequence 1
// when its endpoint serves a preferred address. "A server that chooses a
// zero-length connection ID MUST NOT provide a preferred address" (RFC
// 9000 §18.2).
func (c *Conn) prefAddrInit() {
	if c.isClient || c.ep.cidLen == 0 {
		return
	}
	socks := c.ep.preferredSockets()
	if len(socks) == 0 {
		return
	}
	for _, ps := range socks {
		c.pref.offer = append(c.pref.offer, ps.addr)
	}
	cid := newCID(c.ep.cidLen)
	c.pref.cid = cid
	c.cids.local = append(c.cids.local, localCIDEntry{seq: c.cids.nextSeq, cid: cid, sent: true})
	c.cids.nextSeq++
	c.ep.register(cid, c)
}

// prefAddrParam fills the preferred_address transport parameter.
func (c *Conn) prefAddrParam(p *wire.TransportParameters) {
	if c.pref.cid == nil {
		return
	}
	pa := wire.PreferredAddress{ConnectionID: c.pref.cid, StatelessResetToken: c.ep.resetToken(c.pref.cid)}
	for _, a := range c.pref.offer {
		if a.Addr().Is4() {
			pa.IPv4, pa.IPv4Port = a.Addr().As4(), a.Port()
		} else {
			pa.IPv6, pa.IPv6Port = a.Addr().As16(), a.Port()
		}
	}
	p.HasPreferredAddress = true
	p.PreferredAddress = pa
}

// onPeerPreferredAddress validates the server's preferred_address and
// keeps its connection ID, which is usable on any path (§9.6.3).
func (c *Conn) onPeerPreferredAddress(p *wire.TransportParameters) error {
	if !p.HasPreferredAddress {
		return nil
	}
	// wire.ParseTransportParameters already refuses it from a client
	// (§18.2: "A client MUST NOT include any server-only transport
	// parameter") and a zero-length connection ID in it.
	if len(c.peerInitSCID) == 0 {
		// §18.2: "A server that chooses a zero-length connection ID MUST
		// NOT provide a preferred address. ... A client MUST treat a
		// violation of these requirements as a connection error of type
		// TRANSPORT_PARAMETER_ERROR."
		return localTransportError(wire.TransportParameterError, 0, "RFC 9000 §18.2: preferred_address from a server using zero-length connection IDs")
	}
	pa := &p.PreferredAddress
	c.pref.have = true
	c.pref.peerCID = append([]byte(nil), pa.ConnectionID...)
	c.pref.peerTok = pa.StatelessResetToken
	c.ep.registerResetToken(pa.StatelessResetToken, c)
	// "A client that migrates to a new address SHOULD use a preferred
	// address from the same address family for the server" (§9.6.3); we
	// keep to the family we reached the server with.
	v4 := netip.AddrPortFrom(netip.AddrFrom4(pa.IPv4), pa.IPv4Port)
	v6 := netip.AddrPortFrom(netip.AddrFrom16(pa.IPv6), pa.IPv6Port)
	if c.peerAddr.Addr().Is4() {
		if pa.IPv4Port != 0 && !v4.Addr().IsUnspecified() {
			c.pref.addr = v4
		}
	} else if pa.IPv6Port != 0 && !v6.Addr().IsUnspecified() {
		c.pref.addr = v6
	}
	return nil
}

// prefAddrStart runs when the client's handshake is confirmed: "Once the
// handshake is confirmed, the client SHOULD select one of the two
// addresses provided by the server and initiate path validation" with
// "any previously unused active connection ID, taken from either the
// preferred_address transport parameter or a NEW_CONNECTION_ID frame"
// (§9.6.1).
func (c *Conn) prefAddrStart(now time.Time) {
	if !c.isClient || !c.pref.have || c.config.IgnorePreferredAddress || !c.pref.addr.IsValid() || c.pref.addr == c.peerAddr {
		return
	}
	if c.ep.cidLen == 0 {
		// We route by the server's address: add the new one.
		c.ep.registerAddr(c.pref.addr, c)
	}
	c.pref.probe.start(now, c.loss.pto(), c.ep, c.pref.addr, c.pref.peerCID, 1, c.pref.peerTok)
}

// lookupShared is lookup for the readers of preferred-address sockets:
// lookup's cache belongs to the endpoint's own reader.
func (e *Endpoint) lookupShared(cid []byte) *Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conns[string(cid)]
}

// sendEndpoint is the endpoint the connection's packets leave from.
func (c *Conn) sendEndpoint() *Endpoint {
	if c.sendEP != nil {
		return c.sendEP
	}
	return c.ep
}

// prefAddrSend sends a due PATH_CHALLENGE on the path being validated.
func (c *Conn) prefAddrSend(now time.Time) {
	p := &c.pref.probe
	if !c.handshakeConfirmed || c.appKeys.Write() == nil {
		return
	}
	d, ok := p.due(now)
	if !ok {
		return
	}
	f := wire.PathChallengeFrame{Data: d}
	if b := c.buildLonePacket(now, p.dcid, f.Append(nil), minInitialDatagramSize, loneOtherPath); b != nil {
		c.stats.sent++
		p.ep.writeTo(b, p.addr)
	}
}

// prefAddrTimers ends a validation that timed out. "If path validation
// fails, the client MUST continue sending all future packets to the
// server's original IP address" (§9.6.1); the connection ID used on the
// failed path is retired (§9.5: not reused on another path).
func (c *Conn) prefAddrTimers(now time.Time) {
	p := &c.pref.probe
	if !p.active || now.Before(p.deadline) {
		return
	}
	p.active = false
	debugf("path validation to %v failed", p.addr)
	if c.isClient {
		c.pref.failed = true
	}
	if p.dcidSeq != c.cids.peerSeq {
		c.cids.retire = append(c.cids.retire, p.dcidSeq)
	}
}

// prefAddrOnResponse acts on a PATH_RESPONSE that validates the path
// being probed, and reports whether it did.
func (c *Conn) prefAddrOnResponse(now time.Time, data [8]byte) bool {
	p := &c.pref.probe
	if !p.matches(data) {
		return false
	}
	p.active = false
	if c.isClient {
		// §9.6.1: "As soon as path validation succeeds, the client SHOULD
		// begin sending all future packets to the new server address
		// using the new connection ID and discontinue use of the old
		// server address."
		newIP := c.peerAddr.Addr() != p.addr.Addr()
		c.mu.Lock()
		c.peerAddr = p.addr
		c.mu.Unlock()
		c.switchPeerCID(p.dcidSeq, p.dcid, p.dcidTok)
		c.pref.migrated = true
		c.stats.migrations++
		if newIP {
			c.resetRecovery()
			c.pmtudReset(now)
		}
		debugf("client moved to the server's preferred address %v", p.addr)
		return true
	}
	// Server: the client's address answers from the preferred socket;
	// send from there from now on (§9.6.2).
	c.mu.Lock()
	c.sendEP = p.ep
	c.mu.Unlock()
	c.switchPeerCID(p.dcidSeq, p.dcid, p.dcidTok)
	c.pref.moved = true
	c.pmtudReset(now)
	debugf("server sends from its preferred address %v", p.ep.Addr())
	return true
}

// switchPeerCID moves to the peer's connection ID seq (with its stateless
// reset token) for a new path and retires the one in use, whose token no
// longer counts: RFC 9000 §10.3.1: "An endpoint MUST NOT check for any
// stateless reset tokens associated with connection IDs it has not used
// or for connection IDs that have been retired."
func (c *Conn) switchPeerCID(seq uint64, cid []byte, tok [16]byte) {
	if seq == c.cids.peerSeq {
		return
	}
	c.cids.retire = append(c.cids.retire, c.cids.peerSeq)
	c.cids.peerSeq = seq
	c.peerCID = cid
	c.cids.peerResetToken, c.cids.havePeerResetToken = tok, true
}

// prefAddrOnPacket runs for each processed 1-RTT packet on the server:
// a non-probing packet with a new largest packet number on a preferred
// socket starts validation of the path from that socket (§9.6.2: "The
// server MUST send non-probing packets from its original address until it
// receives a non-probing packet from the client at its preferred address
// and until the server has validated the new path").
func (c *Conn) prefAddrOnPacket(now time.Time, nonProbing, largest bool) {
	local := c.dgramEp
	if c.isClient || !nonProbing || !largest || local == nil || local == c.sendEndpoint() || !c.handshakeConfirmed {
		return
	}
	if p := &c.pref.probe; p.active && p.ep == local {
		return
	}
	// §9.5: "An endpoint MUST NOT reuse a connection ID when sending from
	// more than one local address": a spare connection ID of the client's
	// if it gave one.
	seq, cid, tok := c.cids.peerSeq, c.peerCID, c.cids.peerResetToken
	if len(c.cids.peer) > 0 {
		e := c.cids.peer[0]
		c.cids.peer = c.cids.peer[1:]
		seq, cid, tok = e.seq, e.cid, e.token
	}
	c.pref.probe.start(now, c.loss.pto(), local, c.dgramAddr, cid, seq, tok)
}

// resetRecovery resets the congestion controller and RTT estimator for a
// new path (RFC 9000 §9.4).
func (c *Conn) resetRecovery() {
	c.cids.recoveryResets++
	c.loss.ld.RTT().Reset(0)
	if r, ok := c.loss.cc.(interface{ Reset() }); ok {
		r.Reset()
	}
}

// loneKind says how loss recovery treats a lone packet.
type loneKind uint8

const (
	// loneProbe: a PMTU probe; its loss is no congestion signal.
	loneProbe loneKind = iota
	// loneOtherPath: a packet on a path being validated; its loss is no
	// congestion signal for the current path.
	loneOtherPath
	// lonePathFrame: a path frame sent off the current path, counted as
	// an ordinary packet.
	lonePathFrame
)

// buildLonePacket seals a 1-RTT packet of payload (frames) padded with
// PADDING to a datagram of size bytes, sent to dcid and recorded for loss
// detection as kind says. The caller has checked that 1-RTT write keys
// exist, and writes the result at once (it is the connection's send
// buffer).
func (c *Conn) buildLonePacket(now time.Time, dcid, payload []byte, size int, kind loneKind) []byte {
	sp := &c.spaces[appSpace]
	pn := sp.nextPN
	largestAcked := c.loss.ld.LargestAcked(recovery.Space(appSpace))
	pnLen := wire.EncodedPacketNumberLen(pn, uint64(largestAcked))
	if largestAcked < 0 {
		pnLen = wire.EncodedPacketNumberLen(pn+1, 0)
	}
	h := wire.ShortHeader{DCID: dcid, PacketNumber: pn, PNLen: pnLen, KeyPhase: c.appKeys.Phase() == 1, ClearFixedBit: c.greaseFixedBit(appSpace)}
	if cap(c.sendBuf) < size+64 {
		c.sendBuf = make([]byte, 0, size+64)
	}
	buf, pnOff := h.Append(c.sendBuf[:0])
	log := &c.loss.logs[appSpace]
	log.begin()
	buf = append(buf, payload...)
	log.add(sentFrame{kind: frOther})
	for len(buf) < size-16 || len(buf)-pnOff < 4 {
		buf = append(buf, byte(wire.FrameTypePadding))
	}
	p := builtPacket{space: appSpace, pnOff: pnOff, lenOff: -1, end: len(buf), pn: pn, ackElic: true, inFlight: true}
	if c.hooks != nil {
		c.hooks.PacketSealing(PacketInfo{Space: int(appSpace), Type: wire.PacketType1RTT, PacketNumber: pn,
			Size: p.end + 16, Payload: buf[pnOff+pnLen : p.end], DCID: dcid, SCID: c.localCID, KeyPhase: c.appKeys.Phase() == 1})
	}
	c.qlogPacketSent(now, &p, buf)
	if _, err := c.appKeys.Write().SealPacket(buf[:p.end:p.end+16], pnOff, pn); err != nil {
		log.fEnd = log.openStart
		return nil
	}
	buf = buf[:p.end+16]
	sp.nextPN++
	log.commit(pn)
	c.loss.ld.OnPacketSent(recovery.Space(appSpace), recovery.SentPacket{
		PacketNumber: int64(pn), Size: uint16(len(buf)), AckEliciting: true, InFlight: true,
		PMTUProbe: kind == loneProbe, OtherPath: kind == loneOtherPath,
	}, now)
	c.onSealed(now, pn)
	c.sendBuf = buf[:0]
	return buf
}
