package rpc

import (
	"context"
	"fmt"
	"io"
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

// recvFunc reads a client's request messages from q on the server: a
// message frame is a message, an end frame the end of the stream (io.EOF),
// and a failed queue or a done ctx the end of the call. Messages larger
// than max fail with ResourceExhausted.
func (q *callQueue) recvFunc(ctx context.Context, max int) func() ([]byte, error) {
	ended := false
	return func() ([]byte, error) {
		if ended {
			return nil, io.EOF
		}
		f, err := q.pop(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctxStatus(ctx)
			}
			return nil, unavailable(false, "request stream broken: %v", err)
		}
		if f.typ == frameEnd {
			ended = true
			return nil, io.EOF
		}
		if len(f.data) > max {
			return nil, &Status{Code: ResourceExhausted, Message: fmt.Sprintf("request message of %d bytes exceeds the limit of %d", len(f.data), max)}
		}
		return f.data, nil
	}
}

// streamEnd is what a request stream's end looks like in a callQueue.
var streamEnd = frame{typ: frameEnd}
