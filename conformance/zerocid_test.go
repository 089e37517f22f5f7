package conformance

import (
	"testing"

	"github.com/quiver-quic/quiver/quic"
)

// TestZeroLengthCIDServer runs scenarios against Quiver's server with
// zero-length connection IDs (RFC 9000 §5.1: "A zero-length connection
// ID can be used when a connection ID is not needed to route to the
// correct endpoint"). The raw client took an empty Source Connection ID
// for "no answer yet", and hs-initial-scid-change came out inconclusive
// (the cid-0 variant of conformance/variants). The scenarios that move
// the tester to a new port are unsupported against it (RFC 9000 §9.5: "An
// endpoint SHOULD NOT initiate migration with a peer that has requested a
// zero-length connection ID"), those on the current path are judged.
func TestZeroLengthCIDServer(t *testing.T) {
	addr := startQuiverWith(t, func(c *quic.Config) { c.ConnectionIDLength = -1 })
	expectVerdicts(t, "quiver-cid-0", addr, map[string][]Verdict{
		"hs-initial-scid-change": {Pass},
		"path-probe-new-port":    {Unsupported},
		"path-migration-new-cid": {Unsupported},
		"path-challenge-echo":    {Pass},
	})
}
