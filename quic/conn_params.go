package quic

import (
	"bytes"
	"errors"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// transportParams is what the engine keeps of the peer's transport
// parameters.
type transportParams struct {
	maxIdleTimeout   time.Duration
	ackDelayExponent uint8
	maxAckDelay      time.Duration
	tp               *wire.TransportParameters
}

// localTransportParams encodes our transport parameters.
func (c *Conn) localTransportParams() []byte {
	cfg := c.config
	var p wire.TransportParameters
	p.SetDefaults()
	p.MaxIdleTimeout = uint64(cfg.maxIdleTimeout().Milliseconds())
	p.MaxUDPPayloadSize = cfg.maxUDPPayloadSize()
	p.InitialMaxData = cfg.initialMaxData()
	sd := cfg.initialMaxStreamData()
	p.InitialMaxStreamDataBidiLocal = sd
	p.InitialMaxStreamDataBidiRemote = sd
	p.InitialMaxStreamDataUni = sd
	p.InitialMaxStreamsBidi = cfg.maxBidiStreams()
	p.InitialMaxStreamsUni = cfg.maxUniStreams()
	p.AckDelayExponent = uint64(cfg.ackDelayExponent())
	p.MaxAckDelay = uint64(cfg.maxAckDelay().Milliseconds())
	p.ActiveConnectionIDLimit = cfg.activeCIDLimit()
	if d := cfg.minAckDelay(); d > 0 {
		p.HasMinAckDelay = true
		p.MinAckDelay = uint64(d.Microseconds())
	}
	if cfg.MaxDatagramFrameSize > 0 {
		p.HasMaxDatagramFrameSize = true
		p.MaxDatagramFrameSize = cfg.MaxDatagramFrameSize
	}
	c.localVersionInformation(&p)
	p.GreaseQUICBit = !cfg.DisableGreaseQUICBit
	p.HasInitialSourceConnectionID = true
	p.InitialSourceConnectionID = c.localCID
	// A client never migrates; a server follows a client that does.
	p.DisableActiveMigration = c.isClient
	if !c.isClient {
		p.HasOriginalDestinationConnectionID = true
		p.OriginalDestinationConnectionID = c.origDCID
		p.HasStatelessResetToken = true
		p.StatelessResetToken = c.ep.resetToken(c.localCID)
		if c.retrySCID != nil {
			p.HasRetrySourceConnectionID = true
			p.RetrySourceConnectionID = c.retrySCID
		}
		c.prefAddrParam(&p)
	}
	if c.hooks != nil {
		if raw := c.hooks.EditTransportParameters(&p); raw != nil {
			// Hooks: the list is sent verbatim.
			var b []byte
			for _, tp := range raw {
				b = wire.AppendTransportParameter(b, tp.ID, tp.Value)
			}
			return b
		}
	}
	return p.Marshal()
}

// handlePeerTransportParams parses and validates the peer's transport
// parameters (RFC 9000 §7.4, §18.2) and applies them.
func (c *Conn) handlePeerTransportParams(now time.Time, b []byte) error {
	p, err := wire.ParseTransportParameters(b, c.isClient)
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			return &TransportError{Code: we.Code, Reason: we.Reason}
		}
		return localTransportError(wire.TransportParameterError, 0, "%v", err)
	}
	if err := c.validateCIDParams(p); err != nil {
		return err
	}
	if err := c.handlePeerVersionInformation(p); err != nil {
		return err
	}
	if err := c.onPeerPreferredAddress(p); err != nil {
		return err
	}
	if p.HasMaxDatagramFrameSize {
		c.mu.Lock()
		c.peerMaxDatagram = p.MaxDatagramFrameSize
		c.mu.Unlock()
	}
	c.peerParams = transportParams{
		maxIdleTimeout:   time.Duration(p.MaxIdleTimeout) * time.Millisecond,
		ackDelayExponent: uint8(p.AckDelayExponent),
		maxAckDelay:      time.Duration(p.MaxAckDelay) * time.Millisecond,
		tp:               p,
	}
	c.havePeerTP = true
	c.loss.ld.SetMaxAckDelay(c.peerParams.maxAckDelay)
	if err := c.streams.setPeerParams(p); err != nil {
		return err
	}
	if p.HasStatelessResetToken {
		c.cids.peerResetToken = p.StatelessResetToken
		c.cids.havePeerResetToken = true
		c.ep.registerResetToken(p.StatelessResetToken, c)
	}
	c.cids.peerLimit = p.ActiveConnectionIDLimit
	c.qlogParametersSet(now, p, false)
	// The typed fields hold what the connection uses; the list as sent
	// (p.Raw, hundreds of bytes) is not kept for the connection's life.
	p.Raw = nil
	return nil
}

// validateCIDParams checks the connection ID transport parameters. RFC
// 9000 §7.3: "An endpoint MUST treat the absence of the
// initial_source_connection_id transport parameter from either endpoint
// or the absence of the original_destination_connection_id transport
// parameter from the server as a connection error of type
// TRANSPORT_PARAMETER_ERROR." and "An endpoint MUST treat the following as
// a connection error of type TRANSPORT_PARAMETER_ERROR or
// PROTOCOL_VIOLATION: absence of the retry_source_connection_id transport
// parameter from the server after receiving a Retry packet, presence of
// the retry_source_connection_id transport parameter when no Retry packet
// was received, or a mismatch between values received from a peer in
// these transport parameters and the value sent in the corresponding
// Destination or Source Connection ID fields of Initial packets."
func (c *Conn) validateCIDParams(p *wire.TransportParameters) error {
	tpErr := func(reason string) error {
		return localTransportError(wire.TransportParameterError, 0, "RFC 9000 §7.3: %s", reason)
	}
	if !p.HasInitialSourceConnectionID {
		return tpErr("initial_source_connection_id missing")
	}
	if !bytes.Equal(p.InitialSourceConnectionID, c.peerInitSCID) {
		return tpErr("initial_source_connection_id does not match the Source Connection ID of the peer's Initial")
	}
	if !c.isClient {
		// RFC 9000 §18.2: "A client MUST NOT include any server-only
		// transport parameter"; wire.ParseTransportParameters checks it.
		return nil
	}
	if !p.HasOriginalDestinationConnectionID {
		return tpErr("original_destination_connection_id missing from the server")
	}
	if !bytes.Equal(p.OriginalDestinationConnectionID, c.origDCID) {
		return tpErr("original_destination_connection_id does not match our first Destination Connection ID")
	}
	if c.gotRetry {
		if !p.HasRetrySourceConnectionID {
			return tpErr("retry_source_connection_id missing after a Retry")
		}
		if !bytes.Equal(p.RetrySourceConnectionID, c.retrySCID) {
			return tpErr("retry_source_connection_id does not match the Retry's Source Connection ID")
		}
	} else if p.HasRetrySourceConnectionID {
		return tpErr("retry_source_connection_id present without a Retry")
	}
	return nil
}
