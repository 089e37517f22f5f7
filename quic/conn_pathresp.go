package quic

import (
	"net/netip"
	"time"

	"github.com/quiver-quic/quiver/quic/recovery"
	"github.com/quiver-quic/quiver/quic/wire"
)

// pathResponse is a PATH_RESPONSE owed for a PATH_CHALLENGE, with the
// path the challenge arrived on.
type pathResponse struct {
	data  [8]byte
	addr  netip.AddrPort // the peer address the challenge came from
	ep    *Endpoint      // the local endpoint that received it; nil: the current one
	recvd int            // size of the challenge's datagram, for the amplification limit
}

// maxPathResponses bounds the responses waiting to be sent; a peer that
// sends more challenges than that in one turn gets answers to the latest.
const maxPathResponses = 8

// onPathChallenge queues the PATH_RESPONSE for a PATH_CHALLENGE that
// arrived from addr on ep in a datagram of recvd bytes.
func (s *cidState) onPathChallenge(data [8]byte, addr netip.AddrPort, ep *Endpoint, recvd int) {
	if len(s.pathResponse) >= maxPathResponses {
		s.pathResponse = s.pathResponse[1:]
	}
	s.pathResponse = append(s.pathResponse, pathResponse{data: data, addr: addr, ep: ep, recvd: recvd})
}

// sendOffPathResponses sends, each in a datagram of its own, the
// PATH_RESPONSE frames owed to challenges that arrived on a path other
// than the one the connection sends on (a peer probing a new address,
// RFC 9000 §9.1). RFC 9000 §8.2.2: "An endpoint MUST NOT send more than
// one PATH_RESPONSE frame in response to one PATH_CHALLENGE frame"; §9.3.3
// and §8.2: the response is "sent on the network path where the
// PATH_CHALLENGE was received", which is what lets the peer validate that
// path. Responses for the current path stay queued for the next packet.
func (c *Conn) sendOffPathResponses(now time.Time) {
	s := &c.cids
	kept := s.pathResponse[:0]
	for _, r := range s.pathResponse {
		ep := r.ep
		if ep == nil {
			ep = c.ep
		}
		if r.addr == c.peerAddr && ep == c.ep || !r.addr.IsValid() {
			kept = append(kept, r)
			continue
		}
		c.sendPathResponseOn(now, ep, r)
	}
	clear(s.pathResponse[len(kept):])
	s.pathResponse = kept
}

// sendPathResponseOn seals a 1-RTT packet holding one PATH_RESPONSE and
// writes it to r.addr from ep.
func (c *Conn) sendPathResponseOn(now time.Time, ep *Endpoint, r pathResponse) {
	k := c.appKeys.Write()
	if k == nil || c.sending0RTT() {
		// RFC 9000 §12.4 Table 3: PATH_RESPONSE goes only in 1-RTT
		// packets.
		return
	}
	sp := &c.spaces[appSpace]
	pn := sp.nextPN
	largestAcked := c.loss.ld.LargestAcked(recovery.SpaceAppData)
	pnLen := wire.EncodedPacketNumberLen(pn, uint64(largestAcked))
	if largestAcked < 0 {
		pnLen = wire.EncodedPacketNumberLen(pn+1, 0)
	}
	// RFC 9000 §9.5: "an endpoint MUST NOT reuse a connection ID when
	// sending to more than one destination address": a spare connection ID
	// of the peer's, when there is one, for the other path.
	dcid := c.peerCID
	if len(c.cids.peer) > 0 {
		dcid = c.cids.peer[0].cid
	}
	h := wire.ShortHeader{DCID: dcid, PacketNumber: pn, PNLen: pnLen, KeyPhase: c.appKeys.Phase() == 1, ClearFixedBit: c.greaseFixedBit(appSpace)}
	buf, pnOff := h.Append(c.sendBuf[:0])
	log := &c.loss.logs[appSpace]
	log.begin()
	f := wire.PathResponseFrame{Data: r.data}
	buf = f.Append(buf)
	log.add(sentFrame{kind: frOther})
	// RFC 9000 §8.2.2: "An endpoint MUST expand datagrams that contain a
	// PATH_RESPONSE frame to at least the smallest allowed maximum
	// datagram size of 1200 bytes", and §8.2.1's exception, "unless the
	// anti-amplification limit for the path does not permit sending a
	// datagram of this size": the path is unvalidated, so three times the
	// challenge's datagram (§8.1, §9.3.1).
	want := min(minInitialDatagramSize, 3*r.recvd)
	for len(buf)+16 < want || len(buf)-pnOff < 4 {
		buf = append(buf, 0) // PADDING; also the header protection sample (RFC 9001 §5.4.2)
	}
	end := len(buf)
	buf = append(buf, make([]byte, 16)...)
	if _, err := k.SealPacket(buf[:end:end+16], pnOff, pn); err != nil {
		log.fEnd = log.openStart
		return
	}
	sp.nextPN++
	log.commit(pn)
	c.loss.ld.OnPacketSent(recovery.SpaceAppData, recovery.SentPacket{PacketNumber: int64(pn), Size: uint16(len(buf)), AckEliciting: true, InFlight: true}, now)
	c.onSealed(now, pn)
	c.stats.sent++
	ep.writeTo(buf, r.addr)
	c.sendBuf = buf[:0]
}
