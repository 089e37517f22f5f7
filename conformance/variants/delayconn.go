package variants

import (
	"net"
	"sync"
	"time"
)

// delayConn is a socket whose writes leave after a fixed delay, in
// order: a peer slow to answer, with its own address (a relay in front
// would stand for a NAT and turn the tester's moves to a new IP address
// into new ports, which RFC 9000 §9.4 treats differently).
type delayConn struct {
	net.PacketConn
	delay time.Duration
	queue chan delayed
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

type delayed struct {
	b   []byte
	to  net.Addr
	due time.Time
}

func newDelayConn(pc net.PacketConn, d time.Duration) *delayConn {
	c := &delayConn{PacketConn: pc, delay: d, queue: make(chan delayed, 4096), done: make(chan struct{})}
	c.wg.Add(1)
	go c.run()
	return c
}

func (c *delayConn) run() {
	defer c.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case d := <-c.queue:
			if wait := time.Until(d.due); wait > 0 {
				t.Reset(wait)
				select {
				case <-c.done:
					return
				case <-t.C:
				}
			}
			c.PacketConn.WriteTo(d.b, d.to)
		}
	}
}

// WriteTo queues b to leave after the delay; a full queue drops it, as a
// full link would.
func (c *delayConn) WriteTo(b []byte, to net.Addr) (int, error) {
	select {
	case <-c.done:
		return 0, net.ErrClosed
	default:
	}
	select {
	case c.queue <- delayed{b: append([]byte(nil), b...), to: to, due: time.Now().Add(c.delay)}:
	case <-c.done:
		return 0, net.ErrClosed
	default:
	}
	return len(b), nil
}

func (c *delayConn) Close() error {
	c.once.Do(func() { close(c.done) })
	c.wg.Wait()
	return c.PacketConn.Close()
}
