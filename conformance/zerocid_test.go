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
// (the cid-0 variant of conformance/variants).
func TestZeroLengthCIDServer(t *testing.T) {
	addr := startQuiverWith(t, func(c *quic.Config) { c.ConnectionIDLength = -1 })
	expectVerdicts(t, "quiver-cid-0", addr, map[string][]Verdict{
		"hs-initial-scid-change": {Pass},
	})
}
