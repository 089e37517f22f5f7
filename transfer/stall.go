package transfer

import (
	"io"
	"sync/atomic"
	"time"
)

// stallWatch tells when a download has received no body bytes for a
// while: after every, and again after each further every, until bytes
// arrive or the download ends. One goroutine per download owns the timer.
type stallWatch struct {
	url   string
	every time.Duration
	fn    func(url string, bytes int64, idle time.Duration)
	n     atomic.Int64
	kick  chan struct{}
	done  chan struct{}
	ended chan struct{}
}

func newStallWatch(url string, every time.Duration, fn func(string, int64, time.Duration)) *stallWatch {
	s := &stallWatch{url: url, every: every, fn: fn, kick: make(chan struct{}, 1), done: make(chan struct{}), ended: make(chan struct{})}
	go s.run()
	return s
}

func (s *stallWatch) run() {
	defer close(s.ended)
	t := time.NewTimer(s.every)
	defer t.Stop()
	var idle time.Duration
	for {
		select {
		case <-s.done:
			return
		case <-s.kick:
			idle = 0
			t.Reset(s.every)
		case <-t.C:
			idle += s.every
			s.fn(s.url, s.n.Load(), idle)
			t.Reset(s.every)
		}
	}
}

// progress records n more bytes.
func (s *stallWatch) progress(n int) {
	if n == 0 {
		return
	}
	s.n.Add(int64(n))
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// stop ends the watch and waits for its goroutine, so that no notice
// comes after the download returned.
func (s *stallWatch) stop() {
	close(s.done)
	<-s.ended
}

// stallWriter reports each write to its watch.
type stallWriter struct {
	w  io.Writer
	sw *stallWatch
}

func (s *stallWriter) Write(b []byte) (int, error) {
	n, err := s.w.Write(b)
	s.sw.progress(n)
	return n, err
}
