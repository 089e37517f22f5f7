package quic

import (
	"crypto/rand"
	"crypto/tls"
	"io"
	"net/netip"
	"runtime"
	"slices"
	"time"

	"github.com/quiver-quic/quiver/keylog"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// connState is the state owned by the connection loop.
type connState struct {
	version uint32
	tls     *tls.QUICConn
	spaces  [numSpaces]packetSpace
	appKeys protect.KeyPhase

	// After releaseTLS, tls is nil and postHS reads the 1-RTT CRYPTO
	// stream.
	tlsReleased bool
	postHS      postHandshakeReader

	clientRandom []byte
	keyLog       *keylog.Writer
	// undecryptable holds packets that arrived before their keys.
	undecryptable    []undecryptablePacket
	keysChanged      bool
	keepAlivePending bool
	ampBlocked       bool // the amplification limit stops sending
	ackOnlyRun       int  // ACK-only 1-RTT packets sent in a row
	// 0-RTT state.
	earlyWrite    *protect.Keys // client
	earlyRead     *protect.Keys // server
	remembered    *wire.TransportParameters
	earlyRejected bool
	sent0RTT      bool
	recv0RTT      bool
	accepted      bool           // queued for Accept
	processed     bool           // a packet of the current datagram was processed
	dgramAddr     netip.AddrPort // source of the datagram being processed
	dgramEp       *Endpoint      // the endpoint that received it
	// handshakeAddr is the peer's address during the handshake, which
	// names the server for NEW_TOKEN tokens whatever the connection does
	// later.
	handshakeAddr netip.AddrPort
	// tokenAddr is the client IP the last NEW_TOKEN vouched for.
	tokenAddr     netip.Addr
	pref          prefAddrState
	lastDgramSize int
	ackRanges     []wire.AckRange

	// Connection IDs (RFC 9000 §5.1, §7.3).
	origDCID      []byte // DCID of the client's first Initial
	initialDCID   []byte // DCID the Initial keys derive from (the Retry SCID after a Retry)
	retrySCID     []byte // SCID of the Retry the client accepted
	retryToken    []byte // token to carry in Initials after a Retry
	localCID      []byte // our current SCID
	peerCID       []byte // DCID we send to
	peerInitSCID  []byte // SCID of the peer's first packet
	gotPeerPacket bool
	gotRetry      bool
	gotVN         bool
	// origVersion is the version of the client's first Initial of this
	// attempt; version differs from it after compatible version
	// negotiation (RFC 9368). origInitialRead (server) opens the client's
	// Initials still sent in origVersion.
	origVersion     uint32
	origInitialRead *protect.Keys
	cids            cidState

	peerParams   transportParams
	havePeerTP   bool
	sentHSPacket bool // client: sent a Handshake packet (discard Initial keys)

	handshakeComplete    bool
	handshakeConfirmed   bool
	handshakeDonePending bool
	addrValidated        bool   // server: peer address validated (§8.1)
	bytesRecv, bytesSent uint64 // before validation, for the 3x limit

	idleTimeout  time.Duration
	lastActivity time.Time
	// lastAckEliciting is when we first sent an ack-eliciting packet
	// after last receiving one (RFC 9000 §10.1 idle restart).
	lastAckElicitingSent time.Time

	loss      lossState
	streams   streamsState
	closing   closeState
	timer     *time.Timer
	timerAt   time.Time
	sendBuf   []byte
	frameBuf  []byte
	probeRT   probeRuntime
	stats     connStats
	ackFreq   ackFreqState
	ecn       ecnState
	keyUpdate keyUpdateState
	pmtud     pmtudState
}

// connStats counts events for tests and debugging.
type connStats struct {
	sent, recv, lost, ptos  uint64
	idleTurns, cwndBlocked  uint64
	flowBlocked, bufBlocked uint64
	paced                   uint64
	migrations              uint64
}

// newConnWith creates a connection and starts its loop. setup, when not
// nil, fills the server's view of the client's first Initial.
func newConnWith(ep *Endpoint, cfg *Config, isClient bool, peer netip.AddrPort, setup func(*Conn), first *datagram) (*Conn, error) {
	c := &Conn{
		ep:            ep,
		config:        cfg,
		isClient:      isClient,
		peerAddr:      peer,
		hooks:         connHooks(cfg.Probe),
		recvq:         newRecvQueue(),
		wakec:         make(chan struct{}, 1),
		msgc:          make(chan func(time.Time), 16),
		handshakeDone: make(chan struct{}),
		ready:         make(chan struct{}),
		loopDone:      make(chan struct{}),
		acceptWake:    make(chan struct{}, 1),
		acceptWakeUni: make(chan struct{}, 1),
	}
	if c.hooks != nil {
		c.policy = c.hooks.Policy()
		c.probeRT.inject[appSpace] = slices.Clone(c.policy.EarlyFrames)
	}
	c.closing.sentSignal = make(chan struct{})
	c.handshakeAddr = peer
	c.dgrams.inWake = make(chan struct{}, 1)
	for i := range c.spaces {
		c.spaces[i].init(spaceID(i))
		c.spaces[i].acks.init(spaceID(i), cfg)
		c.spaces[i].acks.disabled = c.policy.NoAcks
	}
	now := time.Now()
	c.lastActivity = now
	c.idleTimeout = cfg.maxIdleTimeout()
	c.localCID = ep.freeCID(ep.cidLen)
	if cfg.KeyLog != nil {
		c.keyLog = keylog.NewWriter(cfg.KeyLog)
	}
	if isClient {
		c.version = cfg.versions(true)[0]
		c.origDCID = make([]byte, 8)
		rand.Read(c.origDCID)
		c.peerCID = c.origDCID
		c.initialDCID = c.origDCID
		if cfg.TokenStore != nil {
			// RFC 9000 §8.1.3: a client uses a NEW_TOKEN token in the
			// Initial packets of a later connection to the same server.
			c.retryToken = cfg.TokenStore.Take(c.tokenKey())
		}
	} else if setup != nil {
		setup(c)
	}
	if cfg.Tracer != nil {
		c.qlog = cfg.Tracer(c.origDCID, isClient)
	}
	c.loss.init(c, now)
	c.pmtudInit()
	c.ecn.disabled = cfg.DisableECN
	c.streams.init(c)
	c.cids.init(c)
	c.prefAddrInit()
	ep.register(c.localCID, c)
	if ep.cidLen == 0 {
		ep.registerAddr(peer, c)
	}
	if !isClient {
		// Route further Initials the client sends to its chosen DCID.
		ep.register(c.initialDCID, c)
	}
	go c.loop(now, first)
	return c, nil
}

func newCID(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// loop is the connection's goroutine.
func (c *Conn) loop(now time.Time, first *datagram) {
	defer c.finish()
	c.timer = time.NewTimer(time.Hour)
	defer c.timer.Stop()
	if err := c.installInitialKeys(c.initialDCID); err != nil {
		c.closeErr = err
		return
	}
	c.qlogStarted(now)
	if err := c.startTLS(now); err != nil {
		c.closeLocal(now, err)
	}
	if first != nil {
		c.handleDatagram(now, first)
	}
	for {
		c.onTimers(now)
		if c.closing.done {
			return
		}
		c.streams.wakeReaders()
		c.applyAckFrequencyPolicy(now)
		c.releaseLazyResets()
		c.sendPackets(now)
		if c.closing.done {
			return
		}
		c.armTimer(now)
		select {
		case <-c.recvq.wake:
			now = time.Now()
			// Take what has arrived, up to a batch, before sending, so
			// that one ACK covers a burst; a strict receiver takes one
			// datagram per turn (Config.StrictAcks).
			batch := recvBatch + 1
			if c.config.StrictAcks {
				batch = 1
			}
			for range batch {
				d := c.recvq.pop()
				if d == nil {
					break
				}
				c.handleDatagram(now, d)
			}
			c.recvq.more()
		case <-c.timer.C:
			c.timerAt = time.Time{}
			now = time.Now()
			c.recvq.trim(now)
		case <-c.wakec:
			// An application write woke the loop. Let the goroutines
			// that are ready run first, so that their writes (other
			// calls' requests or answers) go out in the same packets:
			// RPCs at concurrency 64 took two datagrams per call,
			// one each way, as if they ran one at a time
			// (docs/highway.md). With nothing else ready this returns
			// at once.
			runtime.Gosched()
			now = time.Now()
		case f := <-c.msgc:
			now = time.Now()
			f(now)
		}
	}
}

// armTimer sets the loop timer to the earliest deadline.
func (c *Conn) armTimer(now time.Time) {
	next := c.nextDeadline(now)
	if next.IsZero() {
		next = now.Add(time.Hour)
	}
	if next.Equal(c.timerAt) {
		return
	}
	c.timerAt = next
	d := next.Sub(now)
	if d < 0 {
		d = 0
	}
	c.timer.Reset(d)
}

// nextDeadline returns the earliest time something must happen.
func (c *Conn) nextDeadline(now time.Time) time.Time {
	var t time.Time
	add := func(x time.Time) {
		if !x.IsZero() && (t.IsZero() || x.Before(t)) {
			t = x
		}
	}
	if c.closing.active() {
		add(c.closing.deadline)
		return t
	}
	add(c.idleDeadline())
	add(c.keepAliveDeadline())
	add(c.loss.deadline())
	add(c.cids.challengeDeadline)
	for i := range c.spaces {
		if c.canSendIn(spaceID(i)) {
			add(c.spaces[i].acks.deadline())
		}
	}
	add(c.loss.pacerDeadline(now, c))
	add(c.pmtud.deadline())
	add(c.pref.probe.timer())
	return t
}

// idleDeadline is when the idle timer fires. RFC 9000 §10.1: "each
// endpoint advertises a max_idle_timeout, but the effective value at an
// endpoint is computed as the minimum of the two advertised values ... To
// avoid excessively small idle timeout periods, endpoints MUST increase
// the idle timeout period to be at least three times the current Probe
// Timeout (PTO)."
func (c *Conn) idleDeadline() time.Time {
	d := c.idleTimeout
	if c.havePeerTP && c.peerParams.maxIdleTimeout > 0 && (d == 0 || c.peerParams.maxIdleTimeout < d) {
		d = c.peerParams.maxIdleTimeout
	}
	if d == 0 {
		return time.Time{}
	}
	if p := 3 * c.loss.pto(); d < p {
		d = p
	}
	return c.lastActivity.Add(d)
}

// onTimers handles every deadline that has passed.
func (c *Conn) onTimers(now time.Time) {
	if c.closing.active() {
		if !now.Before(c.closing.deadline) {
			c.closing.done = true
		}
		return
	}
	if t := c.idleDeadline(); !t.IsZero() && !now.Before(t) {
		// RFC 9000 §10.1: "If a max_idle_timeout is specified by either
		// endpoint ... the connection is silently closed and its state is
		// discarded when it remains idle".
		c.closeErr = IdleTimeoutError{}
		c.closing.done = true
		return
	}
	if t := c.keepAliveDeadline(); !t.IsZero() && !now.Before(t) {
		c.keepAlivePending = true
		c.lastActivity = now // one PING per period
	}
	c.onPathValidationTimer(now)
	if c.closing.done {
		return
	}
	c.prefAddrTimers(now)
	c.loss.onTimer(now, c)
}

// keepAliveDeadline is when the next keep-alive PING is due.
func (c *Conn) keepAliveDeadline() time.Time {
	if c.config.KeepAlivePeriod <= 0 || !c.handshakeComplete || c.keepAlivePending {
		return time.Time{}
	}
	return c.lastActivity.Add(c.config.KeepAlivePeriod)
}

// finish runs when the loop exits.
func (c *Conn) finish() {
	if c.closeErr == nil {
		c.closeErr = ErrClosed
	}
	c.qlogClosed()
	// A recorder that owns a file (qlog.Writer) is closed with the
	// connection, so that the trace is complete on disk without the
	// caller tracking recorders (transfer.ServerConfig.QlogDir relies on
	// it).
	if cl, ok := c.qlog.(io.Closer); ok {
		if err := cl.Close(); err != nil {
			debugf("qlog close: %v", err)
		}
	}
	debugf("conn client=%v end: paced=%d idle=%d cwndBlocked=%d qdrops=%d sent=%d recv=%d lost=%d ptos=%d cwnd=%d srtt=%v err=%v", c.isClient, c.stats.paced, c.stats.idleTurns, c.stats.cwndBlocked, c.queueDrops.Load(), c.stats.sent, c.stats.recv, c.stats.lost, c.stats.ptos, c.loss.cc.CongestionWindow(), c.loss.ld.RTT().Smoothed(), c.closeErr)
	if c.tls != nil {
		c.tls.Close()
	}
	c.ep.forget(c)
	c.releaseOldEndpoints()
	c.streams.closeAll(c.closeErr)
	// A connection from the package-level Dial owns its socket: when it
	// ends on its own (idle timeout, the peer's close, a stateless reset)
	// the socket goes with it, not only on Close. Endpoints shared by
	// several connections are not owned and stay open.
	c.mu.Lock()
	ep, owns := c.ep, c.ownsEndpoint
	c.mu.Unlock()
	if owns {
		// Before loopDone, so that Done means the socket is released. The
		// endpoint no longer counts c (forget above), so its Close does
		// not wait for this loop.
		ep.Close()
	}
	close(c.loopDone)
}

// recvBatch is how many queued datagrams one loop turn processes before it
// sends (ACKs included).
const recvBatch = 16
