package quic

import (
	"errors"
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

// errPathValidationFailed ends a connection whose peer moved to an address
// that did not validate, with no validated address to go back to.
var errPathValidationFailed = errors.New("quic: path validation of the peer's new address failed")

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
// RFC 9000 §9.1), and the PATH_CHALLENGE for a previous path. RFC 9000
// §8.2.2: "An endpoint MUST NOT send more than one PATH_RESPONSE frame in
// response to one PATH_CHALLENGE frame"; §8.2: the response is "sent on
// the network path where the PATH_CHALLENGE was received", which is what
// lets the peer validate that path. Responses for the current path stay
// queued for the next packet.
func (c *Conn) sendOffPathResponses(now time.Time) {
	s := &c.cids
	kept := s.pathResponse[:0]
	for _, r := range s.pathResponse {
		if c.onCurrentPath(r) {
			kept = append(kept, r)
			continue
		}
		c.sendPathFrameOn(now, r, &wire.PathResponseFrame{Data: r.data}, 3*r.recvd)
	}
	clear(s.pathResponse[len(kept):])
	s.pathResponse = kept
	for _, r := range s.prevPathChallenge {
		if c.onCurrentPath(r) {
			// The peer came back before the challenge left: it goes
			// with the current path's frames.
			s.pathChallenge = append(s.pathChallenge, r.data)
			continue
		}
		c.sendPathFrameOn(now, r, &wire.PathChallengeFrame{Data: r.data}, r.recvd)
	}
	s.prevPathChallenge = s.prevPathChallenge[:0]
}

// onCurrentPath reports whether r's path is the one the connection sends
// on.
func (c *Conn) onCurrentPath(r pathResponse) bool {
	ep := r.ep
	if ep == nil {
		ep = c.ep
	}
	return r.addr == c.peerAddr && ep == c.sendEndpoint() || !r.addr.IsValid()
}

// sendPathFrameOn seals a 1-RTT packet holding one path frame and writes
// it to r.addr from r.ep, padded towards 1200 bytes within limit bytes.
func (c *Conn) sendPathFrameOn(now time.Time, r pathResponse, f wire.Frame, limit int) {
	ep := r.ep
	if ep == nil {
		ep = c.ep
	}
	k := c.appKeys.Write()
	if k == nil || c.sending0RTT() {
		// RFC 9000 §12.4 Table 3: PATH_RESPONSE goes only in 1-RTT
		// packets.
		return
	}
	// RFC 9000 §9.5: "an endpoint MUST NOT reuse a connection ID when
	// sending to more than one destination address": a spare connection ID
	// of the peer's, when there is one, for the other path.
	dcid := c.peerCID
	if len(c.cids.peer) > 0 {
		dcid = c.cids.peer[0].cid
	}
	// RFC 9000 §8.2.1: "An endpoint MUST expand datagrams that contain a
	// PATH_CHALLENGE frame to at least the smallest allowed maximum
	// datagram size of 1200 bytes, unless the anti-amplification limit for
	// the path does not permit sending a datagram of this size"; §8.2.2
	// says the same of PATH_RESPONSE. On an unvalidated path the limit is
	// three times what arrived from it (§8.1, §9.3.1).
	buf := c.buildLonePacket(now, dcid, f.Append(nil), min(minInitialDatagramSize, limit), lonePathFrame)
	if buf == nil {
		return
	}
	c.stats.sent++
	ep.writeTo(buf, r.addr)
}

// pathValidationTimeout is how long validation of a peer's new address
// may take. RFC 9000 §8.2.4: "A value of three times the larger of the
// current PTO or the PTO for the new path (using kInitialRtt, as defined
// in [QUIC-RECOVERY]) is RECOMMENDED."
func (c *Conn) pathValidationTimeout() time.Duration {
	fresh := recovery.NewRTT(0)
	initial := fresh.PTO(c.loss.ld.MaxAckDelay())
	return 3 * max(c.loss.pto(), initial)
}

// onPathValidationTimer abandons the validation of the peer's new
// address once its time is up. RFC 9000 §9.3.2: "an endpoint MUST revert
// to using the last validated peer address when validation of a new peer
// address fails ... If an endpoint has no state about the last validated
// peer address, it MUST close the connection silently by discarding all
// connection state."
func (c *Conn) onPathValidationTimer(now time.Time) {
	s := &c.cids
	if s.challengeDeadline.IsZero() || now.Before(s.challengeDeadline) {
		return
	}
	s.challengeDeadline = time.Time{}
	if !s.challengePending {
		return
	}
	s.challengePending = false
	s.newAddrIP = false
	if !s.lastValidated.IsValid() {
		debugf("validation of %v failed and no address was validated before: closing silently", c.peerAddr)
		c.closeErr = errPathValidationFailed
		c.closing.done = true
		return
	}
	debugf("validation of %v failed: back to %v", c.peerAddr, s.lastValidated)
	c.mu.Lock()
	c.peerAddr = s.lastValidated
	c.mu.Unlock()
	// §9.5: a new connection ID for the (again) different address.
	s.usePeerCID()
	c.addrValidated = true
	c.stats.migrations++
}
