package quic

import (
	"errors"
	"time"

	"github.com/quiver-quic/quiver/quic/recovery"
	"github.com/quiver-quic/quiver/quic/wire"
)

// frameKind names what a sent frame was, to act on its acknowledgment or
// loss.
type frameKind uint8

const (
	frPing frameKind = iota
	frAck
	frCrypto
	frStream
	frResetStream
	frStopSending
	frMaxData
	frMaxStreamData
	frMaxStreams
	frDataBlocked
	frStreamDataBlocked
	frStreamsBlocked
	frHandshakeDone
	frNewConnectionID
	frRetireConnectionID
	frAckFrequency
	frOther
)

// sentFrame is the compact record of one sent frame. Its fields mean what
// the kind says: stream ID or sequence number in id; offset, limit or
// largest acknowledged in off; length in n.
type sentFrame struct {
	kind frameKind
	fin  bool
	bidi bool
	id   uint64
	off  uint64
	n    uint64
}

// pktRec is what the loss state keeps of a sent packet: where its frames
// are in the frame ring.
type pktRec struct {
	start uint64 // absolute index of the first frame
	count uint32
	done  bool
}

// sentLog keeps the frames of the packets of one space that are not yet
// acknowledged or lost. Packet numbers are consecutive, so records are a
// ring indexed by pn-base; frames are a ring indexed by absolute position.
// Both rings grow to the largest window in flight and are then reused:
// nothing is allocated per packet in steady state.
type sentLog struct {
	pkts   []pktRec
	pHead  int
	pN     int
	base   uint64
	frames []sentFrame
	fStart uint64
	fEnd   uint64
	// open is the packet being built: frames appended since begin.
	openStart uint64
}

func (l *sentLog) begin() { l.openStart = l.fEnd }

func (l *sentLog) add(f sentFrame) {
	if l.fEnd-l.fStart == uint64(len(l.frames)) {
		n := max(2*len(l.frames), 4) // small while idle; doubles under load
		nf := make([]sentFrame, n)
		for i := l.fStart; i < l.fEnd; i++ {
			nf[i&uint64(n-1)] = l.frames[i&uint64(len(l.frames)-1)]
		}
		l.frames = nf
	}
	l.frames[l.fEnd&uint64(len(l.frames)-1)] = f
	l.fEnd++
}

// commit records packet pn with the frames added since begin.
func (l *sentLog) commit(pn uint64) {
	if l.pN == 0 {
		l.base = pn
		l.pHead = 0
	}
	for l.base+uint64(l.pN) < pn {
		l.push(pktRec{start: l.openStart, done: true})
	}
	l.push(pktRec{start: l.openStart, count: uint32(l.fEnd - l.openStart)})
}

func (l *sentLog) push(r pktRec) {
	if l.pN == len(l.pkts) {
		n := max(2*len(l.pkts), 4)
		np := make([]pktRec, n)
		for i := 0; i < l.pN; i++ {
			np[i] = l.pkts[(l.pHead+i)&(len(l.pkts)-1)]
		}
		l.pkts = np
		l.pHead = 0
	}
	l.pkts[(l.pHead+l.pN)&(len(l.pkts)-1)] = r
	l.pN++
}

// take returns the frames of pn and marks it done; ok is false when pn is
// unknown or already done.
func (l *sentLog) take(pn uint64, fn func(f *sentFrame)) bool {
	if l.pN == 0 || pn < l.base || pn >= l.base+uint64(l.pN) {
		return false
	}
	r := &l.pkts[(l.pHead+int(pn-l.base))&(len(l.pkts)-1)]
	if r.done {
		return false
	}
	r.done = true
	for i := r.start; i < r.start+uint64(r.count); i++ {
		fn(&l.frames[i&uint64(len(l.frames)-1)])
	}
	// Release the prefix of resolved packets and their frames.
	for l.pN > 0 && l.pkts[l.pHead].done {
		l.pHead = (l.pHead + 1) & (len(l.pkts) - 1)
		l.base++
		l.pN--
	}
	if l.pN > 0 {
		l.fStart = l.pkts[l.pHead].start
	} else {
		l.fStart = l.fEnd
	}
	return true
}

// lossState wraps the recovery package's loss detector and remembers what
// each packet carried.
type lossState struct {
	ld     *recovery.LossDetector
	cc     recovery.CongestionController
	logs   [numSpaces]sentLog
	probes [numSpaces]int // probe packets owed after a PTO
	// earlyResends counts the server's early Initial CRYPTO resends
	// (onClientInitialWithoutProgress).
	earlyResends int
	ackF         recovery.AckFrame
	// noRetransmit is a probe switch: lost frames are not sent again.
	noRetransmit bool
	pacer        pacer
	// noPacing: Config.DisablePacing.
	noPacing bool
}

func (l *lossState) init(c *Conn, now time.Time) {
	if c.config.congestion() == NewReno {
		l.cc = recovery.NewNewReno(maxDatagramSize)
	} else {
		l.cc = recovery.NewCubic(maxDatagramSize)
	}
	if n := c.config.InitialWindowPackets; n > 0 {
		if w, ok := l.cc.(interface{ SetInitialWindowPackets(int) }); ok {
			w.SetInitialWindowPackets(n)
		}
	}
	l.ld = recovery.NewLossDetector(recovery.LossDetectorConfig{IsServer: !c.isClient, CC: l.cc})
	l.pacer.init()
	l.noPacing = c.config.DisablePacing
	l.noRetransmit = c.policy.NoRetransmit
}

func (l *lossState) pto() time.Duration {
	return l.ld.RTT().PTO(l.ld.MaxAckDelay())
}

func (l *lossState) deadline() time.Time { return l.ld.LossDetectionTimer() }

func (l *lossState) onTimer(now time.Time, c *Conn) {
	t := l.ld.LossDetectionTimer()
	if t.IsZero() || now.Before(t) {
		return
	}
	res := l.ld.OnLossDetectionTimeout(now)
	switch res.Action {
	case recovery.TimeoutLoss:
		for _, p := range res.Lost {
			c.onPacketLost(now, spaceID(res.Space), p)
		}
	case recovery.TimeoutProbe:
		c.stats.ptos++
		sp := spaceID(res.Space)
		if res.AntiDeadlock && !c.isClient {
			return
		}
		if c.spaces[sp].discarded || !c.spaces[sp].canWrite() && sp != appSpace {
			// Probe in the next space that can send.
			for s := sp; s < numSpaces; s++ {
				if c.spaces[s].canWrite() || (s == appSpace && c.appKeys.Write() != nil) {
					sp = s
					break
				}
			}
		}
		l.probes[sp] = res.Probes
		// RFC 9002 §6.2.4: "An endpoint SHOULD include new data in packets
		// that are sent on PTO expiration. Previously sent data MAY be
		// sent if no new data can be sent." We resend unacknowledged
		// CRYPTO data, which is what a stalled handshake needs.
		c.requeueCrypto(sp)
		// RFC 9002 §6.2.4: "In addition to sending data in the packet
		// number space for which the timer expired, the sender SHOULD send
		// ack-eliciting packets from other packet number spaces with
		// in-flight data, coalescing packets if possible. This is
		// particularly valuable when the server has both Initial and
		// Handshake data in flight ... because the peer might only have
		// receive keys for one of the two packet number spaces." Without
		// it a server whose Initial PTO was last re-armed probes only in
		// Handshake, which a client without the ServerHello cannot read.
		for o := initialSpace; o < appSpace; o++ {
			if o == sp || c.spaces[o].discarded || !c.spaces[o].canWrite() || !l.ld.HasAckElicitingInFlight(recovery.Space(o)) {
				continue
			}
			l.probes[o] = max(l.probes[o], res.Probes)
			c.requeueCrypto(o)
		}
		if sp == appSpace {
			c.requeueOutstanding(sp, res.Probes)
			if c.havePeerTP && c.peerParams.tp.HasMinAckDelay && c.handshakeConfirmed {
				// docs/ack-frequency-engine.md §4: PTO probes carry IMMEDIATE_ACK
				// when the peer supports it, for a prompt answer.
				c.ackFreq.immediateAck = true
			}
		}
		c.qlogPTO(now, sp)
	}
}

// maxEarlyCryptoResends bounds how often a server resends its Initial
// CRYPTO data before its PTO because a client Initial showed the client
// lacks it (RFC 9002 §6.2.3: "for a limited number of times per
// connection ... An endpoint that always retransmits packets in response
// to receiving packets that it cannot process risks creating an infinite
// exchange of packets").
const maxEarlyCryptoResends = 2

// onClientInitialWithoutProgress runs at a server for an ack-eliciting
// client Initial packet that brought no new CRYPTO data: the client's
// probe or retransmission, sent because it has not heard the ServerHello.
// RFC 9002 §6.2.3: "When a server receives an Initial packet containing
// duplicate CRYPTO data, it can assume the client did not receive all of
// the server's CRYPTO data sent in Initial packets ... an endpoint MAY,
// for a limited number of times per connection, send a packet containing
// unacknowledged CRYPTO data earlier than the PTO expiry, subject to the
// address validation limits". A client Initial holding only PING is the
// same signal: a client with Handshake keys would probe in Handshake
// (§6.2.2.1).
func (c *Conn) onClientInitialWithoutProgress() {
	l := &c.loss
	s := &c.spaces[initialSpace]
	if c.isClient || s.discarded || s.crypto.sent == 0 || l.earlyResends >= maxEarlyCryptoResends ||
		!l.ld.HasAckElicitingInFlight(recovery.SpaceInitial) {
		return
	}
	l.earlyResends++
	c.requeueCrypto(initialSpace)
}

// requeueCrypto marks every sent CRYPTO byte of a space for sending
// again, for a probe.
func (c *Conn) requeueCrypto(sp spaceID) {
	s := &c.spaces[sp]
	if sp == appSpace || s.discarded || s.crypto.sent == 0 {
		return
	}
	s.crypto.lost = append(s.crypto.lost[:0], byteRange{0, s.crypto.sent})
}

// requeueOutstanding queues the frames of the oldest n packets still in
// flight in a space for sending again, without declaring them lost, so
// that PTO probes carry data the peer may be missing (RFC 9002 §6.2.4:
// "Previously sent data MAY be sent if no new data can be sent").
func (c *Conn) requeueOutstanding(sp spaceID, n int) {
	l := &c.loss.logs[sp]
	for i := 0; i < l.pN && n > 0; i++ {
		r := &l.pkts[(l.pHead+i)&(len(l.pkts)-1)]
		if r.done || r.count == 0 {
			continue
		}
		n--
		for j := r.start; j < r.start+uint64(r.count); j++ {
			f := l.frames[j&uint64(len(l.frames)-1)]
			switch f.kind {
			case frStream, frResetStream, frMaxData, frMaxStreamData, frStopSending, frMaxStreams:
				c.streams.onFrameLost(&f)
			case frHandshakeDone:
				c.handshakeDonePending = true
			}
		}
	}
}

// handleAck processes an ACK frame.
func (c *Conn) handleAck(now time.Time, space spaceID, f *wire.AckFrame) error {
	l := &c.loss
	l.ackF.Ranges = l.ackF.Ranges[:0]
	for _, r := range f.Ranges {
		l.ackF.Ranges = append(l.ackF.Ranges, recovery.AckRange{Smallest: int64(r.Smallest), Largest: int64(r.Largest)})
	}
	exp := uint8(3)
	if c.havePeerTP {
		exp = c.peerParams.ackDelayExponent
	}
	l.ackF.AckDelay = time.Duration(f.AckDelay<<exp) * time.Microsecond
	l.ackF.HasECN, l.ackF.ECT0, l.ackF.ECT1, l.ackF.CE = f.ECN, f.ECT0, f.ECT1, f.ECNCE
	res, err := l.ld.OnAckReceived(recovery.Space(space), l.ackF, now)
	if err != nil {
		if errors.Is(err, recovery.ErrAckOfUnsentPacket) {
			// RFC 9000 §13.1: "An endpoint SHOULD treat receipt of an
			// acknowledgment for a packet it did not send as a connection
			// error of type PROTOCOL_VIOLATION".
			return localTransportError(wire.ProtocolViolation, uint64(f.Type()), "RFC 9000 §13.1: ACK of a packet never sent")
		}
		return localTransportError(wire.FrameEncodingError, uint64(f.Type()), "%v", err)
	}
	if len(res.Acked) > 0 {
		c.ecn.onAck(f.ECN, f.ECT0, f.ECT1, f.ECNCE)
		if c.isClient && space == handshakeSpace {
			// RFC 9002 §6.2.2.1: the client's anti-deadlock PTO is needed
			// only "if the client has not received an acknowledgment for
			// any of its Handshake packets and the handshake is not
			// confirmed".
			l.ld.SetPeerCompletedAddressValidation(now)
		}
	}
	for _, p := range res.Acked {
		c.onPacketAcked(now, space, p)
	}
	for _, p := range res.Lost {
		c.onPacketLost(now, space, p)
	}
	if len(res.Acked) > 0 {
		c.qlogMetrics(now)
	}
	return nil
}

func (c *Conn) onPacketAcked(now time.Time, space spaceID, p recovery.SentPacket) {
	if space == appSpace && p.AckEliciting {
		c.ackFreq.ackedAppPackets++
	}
	if space == appSpace {
		c.pmtudOnAcked(now, p)
	}
	c.loss.logs[space].take(uint64(p.PacketNumber), func(f *sentFrame) {
		switch f.kind {
		case frAck:
			c.spaces[space].acks.onAckAcked(f.off)
		case frStream:
			c.streams.onStreamAcked(f)
		case frResetStream:
			c.streams.onResetAcked(f)
		}
	})
}

func (c *Conn) onPacketLost(now time.Time, space spaceID, p recovery.SentPacket) {
	c.stats.lost++
	if space == appSpace {
		c.pmtudOnLost(now, p)
	}
	c.qlogPacketLost(now, space, uint64(p.PacketNumber))
	c.loss.logs[space].take(uint64(p.PacketNumber), func(f *sentFrame) {
		if c.loss.noRetransmit {
			return
		}
		switch f.kind {
		case frCrypto:
			c.spaces[space].crypto.onLost(f.off, f.n)
		case frHandshakeDone:
			c.handshakeDonePending = true
		case frNewConnectionID, frRetireConnectionID:
			c.cids.onLost(f)
		case frAckFrequency:
			c.onAckFrequencyLost(f.id)
		default:
			c.streams.onFrameLost(f)
		}
	})
}

// discardSpace drops the keys and recovery state of Initial or Handshake
// (RFC 9001 §4.9).
func (c *Conn) discardSpace(now time.Time, id spaceID) {
	sp := &c.spaces[id]
	if sp.discarded {
		return
	}
	sp.discarded = true
	sp.readKeys, sp.writeKeys = nil, nil
	if id == initialSpace {
		c.origInitialRead = nil
	}
	c.loss.ld.OnPacketNumberSpaceDiscarded(recovery.Space(id), now)
	// The frames of the space's packets still in flight are dropped with
	// them, neither released nor sent again. The storage goes too, so that
	// a connection keeps nothing of the handshake's spaces: the sent-frame
	// log and the CRYPTO data, whose send side holds every byte TLS gave
	// (a certificate chain, on a server).
	c.loss.logs[id] = sentLog{}
	sp.crypto = cryptoStream{}
	sp.acks.release()
	c.loss.probes[id] = 0
	if id == handshakeSpace {
		c.loss.ld.SetHandshakeConfirmed(now)
	}
}
