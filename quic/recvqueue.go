package quic

import (
	"sync"
	"time"
)

// recvQueue carries received datagrams from the endpoint's reader to the
// connection's loop. It replaces a buffered channel of recvQueueLen slots,
// which every connection held in full (4 KiB) however idle it was: the
// queue's slices grow with the bursts that arrive and are let go a while
// after the last burst (trim), so that an idle connection holds a few
// slots.
//
// The reader appends to in under mu and then offers a token on wake. The
// loop, on a token, swaps in for its drained out slice and pops from out
// without the lock. A datagram is never left without a token pending or
// the loop about to look: the reader's token follows its append, so the
// loop's swap after taking any token sees the datagram; and at the end of
// each turn (which handles at most recvBatch+1) the loop looks at both
// slices again and offers itself a token when anything waits (more).
type recvQueue struct {
	mu   sync.Mutex
	in   []*datagram
	wake chan struct{} // capacity 1

	// Owned by the loop.
	out  []*datagram
	next int
	// burstAt is when the loop last took a batch larger than
	// recvQueueSmall; slices grown past recvQueueKeep are let go once
	// recvQueueIdle has passed without one (trim).
	burst   bool
	burstAt time.Time
}

const (
	recvQueueSmall = 16
	recvQueueKeep  = 64
	recvQueueIdle  = time.Second
)

func newRecvQueue() recvQueue { return recvQueue{wake: make(chan struct{}, 1)} }

// push queues d for the loop. It reports false, keeping nothing, when
// recvQueueLen datagrams are already waiting.
func (q *recvQueue) push(d *datagram) bool {
	q.mu.Lock()
	if len(q.in) >= recvQueueLen {
		q.mu.Unlock()
		return false
	}
	q.in = append(q.in, d)
	q.mu.Unlock()
	q.signal()
	return true
}

// signal offers the loop a token, unless one is pending.
func (q *recvQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop returns the next queued datagram, or nil when none is waiting. Only
// the loop calls it.
func (q *recvQueue) pop() *datagram {
	if q.next == len(q.out) {
		q.refill()
		if len(q.out) == 0 {
			return nil
		}
	}
	d := q.out[q.next]
	q.out[q.next] = nil
	q.next++
	return d
}

// more offers the loop a token when datagrams are still waiting, so that
// it returns to them after the turn instead of sleeping. A turn that
// drained out exactly has not looked at in: a datagram pushed there while
// a token was pending (the token this turn consumed) has no token of its
// own, so more swaps it in first.
func (q *recvQueue) more() {
	if q.next == len(q.out) {
		q.refill()
	}
	if q.next < len(q.out) {
		q.signal()
	}
}

// refill swaps the reader's slice for the drained out slice. Both keep
// their capacity, so that a transfer's queue allocates nothing once grown.
func (q *recvQueue) refill() {
	spare := q.out[:0]
	q.mu.Lock()
	batch := q.in
	q.in = spare
	q.mu.Unlock()
	q.out, q.next = batch, 0
	if len(batch) > recvQueueSmall {
		q.burst = true
	}
}

// trim lets slices grown by past bursts go once no burst has come for
// recvQueueIdle, so that a connection that has gone quiet holds a few
// slots. The loop calls it when its timer fires.
func (q *recvQueue) trim(now time.Time) {
	if q.burst {
		q.burst, q.burstAt = false, now
		return
	}
	if now.Sub(q.burstAt) < recvQueueIdle || q.next < len(q.out) {
		return
	}
	if cap(q.out) > recvQueueKeep {
		q.out, q.next = nil, 0
	}
	q.mu.Lock()
	if len(q.in) == 0 && cap(q.in) > recvQueueKeep {
		q.in = nil
	}
	q.mu.Unlock()
}
