package quic

import (
	"sync"
	"sync/atomic"
)

// rxBuf is a receive buffer that the datagrams lying in it share: a large
// UDP GRO message is split into datagrams that point into the buffer, each
// opened (decrypted) where it lies instead of being copied out first. The
// buffer goes back to its pool when the reader has moved on and the last of
// its datagrams has been released.
type rxBuf struct {
	b    []byte
	refs atomic.Int32 // the reader's hold (while it splits) and one per datagram
	pool *sync.Pool
}

// newRxPool returns a pool of size-byte receive buffers.
func newRxPool(size int) *sync.Pool {
	p := &sync.Pool{}
	p.New = func() any { return &rxBuf{b: make([]byte, size), pool: p} }
	return p
}

// rxPoolGRO holds the buffers of GRO reads.
var rxPoolGRO = newRxPool(groBufSize)

// minShared is the smallest received message whose datagrams share its
// buffer; smaller ones are copied out, so that a few small datagrams
// waiting in a connection's queue never hold a whole 64 KiB buffer each.
// At this size at most four times the received bytes stay pinned.
const minShared = groBufSize / 4

// hold takes the reader's reference before it hands out datagrams.
func (x *rxBuf) hold() { x.refs.Store(1) }

// share counts one more datagram lying in x.
func (x *rxBuf) share() { x.refs.Add(1) }

// unref drops one reference; the last returns x to its pool.
func (x *rxBuf) unref() {
	switch n := x.refs.Add(-1); {
	case n == 0:
		x.pool.Put(x)
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
	d := sharedDatagramPool.Get().(*datagram)
	x.share()
	d.rx, d.b = x, b[:len(b):len(b)]
	return d
}
