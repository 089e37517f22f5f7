package netem

import (
	"container/heap"
	"sync"
	"time"
)

// A timedQueue hands items to deliver at their due time, in (time, push)
// order and a batch of every item due at once, from a single
// time.AfterFunc timer. Timers rather than a goroutine
// per queue keep the in-process Network free of long-lived goroutines, and
// work unchanged under testing/synctest, where AfterFunc runs on the
// bubble's fake clock.
type timedQueue[T any] struct {
	deliver func(now time.Time, items []T)

	mu      sync.Mutex
	h       timedHeap[T]
	seq     uint64
	timer   *time.Timer
	timerAt time.Time // when timer fires; zero when it is not armed
	stopped bool
	batch   []T
	// inflight counts the items taken for delivery but not yet
	// delivered, so that len sees them.
	inflight int
	// empty, when not nil, is closed once the queue next holds nothing
	// (see emptied).
	empty chan struct{}

	// delivering serialises the delivery of batches, so that two timer
	// callbacks never deliver out of order.
	delivering sync.Mutex
}

type timed[T any] struct {
	at   time.Time
	seq  uint64
	item T
}

type timedHeap[T any] []timed[T]

func (h timedHeap[T]) Len() int { return len(h) }
func (h timedHeap[T]) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timedHeap[T]) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timedHeap[T]) Push(x any)   { *h = append(*h, x.(timed[T])) }
func (h *timedHeap[T]) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = timed[T]{}
	*h = old[:len(old)-1]
	return x
}

func newTimedQueue[T any](deliver func(time.Time, T)) *timedQueue[T] {
	return &timedQueue[T]{deliver: func(now time.Time, items []T) {
		for _, it := range items {
			deliver(now, it)
		}
	}}
}

// newTimedBatchQueue is newTimedQueue for a deliver function that takes
// every due item at once.
func newTimedBatchQueue[T any](deliver func(time.Time, []T)) *timedQueue[T] {
	return &timedQueue[T]{deliver: deliver}
}

// push schedules item for delivery at at. It reports false after stop.
func (q *timedQueue[T]) push(at time.Time, item T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return false
	}
	heap.Push(&q.h, timed[T]{at, q.seq, item})
	q.seq++
	if q.timerAt.IsZero() || at.Before(q.timerAt) {
		q.arm(at)
	}
	return true
}

// arm sets the timer to fire at at. q.mu is held.
func (q *timedQueue[T]) arm(at time.Time) {
	q.timerAt = at
	d := time.Until(at)
	if q.timer == nil {
		q.timer = time.AfterFunc(d, q.fire)
	} else {
		q.timer.Reset(d)
	}
}

// fire delivers every item that is due and re-arms the timer for the next.
func (q *timedQueue[T]) fire() {
	q.delivering.Lock()
	defer q.delivering.Unlock()
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return
	}
	now := time.Now()
	batch := q.batch[:0]
	for len(q.h) > 0 && !q.h[0].at.After(now) {
		batch = append(batch, heap.Pop(&q.h).(timed[T]).item)
	}
	q.timerAt = time.Time{}
	if len(q.h) > 0 {
		q.arm(q.h[0].at)
	}
	q.inflight = len(batch)
	q.mu.Unlock()
	if len(batch) > 0 {
		q.deliver(now, batch)
	}
	clear(batch)
	q.mu.Lock()
	q.batch = batch
	q.inflight = 0
	if len(q.h) == 0 {
		q.signalEmpty()
	}
	q.mu.Unlock()
}

// emptied returns a channel that is closed once every queued item has been
// delivered (or the queue stopped), or nil if nothing is queued now.
func (q *timedQueue[T]) emptied() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped || len(q.h)+q.inflight == 0 {
		return nil
	}
	if q.empty == nil {
		q.empty = make(chan struct{})
	}
	return q.empty
}

// signalEmpty wakes the waiters of emptied. q.mu is held.
func (q *timedQueue[T]) signalEmpty() {
	if q.empty != nil {
		close(q.empty)
		q.empty = nil
	}
}

// stop cancels every pending delivery and waits for a running one to end.
// It must not be called from deliver.
func (q *timedQueue[T]) stop() {
	q.mu.Lock()
	q.stopped = true
	if q.timer != nil {
		q.timer.Stop()
	}
	q.h = nil
	q.signalEmpty()
	q.mu.Unlock()
	q.delivering.Lock()
	q.delivering.Unlock() //nolint:staticcheck // an empty critical section waits for fire to finish
}

// len returns the number of items not yet delivered, including a batch
// being delivered.
func (q *timedQueue[T]) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.h) + q.inflight
}
