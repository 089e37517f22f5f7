package conformance

import (
	"slices"
	"testing"

	"github.com/quiver-quic/quiver/quic"
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
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	rep := runSuite(t, Target{Name: name, Address: addr, SmallPath: "/" + smallFile, LargePath: "/" + largeFile}, ids, nil)
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
		// The engine drops an Initial with a corrupted Retry token or an
		// unknown token in silence (SHOULD-level findings reported to the
		// engine owner); both must be judged, never unsupported.
		"retry-token-corrupted": {Pass, Warn},
		"token-unknown-token":   {Pass, Warn},
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
}
