package quic

import (
	"sync"
	"sync/atomic"
)

// rxBuf is a receive buffer that the datagrams lying in it share: a large
// UDP GRO message is split into datagrams that point into the buffer, each
// opened (decrypted) where it lies instead of being copied out first. The
// buffer goes back to its free list when the reader has moved on and the last of
// its datagrams has been released.
type rxBuf struct {
	b    []byte
	refs atomic.Int32 // the reader's hold (while it splits) and one per datagram
	home *rxFree
	// ds are the datagram headers of the segments, so that splitting a
	// message allocates nothing (a sync.Pool of headers refilled after
	// every GC); the kernel puts at most 64 segments in one GRO message.
	ds  [rxDatagrams]datagram
	nds int
}

const rxDatagrams = 64

// rxFree keeps receive buffers for reuse. Unlike a sync.Pool it is not
// emptied at every garbage collection, which made a transfer allocate a
// fresh 64 KiB buffer for each one in flight after each collection; it
// keeps at most max buffers, so that what stays after a transfer is small.
type rxFree struct {
	mu   sync.Mutex
	bufs []*rxBuf
	size int
	max  int
}

func newRxFree(size, max int) *rxFree { return &rxFree{size: size, max: max} }

// get returns a buffer with no references.
func (f *rxFree) get() *rxBuf {
	f.mu.Lock()
	if n := len(f.bufs); n > 0 {
		x := f.bufs[n-1]
		f.bufs[n-1] = nil
		f.bufs = f.bufs[:n-1]
		f.mu.Unlock()
		return x
	}
	f.mu.Unlock()
	return &rxBuf{b: make([]byte, f.size), home: f}
}

// put keeps x for reuse, or lets the collector have it when max are kept.
func (f *rxFree) put(x *rxBuf) {
	f.mu.Lock()
	if len(f.bufs) < f.max {
		f.bufs = append(f.bufs, x)
	}
	f.mu.Unlock()
}

// rxFreeGRO holds the buffers of GRO reads: 32 of 64 KiB at most.
var rxFreeGRO = newRxFree(groBufSize, 32)

// minShared is the smallest received message whose datagrams share its
// buffer; smaller ones are copied out, so that a few small datagrams
// waiting in a connection's queue never hold a whole 64 KiB buffer each.
// At this size at most four times the received bytes stay pinned.
const minShared = groBufSize / 4

// hold takes the reader's reference before it hands out datagrams.
func (x *rxBuf) hold() { x.refs.Store(1); x.nds = 0 }

// share counts one more datagram lying in x.
func (x *rxBuf) share() { x.refs.Add(1) }

// unref drops one reference; the last returns x to its free list.
func (x *rxBuf) unref() {
	switch n := x.refs.Add(-1); {
	case n == 0:
		x.home.put(x)
	case n < 0:
		panic("quic: receive buffer released more often than shared")
	}
}

// sharedDatagramPool holds datagrams without a buffer of their own: their
// bytes lie in an rxBuf.
var sharedDatagramPool = sync.Pool{New: func() any { return &datagram{} }}

// newSharedDatagram returns a datagram for the bytes b of x, taking a
// reference on x that release drops. b is capped at its length, so that
// nothing appended to it reaches the next datagram in the buffer.
func newSharedDatagram(x *rxBuf, b []byte) *datagram {
	var d *datagram
	if x.nds < len(x.ds) {
		d = &x.ds[x.nds]
		x.nds++
		d.inRx = true
	} else {
		d = sharedDatagramPool.Get().(*datagram)
	}
	x.share()
	d.rx, d.b = x, b[:len(b):len(b)]
	return d
}
