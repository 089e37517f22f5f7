package variants

import (
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recordConn is a PacketConn that records what is written and when.
type recordConn struct {
	net.PacketConn
	mu  sync.Mutex
	got []string
	at  []time.Time
}

func (r *recordConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, string(b))
	r.at = append(r.at, time.Now())
	return len(b), nil
}

func (r *recordConn) Close() error { return nil }

// TestDelayConn: writes leave after the delay, in order, each once, and
// Close stops the writer.
func TestDelayConn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recordConn{}
		c := newDelayConn(rec, 50*time.Millisecond)
		start := time.Now()
		buf := []byte("one")
		c.WriteTo(buf, nil)
		copy(buf, "XXX") // the queued copy is the caller's no longer
		time.Sleep(10 * time.Millisecond)
		c.WriteTo([]byte("two"), nil)
		synctest.Wait()
		rec.mu.Lock()
		if len(rec.got) != 0 {
			t.Errorf("written before the delay: %v", rec.got)
		}
		rec.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		rec.mu.Lock()
		if len(rec.got) != 2 || rec.got[0] != "one" || rec.got[1] != "two" {
			t.Errorf("written %v, want one, two", rec.got)
		} else if rec.at[0].Sub(start) != 50*time.Millisecond || rec.at[1].Sub(start) != 60*time.Millisecond {
			t.Errorf("written at %v and %v after the start, want 50ms and 60ms", rec.at[0].Sub(start), rec.at[1].Sub(start))
		}
		rec.mu.Unlock()
		c.Close()
		if _, err := c.WriteTo([]byte("late"), nil); err == nil {
			t.Error("write after Close succeeded")
		}
	})
}
