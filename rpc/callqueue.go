package rpc

import (
	"context"
	"sync"
)

// callQueue holds the frames that arrived for one client call until the
// caller reads them. It never blocks the connection's reader, so a slow
// stream consumer cannot stall the other calls on the connection.
type callQueue struct {
	mu    sync.Mutex
	items []frame
	err   error
	ready chan struct{}
}

func newCallQueue() *callQueue { return &callQueue{ready: make(chan struct{}, 1)} }

func (q *callQueue) push(f frame) {
	q.mu.Lock()
	q.items = append(q.items, f)
	q.mu.Unlock()
	q.signal()
}

// fail ends the queue: once the queued frames are read, pop returns err.
func (q *callQueue) fail(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	q.mu.Unlock()
	q.signal()
}

func (q *callQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pop waits for the next frame, the queue's error, or the end of ctx (in
// which case it returns ctx's status and ok false).
func (q *callQueue) pop(ctx context.Context) (frame, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			f := q.items[0]
			q.items[0] = frame{}
			q.items = q.items[1:]
			q.mu.Unlock()
			return f, nil
		}
		err := q.err
		q.mu.Unlock()
		if err != nil {
			return frame{}, err
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return frame{}, ctx.Err()
		}
	}
}
