package quic

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// memNet is an in-process UDP network for tests in a synctest bubble.
// Datagrams take delay to arrive; policy may drop or reorder them.
type memNet struct {
	mu     sync.Mutex
	conns  map[netip.AddrPort]*memConn
	fifo   map[netip.AddrPort][]memPkt
	delay  time.Duration
	count  int
	policy func(n int, from, to netip.AddrPort, b []byte) (drop bool, extraDelay time.Duration)
}

func newMemNet(delay time.Duration) *memNet {
	return &memNet{conns: make(map[netip.AddrPort]*memConn), fifo: make(map[netip.AddrPort][]memPkt), delay: delay}
}

type memPkt struct {
	b    []byte
	from netip.AddrPort
}

type memConn struct {
	n      *memNet
	addr   netip.AddrPort
	in     chan memPkt
	closed chan struct{}
	once   sync.Once
}

func (n *memNet) listen(addr string) *memConn {
	c := &memConn{n: n, addr: netip.MustParseAddrPort(addr), in: make(chan memPkt, 4096), closed: make(chan struct{})}
	n.mu.Lock()
	n.conns[c.addr] = c
	n.mu.Unlock()
	return c
}

func (c *memConn) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case p := <-c.in:
		return copy(b, p.b), net.UDPAddrFromAddrPort(p.from), nil
	case <-c.closed:
		return 0, nil, net.ErrClosed
	}
}

func (c *memConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	to := addr.(*net.UDPAddr).AddrPort()
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	n := c.n
	n.mu.Lock()
	from := c.addr
	dst := n.conns[to]
	n.count++
	cnt := n.count
	delay := n.delay
	if n.policy != nil && dst != nil {
		drop, extra := n.policy(cnt, from, to, b)
		if drop {
			dst = nil
		}
		delay += extra
	}
	n.mu.Unlock()
	if dst == nil {
		return len(b), nil
	}
	p := memPkt{b: append([]byte(nil), b...), from: from}
	deliver := func(p memPkt) {
		select {
		case dst.in <- p:
		case <-dst.closed:
		default: // queue full: dropped like a real socket would
		}
	}
	if delay != n.delay {
		// Extra delay: this datagram is reordered on purpose.
		time.AfterFunc(delay, func() { deliver(p) })
		return len(b), nil
	}
	// Datagrams with the base delay arrive in the order they were sent:
	// each timer delivers the oldest one waiting.
	n.mu.Lock()
	n.fifo[to] = append(n.fifo[to], p)
	n.mu.Unlock()
	time.AfterFunc(delay, func() {
		n.mu.Lock()
		q := n.fifo[to]
		p := q[0]
		n.fifo[to] = q[1:]
		n.mu.Unlock()
		deliver(p)
	})
	return len(b), nil
}

func (c *memConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.n.mu.Lock()
		if c.n.conns[c.addr] == c {
			delete(c.n.conns, c.addr)
		}
		c.n.mu.Unlock()
	})
	return nil
}

func (c *memConn) LocalAddr() net.Addr {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	return net.UDPAddrFromAddrPort(c.addr)
}
func (c *memConn) SetDeadline(t time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(t time.Time) error { return nil }

// rebind moves the socket at old to a new address, as a NAT that changes
// its mapping does: datagrams it sends come from new, and datagrams still
// addressed to old are lost.
func (n *memNet) rebind(old, new string) {
	o, nw := netip.MustParseAddrPort(old), netip.MustParseAddrPort(new)
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.conns[o]
	delete(n.conns, o)
	c.addr = nw
	n.conns[nw] = c
}
