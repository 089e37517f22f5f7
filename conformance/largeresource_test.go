package conformance

import (
	"testing"
)

// TestLargeResourceBeyondWindows downloads a large resource bigger than the
// raw client's initial windows (4 MiB per stream, 16 MiB per connection):
// the raw client must raise its limits as it reads, or the transfer
// scenarios stall and come out inconclusive (issue: a 5 MB --large left
// them inconclusive on every server).
func TestLargeResourceBeyondWindows(t *testing.T) {
	s := newQuiverServerRoot(t, "127.0.0.1:0", writeRootSize(t, 24<<20), nil)
	t.Cleanup(s.stop)
	for _, alpn := range []string{"hq-interop", "h3"} {
		t.Run(alpn, func(t *testing.T) {
			expectVerdictsALPN(t, "quiver-24MiB", s.addr, alpn, map[string][]Verdict{
				"rec-transfer-with-loss": {Pass},
				"rec-blackhole-recovery": {Pass},
			})
		})
	}
}
