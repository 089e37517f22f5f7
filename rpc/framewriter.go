package rpc

import (
	"io"
	"runtime"
	"sync"
)

// maxPending bounds the bytes queued for one connection before writers
// wait; it is the transport's backpressure.
const maxPending = 1 << 20

// frameWriter serialises frames onto one byte stream and batches them:
// the first writer that finds the stream idle writes, and frames appended
// meanwhile by other goroutines go out in its next write. Under load many
// frames share one system call; with one caller there is no hand-off to
// another goroutine.
//
// Before its first write the writer yields the processor once, so that
// goroutines already runnable (other calls' handlers, other callers) can
// append their frames to the same write. With nothing else runnable the
// yield returns at once; under load it turned one TLS record and one
// write(2) per frame into one per batch (docs/rpc.md, profile).
type frameWriter struct {
	w       io.Writer
	mu      sync.Mutex
	space   *sync.Cond // signalled when the queue drained or writing failed
	buf     []byte
	spare   []byte
	writing bool
	err     error
}

func newFrameWriter(w io.Writer) *frameWriter {
	fw := &frameWriter{w: w}
	fw.space = sync.NewCond(&fw.mu)
	return fw
}

// write appends a frame with add and makes sure it is written.
func (fw *frameWriter) write(add func([]byte) []byte) error {
	fw.mu.Lock()
	for len(fw.buf) > maxPending && fw.err == nil {
		fw.space.Wait()
	}
	if fw.err != nil {
		err := fw.err
		fw.mu.Unlock()
		return err
	}
	fw.buf = add(fw.buf)
	if fw.writing {
		fw.mu.Unlock()
		return nil
	}
	fw.writing = true
	fw.mu.Unlock()
	runtime.Gosched()
	fw.mu.Lock()
	for len(fw.buf) > 0 && fw.err == nil {
		b := fw.buf
		fw.buf = fw.spare[:0]
		fw.mu.Unlock()
		_, err := fw.w.Write(b)
		fw.mu.Lock()
		if cap(b) <= 4*maxPending {
			fw.spare = b[:0]
		}
		if err != nil {
			fw.err = err
		}
		fw.space.Broadcast()
	}
	fw.writing = false
	err := fw.err
	fw.mu.Unlock()
	return err
}

// fail makes every later write return err.
func (fw *frameWriter) fail(err error) {
	fw.mu.Lock()
	if fw.err == nil {
		fw.err = err
	}
	fw.space.Broadcast()
	fw.mu.Unlock()
}
