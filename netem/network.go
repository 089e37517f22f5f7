package netem

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"
)

// NetworkConfig configures a Network. The zero value is a perfect network
// with seed 0.
type NetworkConfig struct {
	// Seed seeds every random choice; the same seed and the same traffic
	// give the same run.
	Seed uint64
	// Link applies to every direction without its own (SetLink).
	Link Link
	// Capture, if set, sees every datagram. It is called with the
	// Network's lock held: it must not call the Network.
	Capture CaptureFunc
	// ReceiveBuffer bounds the bytes queued for a reader in each Conn, as a
	// socket's receive buffer does; datagrams beyond it are dropped.
	// 0 means 4 MiB.
	ReceiveBuffer int
}

// A Network is an in-process datagram network for tests. Endpoints are
// Conns (net.PacketConns) created by Listen; datagrams between two of them
// cross an Impairer per direction, and are delivered by timers.
//
// Create and use a Network inside a testing/synctest bubble to get exact,
// instant timing: the delivery timers and read deadlines then run on the
// bubble's fake clock. It also works on the real clock.
type Network struct {
	cfg NetworkConfig

	mu      sync.Mutex
	closed  bool
	links   map[pathKey]Link
	dirs    map[pathKey]*netDirection
	conns   map[netip.AddrPort]*Conn
	nats    map[netip.AddrPort]*nat   // by the client's own address
	natExt  map[netip.AddrPort]natRef // by external address
	nextEph map[netip.Addr]uint16     // next ephemeral port per address
}

type pathKey struct{ from, to netip.AddrPort }

type natRef struct {
	nat   *nat
	index int
}

// A netDirection is the link from one endpoint to another.
type netDirection struct {
	imp   *Impairer
	q     *timedQueue[netDelivery]
	stats Stats // delivery-side counters; the ingress ones are in imp
}

// A netDelivery is a datagram copy on its way.
type netDelivery struct {
	d       *netDirection
	src     netip.AddrPort // as the receiver sees it
	dst     netip.AddrPort // as the sender addressed it
	realDst netip.AddrPort // the receiving Conn
	payload []byte
}

const defaultReceiveBuffer = 4 << 20

// NewNetwork returns an empty Network.
func NewNetwork(cfg NetworkConfig) (*Network, error) {
	if err := cfg.Link.Validate(); err != nil {
		return nil, err
	}
	if cfg.ReceiveBuffer <= 0 {
		cfg.ReceiveBuffer = defaultReceiveBuffer
	}
	return &Network{
		cfg:     cfg,
		links:   make(map[pathKey]Link),
		dirs:    make(map[pathKey]*netDirection),
		conns:   make(map[netip.AddrPort]*Conn),
		nats:    make(map[netip.AddrPort]*nat),
		natExt:  make(map[netip.AddrPort]natRef),
		nextEph: make(map[netip.Addr]uint16),
	}, nil
}

// SetLink sets the link from one endpoint to another, replacing the
// default for that direction. Call it once per direction; calling it
// after traffic has flowed starts the direction afresh.
func (n *Network) SetLink(from, to netip.AddrPort, l Link) error {
	if err := l.Validate(); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	k := pathKey{canon(from), canon(to)}
	n.links[k] = l
	if d := n.dirs[k]; d != nil {
		imp, _ := NewImpairer(l, seedFor(n.cfg.Seed, k.from, k.to))
		imp.SetEpoch(d.imp.Epoch())
		d.imp = imp
	}
	return nil
}

// SetRebind puts the endpoint at client behind a NAT that rebinds on the
// given schedule, counted from the client's next datagram.
func (n *Network) SetRebind(client netip.AddrPort, r Rebind) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.natFor(canon(client)).schedule = r
}

// Rebind rebinds the client's NAT mapping now, putting the client behind a
// NAT if it was not, and returns the new external address.
func (n *Network) Rebind(client netip.AddrPort) netip.AddrPort {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.natFor(canon(client))
	t.manual++
	return t.mappings[n.natCurrent(t, time.Now())]
}

// ExternalAddr returns the address that others see for the endpoint at
// client: its own address unless it is behind a NAT that has rebound.
func (n *Network) ExternalAddr(client netip.AddrPort) netip.AddrPort {
	n.mu.Lock()
	defer n.mu.Unlock()
	client = canon(client)
	t := n.nats[client]
	if t == nil || !t.started {
		return client
	}
	return t.mappings[n.natCurrent(t, time.Now())]
}

func (n *Network) natFor(client netip.AddrPort) *nat {
	t := n.nats[client]
	if t == nil {
		t = &nat{
			client:   client,
			rng:      rand.New(rand.NewPCG(seedFor(n.cfg.Seed, client), 1)),
			mappings: []netip.AddrPort{client},
		}
		n.nats[client] = t
		n.natExt[client] = natRef{t, 0}
	}
	return t
}

// natCurrent brings t up to date and registers its new mappings.
func (n *Network) natCurrent(t *nat, now time.Time) int {
	had := len(t.mappings)
	i := t.current(now, func(a netip.AddrPort) bool {
		_, conn := n.conns[a]
		_, ext := n.natExt[a]
		return conn || ext
	})
	for j := had; j < len(t.mappings); j++ {
		n.natExt[t.mappings[j]] = natRef{t, j}
	}
	return i
}

// Stats returns the counters of the direction from one endpoint to
// another (by their own addresses, not NAT mappings).
func (n *Network) Stats(from, to netip.AddrPort) Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.dirs[pathKey{canon(from), canon(to)}]
	if d == nil {
		return Stats{}
	}
	return d.merged()
}

func (d *netDirection) merged() Stats {
	s := d.imp.Stats()
	s.Delivered, s.DeliveredBytes = d.stats.Delivered, d.stats.DeliveredBytes
	s.LostNAT, s.LostNoRoute, s.LostReceiver = d.stats.LostNAT, d.stats.LostNoRoute, d.stats.LostReceiver
	return s
}

// Listen opens an endpoint at addr. Port 0 picks a free port. The address
// must be specific (e.g. 10.0.0.1), since it is the source others see.
func (n *Network) Listen(addr netip.AddrPort) (*Conn, error) {
	addr = canon(addr)
	if !addr.Addr().IsValid() || addr.Addr().IsUnspecified() {
		return nil, fmt.Errorf("netem: listen %s: use a specific address, such as 10.0.0.1:0", addr)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("netem: listen %s: %w", addr, net.ErrClosed)
	}
	if addr.Port() == 0 {
		p, ok := n.ephemeral(addr.Addr())
		if !ok {
			return nil, fmt.Errorf("netem: listen %s: no free port", addr)
		}
		addr = netip.AddrPortFrom(addr.Addr(), p)
	}
	if _, ok := n.conns[addr]; ok {
		return nil, fmt.Errorf("netem: listen %s: address already in use", addr)
	}
	c := &Conn{
		n:          n,
		addr:       addr,
		notify:     make(chan struct{}, 1),
		done:       make(chan struct{}),
		deadlineCh: make(chan struct{}),
	}
	n.conns[addr] = c
	return c, nil
}

// ephemeral picks a free port in the IANA dynamic range.
func (n *Network) ephemeral(a netip.Addr) (uint16, bool) {
	const lo, size = 49152, 65536 - 49152
	next := n.nextEph[a]
	for range size {
		p := uint16(lo + int(next)%size)
		next++
		ap := netip.AddrPortFrom(a, p)
		if _, used := n.conns[ap]; used {
			continue
		}
		if _, used := n.natExt[ap]; used {
			continue
		}
		n.nextEph[a] = next
		return p, true
	}
	return 0, false
}

// Close closes every Conn and cancels every datagram in flight.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	conns := n.conns
	n.conns = map[netip.AddrPort]*Conn{}
	var qs []*timedQueue[netDelivery]
	for _, d := range n.dirs {
		qs = append(qs, d.q)
	}
	n.mu.Unlock()
	// Stopping waits for a running delivery, which takes n.mu: so not under it.
	for _, q := range qs {
		q.stop()
	}
	for _, c := range conns {
		c.shut()
	}
	return nil
}

func (n *Network) direction(k pathKey) *netDirection {
	if d := n.dirs[k]; d != nil {
		return d
	}
	l, ok := n.links[k]
	if !ok {
		l = n.cfg.Link
	}
	imp, _ := NewImpairer(l, seedFor(n.cfg.Seed, k.from, k.to)) // validated when set
	// Both directions of a path share t0, the first datagram either way.
	if r := n.dirs[pathKey{k.to, k.from}]; r != nil {
		imp.SetEpoch(r.imp.Epoch())
	}
	d := &netDirection{imp: imp}
	d.q = newTimedQueue(n.deliver)
	n.dirs[k] = d
	return d
}

func (n *Network) emit(e Event) {
	if n.cfg.Capture != nil {
		n.cfg.Capture(e)
	}
}

// send carries p from the Conn at src towards dst.
func (n *Network) send(src, dst netip.AddrPort, p []byte) error {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return net.ErrClosed
	}
	n.emit(Event{Time: now, Kind: Sent, Src: src, Dst: dst, Payload: p})

	// The NAT sits on the client's side of the link: it translates the
	// source on the way out, and the destination only on delivery, so that
	// a datagram in flight during a rebinding meets the new mapping.
	from := src
	if t := n.nats[src]; t != nil {
		from = t.mappings[n.natCurrent(t, now)]
	}
	realDst := dst
	if ref := n.natExt[dst]; ref.nat != nil {
		realDst = ref.nat.client
	}
	d := n.direction(pathKey{src, realDst})
	v := d.imp.Process(now, p)
	if v.Drop != NotDropped {
		n.emit(Event{Time: now, Kind: Dropped, Cause: v.Drop, Src: src, Dst: dst, Payload: p})
		return nil
	}
	buf := append([]byte(nil), p...)
	v.Apply(buf)
	for i := range v.Copies {
		d.q.push(v.At[i], netDelivery{d: d, src: from, dst: dst, realDst: realDst, payload: buf})
	}
	return nil
}

// deliver hands a datagram copy to its Conn, from a timer.
func (n *Network) deliver(now time.Time, x netDelivery) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	cause := NotDropped
	if ref := n.natExt[x.dst]; ref.nat != nil && n.natCurrent(ref.nat, now) != ref.index {
		cause = DropNAT
	} else if c := n.conns[x.realDst]; c == nil {
		cause = DropNoRoute
	} else if !c.enqueue(x.src, x.payload, n.cfg.ReceiveBuffer) {
		cause = DropReceiver
	}
	if cause != NotDropped {
		x.d.stats.drop(cause)
		n.emit(Event{Time: now, Kind: Dropped, Cause: cause, Src: x.src, Dst: x.dst, Payload: x.payload})
		return
	}
	x.d.stats.Delivered++
	x.d.stats.DeliveredBytes += uint64(len(x.payload))
	n.emit(Event{Time: now, Kind: Delivered, Src: x.src, Dst: x.realDst, Payload: x.payload})
}

func (n *Network) remove(c *Conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conns[c.addr] == c {
		delete(n.conns, c.addr)
	}
}

// canon unmaps IPv4-mapped IPv6 addresses, so that one endpoint has one key.
func canon(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// A Conn is an endpoint of a Network. It implements net.PacketConn with
// UDP semantics: datagrams may be lost, a read returns one datagram and
// discards what does not fit in the buffer, and writes never block.
type Conn struct {
	n    *Network
	addr netip.AddrPort

	mu         sync.Mutex
	q          []received
	qHead      int
	qBytes     int
	closed     bool
	deadline   time.Time
	deadlineCh chan struct{} // closed and replaced when the deadline changes

	// notify carries a token when the queue becomes non-empty. A channel
	// rather than a sync.Cond, because synctest only advances the clock
	// while goroutines are blocked on channels, not on a Cond.
	notify chan struct{}
	done   chan struct{}
}

type received struct {
	from    netip.AddrPort
	payload []byte
}

var _ net.PacketConn = (*Conn)(nil)

// enqueue queues a datagram for the reader; false if the buffer is full or
// the Conn closed.
func (c *Conn) enqueue(from netip.AddrPort, p []byte, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.qBytes+len(p) > limit {
		return false
	}
	c.q = append(c.q, received{from, p})
	c.qBytes += len(p)
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return true
}

// ReadFrom reads the next datagram into b and returns its size (cut to
// len(b)) and its source as a *net.UDPAddr.
func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, from, err := c.ReadFromUDPAddrPort(b)
	if err != nil {
		return 0, nil, err
	}
	return n, net.UDPAddrFromAddrPort(from), nil
}

// ReadFromUDPAddrPort is ReadFrom returning the source as a netip.AddrPort,
// as *net.UDPConn offers.
func (c *Conn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		c.mu.Lock()
		if c.qHead < len(c.q) {
			r := c.q[c.qHead]
			c.q[c.qHead] = received{}
			c.qHead++
			c.qBytes -= len(r.payload)
			if c.qHead == len(c.q) {
				c.q, c.qHead = c.q[:0], 0
			} else {
				// Another reader may be waiting for the rest.
				select {
				case c.notify <- struct{}{}:
				default:
				}
			}
			c.mu.Unlock()
			return copy(b, r.payload), r.from, nil
		}
		if c.closed {
			c.mu.Unlock()
			return 0, netip.AddrPort{}, c.opError("read", net.ErrClosed)
		}
		dl, dch := c.deadline, c.deadlineCh
		c.mu.Unlock()

		var expired <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, netip.AddrPort{}, c.opError("read", errDeadline)
			}
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			expired = timer.C
		}
		select {
		case <-c.notify:
		case <-c.done:
		case <-dch:
		case <-expired:
		}
	}
}

// errDeadline is what reads return at the deadline: its Timeout method
// says true, as net.Conn requires.
var errDeadline = os.ErrDeadlineExceeded

// WriteTo sends p to addr, which must be a *net.UDPAddr (or have an
// AddrPort method). Sending never blocks; a datagram the link cannot take is
// dropped, as by a real network.
func (c *Conn) WriteTo(p []byte, addr net.Addr) (int, error) {
	var to netip.AddrPort
	switch a := addr.(type) {
	case *net.UDPAddr:
		to = a.AddrPort()
	case interface{ AddrPort() netip.AddrPort }:
		to = a.AddrPort()
	default:
		return 0, c.opError("write", fmt.Errorf("unsupported address type %T", addr))
	}
	return c.WriteToUDPAddrPort(p, to)
}

// WriteToUDPAddrPort is WriteTo with a netip.AddrPort.
func (c *Conn) WriteToUDPAddrPort(p []byte, to netip.AddrPort) (int, error) {
	if len(p) > maxDatagram {
		return 0, c.opError("write", errors.New("message too long"))
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return 0, c.opError("write", net.ErrClosed)
	}
	if err := c.n.send(c.addr, canon(to), p); err != nil {
		return 0, c.opError("write", err)
	}
	return len(p), nil
}

// maxDatagram is the largest UDP payload over IPv4.
const maxDatagram = 65507

// Close closes the endpoint; a blocked read returns net.ErrClosed.
func (c *Conn) Close() error {
	if !c.shut() {
		return c.opError("close", net.ErrClosed)
	}
	c.n.remove(c)
	return nil
}

// shut closes the Conn's side; false if it already was.
func (c *Conn) shut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.closed = true
	c.q, c.qHead, c.qBytes = nil, 0, 0
	close(c.done)
	return true
}

// LocalAddr returns the endpoint's address as a *net.UDPAddr.
func (c *Conn) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(c.addr) }

// AddrPort returns the endpoint's address.
func (c *Conn) AddrPort() netip.AddrPort { return c.addr }

// SetDeadline sets the read deadline; writes never block.
func (c *Conn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

// SetReadDeadline makes reads fail with a timeout error at t; the zero time
// means no deadline. It wakes blocked reads, which then see the new value.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opError("set deadline", net.ErrClosed)
	}
	c.deadline = t
	close(c.deadlineCh)
	c.deadlineCh = make(chan struct{})
	return nil
}

// SetWriteDeadline is accepted and ignored, because writes never block.
func (c *Conn) SetWriteDeadline(time.Time) error { return nil }

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "udp", Source: c.LocalAddr(), Err: err}
}
