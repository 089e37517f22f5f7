package rawquic

import (
	"slices"

	"github.com/quiver-quic/quiver/quic/wire"
)

// PNSet is the set of packet numbers the raw client received in one space,
// as ranges in descending order (the order of an ACK frame), so that a
// download of any length costs one small slice and a lookup per packet.
type PNSet struct{ ranges []wire.AckRange }

// Add inserts pn and reports whether it was new.
func (s *PNSet) Add(pn uint64) bool {
	// i is the first range whose Smallest is at or below pn.
	i, _ := slices.BinarySearchFunc(s.ranges, pn, func(r wire.AckRange, pn uint64) int {
		switch {
		case r.Smallest > pn:
			return -1
		case r.Smallest < pn:
			return 1
		}
		return 0
	})
	if i < len(s.ranges) && s.ranges[i].Largest >= pn {
		return false
	}
	joinAbove := i > 0 && s.ranges[i-1].Smallest == pn+1
	joinBelow := i < len(s.ranges) && s.ranges[i].Largest+1 == pn
	switch {
	case joinAbove && joinBelow:
		s.ranges[i-1].Smallest = s.ranges[i].Smallest
		s.ranges = slices.Delete(s.ranges, i, i+1)
	case joinAbove:
		s.ranges[i-1].Smallest = pn
	case joinBelow:
		s.ranges[i].Largest = pn
	default:
		s.ranges = slices.Insert(s.ranges, i, wire.AckRange{Smallest: pn, Largest: pn})
	}
	return true
}

// Empty reports that no packet number was added.
func (s *PNSet) Empty() bool { return len(s.ranges) == 0 }

// Contains reports whether pn was received.
func (s *PNSet) Contains(pn uint64) bool {
	for _, r := range s.ranges {
		if pn > r.Largest {
			return false
		}
		if pn >= r.Smallest {
			return true
		}
	}
	return false
}

// Ack returns the largest n ranges, as an ACK frame carries them.
func (s *PNSet) Ack(n int) []wire.AckRange {
	return slices.Clone(s.ranges[:min(n, len(s.ranges))])
}
