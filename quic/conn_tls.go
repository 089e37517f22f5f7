package quic

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// startTLS creates the TLS 1.3 state machine and runs it until it waits
// for the peer.
func (c *Conn) startTLS(now time.Time) error {
	var cfg *tls.Config
	if c.isClient {
		cfg = c.config.TLSConfig.Clone()
		cfg.MinVersion = tls.VersionTLS13
		if cfg.ClientSessionCache != nil && !c.policy.AnyVersionTickets {
			cfg.ClientSessionCache = versionedSessionCache{cfg.ClientSessionCache, c.version}
		}
	} else {
		// The endpoint's configuration owns the session ticket keys, so
		// that a ticket from one connection resumes on the next; this
		// connection's copy only adds the version check on tickets.
		cfg = c.versionCheckedTLS(c.ep.serverTLS())
	}
	qc := &tls.QUICConfig{TLSConfig: cfg, EnableSessionEvents: true}
	if c.isClient {
		c.tls = tls.QUICClient(qc)
	} else {
		c.tls = tls.QUICServer(qc)
	}
	if c.isClient {
		c.origVersion = c.version
		c.tls.SetTransportParameters(c.localTransportParams())
	}
	var suites []uint16
	if c.isClient {
		suites = c.config.TLS13Suites
	}
	if err := WithTLS13Suites(suites, func() error { return c.tls.Start(context.Background()) }); err != nil {
		return c.tlsError(err)
	}
	return c.handleTLSEvents(now)
}

// versionCheckedTLS returns a copy of the endpoint's server configuration
// that refuses a session ticket issued on a connection of another QUIC
// version than the one this connection started in, so that the client
// gets a full handshake (RFC 9369 §5: "Servers MUST validate the
// originating version of any session ticket or token and not accept one
// issued from a different version. A rejected ticket results in falling
// back to a full TLS handshake, without 0-RTT."). Tickets are still sealed
// and opened with the endpoint's keys.
func (c *Conn) versionCheckedTLS(shared *tls.Config) *tls.Config {
	cfg := shared.Clone()
	wrap, unwrap := shared.WrapSession, shared.UnwrapSession
	if wrap == nil {
		wrap = shared.EncryptTicket
	}
	if unwrap == nil {
		unwrap = shared.DecryptTicket
	}
	cfg.WrapSession = wrap
	cfg.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		st, err := unwrap(identity, cs)
		if err != nil || st == nil {
			return st, err
		}
		if rem := findRemembered(st.Extra); rem != nil {
			if v, _, ok := rememberedVersion(rem); ok && v != c.origVersion {
				return nil, nil
			}
		}
		return st, nil
	}
	return cfg
}

// tlsError turns an error from crypto/tls into a CRYPTO_ERROR. RFC 9001
// §4.8: "A TLS alert is converted into a QUIC connection error. The
// AlertDescription value is added to 0x0100 to produce a QUIC error code".
func (c *Conn) tlsError(err error) error {
	var te *TransportError
	if errors.As(err, &te) {
		return te
	}
	alert := uint8(80) // internal_error
	var ae tls.AlertError
	if errors.As(err, &ae) {
		alert = uint8(ae)
	}
	return &TransportError{Code: wire.CryptoError(alert), Reason: err.Error()}
}

// handleTLSEvents drains the events of the TLS state machine: keys,
// handshake bytes to send, transport parameters, completion.
func (c *Conn) handleTLSEvents(now time.Time) error {
	for c.tls != nil { // releaseTLS may drop it at handshake completion
		e := c.tls.NextEvent()
		switch e.Kind {
		case tls.QUICNoEvent:
			return nil
		case tls.QUICSetReadSecret:
			if err := c.installKeys(now, e.Level, e.Suite, e.Data, false); err != nil {
				return err
			}
		case tls.QUICSetWriteSecret:
			if err := c.installKeys(now, e.Level, e.Suite, e.Data, true); err != nil {
				return err
			}
		case tls.QUICWriteData:
			sp := spaceForLevel(e.Level)
			data := e.Data
			hello := c.isClient && sp == initialSpace && c.clientRandom == nil
			if hello {
				c.clientRandom = helloRandom(data)
			}
			if c.hooks != nil {
				data = c.hooks.HandshakeData(int(sp), append([]byte(nil), data...), hello)
			}
			c.spaces[sp].crypto.write(data)
		case tls.QUICTransportParameters:
			if err := c.handlePeerTransportParams(now, e.Data); err != nil {
				return err
			}
		case tls.QUICTransportParametersRequired:
			c.tls.SetTransportParameters(c.localTransportParams())
		case tls.QUICHandshakeDone:
			c.onHandshakeComplete(now)
		case tls.QUICResumeSession:
			c.onResumeSession(e.SessionState)
		case tls.QUICStoreSession:
			c.onStoreSession(e.SessionState)
		case tls.QUICRejectedEarlyData:
			c.onEarlyDataRejected()
		case tls.QUICErrorEvent:
			return c.tlsError(e.Err)
		}
	}
	return nil
}

func spaceForLevel(l tls.QUICEncryptionLevel) spaceID {
	switch l {
	case tls.QUICEncryptionLevelInitial:
		return initialSpace
	case tls.QUICEncryptionLevelHandshake:
		return handshakeSpace
	}
	return appSpace
}

// helloRandom returns the 32-byte random of a ClientHello message (type
// 1, 3-byte length, 2-byte legacy_version, random), or nil.
func helloRandom(msg []byte) []byte {
	if len(msg) < 38 || msg[0] != 1 {
		return nil
	}
	return append([]byte(nil), msg[6:38]...)
}

var keyLogLabels = map[tls.QUICEncryptionLevel][2]string{
	tls.QUICEncryptionLevelEarly:       {"CLIENT_EARLY_TRAFFIC_SECRET", "CLIENT_EARLY_TRAFFIC_SECRET"},
	tls.QUICEncryptionLevelHandshake:   {"CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET"},
	tls.QUICEncryptionLevelApplication: {"CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"},
}

// logSecret writes one SSLKEYLOGFILE line. The secret belongs to the
// client when we are the client writing, or the server reading.
func (c *Conn) logSecret(level tls.QUICEncryptionLevel, secret []byte, write bool) {
	if c.keyLog == nil || c.clientRandom == nil {
		return
	}
	labels, ok := keyLogLabels[level]
	if !ok {
		return
	}
	label := labels[1]
	if c.isClient == write {
		label = labels[0]
	}
	c.keyLog.Write(label, c.clientRandom, secret)
}

// installKeys installs keys crypto/tls derived for a level.
func (c *Conn) installKeys(now time.Time, level tls.QUICEncryptionLevel, suite uint16, secret []byte, write bool) error {
	if !write {
		c.keysChanged = true
	}
	c.logSecret(level, secret, write)
	switch level {
	case tls.QUICEncryptionLevelEarly:
		return c.installEarlyKeys(now, suite, secret, write)
	case tls.QUICEncryptionLevelApplication:
		var err error
		if write {
			err = c.appKeys.InstallWrite(c.version, suite, secret)
			if !c.isClient && c.policy.EarlyHandshakeDone {
				c.handshakeDonePending = true
			}
		} else {
			err = c.appKeys.InstallRead(c.version, suite, secret)
		}
		if err != nil {
			return &TransportError{Code: wire.InternalError, Reason: err.Error()}
		}
		c.qlogKeyUpdated(now, level, write, "tls")
		return nil
	}
	k, err := protect.NewKeys(c.version, suite, secret)
	if err != nil {
		return &TransportError{Code: wire.InternalError, Reason: err.Error()}
	}
	sp := &c.spaces[spaceForLevel(level)]
	if write {
		sp.writeKeys = k
		if level == tls.QUICEncryptionLevelHandshake {
			// RFC 9002 §6.2.2.1: "When the PTO fires, the client MUST send
			// a Handshake packet if it has Handshake keys, otherwise it
			// MUST send an Initial packet".
			c.loss.ld.SetHandshakeKeys(now)
		}
	} else {
		sp.readKeys = k
	}
	c.qlogKeyUpdated(now, level, write, "tls")
	return nil
}

// installInitialKeys derives the Initial keys from the client's first
// destination connection ID (RFC 9001 §5.2).
func (c *Conn) installInitialKeys(dcid []byte) error {
	v := c.version
	if c.isClient && !protect.SupportedVersion(v) {
		// A client may start with a version it cannot speak (a reserved
		// one, to provoke Version Negotiation, RFC 9000 §6.3); its Initial
		// is protected as in v1, which the server cannot be expected to
		// open anyway.
		v = Version1
	}
	ck, sk, err := protect.NewInitialKeys(v, dcid)
	if err != nil {
		return err
	}
	sp := &c.spaces[initialSpace]
	if c.isClient {
		sp.writeKeys, sp.readKeys = ck, sk
	} else {
		sp.writeKeys, sp.readKeys = sk, ck
	}
	return nil
}

// onHandshakeComplete runs when TLS reports the handshake complete.
func (c *Conn) onHandshakeComplete(now time.Time) {
	c.handshakeComplete = true
	// Give the peer spare connection IDs (RFC 9000 §5.1.1).
	c.cids.issue()
	st := c.tls.ConnectionState()
	c.mu.Lock()
	c.tlsState = st
	c.alpn = st.NegotiatedProtocol
	c.info = ConnectionInfo{Version: c.version, Retried: c.gotRetry || c.retrySCID != nil, VersionNegotiated: c.gotVN,
		Resumed: st.DidResume, Used0RTT: (c.sent0RTT || c.recv0RTT || c.info.Used0RTT) && !c.earlyRejected}
	c.mu.Unlock()
	if !c.isClient {
		// RFC 9001 §4.1.2: "the TLS handshake is considered confirmed at
		// the server when the handshake completes". RFC 9000 §19.20: the
		// server sends HANDSHAKE_DONE.
		c.handshakeDonePending = true
		c.confirmHandshake(now)
		c.sendSessionTicket()
		c.sendNewToken(now)
		if err := c.handleTLSEvents(now); err != nil {
			c.closeLocal(now, err)
		}
		c.queueAccept(now)
		c.releaseTLS()
	}
	if c.isClient {
		// RFC 9001 §4.9.3: "a client ... MUST discard 0-RTT keys as soon
		// as it installs 1-RTT keys".
		c.earlyWrite = nil
	}
	c.markReady()
	close(c.handshakeDone)
}

// queueAccept hands a server connection to Accept, once: at handshake
// completion, or earlier when it accepts 0-RTT data.
func (c *Conn) queueAccept(now time.Time) {
	if c.accepted {
		return
	}
	c.accepted = true
	select {
	case c.ep.acceptq <- c:
	default:
		// Nobody accepts: refuse rather than block the loop.
		c.closeLocal(now, localTransportError(wire.ConnectionRefused, 0, "accept queue full"))
	}
}

// confirmHandshake discards the Handshake keys. RFC 9001 §4.9.2: "An
// endpoint MUST discard its Handshake keys when the TLS handshake is
// confirmed".
func (c *Conn) confirmHandshake(now time.Time) {
	if c.handshakeConfirmed {
		return
	}
	c.handshakeConfirmed = true
	c.discardSpace(now, handshakeSpace)
	c.pmtudStart(now)
	c.prefAddrStart(now)
}
