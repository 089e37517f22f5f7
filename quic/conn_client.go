package quic

import (
	"bytes"
	"time"

	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// handleVersionNegotiation handles a Version Negotiation packet at the
// client (RFC 9000 §6.2).
func (c *Conn) handleVersionNegotiation(now time.Time, h *wire.Header) {
	// RFC 9000 §6.2: "A client MUST discard any Version Negotiation packet
	// if it has received and successfully processed any other packet,
	// including an earlier Version Negotiation packet."
	if !c.isClient || c.gotPeerPacket || c.gotVN {
		return
	}
	// RFC 9000 §17.2.1: the DCID and SCID echo ours.
	if !bytes.Equal(h.DCID, c.localCID) || !bytes.Equal(h.SCID, c.origDCID) {
		return
	}
	// RFC 9000 §6.2: "A client MUST discard a Version Negotiation packet
	// that lists the QUIC version selected by the client."
	if h.Versions.Contains(wire.Version(c.version)) {
		return
	}
	// RFC 8999 §6: "An endpoint MUST ignore a packet that contains no
	// Supported Version fields or contains a truncated Supported Version
	// value." The abandonment RFC 9000 §6.2 asks for applies to a packet
	// that is a Version Negotiation packet in the sense of RFC 8999; an
	// empty one is not, so the client keeps waiting (a truncated list
	// already fails wire.ParseHeader). Ignoring it also leaves gotVN
	// unset: a real Version Negotiation may still follow.
	if h.Versions.Len() == 0 {
		return
	}
	c.gotVN = true
	var theirs []uint32
	for v := range h.Versions.All() {
		theirs = append(theirs, uint32(v))
	}
	ours := c.config.versions(true)
	for _, v := range ours {
		if h.Versions.Contains(wire.Version(v)) && protect.SupportedVersion(v) {
			c.restartWithVersion(now, v)
			return
		}
	}
	// No common version: give up without sending anything (there is no
	// key the server would accept).
	c.closeErr = &VersionNegotiationError{Ours: ours, Theirs: theirs}
	c.closing.phase = phaseDraining
	c.closing.done = true
	c.closing.signalSent()
}

// restartWithVersion starts the handshake again with version v after a
// Version Negotiation packet.
func (c *Conn) restartWithVersion(now time.Time, v uint32) {
	debugf("%v restart with version %#x", now, v)
	c.version = v
	c.tls.Close()
	c.clientRandom = nil
	for i := range c.spaces {
		c.spaces[i] = packetSpace{}
		c.spaces[i].init(spaceID(i))
		c.spaces[i].acks.init(spaceID(i), c.config)
		c.spaces[i].acks.disabled = c.policy.NoAcks
	}
	c.loss = lossState{}
	c.loss.init(c, now)
	if err := c.installInitialKeys(c.initialDCID); err != nil {
		c.closeLocal(now, &TransportError{Code: wire.InternalError, Reason: err.Error()})
		return
	}
	if err := c.startTLS(now); err != nil {
		c.closeLocal(now, err)
	}
}

// handleRetry handles a Retry packet at the client (RFC 9000 §17.2.5.2).
func (c *Conn) handleRetry(now time.Time, pkt []byte, h *wire.Header) {
	// "A client MUST accept and process at most one Retry packet for each
	// connection attempt. After the client has received and processed an
	// Initial or Retry packet from the server, it MUST discard any
	// subsequent Retry packets that it receives."
	if !c.isClient || c.gotRetry || c.gotPeerPacket {
		return
	}
	if uint32(h.Version) != c.version {
		return
	}
	// "Clients MUST discard Retry packets that have a Retry Integrity Tag
	// that cannot be validated."
	if err := protect.VerifyRetry(c.version, c.origDCID, pkt); err != nil {
		return
	}
	// "A client MUST discard a Retry packet with a zero-length Retry Token
	// field." RFC 9000 §7.3 and §17.2.5.1: a Retry whose SCID equals the
	// DCID the client sent is invalid.
	if len(h.Token) == 0 || bytes.Equal(h.SCID, c.initialDCID) {
		return
	}
	c.gotRetry = true
	c.retrySCID = append([]byte(nil), h.SCID...)
	c.retryToken = append([]byte(nil), h.Token...)
	// "The client MUST use the value from the Source Connection ID field
	// of the Retry packet in the Destination Connection ID field of
	// subsequent packets that it sends."
	c.peerCID = c.retrySCID
	c.initialDCID = c.retrySCID
	if err := c.installInitialKeys(c.initialDCID); err != nil {
		return
	}
	// Send the ClientHello again, in new Initial packets; the packet
	// number keeps increasing ("the client MUST NOT reset the packet
	// number for any packet number space after processing a Retry").
	c.requeueCrypto(initialSpace)
	// Frames a probe injected in 0-RTT packets were discarded with them.
	if len(c.probeRT.injected0RTT) > 0 {
		c.probeRT.inject[appSpace] = append(c.probeRT.injected0RTT, c.probeRT.inject[appSpace]...)
		c.probeRT.injected0RTT = nil
	}
}
