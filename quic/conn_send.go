package quic

import (
	"time"

	"github.com/quiver-quic/quiver/quic/recovery"
	"github.com/quiver-quic/quiver/quic/wire"
)

// maxDatagramsPerTurn bounds how many datagrams one loop turn sends, so
// that received packets (ACKs) get processed between bursts.
const maxDatagramsPerTurn = 64

// builtPacket is a packet of the datagram being assembled, not yet
// sealed.
type builtPacket struct {
	space    spaceID
	start    int // offset of the first header byte in the datagram
	pnOff    int // offset of the packet number
	lenOff   int // offset of the Length field; -1 for short headers
	end      int // end of the plaintext payload
	pn       uint64
	early    bool // a 0-RTT packet
	ackElic  bool
	inFlight bool
	hasAck   bool
	largest  uint64
	// pathFrame: the packet carries PATH_CHALLENGE or PATH_RESPONSE, so
	// its datagram is expanded to 1200 bytes (RFC 9000 §8.2.1, §8.2.2).
	pathFrame bool
}

// sendPackets sends what the connection has to send: close packets when
// closing, else datagrams until nothing is left or a limit is hit.
func (c *Conn) sendPackets(now time.Time) {
	if c.closing.active() {
		c.closing.maybeSend(now, c)
		return
	}
	if len(c.cids.pathResponse) > 0 || len(c.cids.prevPathChallenge) > 0 {
		c.sendOffPathResponses(now)
	}
	// The fast path queues the turn's datagrams and sends them in as few
	// system calls as the endpoint's switches allow (sock_linux.go).
	c.prefAddrSend(now)
	ep := c.sendEndpoint()
	var q *sendQueue
	if ep.sock != nil && !c.policy.InterceptDatagrams {
		q = getSendQueue(ep.sock.gso && !ep.noGSO.Load())
	}
	if size, ok := c.pmtudProbeDue(now); ok {
		if b := c.buildPMTUProbe(now, size); b != nil {
			c.stats.sent++
			// Alone, so that a size the path refuses loses the probe
			// only, never a GSO run it would head.
			c.writeDatagram(b, c.ecn.codepoint())
		}
	}
	// With a queue, each datagram is built in place at the end of the
	// queue's buffer: no copy between building and the system call.
	room := c.sendBufSize()
	for i := 0; i < maxDatagramsPerTurn; i++ {
		var b []byte
		if q != nil {
			b = c.buildDatagramIn(now, q.tail(ep, c.peerAddr, room))
		} else {
			b = c.buildDatagram(now)
		}
		if len(b) == 0 {
			break
		}
		if i == maxDatagramsPerTurn-1 {
			// More may be waiting: run another turn once received
			// datagrams have had their chance.
			c.wake()
		}
		c.stats.sent++
		ecn := c.ecn.codepoint()
		if q == nil {
			c.writeDatagram(b, ecn)
			continue
		}
		q.commit(b, ecn)
	}
	if q != nil {
		q.flush(ep, c.peerAddr)
		q.release()
		// The per-connection buffer serves only lone packets (probes,
		// close) on this path: an idle connection holds none.
		c.sendBuf = nil
	}
}

// sendBufSize is the room one datagram is built in: the largest datagram
// the configuration allows, with slack for the padding and AEAD tags that
// are appended after the size checks.
func (c *Conn) sendBufSize() int {
	return max(maxDatagramSize, c.config.maxPacketSize()) + 64
}

// writeDatagram hands a sealed datagram to the socket, through the
// DatagramOut hook.
func (c *Conn) writeDatagram(b []byte, ecn uint8) {
	var oob [sendOOBLen]byte
	ep := c.sendEndpoint()
	if c.hooks != nil && c.policy.InterceptDatagrams {
		out, ecn := c.hooks.DatagramOut(b, ecn)
		for _, d := range out {
			ep.writeECN(d, c.peerAddr, ecn, oob[:0])
		}
		return
	}
	ep.writeECN(b, c.peerAddr, ecn, oob[:0])
}

// amplificationAllowance is how many bytes the server may still send
// before the client's address is validated. RFC 9000 §8.1: "Prior to
// validating the client address, servers MUST NOT send more than three
// times as many bytes as the number of bytes they have received."
func (c *Conn) amplificationAllowance() int {
	size := c.datagramSize()
	if c.isClient || c.addrValidated {
		return size
	}
	limit := 3 * c.bytesRecv
	if c.bytesSent >= limit {
		return 0
	}
	return int(min(limit-c.bytesSent, uint64(size)))
}

// datagramSize is the largest datagram the engine sends now. Until the
// handshake is confirmed it keeps to 1200 bytes, which every path carries
// (RFC 9000 §14); then it uses the size DPLPMTUD found (conn_pmtud.go),
// within the peer's max_udp_payload_size (§18.2: the peer is not "willing
// to receive" more). While a PTO is outstanding it sends base-size
// packets, so that its probes pass a path that stopped carrying larger
// ones and their acknowledgments reveal the black hole.
func (c *Conn) datagramSize() int {
	if !c.handshakeConfirmed {
		return minInitialDatagramSize
	}
	size := c.pmtud.cur
	if c.pmtud.enabled && c.loss.ld.PTOCount() > 0 {
		size = c.pmtud.base
	}
	if c.havePeerTP && c.peerParams.tp.MaxUDPPayloadSize >= minInitialDatagramSize {
		size = int(min(uint64(size), c.peerParams.tp.MaxUDPPayloadSize))
	}
	return size
}

// buildDatagram assembles and seals one datagram into c.sendBuf. It
// returns nil when there is nothing to send.
func (c *Conn) buildDatagram(now time.Time) []byte {
	if size := c.sendBufSize(); cap(c.sendBuf) < size {
		c.sendBuf = make([]byte, 0, size)
	}
	b := c.buildDatagramIn(now, c.sendBuf[:0])
	if b != nil {
		c.sendBuf = b[:0]
	}
	return b
}

// buildDatagramIn assembles and seals one datagram by appending to buf,
// an empty slice with room for a full datagram. It returns nil when there
// is nothing to send.
func (c *Conn) buildDatagramIn(now time.Time, buf []byte) []byte {
	limit := c.amplificationAllowance()
	if blocked := limit < 64; blocked != c.ampBlocked {
		// RFC 9002 §6.2.2.1: a server blocked by the amplification limit
		// arms no PTO until it may send again.
		c.ampBlocked = blocked
		c.loss.ld.SetAmplificationLimited(blocked, now)
	}
	if c.ampBlocked {
		return nil
	}
	cwndOK := c.loss.ld.CanSend()
	if cwndOK && !c.loss.pacerAllows(now) {
		// Paced: only ACK-only packets may leave before the pacer's time.
		cwndOK = false
		c.stats.paced++
	}
	var pkts [numSpaces]builtPacket
	n := 0
	hasInitial, hasPathFrame := false, false
	for sp := initialSpace; sp < numSpaces; sp++ {
		room := limit - len(buf)
		if room < 64 {
			break
		}
		if n > 0 {
			// Reserve the previous packet's AEAD tag.
			buf = append(buf, make([]byte, 16)...)
			room -= 16
		}
		var ok bool
		var p builtPacket
		buf, p, ok = c.appendPacket(now, sp, buf, len(buf)+room-16, cwndOK)
		if !ok {
			if n > 0 {
				buf = buf[:len(buf)-16]
			}
			continue
		}
		if sp == initialSpace && (c.isClient || p.ackElic) {
			hasInitial = true
		}
		if p.pathFrame {
			hasPathFrame = true
		}
		pkts[n] = p
		n++
	}
	if n == 0 {
		if cwndOK {
			c.stats.idleTurns++
		} else {
			c.stats.cwndBlocked++
		}
		// RFC 9002 §7.8: the window does not grow while the sender is
		// application limited.
		c.loss.cc.SetAppLimited(cwndOK)
		return nil
	}
	if !cwndOK && c.loss.pacer.next.IsZero() {
		c.loss.cc.SetAppLimited(false)
	}
	last := &pkts[n-1]
	// RFC 9000 §14.1: "A client MUST expand the payload of all UDP
	// datagrams carrying Initial packets to at least the smallest allowed
	// maximum datagram size of 1200 bytes" and "a server MUST expand the
	// payload of all UDP datagrams carrying ack-eliciting Initial packets
	// to at least the smallest allowed maximum datagram size". The
	// padding goes in the last packet, as PADDING frames.
	//
	// RFC 9000 §8.2.1: "An endpoint MUST expand datagrams that contain a
	// PATH_CHALLENGE frame to at least the smallest allowed maximum
	// datagram size of 1200 bytes, unless the anti-amplification limit for
	// the path does not permit sending a datagram of this size." §8.2.2
	// says the same of PATH_RESPONSE. The min with limit below is that
	// exception.
	want := 0
	if hasInitial || hasPathFrame {
		want = minInitialDatagramSize
	} else if room := limit - (len(buf) + 16); room > 0 && room < 48 {
		// Nearly full: pad to the full size, so that runs of datagrams
		// have one size and go out in one GSO send.
		want = limit
	}
	// RFC 9001 §5.4.2: "packets are padded so that the combined lengths of
	// the encoded packet number and protected payload is at least 4 bytes
	// longer than the sample required for header protection".
	for last.end-last.pnOff < 4 {
		buf = append(buf, 0)
		last.end++
	}
	// The amplification limit wins over padding: a server never sends
	// more than three times what it received (RFC 9000 §8.1).
	want = min(want, limit)
	trailing := 0
	if pad := want - (len(buf) + 16); pad > 0 {
		if c.config.PadWithZeros && last.lenOff >= 0 {
			// Config.PadWithZeros: zero bytes after the last packet, which
			// has a Length field, instead of PADDING frames in it (RFC
			// 9000 §14.1: "Initial packets can even be coalesced with
			// invalid packets, which a receiver will discard").
			trailing = pad
		} else {
			for range pad {
				buf = append(buf, 0)
			}
			last.end += pad
		}
	}
	buf = append(buf, make([]byte, 16+trailing)...)
	// Fill Length fields and seal every packet in place. What must wait
	// until the datagram is complete runs in one deferred call: a defer
	// inside the loop would allocate for every datagram.
	var appSealed, discardInitial bool
	var appPN uint64
	defer func() {
		if appSealed {
			c.onSealed(now, appPN)
		}
		if discardInitial {
			c.discardSpace(now, initialSpace)
		}
	}()
	for i := 0; i < n; i++ {
		p := &pkts[i]
		if p.lenOff >= 0 {
			wire.PutVarintLen(buf[p.lenOff:], uint64(p.end-p.pnOff+16), 2)
		}
		if c.hooks != nil {
			hdrLen := p.pnOff + int(buf[p.start]&3) + 1
			typ := p.space.packetType()
			if p.early {
				typ = wire.PacketType0RTT
			}
			c.hooks.PacketSealing(PacketInfo{Space: int(p.space), Type: typ, PacketNumber: p.pn,
				Size: p.end + 16 - p.start, Payload: buf[hdrLen:p.end], DCID: c.peerCID, SCID: c.localCID,
				KeyPhase: typ == wire.PacketType1RTT && c.appKeys.Phase() == 1})
		}
		c.qlogPacketSent(now, p, buf)
		pkt := buf[p.start : p.end : p.end+16]
		var err error
		if p.early {
			_, err = c.earlyWrite.SealPacket(pkt, p.pnOff-p.start, p.pn)
			c.sent0RTT = true
		} else if p.space == appSpace {
			k := c.appKeys.Write()
			_, err = k.SealPacket(pkt, p.pnOff-p.start, p.pn)
			appSealed, appPN = true, p.pn // one 1-RTT packet per datagram, the last
		} else {
			_, err = c.spaces[p.space].writeKeys.SealPacket(pkt, p.pnOff-p.start, p.pn)
		}
		if err != nil {
			return nil
		}
		size := p.end + 16 - p.start
		c.loss.ld.OnPacketSent(recovery.Space(p.space), recovery.SentPacket{
			PacketNumber: int64(p.pn), Size: uint16(size), AckEliciting: p.ackElic, InFlight: p.inFlight,
		}, now)
		if p.ackElic && c.lastAckElicitingSent.IsZero() {
			// RFC 9000 §10.1: "An endpoint also restarts its idle timer
			// when sending an ack-eliciting packet if no other
			// ack-eliciting packets have been sent since last receiving
			// and processing a packet."
			c.lastAckElicitingSent = now
			c.lastActivity = now
		}
		if p.space == handshakeSpace && c.isClient && !c.spaces[initialSpace].discarded {
			// RFC 9001 §4.9.1: "a client MUST discard Initial keys when it
			// first sends a Handshake packet".
			discardInitial = true
		}
	}
	if !c.isClient && !c.addrValidated {
		c.bytesSent += uint64(len(buf))
	}
	for i := 0; i < n; i++ {
		if pkts[i].inFlight {
			c.loss.pacer.p.OnSent(now, len(buf))
			break
		}
	}
	return buf
}

// appendPacket appends one unsealed packet of space to buf, using at most
// end-len(buf) bytes for header and payload. ok is false when the space
// has nothing to send; buf is then unchanged.
func (c *Conn) appendPacket(now time.Time, space spaceID, buf []byte, end int, cwndOK bool) ([]byte, builtPacket, bool) {
	sp := &c.spaces[space]
	p := builtPacket{space: space, start: len(buf), lenOff: -1}
	if !c.canSendIn(space) {
		return buf, p, false
	}
	probing := c.loss.probes[space] > 0
	wantAck := sp.acks.wantAck(now)
	if !cwndOK && !probing && !wantAck {
		return buf, p, false
	}
	// Quick check that something is there before writing a header.
	if !wantAck && !probing && !c.hasPending(space, cwndOK) {
		return buf, p, false
	}
	if c.hooks != nil && c.hooks.SkipNextPacketNumber(int(space)) {
		sp.nextPN++
	}
	pn := sp.nextPN
	largestAcked := c.loss.ld.LargestAcked(recovery.Space(space))
	pnLen := wire.EncodedPacketNumberLen(pn, uint64(largestAcked))
	if largestAcked < 0 {
		pnLen = wire.EncodedPacketNumberLen(pn+1, 0)
	}
	early := space == appSpace && c.sending0RTT()
	p.early = early
	if early {
		h := wire.LongHeader{Version: wire.Version(c.origVersion), Type: wire.PacketType0RTT, DCID: c.peerCID, SCID: c.localCID, PacketNumber: pn, PNLen: pnLen, LengthLen: 2}
		buf, p.lenOff, p.pnOff = h.Append(buf)
	} else if space == appSpace {
		h := wire.ShortHeader{DCID: c.peerCID, PacketNumber: pn, PNLen: pnLen, KeyPhase: c.appKeys.Phase() == 1, ClearFixedBit: c.greaseFixedBit(space)}
		buf, p.pnOff = h.Append(buf)
	} else {
		h := wire.LongHeader{Version: wire.Version(c.version), Type: space.packetType(), DCID: c.peerCID, SCID: c.localCID, PacketNumber: pn, PNLen: pnLen, LengthLen: 2, ClearFixedBit: c.greaseFixedBit(space)}
		if space == initialSpace && c.isClient {
			h.Token = c.retryToken
		}
		buf, p.lenOff, p.pnOff = h.Append(buf)
	}
	payloadStart := len(buf)
	log := &c.loss.logs[space]
	log.begin()
	// ACK first. RFC 9000 §12.4 Table 3: no ACK in 0-RTT packets.
	if sp.acks.canAck() && !early {
		var f wire.AckFrame
		f.Ranges = c.ackRanges[:0]
		exp := c.config.ackDelayExponent()
		if space != appSpace {
			exp = 3 // RFC 9000 §19.3: Initial and Handshake use exponent 3.
		}
		sp.acks.frame(now, exp, &f)
		c.ackRanges = f.Ranges
		if len(buf)+f.Len() <= end {
			buf = f.Append(buf)
			log.add(sentFrame{kind: frAck, off: f.Ranges[0].Largest})
			sp.acks.onAckSent(now)
			p.hasAck = true
		}
	}
	ackOnly := !cwndOK && !probing
	if !ackOnly {
		buf = c.appendFrames(now, space, buf, end, &p)
	}
	if !p.ackElic && p.hasAck && space == appSpace && !early && !ackOnly {
		// RFC 9000 §13.2.4: "an endpoint that is only sending ACK frames
		// will not receive acknowledgments from its peer unless those
		// acknowledgments are included in packets with ack-eliciting
		// frames"; a receive-only endpoint adds a PING now and then, so
		// that it notices a dead path (e.g. NAT rebinding) by PTO.
		if c.ackOnlyRun++; c.ackOnlyRun >= 20 && len(buf) < end && !sp.acks.disabled {
			buf = append(buf, byte(wire.FrameTypePing))
			log.add(sentFrame{kind: frPing})
			p.ackElic = true
		}
	}
	if p.ackElic {
		c.ackOnlyRun = 0
	}
	if probing && !p.ackElic && len(buf) < end {
		// RFC 9002 §6.2.4: "When a PTO timer expires, a sender MUST send
		// at least one ack-eliciting packet in the packet number space as
		// a probe." Nothing else to send: PING.
		buf = append(buf, byte(wire.FrameTypePing))
		log.add(sentFrame{kind: frPing})
		p.ackElic = true
	}
	if len(buf) == payloadStart {
		log.fEnd = log.openStart
		return buf[:p.start], p, false
	}
	if p.ackElic {
		p.inFlight = true
		if probing {
			c.loss.probes[space]--
		}
	}
	// RFC 9001 §5.4.2: "packets are padded so that the combined lengths of
	// the encoded packet number and protected payload is at least 4 bytes
	// longer than the sample required for header protection". Every
	// packet needs this, not only a datagram's last: a short Handshake
	// packet (a lone ACK) coalesced before a 1-RTT packet otherwise fails
	// to seal, and the packets after it would never reach loss detection.
	for len(buf)-p.pnOff < 4 {
		buf = append(buf, byte(wire.FrameTypePadding))
	}
	p.end = len(buf)
	p.pn = pn
	sp.nextPN++
	log.commit(pn)
	return buf, p, true
}

// canSendIn reports whether packets of a space can be sent now: its keys
// are there and not discarded. 1-RTT packets wait for the handshake to
// complete (0-RTT is not implemented).
func (c *Conn) canSendIn(space spaceID) bool {
	if space == appSpace {
		if c.isClient {
			return c.appKeys.Write() != nil && c.handshakeComplete || c.sending0RTT()
		}
		// A server may send 1-RTT packets (0.5-RTT data) as soon as it
		// has the keys, before the client's Finished (RFC 9001 §4.1.1).
		return c.appKeys.Write() != nil
	}
	return c.spaces[space].canWrite()
}

// hasPending reports whether a space may have frames other than ACK to
// send; appendPacket still tries and abandons empty packets.
func (c *Conn) hasPending(space spaceID, cwndOK bool) bool {
	if !cwndOK {
		return false
	}
	sp := &c.spaces[space]
	if sp.crypto.hasData() || len(c.probeRT.inject[space]) > 0 {
		return true
	}
	if space != appSpace {
		return false
	}
	if c.handshakeDonePending || c.keepAlivePending || c.cids.hasPending() || c.ackFreq.pending != nil || c.ackFreq.immediateAck {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.streams
	return len(s.sendQueue) > 0 || len(s.ctlQueue) > 0 || len(c.dgrams.out) > 0 || s.flow.WantsMaxData() ||
		s.limits.WantsMaxStreams(true) || s.limits.WantsMaxStreams(false)
}

// appendFrames adds CRYPTO, control and STREAM frames.
func (c *Conn) appendFrames(now time.Time, space spaceID, buf []byte, end int, p *builtPacket) []byte {
	sp := &c.spaces[space]
	log := &c.loss.logs[space]
	// Injected frames (probe hook) go first, verbatim.
	if inj := c.probeRT.inject[space]; len(inj) > 0 {
		for len(inj) > 0 && len(buf)+inj[0].Len() <= end {
			buf = inj[0].Append(buf)
			log.add(sentFrame{kind: frOther})
			p.ackElic = true
			if p.early && c.isClient && !c.gotRetry {
				c.probeRT.injected0RTT = append(c.probeRT.injected0RTT, inj[0])
			}
			inj = inj[1:]
		}
		c.probeRT.inject[space] = inj
	}
	for sp.crypto.hasData() {
		room := end - len(buf) - wire.CryptoFrameOverhead(sp.crypto.sent+1<<20, 1<<14)
		if room <= 0 {
			break
		}
		off, data := sp.crypto.next(room)
		f := wire.CryptoFrame{Offset: off, Data: data}
		buf = f.Append(buf)
		log.add(sentFrame{kind: frCrypto, off: off, n: uint64(len(data))})
		p.ackElic = true
	}
	if space != appSpace {
		return buf
	}
	if p.early {
		// 0-RTT carries stream data and flow control only.
		c.mu.Lock()
		buf = c.appendStreamControl(now, buf, end, log, p)
		buf = c.appendStreamData(now, buf, end, log, p)
		c.mu.Unlock()
		return buf
	}
	if c.keepAlivePending && len(buf)+1 <= end {
		buf = append(buf, byte(wire.FrameTypePing))
		log.add(sentFrame{kind: frPing})
		c.keepAlivePending = false
		p.ackElic = true
	}
	if c.handshakeDonePending && len(buf)+1 <= end {
		buf = append(buf, byte(wire.FrameTypeHandshakeDone))
		log.add(sentFrame{kind: frHandshakeDone})
		c.handshakeDonePending = false
		p.ackElic = true
	}
	buf = c.cids.appendFrames(buf, end, log, p)
	buf = c.appendAckFrequency(buf, end, log, p)
	c.mu.Lock()
	buf = c.appendDatagrams(buf, end, log, p)
	buf = c.appendStreamControl(now, buf, end, log, p)
	buf = c.appendStreamData(now, buf, end, log, p)
	c.mu.Unlock()
	return buf
}

// controlRoom is the room kept free for one control frame.
const controlRoom = 24

// appendStreamControl adds flow-control and stream-state frames. c.mu is
// held.
func (c *Conn) appendStreamControl(now time.Time, buf []byte, end int, log *sentLog, p *builtPacket) []byte {
	s := &c.streams
	rtt := c.loss.ld.RTT().Smoothed()
	credit := !c.policy.NoFlowControlCredit
	fits := func() bool { return end-len(buf) >= controlRoom }
	if fits() && credit {
		if limit, ok := s.flow.NextMaxData(now, rtt); ok {
			f := wire.MaxDataFrame{Maximum: limit}
			buf = f.Append(buf)
			log.add(sentFrame{kind: frMaxData, off: limit})
			p.ackElic = true
		}
	}
	for _, bidi := range [2]bool{true, false} {
		if !fits() {
			break
		}
		if n, ok := s.limits.NextMaxStreams(bidi); ok && credit {
			f := wire.MaxStreamsFrame{Bidi: bidi, Maximum: n}
			buf = f.Append(buf)
			log.add(sentFrame{kind: frMaxStreams, bidi: bidi, off: n})
			p.ackElic = true
		}
		if !fits() {
			break
		}
		if n, ok := s.limits.NextStreamsBlocked(bidi); ok && !c.config.DisableBlockedFrames {
			f := wire.StreamsBlockedFrame{Bidi: bidi, Limit: n}
			buf = f.Append(buf)
			log.add(sentFrame{kind: frStreamsBlocked, bidi: bidi, off: n})
			p.ackElic = true
		}
	}
	if fits() {
		if limit, ok := s.flow.NextDataBlocked(); ok && !c.config.DisableBlockedFrames {
			f := wire.DataBlockedFrame{Limit: limit}
			buf = f.Append(buf)
			log.add(sentFrame{kind: frDataBlocked, off: limit})
			p.ackElic = true
		}
	}
	for len(s.ctlQueue) > 0 && fits() {
		st := s.ctlQueue[0]
		id := uint64(st.id)
		if st.canRecv {
			if code, ok := st.recv.NextStopSending(); ok {
				f := wire.StopSendingFrame{StreamID: id, ErrorCode: code}
				buf = f.Append(buf)
				log.add(sentFrame{kind: frStopSending, id: id})
				p.ackElic = true
			}
			if fits() && credit {
				if limit, ok := st.recv.NextMaxStreamData(now, rtt); ok {
					f := wire.MaxStreamDataFrame{StreamID: id, Maximum: limit}
					buf = f.Append(buf)
					log.add(sentFrame{kind: frMaxStreamData, id: id, off: limit})
					p.ackElic = true
				}
			}
		}
		if !fits() {
			break
		}
		st.ctlQueued = false
		s.ctlQueue[0] = nil
		s.ctlQueue = s.ctlQueue[1:]
		if len(s.ctlQueue) == 0 {
			s.ctlQueue = s.ctlQueue[:0:0]
		}
		s.maybeForgetLocked(st)
	}
	return buf
}

// appendStreamData adds RESET_STREAM, STREAM_DATA_BLOCKED and STREAM
// frames from the send queue, round robin. c.mu is held.
func (c *Conn) appendStreamData(now time.Time, buf []byte, end int, log *sentLog, p *builtPacket) []byte {
	s := &c.streams
	c.queueLazyResetsLocked() // a packet goes out anyway: they ride along
	q := s.sendQueue
	tried := 0
	for len(q) > 0 && tried < len(q) && end-len(buf) > controlRoom {
		if s.rr >= len(q) {
			s.rr = 0
		}
		st := q[s.rr]
		id := uint64(st.id)
		progressed := false
		if code, fs, ok := st.send.NextReset(); ok {
			f := wire.ResetStreamFrame{StreamID: id, ErrorCode: code, FinalSize: fs}
			buf = f.Append(buf)
			log.add(sentFrame{kind: frResetStream, id: id})
			p.ackElic = true
			progressed = true
		}
		if limit, ok := st.send.NextBlocked(); ok && end-len(buf) > controlRoom && !c.config.DisableBlockedFrames {
			f := wire.StreamDataBlockedFrame{StreamID: id, Limit: limit}
			buf = f.Append(buf)
			log.add(sentFrame{kind: frStreamDataBlocked, id: id, off: limit})
			p.ackElic = true
			progressed = true
		}
		overhead := 1 + wire.VarintLen(id) + 8 + 2
		if room := end - len(buf) - overhead; room > 0 {
			if off, data, fin, ok := st.send.NextFrame(room, ^uint64(0)); ok {
				f := wire.StreamFrame{StreamID: id, Offset: off, Data: data, Fin: fin}
				buf = f.Append(buf)
				log.add(sentFrame{kind: frStream, id: id, off: off, n: uint64(len(data)), fin: fin})
				p.ackElic = true
				progressed = true
			}
		}
		if !st.send.HasFrame() {
			st.queued = false
			copy(q[s.rr:], q[s.rr+1:])
			q[len(q)-1] = nil
			q = q[:len(q)-1]
			tried = 0
			continue
		}
		if progressed {
			tried = 0
		} else {
			tried++
		}
		s.rr++
		if !progressed && tried >= len(q) {
			break
		}
	}
	s.sendQueue = q
	return buf
}
