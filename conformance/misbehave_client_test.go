package conformance

import (
	"slices"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
	"github.com/quiver-quic/quiver/transfer"
)

// TestMisbehavingClient makes Quiver's client break rules through its
// probe hooks and checks that the client-facing scenarios judging those
// rules fail.
func TestMisbehavingClient(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		edit     func(*quic.Config)
		want     []Verdict
	}{
		// Datagrams of the stateless reset's size and form never reach
		// the engine: the client goes on and acknowledges the next PING.
		{"ignores-stateless-reset", "cli-stateless-reset", func(c *quic.Config) {
			c.Probe = &quic.Probe{DropIncoming: func(b []byte) bool { return len(b) == 60 && b[0]&0xc0 == 0x40 }}
		}, []Verdict{Fail}},
		// No acknowledgment of anything after the server's key update.
		{"silent-after-key-update", "cli-key-update-server", func(c *quic.Config) {
			c.Probe = &quic.Probe{NoKeyUpdateAck: true}
		}, []Verdict{Fail}},
		// grease_quic_bit advertised, but packets with the bit cleared
		// are discarded.
		{"grease-bit-not-accepted", "cli-grease-quic-bit", func(c *quic.Config) {
			c.DisableGreaseQUICBit = true
			c.Probe = &quic.Probe{TransportParameters: func(p *wire.TransportParameters) { p.GreaseQUICBit = true }}
		}, []Verdict{Fail, Observed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct := quiverClientWith("hq-interop", func(c *transfer.ClientConfig) { c.EditQUIC = tc.edit })
			rep := runClientSuite(t, ct, []string{tc.id})
			got, s := verdictOf(rep, tc.id)
			if !slices.Contains(tc.want, got) {
				t.Errorf("%s: %s (%s), want one of %v", tc.id, got, s, tc.want)
			}
			// A from-knowledge requirement is observed, never failed; its
			// sentence still tells.
			if got == Observed && !strings.Contains(s, "would be fail") {
				t.Errorf("%s: observed, but not as a failure: %s", tc.id, s)
			}
		})
	}
}
