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
func rememberedParams(p *wire.TransportParameters) []byte {
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
	return append(append([]byte(nil), tpExtraPrefix...), r.Marshal()...)
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
	c.tls.SendSessionTicket(tls.QUICSessionTicketOptions{EarlyData: c.config.Allow0RTT, Extra: [][]byte{rememberedParams(p)}})
}

// onResumeSession decides whether 0-RTT is used with a resumed session.
func (c *Conn) onResumeSession(s *tls.SessionState) {
	rem := findRemembered(s.Extra)
	if c.isClient {
		if !c.config.Allow0RTT || rem == nil {
			s.EarlyData = false
			return
		}
		p, err := wire.ParseTransportParameters(rem[len(tpExtraPrefix):], false)
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
	p, err := wire.ParseTransportParameters(c.localTransportParams(), true)
	if !c.config.Allow0RTT || err != nil || rem == nil || !bytes.Equal(rem, rememberedParams(p)) {
		s.EarlyData = false
	}
}

// onStoreSession keeps the server's parameters with the ticket.
func (c *Conn) onStoreSession(s *tls.SessionState) {
	if c.havePeerTP && findRemembered(s.Extra) == nil {
		s.Extra = append(s.Extra, rememberedParams(c.peerParams.tp))
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
