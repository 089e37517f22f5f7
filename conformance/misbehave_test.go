package conformance

import (
	"slices"
	"testing"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// startQuiverWith runs Quiver's server with its configuration edited by
// edit and returns its address.
func startQuiverWith(t *testing.T, edit func(*quic.Config)) string {
	s := newQuiverServerConfig(t, "127.0.0.1:0", edit)
	t.Cleanup(s.stop)
	return s.addr
}

// expectVerdicts runs the scenarios of want against addr and checks that
// each verdict is one of those listed.
func expectVerdicts(t *testing.T, name, addr string, want map[string][]Verdict) {
	t.Helper()
	expectVerdictsALPN(t, name, addr, "hq-interop", want)
}

// expectVerdictsALPN is expectVerdicts over the application protocol
// alpn.
func expectVerdictsALPN(t *testing.T, name, addr, alpn string, want map[string][]Verdict) {
	t.Helper()
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	// The ALPN is given, so that a server whose misbehaviour breaks the
	// discovery handshake still gets its scenarios run.
	rep := runSuite(t, Target{Name: name, Address: addr, ALPN: []string{alpn}, SmallPath: "/" + smallFile, LargePath: "/" + largeFile}, ids, nil)
	for id, vs := range want {
		if got, s := verdictOf(rep, id); !slices.Contains(vs, got) {
			t.Errorf("%s against %s: %s (%s), want one of %v", id, name, got, s, vs)
		}
	}
}

// TestRetryServer runs the Retry scenarios against Quiver's server with
// RequireRetry: they must run (not come out unsupported) and pass.
func TestRetryServer(t *testing.T) {
	addr := startQuiverWith(t, func(c *quic.Config) { c.RequireRetry = true })
	expectVerdicts(t, "quiver-retry", addr, map[string][]Verdict{
		"retry-format":             {Pass},
		"retry-handshake":          {Pass},
		"token-new-token-accepted": {Pass},
		// The engine drops an Initial with a corrupted Retry token in
		// silence (a SHOULD-level finding reported to the engine owner);
		// it must be judged, never unsupported.
		"retry-token-corrupted": {Pass, Warn},
		// An unknown token draws a Retry (RFC 9000 §8.1.3).
		"token-unknown-token": {Pass},
		// A Retry creates no state (RFC 9000 §17.2.5): the probe scenario
		// judges the flight after it, not retransmissions of the Retry.
		"rec-server-handshake-probe":      {Pass},
		"hs-handshake-done-retransmitted": {Pass},
		// 0-RTT behind Retry: connection 2 presents connection 1's
		// NEW_TOKEN token (RFC 9000 §8.1.3), so the server skips the Retry
		// and its 0-RTT is judged (0-RTT sent before a Retry would never
		// be processed: a Retry keeps no state).
		"tls-0rtt-accepted":        {Pass},
		"tls-crypto-in-0rtt":       {Pass},
		"pkt-ack-in-0rtt":          {Pass},
		"tls-0rtt-limit-violation": {Pass},
	})
}

// TestMisbehavingServer makes Quiver's server break rules through its
// probe hooks and checks that the scenarios judging those rules fail.
func TestMisbehavingServer(t *testing.T) {
	t.Run("amplification", func(t *testing.T) {
		// Every datagram goes out twice: the engine's 3× accounting
		// counts one copy, the wire carries two.
		addr := startQuiverWith(t, func(c *quic.Config) {
			c.Probe = &quic.Probe{OnSendDatagram: func(b []byte) [][]byte { return [][]byte{b, b} }}
		})
		expectVerdicts(t, "quiver-doubling", addr, map[string][]Verdict{"amp-handshake-limit": {Fail}})
	})
	t.Run("min-ack-delay", func(t *testing.T) {
		addr := startQuiverWith(t, func(c *quic.Config) {
			c.Probe = &quic.Probe{TransportParameters: func(tp *wire.TransportParameters) { tp.MinAckDelay = 30000 }}
		})
		expectVerdicts(t, "quiver-min-ack-delay-30ms", addr, map[string][]Verdict{"af-tp-valid": {Fail}})
	})
	t.Run("quic-bit", func(t *testing.T) {
		// Short-header datagrams leave with the QUIC bit cleared towards
		// clients that never advertised grease_quic_bit.
		addr := startQuiverWith(t, func(c *quic.Config) {
			c.Probe = &quic.Probe{OnSendDatagram: func(b []byte) [][]byte {
				if len(b) > 0 && b[0]&0x80 == 0 {
					b = append([]byte(nil), b...)
					b[0] &^= 0x40
				}
				return [][]byte{b}
			}}
		})
		expectVerdicts(t, "quiver-quic-bit-cleared", addr, map[string][]Verdict{"grease-quic-bit-not-without-tp": {Fail}})
	})
	t.Run("path-response", func(t *testing.T) {
		// PATH_RESPONSE frames are dropped from what the server sends:
		// the acknowledged challenge then goes unanswered.
		addr := startQuiverWith(t, func(c *quic.Config) {
			c.Probe = &quic.Probe{OnPacketSent: func(pi quic.PacketInfo) {
				for off := 0; off < len(pi.Payload); {
					f, n, err := wire.ParseFrame(pi.Payload[off:])
					if err != nil {
						return
					}
					if f.Type() == wire.FrameTypePathResponse {
						pi.Payload[off] = byte(wire.FrameTypePing)
						clear(pi.Payload[off+1 : off+n]) // PADDING
					}
					off += n
				}
			}}
		})
		expectVerdicts(t, "quiver-no-path-response", addr, map[string][]Verdict{"path-challenge-echo": {Fail}})
	})
}
