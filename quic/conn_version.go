package quic

import (
	"math/rand/v2"
	"slices"

	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Compatible version negotiation (RFC 9368) between QUIC v1 and v2, and
// the version_information transport parameter that carries it. RFC 9369
// §4: "Any QUIC endpoint that supports QUIC version 2 MUST send, process,
// and validate the version_information transport parameter specified in
// [QUIC-VN] to prevent version downgrade attacks." RFC 9368 is not in the
// specs folder; the sentences attributed to it here are from memory of
// the published text and say so.

// availableVersions returns the versions we would speak, in our order of
// preference: the Available Versions of our version_information.
func (c *Conn) availableVersions() []wire.Version {
	var vs []wire.Version
	for _, v := range c.config.versions(c.isClient) {
		if protect.SupportedVersion(v) && !slices.Contains(vs, wire.Version(v)) {
			vs = append(vs, wire.Version(v))
		}
	}
	return vs
}

// localVersionInformation fills our version_information: the version in
// use (for a server, after any upgrade) and the versions we support.
func (c *Conn) localVersionInformation(p *wire.TransportParameters) {
	if !protect.SupportedVersion(c.version) {
		return
	}
	p.HasVersionInformation = true
	p.VersionInformation = wire.VersionInformation{Chosen: wire.Version(c.version), Available: c.availableVersions()}
}

// handlePeerVersionInformation validates the peer's version_information
// and, at a server, picks the negotiated version (RFC 9368 §2.3, §4).
func (c *Conn) handlePeerVersionInformation(p *wire.TransportParameters) error {
	vnErr := func(format string, args ...any) error {
		return localTransportError(wire.VersionNegotiationError, 0, format, args...)
	}
	if !p.HasVersionInformation {
		// A peer without the parameter (quic-go, for instance) is taken
		// to support only the version in use (RFC 9368 §4, from memory:
		// absence is treated as Chosen Version equal to the version of
		// the packet and no other Available Version). A server that
		// changed version must have sent it.
		if c.isClient && c.version != c.origVersion {
			return vnErr("RFC 9368 §4: server changed version to %#x without version_information", c.version)
		}
		return nil
	}
	vi := &p.VersionInformation
	if !c.isClient {
		// RFC 9368 §4 (from memory): the server validates that the
		// client's Chosen Version matches the version of the packets that
		// carried the ClientHello (the original version); a mismatch is a
		// VERSION_NEGOTIATION_ERROR.
		if uint32(vi.Chosen) != c.origVersion {
			return vnErr("RFC 9368 §4: client Chosen Version %#x differs from the version in use %#x", uint32(vi.Chosen), c.origVersion)
		}
		// RFC 9368 §2.3 (from memory): the server picks its most
		// preferred version among the client's Available Versions that is
		// compatible with the original one; v1 and v2 are compatible in
		// both directions (RFC 9369 §4).
		for _, v := range c.availableVersions() {
			if slices.Contains(vi.Available, v) || uint32(v) == c.origVersion {
				if uint32(v) != c.version {
					return c.serverSwitchVersion(uint32(v))
				}
				return nil
			}
		}
		return nil
	}
	// RFC 9368 §4 (from memory): "clients MUST validate that the server's
	// Chosen Version is equal to the negotiated version; if they do not
	// match, the client MUST close the connection with a version
	// negotiation error".
	if uint32(vi.Chosen) != c.version {
		return vnErr("RFC 9368 §4: server Chosen Version %#x differs from the version in use %#x", uint32(vi.Chosen), c.version)
	}
	if c.gotVN {
		// Downgrade protection after incompatible negotiation: given the
		// server's Available Versions, we must have picked the version we
		// are using.
		for _, v := range c.availableVersions() {
			if slices.Contains(vi.Available, v) {
				if uint32(v) != c.version {
					return vnErr("RFC 9368 §4: Version Negotiation led to %#x but the server supports %#x, which we prefer", c.version, uint32(v))
				}
				break
			}
		}
	}
	return nil
}

// serverSwitchVersion makes a server use version v from now on: Initial
// packets are sent in v (which tells the client), and the Handshake and
// 1-RTT keys, not derived yet, use v's labels. The client may still send
// Initial packets in the original version until it sees ours, so their
// read keys are kept.
func (c *Conn) serverSwitchVersion(v uint32) error {
	sp := &c.spaces[initialSpace]
	c.origInitialRead = sp.readKeys
	old := c.version
	c.version = v
	if err := c.installInitialKeys(c.initialDCID); err != nil {
		c.version = old
		return &TransportError{Code: wire.InternalError, Reason: err.Error()}
	}
	debugf("server upgrades to version %#x", v)
	return nil
}

// clientFollowVersion is called at a client for an Initial packet of a
// version other than ours. If the version is one we offered and the
// packet opens with its Initial keys, the server chose it (RFC 9368
// §2.3): we switch to it and return true.
func (c *Conn) clientFollowVersion(pkt []byte, h *wire.Header) bool {
	v := uint32(h.Version)
	if !c.isClient || h.Type != wire.PacketTypeInitial || c.version != c.origVersion ||
		c.spaces[handshakeSpace].readKeys != nil || !slices.Contains(c.availableVersions(), h.Version) {
		return false
	}
	ck, sk, err := protect.NewInitialKeys(v, c.initialDCID)
	if err != nil {
		return false
	}
	// Trial-open a copy: a packet that does not open changes nothing.
	cp := append([]byte(nil), pkt...)
	pnLen, err := sk.HeaderProtector().Remove(cp, h.PNOffset, true)
	if err != nil {
		return false
	}
	sp := &c.spaces[initialSpace]
	pn := wire.DecodePacketNumber(sp.largestRecv, wire.ReadPacketNumber(cp[h.PNOffset:], pnLen), pnLen*8)
	if _, err := sk.OpenPacket(cp, h.PNOffset+pnLen, pn); err != nil {
		return false
	}
	debugf("client follows the server to version %#x", v)
	c.version = v
	sp.writeKeys, sp.readKeys = ck, sk
	return true
}

// greaseFixedBit reports whether to send the next packet of space with
// the QUIC bit cleared. RFC 9287 §3.1 (not in the specs folder; from
// memory): an endpoint that receives grease_quic_bit "MAY set the QUIC
// Bit to an unpredictable value"; before it has the peer's transport
// parameters it sets the bit. We grease Handshake and 1-RTT packets only:
// Initial packets may reach the peer before it can know we read its
// parameters, and a client's Initial precedes them.
func (c *Conn) greaseFixedBit(space spaceID) bool {
	if space == initialSpace || !c.havePeerTP || !c.peerParams.tp.GreaseQUICBit {
		return false
	}
	return rand.Uint32()&1 == 0
}
