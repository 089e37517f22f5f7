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
}
