// Package tailbuf keeps the last bytes of a child process's output, so a
// failure report can quote what the process said last without holding all
// of a long run's logs in memory.
package tailbuf

import "sync"

// Buffer is an io.Writer that keeps the last Max bytes written to it. It is
// safe for concurrent use (a process's stdout and stderr write at once).
type Buffer struct {
	Max int

	mu  sync.Mutex
	buf []byte
}

// Write appends b, drops what is older than the last Max bytes, and never
// fails.
func (t *Buffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.Max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// String returns the bytes kept.
func (t *Buffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
