package quic

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// An Endpoint is a UDP socket that carries QUIC connections, as a server
// (Accept), a client (Dial) or both. One goroutine reads the socket and
// routes each datagram to its connection by destination connection ID.
type Endpoint struct {
	pc     net.PacketConn
	udp    *net.UDPConn // pc, when it is a real UDP socket
	config *Config
	server bool

	mu    sync.Mutex
	conns map[string]*Conn // by every connection ID we issued, and by client-chosen Initial DCIDs
	// byAddr routes by peer address when the endpoint issues zero-length
	// connection IDs.
	byAddr map[netip.AddrPort]*Conn
	cidLen int
	// resetTokens maps the peers' stateless reset tokens to connections.
	resetTokens map[[16]byte]*Conn
	all         map[*Conn]struct{}
	closed      bool

	acceptq   chan *Conn
	done      chan struct{}
	readDone  chan struct{}
	tokens    *tokenProtector
	noGSO     atomic.Bool // GSO failed once: send datagrams one by one
	sock      *sockIO     // the fast path, when udp gives raw access
	tlsOnce   sync.Once
	tlsConf   *tls.Config
	resetSalt [32]byte

	// preferred are the sockets of the server's preferred addresses
	// (guarded by mu); primary, on such a socket's endpoint, is the
	// endpoint whose connections it routes to (conn_prefaddr.go).
	preferred []prefSocket
	primary   *Endpoint
}

// prefSocket is a socket serving a preferred address and the address
// offered for it.
type prefSocket struct {
	ep   *Endpoint
	addr netip.AddrPort
}

// datagram is one received UDP datagram. Buffers are pooled.
type datagram struct {
	buf  []byte // backing buffer, full capacity
	b    []byte // the datagram
	addr netip.AddrPort
	ecn  uint8
	ep   *Endpoint // the endpoint whose socket received it
	// rx is the shared receive buffer b lies in, when b was not copied
	// out of it (rxbuf.go); buf is then nil.
	rx   *rxBuf
	inRx bool // d is one of rx's own headers
}

const recvBufSize = 2048

var datagramPool = sync.Pool{New: func() any {
	return &datagram{buf: make([]byte, recvBufSize)}
}}

func newDatagram() *datagram { return datagramPool.Get().(*datagram) }

func (d *datagram) release() {
	d.b = nil
	d.ep = nil
	// The pools are shared by every endpoint of the process: a datagram
	// read from a socket that carries no ECN (a plain net.PacketConn)
	// must not keep the mark of the last one that did.
	d.ecn = 0
	if x := d.rx; x != nil {
		// A header that lives in x is x's again after unref: nothing
		// touches d after it.
		d.rx = nil
		if !d.inRx {
			sharedDatagramPool.Put(d)
		}
		x.unref()
		return
	}
	datagramPool.Put(d)
}

// Listen opens a UDP socket on addr and returns an Endpoint that accepts
// connections with cfg. cfg.TLSConfig must carry a certificate.
func Listen(network, addr string, cfg *Config) (*Endpoint, error) {
	if cfg == nil || cfg.TLSConfig == nil {
		return nil, errors.New("quic: Listen needs a Config with a TLSConfig")
	}
	pc, err := listenUDP(network, addr, cfg)
	if err != nil {
		return nil, err
	}
	e, err := newEndpoint(pc, cfg, true)
	if err != nil {
		return nil, err
	}
	if pa := cfg.PreferredAddress; pa != nil {
		for _, a := range []netip.AddrPort{pa.IPv4, pa.IPv6} {
			if !a.IsValid() {
				continue
			}
			nw := "udp6"
			if a.Addr().Is4() {
				nw = "udp4"
			}
			ppc, err := listenUDP(nw, a.String(), cfg)
			if err == nil {
				err = e.ServePreferredAddress(ppc, a)
			}
			if err != nil {
				e.Close()
				return nil, fmt.Errorf("quic: preferred address %v: %w", a, err)
			}
		}
	}
	return e, nil
}

// ServePreferredAddress makes a server endpoint accept its connections'
// packets on pc too, and offer addr (pc's own address when addr is zero;
// pc's port when addr's port is 0) to clients as its preferred address
// (RFC 9000 §9.6) for the address family of addr. Connections accepted
// from then on carry the offer. The endpoint takes ownership of pc and
// closes it with itself. Listen calls it for Config.PreferredAddress.
func (e *Endpoint) ServePreferredAddress(pc net.PacketConn, addr netip.AddrPort) error {
	if !e.server {
		pc.Close()
		return errors.New("quic: only a server endpoint offers a preferred address")
	}
	local := netipOf(pc.LocalAddr())
	if !addr.IsValid() {
		addr = local
	} else if addr.Port() == 0 {
		addr = netip.AddrPortFrom(addr.Addr(), local.Port())
	}
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	se, err := newEndpointOf(pc, e.config, false, e)
	if err != nil {
		pc.Close()
		return err
	}
	e.mu.Lock()
	e.preferred = append(e.preferred, prefSocket{ep: se, addr: addr})
	e.mu.Unlock()
	return nil
}

// preferredSockets returns the preferred-address sockets.
func (e *Endpoint) preferredSockets() []prefSocket {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]prefSocket(nil), e.preferred...)
}

// NewEndpoint builds an Endpoint over an existing packet connection. If
// cfg is non-nil and cfg.TLSConfig has certificates, the endpoint accepts
// connections. It takes ownership of pc.
func NewEndpoint(pc net.PacketConn, cfg *Config) (*Endpoint, error) {
	server := cfg != nil && cfg.TLSConfig != nil &&
		(len(cfg.TLSConfig.Certificates) > 0 || cfg.TLSConfig.GetCertificate != nil || cfg.TLSConfig.GetConfigForClient != nil)
	return newEndpoint(pc, cfg, server)
}

func listenUDP(network, addr string, cfg *Config) (*net.UDPConn, error) {
	ua, err := net.ResolveUDPAddr(network, addr)
	if err != nil {
		return nil, fmt.Errorf("quic: resolve %s: %w", addr, err)
	}
	c, err := net.ListenUDP(network, ua)
	if err != nil {
		return nil, fmt.Errorf("quic: listen %s: %w", addr, err)
	}
	if cfg == nil {
		cfg = &Config{}
	}
	setSocketBuffers(c, cfg.socketBuffer())
	return c, nil
}

func newEndpoint(pc net.PacketConn, cfg *Config, server bool) (*Endpoint, error) {
	return newEndpointOf(pc, cfg, server, nil)
}

// newEndpointOf builds an endpoint; with primary set it serves a
// preferred address of primary: it routes into primary's connections and
// signs stateless resets with primary's key.
func newEndpointOf(pc net.PacketConn, cfg *Config, server bool, primary *Endpoint) (*Endpoint, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	e := &Endpoint{
		pc:          pc,
		config:      cfg,
		server:      server,
		conns:       make(map[string]*Conn),
		resetTokens: make(map[[16]byte]*Conn),
		byAddr:      make(map[netip.AddrPort]*Conn),
		cidLen:      cfg.connIDLen(),
		all:         make(map[*Conn]struct{}),
		acceptq:     make(chan *Conn, 64),
		done:        make(chan struct{}),
		readDone:    make(chan struct{}),
	}
	e.udp, _ = pc.(*net.UDPConn)
	if e.udp != nil {
		enableECNReceive(e.udp)
		e.sock = newSockIO(e.udp, cfg)
	}
	var err error
	if e.tokens, err = newTokenProtector(); err != nil {
		return nil, err
	}
	e.resetSalt = cfg.StatelessResetKey
	if e.resetSalt == [32]byte{} {
		rand.Read(e.resetSalt[:])
	}
	if primary != nil {
		e.primary = primary
		e.resetSalt = primary.resetSalt
		e.cidLen = primary.cidLen
	}
	if e.sock != nil {
		go e.readLoopRaw()
	} else {
		go e.readLoop()
	}
	return e, nil
}

// Addr returns the local address of the endpoint's socket.
func (e *Endpoint) Addr() net.Addr { return e.pc.LocalAddr() }

// Accept waits for the next incoming connection whose handshake has
// completed on the server side.
func (e *Endpoint) Accept(ctx context.Context) (*Conn, error) {
	select {
	case c := <-e.acceptq:
		return c, nil
	case <-e.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close closes every connection with NO_ERROR, waits briefly for the
// CONNECTION_CLOSE packets to leave, and closes the socket.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	conns := make([]*Conn, 0, len(e.all))
	for c := range e.all {
		conns = append(conns, c)
	}
	e.mu.Unlock()
	close(e.done)
	for _, c := range conns {
		c.kill()
	}
	for _, c := range conns {
		<-c.loopDone
	}
	for _, p := range e.preferredSockets() {
		p.ep.Close()
	}
	err := e.pc.Close()
	<-e.readDone
	return err
}

// Dial opens a UDP socket on an ephemeral port and starts a client
// connection to addr. It returns once the handshake completes. Closing the
// connection closes the socket.
func Dial(ctx context.Context, network, addr string, cfg *Config) (*Conn, error) {
	return dialNew(ctx, network, addr, cfg, false)
}

// DialEarly is Dial with 0-RTT; see Endpoint.DialEarly.
func DialEarly(ctx context.Context, network, addr string, cfg *Config) (*Conn, error) {
	return dialNew(ctx, network, addr, cfg, true)
}

func dialNew(ctx context.Context, network, addr string, cfg *Config, early bool) (*Conn, error) {
	laddr := ":0"
	if network == "udp4" {
		laddr = "0.0.0.0:0"
	}
	pc, err := listenUDP(network, laddr, cfg)
	if err != nil {
		return nil, err
	}
	e, err := newEndpoint(pc, cfg, false)
	if err != nil {
		pc.Close()
		return nil, err
	}
	c, err := e.dial(ctx, network, addr, cfg, early)
	if err != nil {
		e.Close()
		return nil, err
	}
	c.mu.Lock()
	c.ownsEndpoint = true
	c.mu.Unlock()
	select {
	case <-c.loopDone:
		// The connection ended before it owned the socket: its loop did
		// not close it (Endpoint.Close is idempotent).
		e.Close()
	default:
	}
	return c, nil
}

// Dial starts a client connection to addr from the endpoint's socket and
// waits for its handshake to complete.
func (e *Endpoint) Dial(ctx context.Context, network, addr string, cfg *Config) (*Conn, error) {
	return e.dial(ctx, network, addr, cfg, false)
}

func (e *Endpoint) dial(ctx context.Context, network, addr string, cfg *Config, early bool) (*Conn, error) {
	if cfg == nil || cfg.TLSConfig == nil {
		return nil, errors.New("quic: Dial needs a Config with a TLSConfig (ServerName, NextProtos)")
	}
	ua, err := net.ResolveUDPAddr(network, addr)
	if err != nil {
		return nil, fmt.Errorf("quic: resolve %s: %w", addr, err)
	}
	ap := ua.AddrPort()
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	c, err := newConnWith(e, cfg, true, ap, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("quic: dial %s: %w", addr, err)
	}
	ready := c.handshakeDone
	if early {
		ready = c.ready
	}
	select {
	case <-ready:
		return c, nil
	case <-c.loopDone:
		return nil, fmt.Errorf("quic: dial %s: %w", addr, c.closeErr)
	case <-ctx.Done():
		c.kill()
		<-c.loopDone
		return nil, fmt.Errorf("quic: dial %s: %w", addr, ctx.Err())
	}
}

// DialEarly is Dial for 0-RTT: when the client resumes a session that
// allows early data (Config.Allow0RTT and TLSConfig.ClientSessionCache),
// it returns as soon as 0-RTT keys are ready, so that streams opened and
// written now travel in 0-RTT packets. Otherwise it returns once the
// handshake completes. The server may still reject the early data; the
// engine then sends it again after the handshake.
func (e *Endpoint) DialEarly(ctx context.Context, network, addr string, cfg *Config) (*Conn, error) {
	return e.dial(ctx, network, addr, cfg, true)
}

// serverTLS returns the TLS configuration shared by the endpoint's server
// connections.
func (e *Endpoint) serverTLS() *tls.Config {
	e.tlsOnce.Do(func() {
		e.tlsConf = e.config.TLSConfig.Clone()
		e.tlsConf.MinVersion = tls.VersionTLS13
	})
	return e.tlsConf
}

// register makes the endpoint route datagrams with cid to c.
func (e *Endpoint) register(cid []byte, c *Conn) {
	e.mu.Lock()
	e.conns[string(cid)] = c
	e.all[c] = struct{}{}
	e.mu.Unlock()
}

// claimCID picks a connection ID of n bytes that routes to no connection
// yet and registers it for c. RFC 9000 §5.1: connection IDs are chosen so
// that packets route to the right connection, and short IDs (1 byte: 256
// values) collide soon among many connections; a collision would steal
// another connection's packets. It returns nil when a few tries found no
// free ID (the space is nearly full): the caller issues fewer IDs.
func (e *Endpoint) claimCID(n int, c *Conn) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	for range 64 {
		cid := newCID(n)
		if _, used := e.conns[string(cid)]; used {
			continue
		}
		e.conns[string(cid)] = c
		e.all[c] = struct{}{}
		return cid
	}
	return nil
}

// freeCID returns a connection ID of n bytes that routes to no connection
// now (or a random one after a few tries); the caller registers it.
func (e *Endpoint) freeCID(n int) []byte {
	if n == 0 {
		// Zero-length IDs route by address (RFC 9000 §5.1): nothing to
		// choose (an empty, non-nil ID, as before).
		return newCID(0)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var cid []byte
	for range 64 {
		cid = newCID(n)
		if _, used := e.conns[string(cid)]; !used {
			break
		}
	}
	return cid
}

func (e *Endpoint) unregister(cid []byte, c *Conn) {
	e.mu.Lock()
	if e.conns[string(cid)] == c {
		delete(e.conns, string(cid))
	}
	e.mu.Unlock()
}

// registerAddr routes datagrams from addr to c (zero-length CIDs).
func (e *Endpoint) registerAddr(addr netip.AddrPort, c *Conn) {
	e.mu.Lock()
	e.byAddr[addr] = c
	e.mu.Unlock()
}

// detach stops counting c among the endpoint's connections (Close does not
// close it) but keeps its routes.
func (e *Endpoint) detach(c *Conn) {
	e.mu.Lock()
	delete(e.all, c)
	e.mu.Unlock()
}

// forget drops every route to c once its loop has ended.
func (e *Endpoint) forget(c *Conn) {
	e.mu.Lock()
	for k, v := range e.conns {
		if v == c {
			delete(e.conns, k)
		}
	}
	for k, v := range e.resetTokens {
		if v == c {
			delete(e.resetTokens, k)
		}
	}
	for k, v := range e.byAddr {
		if v == c {
			delete(e.byAddr, k)
		}
	}
	delete(e.all, c)
	e.mu.Unlock()
}

func (e *Endpoint) lookup(cid []byte) *Conn {
	e.mu.Lock()
	c := e.conns[string(cid)]
	e.mu.Unlock()
	return c
}

// writeTo sends one datagram. It is safe for concurrent use.
func (e *Endpoint) writeTo(b []byte, addr netip.AddrPort) error {
	var err error
	if e.udp != nil {
		_, err = e.udp.WriteToUDPAddrPort(b, addr)
	} else {
		_, err = e.pc.WriteTo(b, net.UDPAddrFromAddrPort(addr))
	}
	return err
}

// writeECN sends one datagram marked with the ECN codepoint ecn (0: not
// marked). oob is scratch space for the control messages.
func (e *Endpoint) writeECN(b []byte, addr netip.AddrPort, ecn uint8, oob []byte) error {
	if ecn == 0 || e.udp == nil {
		return e.writeTo(b, addr)
	}
	_, _, err := e.udp.WriteMsgUDPAddrPort(b, appendECNCmsgs(oob, ecn), addr)
	return err
}

func (e *Endpoint) readLoop() {
	defer close(e.readDone)
	var oob [ecnOOBBufferLen]byte
	for {
		d := newDatagram()
		var n int
		var err error
		if e.udp != nil {
			var oobn int
			n, oobn, _, d.addr, err = e.udp.ReadMsgUDPAddrPort(d.buf, oob[:])
			d.ecn = parseECN(oob[:oobn])
		} else {
			var a net.Addr
			d.ecn = 0 // a plain PacketConn carries no ECN
			n, a, err = e.pc.ReadFrom(d.buf)
			if ua, ok := a.(*net.UDPAddr); ok {
				d.addr = ua.AddrPort()
			}
		}
		if err != nil {
			d.release()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-e.done:
				return
			default:
			}
			continue
		}
		d.addr = netip.AddrPortFrom(d.addr.Addr().Unmap(), d.addr.Port())
		d.b = d.buf[:n]
		e.route(d)
	}
}

// route hands d to its connection, or to the stateless handling of the
// server.
func (e *Endpoint) route(d *datagram) {
	d.ep = e
	// A preferred-address socket routes into its primary's tables.
	tbl := e
	if e.primary != nil {
		tbl = e.primary
	}
	dcid, ok := datagramDCID(d.b, e.cidLen)
	if !ok {
		d.release()
		return
	}
	var c *Conn
	switch {
	case e.cidLen == 0 && len(dcid) == 0:
		// RFC 9000 §5.2: "If the Destination Connection ID is zero length
		// and the addressing information in the packet matches the
		// addressing information the endpoint uses to identify a
		// connection with a zero-length connection ID, QUIC processes the
		// packet as part of that connection." Every connection's empty
		// ID is the same key: only the address tells them apart.
	case e.primary != nil:
		c = e.primary.lookupShared(dcid)
	default:
		c = e.lookup(dcid)
	}
	if c != nil {
		c.deliver(d)
		return
	}
	if e.cidLen == 0 {
		tbl.mu.Lock()
		c := tbl.byAddr[d.addr]
		tbl.mu.Unlock()
		if c != nil {
			c.deliver(d)
			return
		}
	}
	if d.b[0]&0x80 != 0 && e.server {
		e.handleUnknownLong(d, dcid)
		return
	}
	if d.b[0]&0x80 == 0 {
		// A stateless reset carries an unpredictable DCID: find its
		// connection by the token at the end (RFC 9000 §10.3.1).
		if len(d.b) >= 21 {
			var tok [16]byte
			copy(tok[:], d.b[len(d.b)-16:])
			tbl.mu.Lock()
			c := tbl.resetTokens[tok]
			tbl.mu.Unlock()
			if c != nil {
				c.deliver(d)
				return
			}
		}
		e.sendStatelessReset(d)
	}
	d.release()
}

// registerResetToken routes datagrams ending with tok to c.
func (e *Endpoint) registerResetToken(tok [16]byte, c *Conn) {
	e.mu.Lock()
	e.resetTokens[tok] = c
	e.mu.Unlock()
}

// sendStatelessReset answers a short-header packet for an unknown
// connection ID (RFC 9000 §10.3). "An endpoint MUST NOT send a Stateless
// Reset that is three times or more larger than the packet it receives"
// and, to avoid loops, "an endpoint MUST ensure that every Stateless
// Reset that it sends is smaller than the packet that triggered it". The
// smallest reset is 21 bytes (§10.3: 5 unpredictable bytes and the token).
func (e *Endpoint) sendStatelessReset(d *datagram) {
	const minReset = 21
	if len(d.b) <= minReset || e.cidLen == 0 || len(d.b) < 1+e.cidLen {
		return
	}
	n := min(len(d.b)-1, 43)
	b := make([]byte, n)
	rand.Read(b[:n-16])
	// "the first byte ... has the fixed bit set and the header form bit
	// cleared" so that it looks like a short header packet.
	b[0] = 0x40 | b[0]&0x3f
	tok := e.resetToken(d.b[1 : 1+e.cidLen])
	copy(b[n-16:], tok[:])
	e.writeTo(b, d.addr)
}

// datagramDCID returns the destination connection ID of the first packet
// in b. Short headers carry cidLen bytes, the length of every CID the
// endpoint issues.
func datagramDCID(b []byte, cidLen int) ([]byte, bool) {
	if len(b) == 0 {
		return nil, false
	}
	if b[0]&0x80 == 0 {
		if len(b) < 1+cidLen {
			return nil, false
		}
		return b[1 : 1+cidLen], true
	}
	if len(b) < 6 {
		return nil, false
	}
	n := int(b[5])
	if len(b) < 6+n {
		return nil, false
	}
	return b[6 : 6+n], true
}
