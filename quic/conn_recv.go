package quic

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// handleDatagram processes every packet coalesced in a datagram.
func (c *Conn) handleDatagram(now time.Time, d *datagram) {
	defer d.release()
	if c.closing.done {
		return
	}
	if c.hooks != nil && c.hooks.DatagramIn(d.b) {
		return
	}
	if c.isClient && !c.knownServerAddr(d.addr) {
		// RFC 9000 §9: "If a client receives packets from an unknown
		// server address, the client MUST discard these packets."
		return
	}
	c.stats.recv++
	if !c.isClient && !c.addrValidated {
		c.bytesRecv += uint64(len(d.b))
	}
	b := d.b
	var firstDCID []byte
	c.processed = false
	c.dgramAddr = d.addr
	c.dgramEp = d.ep
	c.lastDgramSize = len(d.b)
	for len(b) > 0 {
		n := c.handlePacket(now, b, len(d.b), d.ecn, &firstDCID)
		if n <= 0 || c.closing.done {
			break
		}
		b = b[n:]
	}
	if !c.processed && c.isStatelessReset(d.b) {
		// RFC 9000 §10.3.1: "If the last 16 bytes of the datagram are
		// identical in value to a stateless reset token, the endpoint MUST
		// enter the draining period and not send any further packets on
		// this connection."
		c.closeErr = errStatelessReset
		c.closing.phase = phaseDraining
		c.closing.deadline = now
		c.closing.done = true
		c.closing.signalSent()
		return
	}
	c.retryUndecryptable(now)
}

// knownServerAddr reports whether a client's datagram comes from an
// address of the server: the one dialed, the one in use (the preferred
// address once the client moved there) or the preferred address it is
// validating.
func (c *Conn) knownServerAddr(a netip.AddrPort) bool {
	unmap := func(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }
	a = unmap(a)
	if a == unmap(c.peerAddr) || a == unmap(c.handshakeAddr) {
		return true
	}
	p := &c.pref.probe
	return p.active && a == unmap(p.addr)
}

// isStatelessReset reports whether a datagram that could not be processed
// ends with the stateless reset token of a connection ID of the peer's
// that we use: the one in use, and the one a path validation sends to.
// RFC 9000 §10.3.1: "An endpoint MUST NOT check for any stateless reset
// tokens associated with connection IDs it has not used or for connection
// IDs that have been retired", so the unused spares do not count.
func (c *Conn) isStatelessReset(b []byte) bool {
	if len(b) < 21 || b[0]&0x80 != 0 {
		return false
	}
	tail := b[len(b)-16:]
	if c.cids.havePeerResetToken && subtle.ConstantTimeCompare(tail, c.cids.peerResetToken[:]) == 1 {
		return true
	}
	if p := &c.pref.probe; p.active && subtle.ConstantTimeCompare(tail, p.dcidTok[:]) == 1 {
		return true
	}
	return false
}

// maxUndecryptable bounds the packets kept until their keys arrive.
const maxUndecryptable = 16

type undecryptablePacket struct {
	b         []byte
	dgramSize int
	ecn       uint8
}

// retryUndecryptable processes buffered packets whose keys are now
// installed.
func (c *Conn) retryUndecryptable(now time.Time) {
	for len(c.undecryptable) > 0 && c.keysChanged {
		c.keysChanged = false
		pkts := c.undecryptable
		c.undecryptable = nil
		for _, p := range pkts {
			var first []byte
			c.handlePacket(now, p.b, p.dgramSize, p.ecn, &first)
			if c.closing.active() {
				return
			}
		}
	}
	c.keysChanged = false
}

// handlePacket processes the packet at the start of b and returns its
// length, or 0 when the rest of the datagram must be dropped.
func (c *Conn) handlePacket(now time.Time, b []byte, dgramSize int, ecn uint8, firstDCID *[]byte) int {
	h, err := wire.ParseHeader(b, c.ep.cidLen)
	if err != nil {
		return 0
	}

	// RFC 9000 §12.2: "receivers SHOULD ignore any subsequent packets with
	// a different Destination Connection ID than the first packet in the
	// datagram".
	if *firstDCID == nil {
		*firstDCID = h.DCID
	} else if !bytes.Equal(*firstDCID, h.DCID) {
		return 0
	}
	if c.closing.active() {
		c.closing.onPacketWhileClosing(now, c)
		return h.PacketLen
	}
	switch h.Type {
	case wire.PacketTypeVersionNegotiation:
		c.handleVersionNegotiation(now, &h)
		return 0
	case wire.PacketTypeRetry:
		c.handleRetry(now, b[:h.PacketLen], &h)
		return 0
	case wire.PacketType0RTT:
		if c.isClient {
			return h.PacketLen // RFC 9000 §17.2.3: only clients send 0-RTT.
		}
	}
	// Initial packets in the original version still reach a server that
	// moved to another compatible version (RFC 9368 §2.3); a client
	// follows a server that did.
	origInitial := false
	// RFC 9000 §17.2 and §17.3.1: "Packets containing a zero value for
	// this bit are not valid packets in this version and MUST be
	// discarded." RFC 9287 §3: "An endpoint that advertises the
	// grease_quic_bit transport parameter MUST accept packets with the
	// QUIC Bit set to a value of 0."
	if !h.FixedBit && c.config.DisableGreaseQUICBit {
		return h.PacketLen
	}
	if h.Long && uint32(h.Version) != c.version {
		switch {
		case !c.isClient && h.Type == wire.PacketTypeInitial && uint32(h.Version) == c.origVersion && c.origInitialRead != nil:
			origInitial = true
		case !c.isClient && h.Type == wire.PacketType0RTT && uint32(h.Version) == c.origVersion:
		case c.clientFollowVersion(b[:h.PacketLen], &h):
		default:
			return h.PacketLen
		}
	}
	// RFC 9000 §7.2: "A server MUST set the Destination Connection ID it
	// uses for sending packets based on the first received Initial
	// packet. Any further changes to the Destination Connection ID are
	// only permitted if the values are taken from NEW_CONNECTION_ID
	// frames; if subsequent Initial packets include a different Source
	// Connection ID, they MUST be discarded."
	if !c.isClient && h.Type == wire.PacketTypeInitial && !bytes.Equal(h.SCID, c.peerInitSCID) {
		return h.PacketLen
	}
	var space spaceID
	switch h.Type {
	case wire.PacketTypeInitial:
		space = initialSpace
	case wire.PacketTypeHandshake:
		space = handshakeSpace
	case wire.PacketType1RTT, wire.PacketType0RTT:
		space = appSpace
	default:
		return h.PacketLen
	}
	sp := &c.spaces[space]
	if sp.discarded {
		return h.PacketLen
	}
	if c.isClient && h.Long {
		// RFC 9000 §17.2.2: "clients that receive an Initial packet with a
		// non-zero Token Length field MUST either discard the packet or
		// generate a connection error of type PROTOCOL_VIOLATION."
		if h.Type == wire.PacketTypeInitial && len(h.Token) > 0 {
			return h.PacketLen
		}
		// RFC 9000 §7.2: "Once a client has received a valid Initial
		// packet from the server, it MUST discard any subsequent packet it
		// receives on that connection with a different Source Connection
		// ID."
		if c.gotPeerPacket && !bytes.Equal(h.SCID, c.peerInitSCID) {
			return h.PacketLen
		}
	}
	pkt := b[:h.PacketLen]
	var hp *protect.HeaderProtector
	if h.Type == wire.PacketType0RTT {
		if c.earlyRead != nil {
			hp = c.earlyRead.HeaderProtector()
		}
	} else if space == appSpace {
		hp = c.appKeys.ReadHeader()
	} else if origInitial {
		hp = c.origInitialRead.HeaderProtector()
	} else if sp.readKeys != nil {
		hp = sp.readKeys.HeaderProtector()
	}
	if hp == nil {
		// Keys not yet available, e.g. a Handshake packet that overtook
		// the Initial. RFC 9001 §4.1.4: "an endpoint MAY buffer packets
		// ... that it cannot yet decrypt"; we keep a few and process them
		// once the keys arrive.
		// Config.DiscardEarly1RTT keeps no 1-RTT packet (RFC 9001 §5.7:
		// "Received packets protected with 1-RTT keys MAY be stored").
		keep := h.Type != wire.PacketType1RTT || !c.config.DiscardEarly1RTT
		if keep && len(c.undecryptable) < maxUndecryptable && space != initialSpace && (h.Type != wire.PacketType0RTT || !c.handshakeComplete) {
			c.undecryptable = append(c.undecryptable, undecryptablePacket{b: append([]byte(nil), b[:h.PacketLen]...), dgramSize: dgramSize, ecn: ecn})
		}
		return h.PacketLen
	}
	pnLen, err := hp.Remove(pkt, h.PNOffset, h.Long)
	if err != nil {
		return h.PacketLen
	}
	pn := wire.DecodePacketNumber(sp.largestRecv, wire.ReadPacketNumber(pkt[h.PNOffset:], pnLen), pnLen*8)
	hdrLen := h.PNOffset + pnLen
	var payload []byte
	if h.Type == wire.PacketType0RTT {
		payload, err = c.earlyRead.OpenPacket(pkt, hdrLen, pn)
		if err == nil && !c.recv0RTT {
			c.recv0RTT = true
			c.mu.Lock()
			c.info.Used0RTT = true
			c.mu.Unlock()
		}
	} else if space == appSpace {
		var ciphertext []byte // a copy for the policy: a failed Open in place clears the buffer
		if c.policy.OpenWithOldKeys {
			ciphertext = append([]byte(nil), pkt[hdrLen:]...)
		}
		var updated bool
		payload, updated, err = c.appKeys.Open(pkt[hdrLen:hdrLen], pkt[:hdrLen], pkt[hdrLen:], pn, boolBit(wire.KeyPhase(pkt[0])))
		if err != nil && ciphertext != nil {
			payload, err = c.openWithOldKeys(pkt[:hdrLen], ciphertext, pn)
		}
		if err == nil && updated {
			c.qlogKeyUpdated(now, 0, true, "remote_update")
		}
	} else if origInitial {
		payload, err = c.origInitialRead.OpenPacket(pkt, hdrLen, pn)
	} else {
		payload, err = sp.readKeys.OpenPacket(pkt, hdrLen, pn)
	}
	if err != nil {
		// RFC 9000 §12.2 / RFC 9001 §5.5: packets that fail to decrypt
		// are discarded.
		return h.PacketLen
	}
	// RFC 9000 §17.2 / §17.3.1: "An endpoint MUST treat receipt of a
	// packet that has a non-zero value for these bits after removing both
	// packet and header protection as a connection error of type
	// PROTOCOL_VIOLATION."
	if wire.ReservedBits(pkt[0], h.Long) != 0 {
		c.closeLocal(now, localTransportError(wire.ProtocolViolation, 0, "RFC 9000 §17.2: reserved bits set"))
		return 0
	}
	if sp.acks.isDuplicate(pn) {
		return h.PacketLen
	}
	if pn > sp.largestRecv || sp.largestRecv == wire.NoPacketNumber {
		sp.largestRecv = pn
	}
	if h.Type == wire.PacketType1RTT && c.earlyRead != nil && !c.policy.Keep0RTTKeys {
		// RFC 9001 §4.9.3: "Servers MAY temporarily retain 0-RTT keys to
		// allow decrypting reordered packets"; we drop them with the first
		// 1-RTT packet.
		c.earlyRead = nil
	}
	if c.isClient && !c.gotPeerPacket && h.Long {
		// RFC 9000 §7.2: "the client MUST change the Destination
		// Connection ID it uses for sending packets in response to only
		// the first received Initial or Retry packet" to the server's SCID.
		c.gotPeerPacket = true
		c.peerCID = append([]byte(nil), h.SCID...)
		c.peerInitSCID = c.peerCID
	}
	if !c.isClient && space == handshakeSpace {
		// RFC 9000 §8.1: "an endpoint can consider the peer address
		// validated" once it processes a Handshake packet. RFC 9001 §4.9.1:
		// "a server MUST discard Initial keys when it first successfully
		// processes a Handshake packet".
		c.addrValidated = true
		if !c.policy.KeepInitialKeys {
			c.discardSpace(now, initialSpace)
		}
	}
	c.lastActivity = now
	c.lastAckElicitingSent = time.Time{}
	info := recvPacketInfo{space: space, pn: pn, typ: h.Type, size: len(pkt), dgramSize: dgramSize, header: &h}
	if c.hooks != nil {
		c.hooks.PacketReceived(PacketInfo{Space: int(space), Type: h.Type, PacketNumber: pn, DCID: h.DCID, SCID: h.SCID, Size: len(pkt), DatagramSize: dgramSize, ECN: ecn, Payload: payload,
			KeyPhase: h.Type == wire.PacketType1RTT && wire.KeyPhase(pkt[0]), FirstByte: pkt[0]})
	}
	ackEliciting, ok := c.handleFrames(now, &info, payload)
	if !ok {
		return 0
	}
	c.processed = true
	if c.policy.NoKeyUpdateAck && space == appSpace && c.appKeys.Generation() > 0 {
		return h.PacketLen // policy: never acknowledge new-phase packets
	}
	sp.acks.onReceived(now, pn, ackEliciting, ecn)
	if space == appSpace {
		c.prefAddrOnPacket(now, info.nonProbing, pn == sp.largestRecv)
	}
	if space == initialSpace && ackEliciting && !info.newCrypto && !c.isClient {
		c.onClientInitialWithoutProgress()
	}
	if space == appSpace && c.dgramAddr != c.peerAddr && pn == sp.largestRecv && !c.isClient && c.handshakeConfirmed {
		// RFC 9000 §9.3: "Receiving a packet from a new peer address
		// containing a non-probing frame indicates that the peer has
		// migrated to that address." Only the packet with the largest
		// number counts (§9.3: "An endpoint only changes the address to
		// which it sends packets in response to the highest-numbered
		// non-probing packet").
		if info.nonProbing {
			c.onPeerAddressChange(now, c.dgramAddr)
		}
	}
	return h.PacketLen
}

func boolBit(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

type recvPacketInfo struct {
	space      spaceID
	pn         uint64
	typ        wire.PacketType
	size       int
	dgramSize  int
	header     *wire.Header
	nonProbing bool // set by handleFrames: a frame other than a probing one
	newCrypto  bool // a CRYPTO frame brought bytes not yet delivered to TLS
}

// parserPool holds the frame parsers of packets being handled.
var parserPool = sync.Pool{New: func() any { return new(wire.Parser) }}

// handleFrames dispatches every frame in a packet payload. It returns
// whether the packet was ack-eliciting and whether processing may go on.
func (c *Conn) handleFrames(now time.Time, info *recvPacketInfo, payload []byte) (ackEliciting, ok bool) {
	if len(payload) == 0 {
		// RFC 9000 §12.4: "An endpoint MUST treat receipt of a packet
		// containing no frames as a connection error of type
		// PROTOCOL_VIOLATION."
		c.closeLocal(now, localTransportError(wire.ProtocolViolation, 0, "RFC 9000 §12.4: packet without frames"))
		return false, false
	}
	c.qlogPacketReceived(now, info, payload)
	// The parser's frames live until the packet is handled; no handler
	// keeps one. Pooled, an idle connection holds none (520 bytes).
	p := parserPool.Get().(*wire.Parser)
	defer parserPool.Put(p)
	for len(payload) > 0 {
		f, n, err := p.Parse(payload)
		if err != nil {
			var we *wire.Error
			if errors.As(err, &we) {
				c.closeLocal(now, &TransportError{Code: we.Code, FrameType: uint64(we.FrameType), Reason: we.Reason})
			} else {
				c.closeLocal(now, localTransportError(wire.FrameEncodingError, 0, "%v", err))
			}
			return false, false
		}
		payload = payload[n:]
		t := f.Type()
		// RFC 9000 §12.4: "An endpoint MUST treat receipt of a frame in a
		// packet type that is not permitted as a connection error of type
		// PROTOCOL_VIOLATION."
		if !t.AllowedIn(info.typ) {
			c.closeLocal(now, localTransportError(wire.ProtocolViolation, uint64(t), "RFC 9000 §12.4: %v frame not permitted in %v packet", t, info.typ))
			return false, false
		}
		if t.AckEliciting() {
			ackEliciting = true
		}
		if !t.Probing() {
			info.nonProbing = true
		}
		if err := c.handleFrame(now, info, f); err != nil {
			c.closeLocal(now, err)
			return false, false
		}
		if c.closing.active() {
			return ackEliciting, false
		}
	}
	return ackEliciting, true
}

// handleFrame acts on one frame.
func (c *Conn) handleFrame(now time.Time, info *recvPacketInfo, f wire.Frame) error {
	switch f := f.(type) {
	case *wire.PaddingFrame, *wire.PingFrame:
	case *wire.AckFrame:
		return c.handleAck(now, info.space, f)
	case *wire.CryptoFrame:
		if f.Offset+uint64(len(f.Data)) > c.spaces[info.space].crypto.delivered {
			info.newCrypto = true
		}
		return c.handleCrypto(now, info.space, f)
	case *wire.HandshakeDoneFrame:
		// RFC 9000 §19.20: "A server MUST treat receipt of a
		// HANDSHAKE_DONE frame as a connection error of type
		// PROTOCOL_VIOLATION."
		if !c.isClient {
			return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "RFC 9000 §19.20: HANDSHAKE_DONE sent by a client")
		}
		// RFC 9001 §4.1.2: "At the client, the handshake is considered
		// confirmed when a HANDSHAKE_DONE frame is received."
		c.confirmHandshake(now)
		c.releaseTLS()
	case *wire.ConnectionCloseFrame:
		c.handlePeerClose(now, f)
	case *wire.NewTokenFrame:
		// RFC 9000 §19.7: "A server MUST treat receipt of a NEW_TOKEN
		// frame as a connection error of type PROTOCOL_VIOLATION."
		if !c.isClient {
			return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "RFC 9000 §19.7: NEW_TOKEN sent by a client")
		}
		c.onNewToken(f)
	case *wire.NewConnectionIDFrame:
		return c.cids.onNewConnectionID(now, f)
	case *wire.RetireConnectionIDFrame:
		return c.cids.onRetireConnectionID(now, f, info.header.DCID)
	case *wire.PathChallengeFrame:
		// RFC 9000 §8.2.2: "On receiving a PATH_CHALLENGE frame, an
		// endpoint MUST respond by echoing the data contained in the
		// PATH_CHALLENGE frame in a PATH_RESPONSE frame." The response
		// goes back on the path the challenge came from
		// (sendOffPathResponses).
		c.cids.onPathChallenge(f.Data, c.dgramAddr, c.dgramEp, c.lastDgramSize)
	case *wire.PathResponseFrame:
		if c.prefAddrOnResponse(now, f.Data) {
			break
		}
		if c.cids.challengePending && f.Data == c.cids.challenge {
			c.cids.challengePending = false
			c.pathValidated(now)
		}
	case *wire.StreamFrame:
		return c.streams.onStream(now, f)
	case *wire.ResetStreamFrame:
		return c.streams.onResetStream(now, f)
	case *wire.StopSendingFrame:
		return c.streams.onStopSending(now, f)
	case *wire.MaxDataFrame:
		c.streams.onMaxData(f.Maximum)
	case *wire.MaxStreamDataFrame:
		return c.streams.onMaxStreamData(f)
	case *wire.MaxStreamsFrame:
		return c.streams.onMaxStreams(f)
	case *wire.StreamDataBlockedFrame:
		return c.streams.onStreamDataBlocked(f)
	case *wire.DataBlockedFrame, *wire.StreamsBlockedFrame:
		// Informational; our credit policy does not depend on them.
	case *wire.DatagramFrame:
		return c.onDatagram(now, f)
	case *wire.AckFrequencyFrame:
		return c.onAckFrequency(now, f)
	case *wire.ImmediateAckFrame:
		return c.onImmediateAck(now, f)
	default:
		return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "frame %v not negotiated", f.Type())
	}
	return nil
}

// handleCrypto feeds CRYPTO data to TLS in order.
func (c *Conn) handleCrypto(now time.Time, space spaceID, f *wire.CryptoFrame) error {
	sp := &c.spaces[space]
	if sp.discarded {
		// The space was discarded while this packet was being handled:
		// an earlier frame of it completed the handshake. Its CRYPTO
		// stream, whose record went with it, was complete, so this is a
		// copy (RFC 9000 §2.2: "Data that has already been received can
		// be discarded"); fed to TLS it would be handshake data at a
		// level TLS has left.
		return nil
	}
	// RFC 9001 §4.1.3: "If the packet is from a previously installed
	// encryption level, it MUST NOT contain data that extends past the end
	// of previously received data in that flow. Implementations MUST
	// treat any violations of this requirement as a connection error of
	// type PROTOCOL_VIOLATION." TLS has left the Initial level once the
	// Handshake read keys are in.
	if space == initialSpace && c.spaces[handshakeSpace].readKeys != nil && f.Offset+uint64(len(f.Data)) > sp.crypto.receivedEnd() {
		return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "RFC 9001 §4.1.3: Initial CRYPTO data past offset %d after the Handshake keys were installed", sp.crypto.receivedEnd())
	}
	ready, exceeded := sp.crypto.receive(f.Offset, f.Data)
	if exceeded {
		return localTransportError(wire.CryptoBufferExceeded, uint64(f.Type()), "RFC 9000 §7.5: CRYPTO data beyond %d bytes of buffer", maxCryptoBuffer)
	}
	for _, b := range ready {
		if !c.isClient && space == initialSpace && c.clientRandom == nil {
			c.clientRandom = helloRandom(b)
			// RFC 9001 §8.4: "A client MUST NOT request the use of the
			// TLS 1.3 compatibility mode. A server SHOULD treat the
			// receipt of a TLS ClientHello with a non-empty
			// legacy_session_id field as a connection error of type
			// PROTOCOL_VIOLATION." (crypto/tls would echo it.) The
			// length byte follows the 4-byte handshake header, the
			// 2-byte legacy_version and the 32-byte random.
			if c.clientRandom != nil && len(b) > 38 && b[38] != 0 {
				return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "RFC 9001 §8.4: ClientHello with a %d-byte legacy_session_id", b[38])
			}
		}
		if c.tlsReleased {
			if err := c.postHS.feed(b, c.isClient); err != nil {
				return err
			}
			continue
		}
		if err := WithTLS13Suites(nil, func() error { return c.tls.HandleData(space.tlsLevel(), b) }); err != nil {
			return c.tlsError(err)
		}
	}
	if len(ready) > 0 && !c.tlsReleased {
		return c.handleTLSEvents(now)
	}
	return nil
}
