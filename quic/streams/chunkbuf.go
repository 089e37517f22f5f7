package streams

import "sync"

// chunkSize is the unit in which stream bytes are buffered. Large enough that
// the per-chunk bookkeeping is negligible next to copying 1200-byte frames,
// small enough that a mostly idle stream holds little memory.
const chunkSize = 16 << 10

type chunk [chunkSize]byte

// chunkPool recycles chunks across all streams of all connections, so that a
// long transfer reuses the same few chunks instead of allocating as it goes.
var chunkPool = sync.Pool{New: func() any { return new(chunk) }}

// chunkBuf holds bytes of a stream by absolute offset in fixed-size chunks.
// chunks[i] covers [base+i*chunkSize, base+(i+1)*chunkSize); base is a
// multiple of chunkSize. A nil entry is a chunk that holds no data yet (the
// receive side fills chunks out of order). Freeing a prefix returns whole
// chunks to the pool; nothing is ever copied to shift data.
type chunkBuf struct {
	chunks []*chunk
	base   uint64
}

// writeAt copies p to offset off, allocating chunks as needed. off must not be
// below base.
func (b *chunkBuf) writeAt(off uint64, p []byte) {
	for len(p) > 0 {
		idx := int((off - b.base) / chunkSize)
		for len(b.chunks) <= idx {
			b.chunks = append(b.chunks, nil)
		}
		c := b.chunks[idx]
		if c == nil {
			c = chunkPool.Get().(*chunk)
			b.chunks[idx] = c
		}
		n := copy(c[(off-b.base)%chunkSize:], p)
		p = p[n:]
		off += uint64(n)
	}
}

// view returns the bytes from off, at most n of them, that lie in a single
// chunk. The caller must know the bytes were written.
func (b *chunkBuf) view(off uint64, n int) []byte {
	idx := int((off - b.base) / chunkSize)
	in := int((off - b.base) % chunkSize)
	end := min(in+n, chunkSize)
	return b.chunks[idx][in:end]
}

// readAt copies the bytes [off, off+len(p)) into p; they must all be written.
func (b *chunkBuf) readAt(off uint64, p []byte) {
	for len(p) > 0 {
		n := copy(p, b.view(off, len(p)))
		p = p[n:]
		off += uint64(n)
	}
}

// discardTo frees every chunk that lies entirely below off.
func (b *chunkBuf) discardTo(off uint64) {
	k := 0
	for k < len(b.chunks) && b.base+chunkSize <= off {
		if c := b.chunks[k]; c != nil {
			chunkPool.Put(c)
		}
		k++
		b.base += chunkSize
	}
	if k == 0 {
		return
	}
	// Shift the (short) slice of chunk pointers down instead of reslicing,
	// so that its capacity is reused and appends do not reallocate.
	n := copy(b.chunks, b.chunks[k:])
	clear(b.chunks[n:])
	b.chunks = b.chunks[:n]
	if n == 0 {
		// Nothing is held: move base up to off's chunk so the next write
		// does not create a run of empty entries.
		b.base = off - off%chunkSize
	}
}

// release returns all chunks to the pool; the buffer can be reused from off.
func (b *chunkBuf) release(off uint64) {
	for i, c := range b.chunks {
		if c != nil {
			chunkPool.Put(c)
		}
		b.chunks[i] = nil
	}
	b.chunks = b.chunks[:0]
	b.base = off - off%chunkSize
}

// held returns the number of bytes of memory held in chunks.
func (b *chunkBuf) held() int {
	n := 0
	for _, c := range b.chunks {
		if c != nil {
			n += chunkSize
		}
	}
	return n
}
