package quic

import "testing"

func TestRecvQueue(t *testing.T) {
	q := newRecvQueue()
	if q.pop() != nil {
		t.Fatal("pop on an empty queue returned a datagram")
	}
	ds := make([]*datagram, recvQueueLen+1)
	for i := range ds {
		ds[i] = &datagram{}
	}
	for i, d := range ds[:recvQueueLen] {
		if !q.push(d) {
			t.Fatalf("push %d refused below the limit", i)
		}
	}
	if q.push(ds[recvQueueLen]) {
		t.Fatal("push accepted past recvQueueLen")
	}
	select {
	case <-q.ready:
	default:
		t.Fatal("no ready token after pushes")
	}
	// The loop takes a few, then more arrive: order is kept.
	for i := 0; i < 3; i++ {
		if got := q.pop(); got != ds[i] {
			t.Fatalf("pop %d: wrong datagram", i)
		}
	}
	if !q.more() {
		t.Fatal("more() false with taken datagrams left")
	}
	extra := &datagram{}
	if !q.push(extra) {
		t.Fatal("push refused after the loop took the queue")
	}
	for i := 3; i < recvQueueLen; i++ {
		if got := q.pop(); got != ds[i] {
			t.Fatalf("pop %d: wrong datagram", i)
		}
	}
	if got := q.pop(); got != extra {
		t.Fatal("datagram pushed while the loop held the queue was lost")
	}
	if q.pop() != nil || q.more() {
		t.Fatal("queue not empty at the end")
	}
	// An idle queue keeps small slices: what it held, not recvQueueLen.
	q2 := newRecvQueue()
	for range 3 {
		q2.push(&datagram{})
	}
	for q2.pop() != nil {
	}
	if c := cap(q2.in) + cap(q2.out); c > 16 {
		t.Errorf("a queue that held 3 datagrams keeps %d slots", c)
	}
}
