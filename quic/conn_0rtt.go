package quic

import (
	"bytes"
	"crypto/tls"
	"time"

	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// 0-RTT (RFC 9001 §4.6, RFC 9000 §7.4.1). A client that resumes a session
// whose ticket allows early data sends application data in 0-RTT packets
// before the handshake completes, under the transport parameters it
// remembered from the connection that gave it the ticket. A server accepts
// 0-RTT only when its current parameters are those it gave then.

// tpExtraPrefix marks our entry in tls.SessionState.Extra.
var tpExtraPrefix = []byte("quiver-0rtt-tp\x00")

// rememberedParams encodes the transport parameters a client must
// remember for 0-RTT (RFC 9000 §7.4.1: "the client remembers ...
// active_connection_id_limit, initial_max_data,
// initial_max_stream_data_bidi_local, initial_max_stream_data_bidi_remote,
// initial_max_stream_data_uni, initial_max_streams_bidi,
// initial_max_streams_uni, max_datagram_frame_size"). min_ack_delay is
// left out on purpose: "Endpoints MUST NOT remember the value of the
// min_ack_delay transport parameter they received for use in a subsequent
// connection" (draft-ietf-quic-ack-frequency-14 §3), so ACK_FREQUENCY and
// IMMEDIATE_ACK never go in 0-RTT (and wire.FrameType.AllowedIn rejects
// them there on receipt).
//
// The entry starts with the QUIC version of the connection that issued the
// ticket. RFC 9369 §5: "TLS session tickets and NEW_TOKEN tokens are
// specific to the QUIC version of the connection that provided them.
// Clients MUST NOT use a session ticket or token from a QUIC version 1
// connection to initiate a QUIC version 2 connection, and vice versa." and
// "Servers MUST validate the originating version of any session ticket or
// token and not accept one issued from a different version."
func rememberedParams(p *wire.TransportParameters, version uint32) []byte {
	var r wire.TransportParameters
	r.SetDefaults()
	r.ActiveConnectionIDLimit = p.ActiveConnectionIDLimit
	r.InitialMaxData = p.InitialMaxData
	r.InitialMaxStreamDataBidiLocal = p.InitialMaxStreamDataBidiLocal
	r.InitialMaxStreamDataBidiRemote = p.InitialMaxStreamDataBidiRemote
	r.InitialMaxStreamDataUni = p.InitialMaxStreamDataUni
	r.InitialMaxStreamsBidi = p.InitialMaxStreamsBidi
	r.InitialMaxStreamsUni = p.InitialMaxStreamsUni
	r.HasMaxDatagramFrameSize = p.HasMaxDatagramFrameSize
	r.MaxDatagramFrameSize = p.MaxDatagramFrameSize
	b := append([]byte(nil), tpExtraPrefix...)
	b = append(b, byte(version>>24), byte(version>>16), byte(version>>8), byte(version))
	return append(b, r.Marshal()...)
}

// rememberedVersion splits an entry made by rememberedParams into the
// version of the connection that issued it and the encoded parameters.
func rememberedVersion(rem []byte) (version uint32, params []byte, ok bool) {
	b := rem[len(tpExtraPrefix):]
	if len(b) < 4 {
		return 0, nil, false
	}
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), b[4:], true
}

// versionedSessionCache hands out only the sessions a connection of one
// QUIC version may use (RFC 9369 §5, above): a client's session whose
// ticket came from another version is not offered at all, so the
// connection falls back to a full handshake.
type versionedSessionCache struct {
	tls.ClientSessionCache
	version uint32
}

func (v versionedSessionCache) Get(key string) (*tls.ClientSessionState, bool) {
	cs, ok := v.ClientSessionCache.Get(key)
	if !ok || cs == nil {
		return cs, ok
	}
	_, st, err := cs.ResumptionState()
	if err != nil || st == nil {
		return cs, ok
	}
	if rem := findRemembered(st.Extra); rem != nil {
		if ver, _, ok := rememberedVersion(rem); !ok || ver != v.version {
			return nil, false
		}
	}
	return cs, ok
}

func findRemembered(extra [][]byte) []byte {
	for _, e := range extra {
		if bytes.HasPrefix(e, tpExtraPrefix) {
			return e
		}
	}
	return nil
}

// sendSessionTicket issues a ticket once the server's handshake is
// complete; it allows 0-RTT when Config.Allow0RTT is set.
func (c *Conn) sendSessionTicket() {
	if c.config.TLSConfig.SessionTicketsDisabled {
		return
	}
	p, err := wire.ParseTransportParameters(c.localTransportParams(), true)
	if err != nil {
		return
	}
	c.tls.SendSessionTicket(tls.QUICSessionTicketOptions{EarlyData: c.config.Allow0RTT, Extra: [][]byte{rememberedParams(p, c.version)}})
}

// onResumeSession decides whether 0-RTT is used with a resumed session.
func (c *Conn) onResumeSession(s *tls.SessionState) {
	rem := findRemembered(s.Extra)
	if c.isClient {
		if !c.config.Allow0RTT || rem == nil {
			s.EarlyData = false
			return
		}
		ver, enc, ok := rememberedVersion(rem)
		if !ok || ver != c.origVersion && !c.policy.AnyVersionTickets {
			s.EarlyData = false
			return
		}
		p, err := wire.ParseTransportParameters(enc, false)
		if err != nil {
			s.EarlyData = false
			return
		}
		c.remembered = p
		return
	}
	// Server: accept only if the parameters the client remembered are
	// still ours (RFC 9000 §7.4.1: "a server MUST NOT ... reduce any
	// limits ... if it accepts 0-RTT data").
	// The ticket must come from a connection of the version this one
	// started in (RFC 9369 §5); the version is part of the entry.
	p, err := wire.ParseTransportParameters(c.localTransportParams(), true)
	if !c.config.Allow0RTT || err != nil || rem == nil || !bytes.Equal(rem, rememberedParams(p, c.origVersion)) {
		s.EarlyData = false
	}
}

// onStoreSession keeps the server's parameters with the ticket.
func (c *Conn) onStoreSession(s *tls.SessionState) {
	if c.havePeerTP && findRemembered(s.Extra) == nil {
		// After compatible version negotiation the ticket "maps to the
		// negotiated version rather than the original one" (RFC 9369 §5).
		s.Extra = append(s.Extra, rememberedParams(c.peerParams.tp, c.version))
	}
	c.tls.StoreSession(s)
}

// installEarlyKeys installs the 0-RTT keys: the client writes with them,
// the server reads.
func (c *Conn) installEarlyKeys(now time.Time, suite uint16, secret []byte, write bool) error {
	// 0-RTT is sent in the client's original version, even when the
	// server then moves to another one (RFC 9368 §2.3).
	k, err := protect.NewKeys(c.origVersion, suite, secret)
	if err != nil {
		return &TransportError{Code: wire.InternalError, Reason: err.Error()}
	}
	if write {
		c.earlyWrite = k
		if c.remembered != nil {
			// Streams and flow control start from the remembered
			// parameters until the server's new ones arrive.
			c.streams.setPeerParams(c.remembered)
		}
		c.markReady()
	} else {
		c.earlyRead = k
		// 0-RTT is accepted: let the application see the connection now,
		// so that it can answer early requests in 0.5-RTT data.
		st := c.tls.ConnectionState()
		c.mu.Lock()
		c.alpn = st.NegotiatedProtocol
		c.mu.Unlock()
		c.markReady()
		c.queueAccept(now)
	}
	c.qlogKeyUpdated(now, tls.QUICEncryptionLevelEarly, write, "tls")
	return nil
}

// markReady lets streams be opened: 1-RTT or 0-RTT keys are there.
func (c *Conn) markReady() {
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
}

// onEarlyDataRejected makes the data sent in 0-RTT go again in 1-RTT
// packets (RFC 9001 §4.6.2: "If the server rejects 0-RTT, ... the client
// ... retransmits ... in 1-RTT packets").
func (c *Conn) onEarlyDataRejected() {
	c.earlyRejected = true
	c.earlyWrite = nil
	c.requeueOutstanding(appSpace, 1<<30)
}

// sending0RTT reports whether application data goes in 0-RTT packets now.
func (c *Conn) sending0RTT() bool {
	return c.isClient && !c.handshakeComplete && c.earlyWrite != nil
}
