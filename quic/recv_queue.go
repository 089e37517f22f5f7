package quic

import "sync"

// recvQueue carries received datagrams from the endpoint's reader to the
// connection's loop. It replaces a channel of recvQueueLen slots, which
// cost every connection 4 KiB whether it moved data or sat idle: here the
// producer appends to one slice and the loop swaps it for its own, so
// memory follows the largest burst the connection has seen (a handful of
// slots for a connection that only handshook), and the lock is taken once
// per burst on the loop's side rather than once per datagram.
type recvQueue struct {
	mu sync.Mutex
	in []*datagram // appended by push, under mu
	// ready holds a token while in may be non-empty, for the loop's
	// select.
	ready chan struct{}

	// Owned by the loop.
	out []*datagram
	pos int // next datagram of out to hand out
}

func newRecvQueue() recvQueue {
	return recvQueue{ready: make(chan struct{}, 1)}
}

// push queues d and reports whether there was room: at most recvQueueLen
// datagrams wait beyond what the loop has taken.
func (q *recvQueue) push(d *datagram) bool {
	q.mu.Lock()
	if len(q.in) >= recvQueueLen {
		q.mu.Unlock()
		return false
	}
	q.in = append(q.in, d)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// pop returns the next datagram, or nil when none is queued. Only the
// loop calls it.
func (q *recvQueue) pop() *datagram {
	if q.pos == len(q.out) {
		clear(q.out)
		q.mu.Lock()
		q.out, q.in = q.in, q.out[:0]
		q.mu.Unlock()
		q.pos = 0
		if len(q.out) == 0 {
			return nil
		}
	}
	d := q.out[q.pos]
	q.pos++
	return d
}

// more reports whether datagrams the loop has taken are still waiting;
// the loop then makes sure it comes back to them.
func (q *recvQueue) more() bool { return q.pos < len(q.out) }

// rearm puts the token back so that the loop's select returns at once.
func (q *recvQueue) rearm() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// drain releases every queued datagram; the loop calls it when it ends.
func (q *recvQueue) drain() {
	for d := q.pop(); d != nil; d = q.pop() {
		d.release()
	}
}
