package streams

// span is the half-open byte range [start, end).
type span struct {
	start, end uint64
}

// rangeSet is a sorted list of disjoint, non-adjacent spans. Its slice is
// reused, so adding and removing ranges does not allocate in steady state.
type rangeSet []span

// search returns the index of the first span whose end is >= off.
func (s rangeSet) search(off uint64) int {
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s[m].end < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// add inserts [start, end), merging it with overlapping or adjacent spans.
func (s *rangeSet) add(start, end uint64) {
	if start >= end {
		return
	}
	r := *s
	// Fast path: in-order arrival extends or follows the last span.
	if n := len(r); n == 0 || r[n-1].end < start {
		*s = append(r, span{start, end})
		return
	} else if r[n-1].start <= start {
		r[n-1].end = max(r[n-1].end, end)
		return
	}
	i := r.search(start)
	j := i
	for j < len(r) && r[j].start <= end {
		j++
	}
	if i == j {
		r = append(r, span{})
		copy(r[i+1:], r[i:])
		r[i] = span{start, end}
		*s = r
		return
	}
	r[i] = span{min(start, r[i].start), max(end, r[j-1].end)}
	*s = append(r[:i+1], r[j:]...)
}

// remove deletes [start, end) from the set, splitting a span if needed.
func (s *rangeSet) remove(start, end uint64) {
	if start >= end {
		return
	}
	r := *s
	i := r.search(start + 1) // first span with end > start
	for i < len(r) && r[i].start < end {
		sp := r[i]
		switch {
		case sp.start < start && sp.end > end:
			// Split in two.
			r = append(r, span{})
			copy(r[i+2:], r[i+1:])
			r[i] = span{sp.start, start}
			r[i+1] = span{end, sp.end}
			*s = r
			return
		case sp.start < start:
			r[i].end = start
			i++
		case sp.end > end:
			r[i].start = end
			*s = r
			return
		default:
			r = append(r[:i], r[i+1:]...)
		}
	}
	*s = r
}

// contains reports whether every byte of [start, end) is in the set.
func (s rangeSet) contains(start, end uint64) bool {
	if start >= end {
		return true
	}
	i := s.search(start + 1)
	return i < len(s) && s[i].start <= start && s[i].end >= end
}

// prefix returns the end of the span that starts at or before from and
// contains from, or from if there is none: the end of contiguous data.
func (s rangeSet) prefix(from uint64) uint64 {
	i := s.search(from)
	if i < len(s) && s[i].start <= from {
		return s[i].end
	}
	return from
}
