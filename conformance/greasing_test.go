package conformance

import (
	"testing"

	"github.com/quiver-quic/quiver/quic"
)

func TestGreaseSuites(t *testing.T) {
	for range 100 {
		gs := greaseSuites()
		if gs[0] == gs[1] || !quic.IsGreaseValue(gs[0]) || !quic.IsGreaseValue(gs[1]) {
			t.Fatalf("greaseSuites() = %#04x", gs)
		}
	}
}
