package quic

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

// TestRecvQueueBoundAndOrder checks the queue's bound, its order, the
// token that announces datagrams, and that a drained queue lets a burst's
// slices go.
func TestRecvQueueBoundAndOrder(t *testing.T) {
	q := newRecvQueue()
	for i := range recvQueueLen + 10 {
		d := &datagram{addr: netip.AddrPortFrom(netip.Addr{}, uint16(i))}
		if ok := q.push(d); ok != (i < recvQueueLen) {
			t.Fatalf("push %d = %v with %d waiting", i, ok, i)
		}
	}
	select {
	case <-q.wake:
	default:
		t.Fatal("no token after pushes")
	}
	for i := range recvQueueLen {
		d := q.pop()
		if d == nil || int(d.addr.Port()) != i {
			t.Fatalf("pop %d = %v", i, d)
		}
		if i == recvBatch {
			q.more()
			select {
			case <-q.wake:
			default:
				t.Fatal("no token for datagrams left in the loop's slice")
			}
		}
	}
	if d := q.pop(); d != nil {
		t.Fatalf("pop from a drained queue = %v", d)
	}
	// The slices keep their room while bursts come, and let it go once
	// none has come for recvQueueIdle.
	now := time.Now()
	q.trim(now) // notes the burst
	q.trim(now.Add(recvQueueIdle / 2))
	if cap(q.in)+cap(q.out) < recvQueueLen {
		t.Fatalf("queue let its slices go during a burst: %d + %d slots", cap(q.in), cap(q.out))
	}
	q.trim(now.Add(recvQueueIdle))
	if cap(q.in) > recvQueueKeep || cap(q.out) > recvQueueKeep {
		t.Fatalf("queue idle for %v holds %d + %d slots", recvQueueIdle, cap(q.in), cap(q.out))
	}
	q.more()
	select {
	case <-q.wake:
		t.Fatal("token with nothing left")
	default:
	}
}

// TestRecvQueueTurnDrainsExactly is the lost wake-up that stalled
// transfers: a datagram pushed while the token for the loop's leftovers is
// pending gets no token of its own; the turn that then pops exactly the
// leftovers must still leave a token for it.
func TestRecvQueueTurnDrainsExactly(t *testing.T) {
	q := newRecvQueue()
	turn := func() int {
		<-q.wake
		n := 0
		for range recvBatch + 1 {
			if q.pop() == nil {
				break
			}
			n++
		}
		q.more()
		return n
	}
	for range 2 * (recvBatch + 1) {
		q.push(&datagram{})
	}
	if n := turn(); n != recvBatch+1 {
		t.Fatalf("first turn popped %d", n)
	}
	q.push(&datagram{}) // the leftovers' token is pending: no new one
	if n := turn(); n != recvBatch+1 {
		t.Fatalf("second turn popped %d", n)
	}
	select {
	case <-q.wake:
	default:
		t.Fatal("a queued datagram is left without a token: the loop would sleep on it")
	}
	if q.pop() == nil {
		t.Fatal("the last datagram is gone")
	}
}

// TestRecvQueueNoLostWakeup runs a reader and a loop as the connection
// does (a token, a batch of at most recvBatch+1, more) and checks that
// every datagram pushed is popped: a lost wake-up hangs the test.
func TestRecvQueueNoLostWakeup(t *testing.T) {
	q := newRecvQueue()
	const n = 200000
	var pushed int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range n {
			if q.push(&datagram{}) {
				pushed++
			}
		}
	}()
	popped := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; ; {
		select {
		case <-q.wake:
		case <-done:
			finished = true
		}
		for range recvBatch + 1 {
			if q.pop() == nil {
				break
			}
			popped++
		}
		q.more()
		if finished {
			// The reader has stopped: whatever is left is announced.
			for {
				select {
				case <-q.wake:
					for range recvBatch + 1 {
						if q.pop() == nil {
							break
						}
						popped++
					}
					q.more()
					continue
				default:
				}
				break
			}
			break
		}
	}
	if popped != pushed {
		t.Fatalf("popped %d of %d pushed datagrams", popped, pushed)
	}
	t.Logf("%d pushed (%d dropped at the bound), all popped", pushed, n-pushed)
}
