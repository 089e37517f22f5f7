package conformance

import (
	"testing"

	"github.com/quiver-quic/quiver/quic"
)

// TestMisbehavingServerTLS makes Quiver's server break the TLS rules of
// family B where its configuration allows, and checks that the scenarios
// judging them do not pass.
func TestMisbehavingServerTLS(t *testing.T) {
	t.Run("no-alpn", func(t *testing.T) {
		// A server configured without ALPN lets crypto/tls accept a
		// ClientHello that offers none (RFC 9001 §8.1 wants a close).
		addr := startQuiverWith(t, func(c *quic.Config) { c.TLSConfig.NextProtos = nil })
		expectVerdicts(t, "quiver-no-alpn", addr, map[string][]Verdict{"tls-alpn-absent": {Fail}})
	})
	t.Run("old-keys", func(t *testing.T) {
		// The server opens a packet that its current and next keys
		// cannot with the previous keys and processes it (RFC 9001 §6.4
		// wants KEY_UPDATE_ERROR, or the packet dropped once the old keys
		// are gone).
		addr := startQuiverWith(t, func(c *quic.Config) { c.Probe = &quic.Probe{OpenWithOldKeys: true} })
		expectVerdicts(t, "quiver-old-keys", addr, map[string][]Verdict{"tls-key-update-old-keys-after-new": {Fail}})
	})
	t.Run("server-key-updates", func(t *testing.T) {
		// Updates every 50 packets: the server follows RFC 9001 §6.1 and
		// waits for an acknowledgment of the new phase, which the tester
		// withholds, so the scenario passes.
		addr := startQuiverWith(t, func(c *quic.Config) { c.Probe = &quic.Probe{KeyUpdateInterval: 50} })
		expectVerdicts(t, "quiver-updates", addr, map[string][]Verdict{"tls-server-key-update": {Pass}})
		// The same without waiting for the acknowledgment fails.
		addr = startQuiverWith(t, func(c *quic.Config) { c.Probe = &quic.Probe{KeyUpdateInterval: 50, KeyUpdateWithoutAck: true} })
		expectVerdicts(t, "quiver-updates-without-ack", addr, map[string][]Verdict{"tls-server-key-update": {Fail}})
	})
	t.Run("initial-keys-kept", func(t *testing.T) {
		// The server keeps its Initial keys after processing a Handshake
		// packet, so it acknowledges the tester's later Initial PING.
		addr := startQuiverWith(t, func(c *quic.Config) { c.Probe = &quic.Probe{KeepInitialKeys: true} })
		expectVerdicts(t, "quiver-initial-keys-kept", addr, map[string][]Verdict{"tls-initial-keys-discarded": {Fail}})
	})
}
