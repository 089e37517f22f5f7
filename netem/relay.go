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
	// Rebind.Addr, the new socket also gets a new 127.0.0.x address, which
	// needs an IPv4 loopback server.
	Rebind Rebind
	// Capture, if set, sees every datagram once the relay is armed. Calls
	// are made with the relay's lock held.
	Capture CaptureFunc
	// Unarmed makes the relay forward without impairment or capture until
	// Arm, so that a readiness probe never shows in a trace and the
	// scenario clock starts with the real test (interop design §2.3).
	Unarmed bool
	// SocketBuffer is the receive and send buffer asked for each socket;
	// 0 means 4 MiB, the host's rmem_max.
	SocketBuffer int
}

// A Relay is a UDP relay between processes that applies a Link in each
// direction: clients send to Addr, and the relay forwards to Server from
// one socket per client, so that the server sees the relay and its replies
// come back through it. Deliveries are scheduled on real timers, accurate
// to well under a millisecond on an idle host.
//
// The Relay's view is all it can capture: the client side shows the
// client's datagrams as received by the relay and the server's as sent
// by it, with the relay's addresses.
type Relay struct {
	cfg  RelayConfig
	down *net.UDPConn
	addr netip.AddrPort

	mu        sync.Mutex
	running   bool
	closed    bool
	armed     bool
	t0        time.Time
	hasT0     bool
	dirs      [2]*relayDirection // ToServer, ToClient
	sessions  map[netip.AddrPort]*relaySession
	rng       *rand.Rand // upstream addresses and ports
	rebinds   []Rebinding
	stopCtx   func() bool
	readers   sync.WaitGroup
	done      chan struct{}
	upSockets []*net.UDPConn
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
}

type relaySession struct {
	client netip.AddrPort
	up     *relaySocket // the current server-facing socket
}

// A relaySocket is one server-facing socket; gen is the number of
// rebindings it was opened after, so that it is stale once the schedule has
// moved past it.
type relaySocket struct {
	s    *relaySession
	conn *net.UDPConn
	addr netip.AddrPort
	gen  int
}

type relayDelivery struct {
	conn     *net.UDPConn
	sock     *relaySocket // for server-to-client datagrams
	src, dst netip.AddrPort
	payload  []byte
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
	if cfg.Rebind.Addr && !(cfg.Server.Addr().Is4() && cfg.Server.Addr().IsLoopback()) {
		return nil, fmt.Errorf("netem: relay: address rebinding needs an IPv4 loopback server, not %s", cfg.Server)
	}
	if cfg.SocketBuffer <= 0 {
		cfg.SocketBuffer = defaultSocketBuffer
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
		d := &relayDirection{dir: Direction(i + 1), imp: imp}
		d.q = newTimedQueue(func(now time.Time, x relayDelivery) { r.deliver(now, d, x) })
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
	c, err := r.listen(r.cfg.Listen)
	if err != nil {
		return err
	}
	r.down = c
	r.addr = canon(c.LocalAddr().(*net.UDPAddr).AddrPort())
	r.running = true
	r.readers.Add(1)
	go r.readClients()
	r.stopCtx = context.AfterFunc(ctx, func() { r.Stop() })
	return nil
}

func (r *Relay) listen(a netip.AddrPort) (*net.UDPConn, error) {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(a))
	if err != nil {
		return nil, fmt.Errorf("netem: relay: listen %s: %w", a, err)
	}
	c.SetReadBuffer(r.cfg.SocketBuffer)
	c.SetWriteBuffer(r.cfg.SocketBuffer)
	return c, nil
}

// Addr returns the client-facing address, once started.
func (r *Relay) Addr() netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr
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
	return s
}

// Rebindings returns the rebindings applied so far.
func (r *Relay) Rebindings() []Rebinding {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Rebinding(nil), r.rebinds...)
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
	socks := append([]*net.UDPConn{r.down}, r.upSockets...)
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
			c.Close()
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

func (r *Relay) emit(e Event) {
	if r.cfg.Capture != nil {
		r.cfg.Capture(e)
	}
}

// readClients reads the client-facing socket.
func (r *Relay) readClients() {
	defer r.readers.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := r.down.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ICMP errors reported on the socket
		}
		r.fromClient(time.Now(), canon(from), append([]byte(nil), buf[:n]...))
	}
}

func (r *Relay) fromClient(now time.Time, client netip.AddrPort, p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if r.armed && !r.hasT0 {
		r.t0, r.hasT0 = now, true
		r.dirs[0].imp.SetEpoch(now)
		r.dirs[1].imp.SetEpoch(now)
	}
	s := r.sessions[client]
	if s == nil {
		s = &relaySession{client: client}
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
		sock.conn.WriteToUDPAddrPort(p, r.cfg.Server)
		return
	}
	d := r.dirs[0]
	r.emit(Event{Time: now, Kind: Sent, Dir: ToServer, Src: client, Dst: r.addr, Payload: p})
	v := d.imp.Process(now, p)
	if v.Drop != NotDropped {
		r.emit(Event{Time: now, Kind: Dropped, Dir: ToServer, Cause: v.Drop, Src: client, Dst: r.addr, Payload: p})
		return
	}
	v.Apply(p)
	for i := range v.Copies {
		d.q.push(v.At[i], relayDelivery{conn: sock.conn, src: sock.addr, dst: r.cfg.Server, payload: p})
	}
}

// openUpstream gives s a new server-facing socket. r.mu is held.
func (r *Relay) openUpstream(s *relaySession, gen int) error {
	local := netip.AddrPortFrom(r.cfg.UpstreamAddr, 0)
	if r.cfg.Rebind.Addr && gen > 0 {
		local = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, byte(r.rng.IntN(256)), byte(2 + r.rng.IntN(253))}), 0)
	}
	c, err := r.listen(local)
	if err != nil {
		return err
	}
	a := canon(c.LocalAddr().(*net.UDPAddr).AddrPort())
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

// readServer reads one server-facing socket.
func (r *Relay) readServer(sock *relaySocket) {
	defer r.readers.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := sock.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if canon(from) != r.cfg.Server {
			continue // not the server: a NAT would not let it in
		}
		r.fromServer(time.Now(), sock, append([]byte(nil), buf[:n]...))
	}
}

func (r *Relay) fromServer(now time.Time, sock *relaySocket, p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	client := sock.s.client
	if !r.armed || !r.hasT0 {
		r.down.WriteToUDPAddrPort(p, client)
		return
	}
	d := r.dirs[1]
	r.emit(Event{Time: now, Kind: Sent, Dir: ToClient, Src: r.cfg.Server, Dst: sock.addr, Payload: p})
	v := d.imp.Process(now, p)
	if v.Drop != NotDropped {
		r.emit(Event{Time: now, Kind: Dropped, Dir: ToClient, Cause: v.Drop, Src: r.cfg.Server, Dst: sock.addr, Payload: p})
		return
	}
	v.Apply(p)
	for i := range v.Copies {
		d.q.push(v.At[i], relayDelivery{conn: r.down, sock: sock, src: r.addr, dst: client, payload: p})
	}
}

// deliver writes a datagram copy out, from a timer.
func (r *Relay) deliver(now time.Time, d *relayDirection, x relayDelivery) {
	// The write is made under the lock, so that the capture shows the
	// delivery before anything the receiver sends in answer.
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	cause := NotDropped
	if x.sock != nil && x.sock.gen < r.generation(now) {
		// The NAT sits on the client's side of the link, so a datagram
		// meets a rebinding that happened while it was in flight.
		cause = DropNAT
	} else if _, err := x.conn.WriteToUDPAddrPort(x.payload, x.dst); err != nil {
		cause = DropReceiver
	}
	if cause != NotDropped {
		d.stats.drop(cause)
		r.emit(Event{Time: now, Kind: Dropped, Dir: d.dir, Cause: cause, Src: x.src, Dst: x.dst, Payload: x.payload})
		return
	}
	d.stats.Delivered++
	d.stats.DeliveredBytes += uint64(len(x.payload))
	r.emit(Event{Time: now, Kind: Delivered, Dir: d.dir, Src: x.src, Dst: x.dst, Payload: x.payload})
}
