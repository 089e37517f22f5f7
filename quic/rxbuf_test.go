package quic

import (
	"sync"
	"testing"
)

// TestRxBufShared checks the reference counting of a shared receive
// buffer: the datagrams lying in it keep it from the pool until the last
// is released, each sees only its own bytes, and a release too many is
// caught.
func TestRxBufShared(t *testing.T) {
	free := newRxFree(4096, 1)
	x := free.get()
	for i := range x.b {
		x.b[i] = byte(i / 1000)
	}
	x.hold()
	var ds []*datagram
	for off := 0; off < 4000; off += 1000 {
		ds = append(ds, newSharedDatagram(x, x.b[off:off+1000]))
	}
	x.unref() // the reader moves on
	if got := x.refs.Load(); got != 4 {
		t.Fatalf("refs after the reader let go = %d, want 4 (one per datagram)", got)
	}
	for i, d := range ds {
		if len(d.b) != 1000 || cap(d.b) != 1000 {
			t.Fatalf("datagram %d: len %d cap %d, want 1000 and 1000", i, len(d.b), cap(d.b))
		}
		if d.b[0] != byte(i) || d.b[999] != byte(i) {
			t.Fatalf("datagram %d holds bytes of another: %d..%d", i, d.b[0], d.b[999])
		}
		if d.buf != nil {
			t.Fatalf("datagram %d has a buffer of its own", i)
		}
		if d != &x.ds[i] {
			t.Fatalf("datagram %d is not one of the buffer's own headers", i)
		}
	}
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() { defer wg.Done(); d.release() }()
	}
	wg.Wait()
	if got := x.refs.Load(); got != 0 {
		t.Fatalf("refs after every release = %d, want 0", got)
	}
	if len(free.bufs) != 1 || free.bufs[0] != x {
		t.Fatal("the released buffer did not go back to its free list")
	}
	free.put(&rxBuf{home: free}) // beyond max: not kept
	if len(free.bufs) != 1 {
		t.Fatalf("free list keeps %d buffers, max 1", len(free.bufs))
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a release too many did not panic")
		}
	}()
	x.unref()
}

// TestRxBufManySegments checks a message of more segments than the buffer
// has headers: the rest come from the pool and are released alike.
func TestRxBufManySegments(t *testing.T) {
	x := newRxFree(1<<12, 1).get()
	x.hold()
	var ds []*datagram
	for i := range rxDatagrams + 3 {
		ds = append(ds, newSharedDatagram(x, x.b[i:i+1]))
	}
	x.unref()
	for i, d := range ds {
		if d.inRx != (i < rxDatagrams) {
			t.Fatalf("datagram %d: inRx %v", i, d.inRx)
		}
		d.release()
	}
	if got := x.refs.Load(); got != 0 {
		t.Fatalf("refs after every release = %d, want 0", got)
	}
}
