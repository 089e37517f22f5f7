package qpack

// table is a dynamic table (RFC 9204 §3.2): entries in insertion order,
// entries[i] having absolute index dropped+i.
type table struct {
	entries  []HeaderField
	dropped  uint64 // entries evicted: the absolute index of entries[0]
	size     uint64
	capacity uint64
}

// inserted is the Insert Count: the number of entries ever inserted.
func (t *table) inserted() uint64 { return t.dropped + uint64(len(t.entries)) }

// get returns the entry of absolute index abs, if it is in the table.
func (t *table) get(abs uint64) (HeaderField, bool) {
	if abs < t.dropped || abs >= t.inserted() {
		return HeaderField{}, false
	}
	return t.entries[abs-t.dropped], true
}

// evictTo evicts the oldest entries until the size is at most limit (RFC
// 9204 §3.2.2).
func (t *table) evictTo(limit uint64) {
	for t.size > limit && len(t.entries) > 0 {
		t.size -= t.entries[0].Size()
		t.entries[0] = HeaderField{}
		t.entries = t.entries[1:]
		t.dropped++
	}
}

// insert adds f, evicting as needed; the caller has checked that f fits
// the capacity.
func (t *table) insert(f HeaderField) {
	t.evictTo(t.capacity - f.Size())
	t.entries = append(t.entries, f)
	t.size += f.Size()
}

// roomFor reports whether f fits once the entries below absolute index
// evictable (and only those) are evicted.
func (t *table) roomFor(f HeaderField, evictable uint64) bool {
	if f.Size() > t.capacity {
		return false
	}
	size := t.size
	for i, e := range t.entries {
		if size+f.Size() <= t.capacity {
			return true
		}
		if t.dropped+uint64(i) >= evictable {
			return false
		}
		size -= e.Size()
	}
	return size+f.Size() <= t.capacity
}
