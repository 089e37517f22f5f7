package netem

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Listen is the client-facing address; port 0 picks a free port.
	Listen netip.AddrPort
	// Server is where client datagrams go.
	Server netip.AddrPort
	// UpstreamAddr is the local address of the server-facing sockets. By
	// default it is the loopback address when Server is on loopback, and
	// the unspecified address otherwise.
	UpstreamAddr netip.Addr

	// ToServer and ToClient are the two directions of the link. All
	// clients share them, as they would share a bottleneck.
	ToServer, ToClient Link
	// Seed seeds every random choice of the run.
	Seed uint64
	// Rebind, if set, rebinds every client's mapping on this schedule,
	// counted from t0: the relay moves the client to a new server-facing
	// socket, and server datagrams to the old one are dropped. With
	// Rebind.Addr, the new socket also gets a new address: from
	// RebindPool when set, else a 127.0.x.y address, which needs an IPv4
	// loopback server.
	Rebind Rebind
	// RebindPool, if valid, is where address rebinding draws the new
	// server-facing addresses from; they must be local to the relay
	// (Namespaces make NSRebindPool local to the router).
	RebindPool netip.Prefix
	// Capture, if set, sees every datagram once the relay is armed. Calls
	// are made with the relay's lock held.
	Capture CaptureFunc
	// Unarmed makes the relay forward without impairment or capture until
	// Arm, so that a readiness probe never shows in a trace and the
	// scenario clock starts with the real test.
	Unarmed bool
	// ListenUDP, if set, opens the relay's sockets instead of
	// net.ListenUDP, e.g. in another network namespace
	// (Namespaces.ListenUDP).
	ListenUDP func(network string, laddr *net.UDPAddr) (*net.UDPConn, error)
	// SocketBuffer is the receive and send buffer asked for each socket;
	// 0 means 4 MiB (more than rmem_max needs root, which it then uses).
	SocketBuffer int
	// Alternates are further server addresses the relay stands for, such
	// as a server's preferred address (RFC 9000 §9.6): what a client sends
	// to an alternate's Listen goes to its Server through the same link and
	// from the same server-facing socket as the client's other datagrams,
	// and what that server address sends back comes to the client from
	// Listen.
	Alternates []RelayAlternate
}

// A RelayAlternate is one further server address of a Relay.
type RelayAlternate struct {
	// Listen is the client-facing address; port 0 picks a free port.
	Listen netip.AddrPort
	// Server is where the datagrams sent to Listen go.
	Server netip.AddrPort
	// ListenUDP, if set, opens the client-facing socket instead of
	// RelayConfig.ListenUDP: Namespaces.ListenUDPTransparent lets a relay
	// in a router answer on an address that is not its own.
	ListenUDP func(network string, laddr *net.UDPAddr) (*net.UDPConn, error)
}

// A Relay is a UDP relay between processes that applies a Link in each
// direction: clients send to Addr, and the relay forwards to Server from
// one socket per client, so that the server sees the relay and its replies
// come back through it.
//
// Each socket is read and written in batches (recvmmsg, sendmmsg). A
// datagram that the link lets through at once (no rate, delay or queue in
// its way) is written by the reader that read it, in the same batch, with
// no timer; the others wait on one timer per direction, accurate to well
// under a millisecond on an idle host. The IP ECN field of every datagram
// is read (IP_RECVTOS, IPV6_RECVTCLASS) and set again on the way out, so
// ECN marks cross the relay as they would cross a router.
//
// The Relay's view is all it can capture: the client side shows the
// client's datagrams as received by the relay and the server's as sent
// by it, with the relay's addresses. Events are stamped under the relay's
// lock with a clock that never goes back, so a trace is in time order.
type Relay struct {
	cfg  RelayConfig
	pool bufPool
	// fronts are the client-facing sockets: the main one first, then one
	// per alternate. Set by Start.
	fronts []*relayFront

	mu        sync.Mutex
	running   bool
	closed    bool
	armed     bool
	t0        time.Time
	hasT0     bool
	lastStamp time.Time
	dirs      [2]*relayDirection // ToServer, ToClient
	sessions  map[netip.AddrPort]*relaySession
	rng       *rand.Rand // upstream addresses and ports
	rebinds   []Rebinding
	stopCtx   func() bool
	readers   sync.WaitGroup
	done      chan struct{}
	upSockets []*batchConn
}

// A Rebinding records one NAT rebinding that the relay applied.
type Rebinding struct {
	Time   time.Time      `json:"time"`
	Client netip.AddrPort `json:"client"`
	Old    netip.AddrPort `json:"old"` // server-facing address before
	New    netip.AddrPort `json:"new"` // and after
}

type relayDirection struct {
	dir   Direction
	imp   *Impairer
	q     *timedQueue[relayDelivery]
	stats Stats
	// fast says that the link never holds a datagram back (no rate,
	// delay, jitter or reordering), so deliveries skip the timer.
	fast bool
	// w gathers the timer's deliveries; only the timer uses it.
	w writeBatch
}

// A relayFront is a client-facing socket and the server address it stands
// for.
type relayFront struct {
	conn     *batchConn
	addr     netip.AddrPort // as the client sees it
	server   netip.AddrPort
	serverUA *net.UDPAddr
}

type relaySession struct {
	client   netip.AddrPort
	clientUA *net.UDPAddr
	up       *relaySocket // the current server-facing socket
}

// A relaySocket is one server-facing socket; gen is the number of
// rebindings it was opened after, so that it is stale once the schedule has
// moved past it.
type relaySocket struct {
	s    *relaySession
	conn *batchConn
	addr netip.AddrPort
	gen  int
}

type relayDelivery struct {
	conn     *batchConn
	sock     *relaySocket // for server-to-client datagrams
	src, dst netip.AddrPort
	dstUA    *net.UDPAddr
	ecn      uint8
	buf      *[]byte // the datagram, a pooled copy
}

const defaultSocketBuffer = 4 << 20

// NewRelay checks cfg and returns a Relay ready to Start.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if !cfg.Server.IsValid() {
		return nil, errors.New("netem: relay needs a Server address")
	}
	cfg.Server = canon(cfg.Server)
	if !cfg.Listen.Addr().IsValid() {
		cfg.Listen = netip.AddrPortFrom(loopbackFor(cfg.Server.Addr()), cfg.Listen.Port())
	}
	if !cfg.UpstreamAddr.IsValid() {
		if cfg.Server.Addr().IsLoopback() {
			cfg.UpstreamAddr = loopbackFor(cfg.Server.Addr())
		} else if cfg.Server.Addr().Is4() {
			cfg.UpstreamAddr = netip.IPv4Unspecified()
		} else {
			cfg.UpstreamAddr = netip.IPv6Unspecified()
		}
	}
	if cfg.ListenUDP == nil {
		cfg.ListenUDP = net.ListenUDP
	}
	if cfg.Rebind.Addr && !cfg.RebindPool.IsValid() && !(cfg.Server.Addr().Is4() && cfg.Server.Addr().IsLoopback()) {
		return nil, fmt.Errorf("netem: relay: address rebinding needs an IPv4 loopback server or a RebindPool, not %s", cfg.Server)
	}
	if p := cfg.RebindPool; p.IsValid() && (!p.Addr().Is4() || p.Bits() > 30) {
		return nil, fmt.Errorf("netem: relay: rebind pool %s is not an IPv4 prefix of at least 4 addresses", p)
	}
	if cfg.SocketBuffer <= 0 {
		cfg.SocketBuffer = defaultSocketBuffer
	}
	for i, a := range cfg.Alternates {
		if !a.Listen.Addr().IsValid() || !a.Server.IsValid() {
			return nil, fmt.Errorf("netem: relay alternate %d needs a Listen address and a Server", i)
		}
		cfg.Alternates[i].Listen, cfg.Alternates[i].Server = canon(a.Listen), canon(a.Server)
	}
	r := &Relay{
		cfg:      cfg,
		armed:    !cfg.Unarmed,
		sessions: make(map[netip.AddrPort]*relaySession),
		rng:      rand.New(rand.NewPCG(cfg.Seed, 2)),
		done:     make(chan struct{}),
	}
	for i, l := range []Link{cfg.ToServer, cfg.ToClient} {
		// Each direction draws from its own stream of the run's seed.
		imp, err := NewImpairer(l, cfg.Seed^uint64(i+1)*0x9e3779b97f4a7c15)
		if err != nil {
			return nil, fmt.Errorf("netem: relay %v link: %w", Direction(i+1), err)
		}
		d := &relayDirection{dir: Direction(i + 1), imp: imp,
			fast: l.Rate == 0 && l.Delay == 0 && l.Jitter == 0 && l.Reorder == 0}
		d.q = newTimedBatchQueue(func(_ time.Time, xs []relayDelivery) { r.deliver(d, xs) })
		r.dirs[i] = d
	}
	return r, nil
}

func loopbackFor(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	return netip.IPv6Loopback()
}

// String returns "to-server", "to-client" or "unknown".
func (d Direction) String() string {
	switch d {
	case ToServer:
		return "to-server"
	case ToClient:
		return "to-client"
	}
	return "unknown"
}

// Start opens the client-facing socket and starts relaying. Cancelling ctx
// stops the relay, as Stop does.
func (r *Relay) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running || r.closed {
		return errors.New("netem: relay already started")
	}
	alts := append([]RelayAlternate{{Listen: r.cfg.Listen, Server: r.cfg.Server}}, r.cfg.Alternates...)
	for _, a := range alts {
		listen := a.ListenUDP
		if listen == nil {
			listen = r.cfg.ListenUDP
		}
		c, err := listenBatch(listen, a.Listen, r.cfg.SocketBuffer)
		if err != nil {
			for _, f := range r.fronts {
				f.conn.c.Close()
			}
			r.fronts = nil
			return err
		}
		r.fronts = append(r.fronts, &relayFront{conn: c, addr: canon(c.c.LocalAddr().(*net.UDPAddr).AddrPort()),
			server: a.Server, serverUA: net.UDPAddrFromAddrPort(a.Server)})
	}
	r.running = true
	for _, f := range r.fronts {
		r.readers.Add(1)
		go r.readClients(f)
	}
	r.stopCtx = context.AfterFunc(ctx, func() { r.Stop() })
	return nil
}

// Addr returns the client-facing address, once started.
func (r *Relay) Addr() netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fronts) == 0 {
		return netip.AddrPort{}
	}
	return r.fronts[0].addr
}

// AlternateAddrs returns the client-facing address of each alternate, in
// the order of RelayConfig.Alternates, once started.
func (r *Relay) AlternateAddrs() []netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []netip.AddrPort
	for _, f := range r.fronts[min(1, len(r.fronts)):] {
		out = append(out, f.addr)
	}
	return out
}

// Arm starts impairment and capture; t0 is the next client datagram.
func (r *Relay) Arm() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = true
}

// Epoch returns t0, the arrival of the first client datagram after arming,
// and whether it has happened.
func (r *Relay) Epoch() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.t0, r.hasT0
}

// Stats returns the counters of each direction.
func (r *Relay) Stats() (toServer, toClient Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dirs[0].merged(), r.dirs[1].merged()
}

func (d *relayDirection) merged() Stats {
	s := d.imp.Stats()
	s.Delivered, s.DeliveredBytes = d.stats.Delivered, d.stats.DeliveredBytes
	s.LostNAT, s.LostReceiver = d.stats.LostNAT, d.stats.LostReceiver
	s.ECN = d.stats.ECN
	return s
}

// IOStats returns the system calls the relay has made so far in each
// direction and the datagrams they moved: towards the server it reads
// the client-facing sockets and writes the server-facing ones, towards
// the client the other way round.
func (r *Relay) IOStats() (toServer, toClient IOStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.fronts {
		toServer.addReads(&f.conn.io)
		toClient.addWrites(&f.conn.io)
	}
	for _, c := range r.upSockets {
		toClient.addReads(&c.io)
		toServer.addWrites(&c.io)
	}
	return toServer, toClient
}

// Rebindings returns the rebindings applied so far.
func (r *Relay) Rebindings() []Rebinding {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Rebinding(nil), r.rebinds...)
}

// Drain waits until every datagram in flight in direction d (ToServer or
// ToClient) has been delivered or dropped, or until ctx ends. A runner
// calls it after the client exits and before it stops the server, so that
// the client's last packets (a Finished, a CONNECTION_CLOSE) still reach
// the server through the emulated delay instead of dying with the link.
func (r *Relay) Drain(ctx context.Context, d Direction) error {
	if d != ToServer && d != ToClient {
		return fmt.Errorf("netem: relay: no direction %v", d)
	}
	q := r.dirs[d-1].q
	for {
		ch := q.emptied()
		if ch == nil {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Done is closed when the relay has stopped.
func (r *Relay) Done() <-chan struct{} { return r.done }

// Stop stops relaying, drops the datagrams in flight, closes every socket
// and waits for the relay's goroutines to end. It is safe to call more than
// once.
func (r *Relay) Stop() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		<-r.done
		return nil
	}
	r.closed = true
	running := r.running
	var socks []*batchConn
	for _, f := range r.fronts {
		socks = append(socks, f.conn)
	}
	socks = append(socks, r.upSockets...)
	if r.stopCtx != nil {
		r.stopCtx()
	}
	r.mu.Unlock()
	// Deliveries take r.mu, so stop them without holding it; after this no
	// delivery writes to a socket we are about to close.
	for _, d := range r.dirs {
		d.q.stop()
	}
	if running {
		for _, c := range socks {
			c.c.Close()
		}
		r.readers.Wait()
	}
	close(r.done)
	return nil
}

// generation returns how many rebindings the schedule has made by now.
// r.mu is held.
func (r *Relay) generation(now time.Time) int {
	if !r.hasT0 {
		return 0
	}
	return r.cfg.Rebind.count(now.Sub(r.t0))
}

// stamp reads the clock for an event. r.mu is held, so events are stamped
// in the order they are captured, and the stamps never go back (the wall
// clock may, monotonic readings aside).
func (r *Relay) stamp() time.Time {
	now := time.Now()
	if now.Before(r.lastStamp) {
		now = r.lastStamp
	}
	r.lastStamp = now
	return now
}

func (r *Relay) emit(e Event) {
	if r.cfg.Capture != nil {
		r.cfg.Capture(e)
	}
}

// readLoop reads conn a batch at a time and hands each batch to handle,
// which returns the datagrams to write at once.
func (r *Relay) readLoop(conn *batchConn, d *relayDirection, handle func(rb *readBatch, n int, w *writeBatch)) {
	defer r.readers.Done()
	rb := readBatches.Get().(*readBatch)
	defer readBatches.Put(rb)
	var w writeBatch
	for {
		n, err := conn.read(rb)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ICMP errors reported on the socket
		}
		conn.io.reads.Add(1)
		handle(rb, n, &w)
		// Written outside the lock: the Delivered events were captured
		// before, and an answer cannot be read before this write.
		if failed := w.flush(&r.pool); failed > 0 {
			r.mu.Lock()
			// The capture already shows them delivered; the counter
			// tells the truth.
			d.stats.LostReceiver += uint64(failed)
			r.mu.Unlock()
		}
	}
}

// readClients reads a client-facing socket.
func (r *Relay) readClients(f *relayFront) {
	r.readLoop(f.conn, r.dirs[0], func(rb *readBatch, n int, w *writeBatch) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed {
			return
		}
		now := r.stamp()
		for i := range n {
			p, from, ecn, size := rb.segments(i)
			f.conn.io.readDatagrams.Add(segmentCount(len(p), size))
			// A coalesced read is relayed datagram by datagram; the
			// writer joins them again where the link keeps them
			// together.
			for off := 0; off < len(p); off += size {
				r.fromClient(now, f, from, p[off:min(off+size, len(p))], ecn, w)
			}
		}
	})
}

// fromClient relays one client datagram. r.mu is held; p is the reader's
// buffer, valid until w is flushed.
func (r *Relay) fromClient(now time.Time, f *relayFront, client netip.AddrPort, p []byte, ecn uint8, w *writeBatch) {
	if r.armed && !r.hasT0 {
		r.t0, r.hasT0 = now, true
		r.dirs[0].imp.SetEpoch(now)
		r.dirs[1].imp.SetEpoch(now)
	}
	s := r.sessions[client]
	if s == nil {
		s = &relaySession{client: client, clientUA: net.UDPAddrFromAddrPort(client)}
		r.sessions[client] = s
	}
	if gen := r.generation(now); s.up == nil || s.up.gen < gen {
		old := s.up
		if err := r.openUpstream(s, gen); err != nil {
			return // no socket, no forwarding: like a NAT out of ports
		}
		if old != nil {
			r.rebinds = append(r.rebinds, Rebinding{now, client, old.addr, s.up.addr})
		}
	}
	sock := s.up
	if !r.armed {
		w.out = append(w.out, outgoing{conn: sock.conn, dst: f.serverUA, payload: p, ecn: ecn})
		return
	}
	r.impair(now, r.dirs[0], p, ecn, w, relayDelivery{conn: sock.conn, src: sock.addr, dst: f.server, dstUA: f.serverUA},
		Event{Time: now, Kind: Sent, Dir: ToServer, Src: client, Dst: f.addr, Payload: p, ECN: ecn})
}

// impair runs one datagram through a direction's link: it is captured as
// sent, then dropped, written at once (fast path) or queued for its
// delivery time. r.mu is held.
func (r *Relay) impair(now time.Time, d *relayDirection, p []byte, ecn uint8, w *writeBatch, x relayDelivery, sent Event) {
	d.stats.countECN(ecn)
	r.emit(sent)
	v := d.imp.Process(now, p)
	if v.Drop != NotDropped {
		sent.Kind, sent.Cause = Dropped, v.Drop
		r.emit(sent)
		return
	}
	v.Apply(p)
	x.ecn = ecn
	for i := range v.Copies {
		if d.fast && !v.At[i].After(now) && d.q.len() == 0 {
			// Nothing is held back and nothing waits: deliver now,
			// from the reader's own buffer.
			r.delivered(now, d, &x, p)
			w.out = append(w.out, outgoing{conn: x.conn, dst: x.dstUA, payload: p, ecn: ecn})
			continue
		}
		x.buf = r.pool.get(len(p))
		copy(*x.buf, p)
		d.q.push(v.At[i], x)
	}
}

// delivered captures and counts one delivery. r.mu is held.
func (r *Relay) delivered(now time.Time, d *relayDirection, x *relayDelivery, p []byte) {
	d.stats.Delivered++
	d.stats.DeliveredBytes += uint64(len(p))
	r.emit(Event{Time: now, Kind: Delivered, Dir: d.dir, Src: x.src, Dst: x.dst, Payload: p, ECN: x.ecn})
}

// openUpstream gives s a new server-facing socket. r.mu is held.
func (r *Relay) openUpstream(s *relaySession, gen int) error {
	local := netip.AddrPortFrom(r.cfg.UpstreamAddr, 0)
	if r.cfg.Rebind.Addr && gen > 0 {
		local = netip.AddrPortFrom(r.poolAddr(), 0)
	}
	c, err := listenBatch(r.cfg.ListenUDP, local, r.cfg.SocketBuffer)
	if err != nil {
		return err
	}
	a := canon(c.c.LocalAddr().(*net.UDPAddr).AddrPort())
	sock := &relaySocket{s: s, conn: c, addr: a, gen: gen}
	s.up = sock
	// Old sockets stay open until Stop, so that the server's datagrams to
	// a retired mapping are seen and dropped by the NAT rather than
	// refused by the kernel.
	r.upSockets = append(r.upSockets, c)
	r.readers.Add(1)
	go r.readServer(sock)
	return nil
}

// poolAddr draws a server-facing address for an address rebinding: from
// the rebind pool, never its first or last address, or from 127.0.x.y.
func (r *Relay) poolAddr() netip.Addr {
	p := r.cfg.RebindPool
	if !p.IsValid() {
		return netip.AddrFrom4([4]byte{127, 0, byte(r.rng.IntN(256)), byte(2 + r.rng.IntN(253))})
	}
	base := p.Masked().Addr().As4()
	size := uint32(1) << (32 - p.Bits())
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	n += 1 + uint32(r.rng.IntN(int(size-2)))
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// readServer reads one server-facing socket.
func (r *Relay) readServer(sock *relaySocket) {
	r.readLoop(sock.conn, r.dirs[1], func(rb *readBatch, n int, w *writeBatch) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed {
			return
		}
		now := r.stamp()
		for i := range n {
			p, from, ecn, size := rb.segments(i)
			sock.conn.io.readDatagrams.Add(segmentCount(len(p), size))
			f := r.front(from)
			if f == nil {
				continue // not the server: a NAT would not let it in
			}
			for off := 0; off < len(p); off += size {
				r.fromServer(now, sock, f, p[off:min(off+size, len(p))], ecn, w)
			}
		}
	})
}

// front returns the client-facing socket that stands for server address
// from, or nil when from is none of the server's.
func (r *Relay) front(from netip.AddrPort) *relayFront {
	for _, f := range r.fronts {
		if f.server == from {
			return f
		}
	}
	return nil
}

// fromServer relays one server datagram, which came from the server
// address that f stands for. r.mu is held.
func (r *Relay) fromServer(now time.Time, sock *relaySocket, f *relayFront, p []byte, ecn uint8, w *writeBatch) {
	s := sock.s
	if !r.armed || !r.hasT0 {
		w.out = append(w.out, outgoing{conn: f.conn, dst: s.clientUA, payload: p, ecn: ecn})
		return
	}
	d := r.dirs[1]
	x := relayDelivery{conn: f.conn, sock: sock, src: f.addr, dst: s.client, dstUA: s.clientUA}
	sent := Event{Time: now, Kind: Sent, Dir: ToClient, Src: f.server, Dst: sock.addr, Payload: p, ECN: ecn}
	if sock.gen < r.generation(now) && d.fast && d.q.len() == 0 {
		// A datagram to a retired mapping that would be delivered now
		// meets the NAT now.
		d.stats.countECN(ecn)
		r.emit(sent)
		d.imp.Process(now, p)
		d.stats.drop(DropNAT)
		sent.Kind, sent.Cause = Dropped, DropNAT
		r.emit(sent)
		return
	}
	r.impair(now, d, p, ecn, w, x, sent)
}

// deliver writes out a batch of datagram copies that are due, from a
// direction's timer.
func (r *Relay) deliver(d *relayDirection, xs []relayDelivery) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		for _, x := range xs {
			r.pool.put(x.buf)
		}
		return
	}
	now := r.stamp()
	for i := range xs {
		x := &xs[i]
		p := *x.buf
		if x.sock != nil && x.sock.gen < r.generation(now) {
			// The NAT sits on the client's side of the link, so a
			// datagram meets a rebinding that happened while it was in
			// flight.
			d.stats.drop(DropNAT)
			r.emit(Event{Time: now, Kind: Dropped, Dir: d.dir, Cause: DropNAT, Src: x.src, Dst: x.dst, Payload: p, ECN: x.ecn})
			r.pool.put(x.buf)
			continue
		}
		r.delivered(now, d, x, p)
		d.w.out = append(d.w.out, outgoing{conn: x.conn, dst: x.dstUA, payload: p, ecn: x.ecn, buf: x.buf})
	}
	r.mu.Unlock()
	// The timer's batches are serialised by the queue, so d.w is ours.
	if failed := d.w.flush(&r.pool); failed > 0 {
		r.mu.Lock()
		d.stats.LostReceiver += uint64(failed)
		r.mu.Unlock()
	}
}
