package conformance

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// TestPNSetMatchesAckFrame: the ranges a rawquic.PNSet keeps are those the
// raw client's ACK frame lists for the same packet numbers.
func TestPNSetMatchesAckFrame(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var s rawquic.PNSet
		seen := map[uint64]bool{}
		for i := 0; i < 60; i++ {
			pn := r.Uint64N(80)
			if got := s.Add(pn); got == seen[pn] {
				t.Fatalf("add(%d) = %v with seen %v", pn, got, seen[pn])
			}
			seen[pn] = true
		}
		var pns []uint64
		for pn := range seen {
			pns = append(pns, pn)
		}
		// The ranges are what the raw client's ACK frame would list.
		var rc rawCore[*packet]
		want := rc.AckFrameOf(2, pns).Ranges
		if got := s.Ack(32); !slices.Equal(got, want) {
			t.Fatalf("ranges %v, want %v", got, want)
		}
		for pn := uint64(0); pn < 80; pn++ {
			if s.Contains(pn) != seen[pn] {
				t.Fatalf("contains(%d) = %v", pn, !seen[pn])
			}
		}
	}
	var s rawquic.PNSet
	if !s.Empty() || len(s.Ack(32)) != 0 {
		t.Fatal("a new set is not empty")
	}
	s.Add(5)
	if got := s.Ack(32); !slices.Equal(got, []wire.AckRange{{Smallest: 5, Largest: 5}}) {
		t.Fatal(got)
	}
}
