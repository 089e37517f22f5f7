package quic

import (
	"crypto/tls"
	"time"

	"github.com/quiver-quic/quiver/quic/recovery"
)

// keyUpdateInterval is how many packets the engine seals with one set of
// 1-RTT keys before it updates them. RFC 9001 §6.6: "Endpoints MUST
// initiate a key update before the confidentiality limit for the selected
// AEAD is reached" (2^23 packets for AES-GCM); we update at a quarter of
// it.
const keyUpdateInterval = 1 << 21

// keyUpdateState decides when the engine updates its 1-RTT keys.
type keyUpdateState struct {
	sealed   uint64 // packets sealed with the current write keys
	phaseMin uint64 // first packet number sent in the current phase
	interval uint64 // keyUpdateInterval, smaller in tests
}

// onSealed counts a 1-RTT packet and updates the keys when due: after the
// handshake is confirmed and once a packet of the current phase has been
// acknowledged (RFC 9001 §6.1: "An endpoint MUST NOT initiate a subsequent
// key update unless it has received an acknowledgment for a packet that
// was sent protected with keys from the current key phase").
func (c *Conn) onSealed(now time.Time, pn uint64) {
	k := &c.keyUpdate
	k.sealed++
	interval := k.interval
	if interval == 0 {
		interval = c.policy.KeyUpdateInterval
	}
	if interval == 0 {
		interval = c.config.KeyUpdateInterval
	}
	if interval == 0 {
		interval = keyUpdateInterval
	}
	if k.sealed < interval || !c.handshakeConfirmed {
		return
	}
	if la := c.loss.ld.LargestAcked(recovery.Space(appSpace)); (la < 0 || uint64(la) < k.phaseMin) && !c.policy.KeyUpdateWithoutAck {
		return
	}
	if err := c.appKeys.Update(); err != nil {
		return
	}
	k.sealed = 0
	k.phaseMin = pn + 1
	c.qlogKeyUpdated(now, tls.QUICEncryptionLevelApplication, true, "local_update")
}
