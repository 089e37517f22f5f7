package rawquic

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/quiver-quic/quiver/quic/wire"
)

func TestPNSet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var s PNSet
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
		want := rangesOf(pns)
		if got := s.Ack(32); !slices.Equal(got, want) {
			t.Fatalf("ranges %v, want %v", got, want)
		}
		for pn := uint64(0); pn < 80; pn++ {
			if s.Contains(pn) != seen[pn] {
				t.Fatalf("contains(%d) = %v", pn, !seen[pn])
			}
		}
	}
	var s PNSet
	if !s.Empty() || len(s.Ack(32)) != 0 {
		t.Fatal("a new set is not empty")
	}
	s.Add(5)
	if got := s.Ack(32); !slices.Equal(got, []wire.AckRange{{Smallest: 5, Largest: 5}}) {
		t.Fatal(got)
	}
}

// rangesOf lists pns as an ACK frame does: ranges in descending order, at
// most 32.
func rangesOf(pns []uint64) []wire.AckRange {
	pns = slices.Clone(pns)
	slices.Sort(pns)
	slices.Reverse(pns)
	var rs []wire.AckRange
	for _, pn := range pns {
		if n := len(rs); n > 0 && rs[n-1].Smallest == pn+1 {
			rs[n-1].Smallest = pn
			continue
		}
		if len(rs) == 32 {
			break
		}
		rs = append(rs, wire.AckRange{Smallest: pn, Largest: pn})
	}
	return rs
}

// TestPNSetMatchesAckFrame: the ranges a PNSet keeps are those the
// raw client's ACK frame lists for the same packet numbers.
func TestPNSetMatchesAckFrame(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var s PNSet
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
		var rc Client[testPacket]
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
	var s PNSet
	if !s.Empty() || len(s.Ack(32)) != 0 {
		t.Fatal("a new set is not empty")
	}
	s.Add(5)
	if got := s.Ack(32); !slices.Equal(got, []wire.AckRange{{Smallest: 5, Largest: 5}}) {
		t.Fatal(got)
	}
}
