package quic

import (
	"crypto/tls"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// The qlog hooks below cost one nil check when tracing is off.

func (c *Conn) qlogOn() bool { return c.qlog != nil && c.qlog.Enabled() }

func (c *Conn) qlogStarted(now time.Time) {
	if !c.qlogOn() {
		return
	}
}

func (c *Conn) qlogClosed() {
	if !c.qlogOn() {
		return
	}
}

func (c *Conn) qlogKeyUpdated(now time.Time, level tls.QUICEncryptionLevel, write bool, trigger string) {
	if !c.qlogOn() {
		return
	}
}

func (c *Conn) qlogPacketReceived(now time.Time, info *recvPacketInfo, payload []byte) {
	if !c.qlogOn() {
		return
	}
}

func (c *Conn) qlogPacketSent(now time.Time, p *builtPacket, buf []byte) {
	if !c.qlogOn() {
		return
	}
}

func (c *Conn) qlogPacketLost(now time.Time, space spaceID, pn uint64) {
	if !c.qlogOn() {
		return
	}
}

func (c *Conn) qlogPTO(now time.Time, space spaceID) {
	if !c.qlogOn() {
		return
	}
}

func (c *Conn) qlogMetrics(now time.Time) {
	if !c.qlogOn() {
		return
	}
}

func (c *Conn) qlogParametersSet(now time.Time, p *wire.TransportParameters, local bool) {
	if !c.qlogOn() {
		return
	}
}
