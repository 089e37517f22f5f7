package quic

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiver-quic/quiver/qlog"
)

// A Conn is a QUIC connection. Its state belongs to one goroutine, the
// connection loop; the methods of Conn and Stream talk to that loop
// through channels and wake-ups, and are safe for concurrent use.
type Conn struct {
	ep           *Endpoint
	config       *Config
	isClient     bool
	ownsEndpoint bool
	oldEndpoints []oldEndpoint // endpoints left by Migrate; guarded by mu
	peerAddr     netip.AddrPort
	// sendEP, when set, is the endpoint packets leave from instead of ep:
	// a server's preferred-address socket (conn_prefaddr.go). Written by
	// the loop under mu.
	sendEP *Endpoint
	hooks  Hooks  // nil in production
	policy Policy // hooks.Policy(), read once at the start
	qlog   qlog.Recorder

	// Channels into the loop.
	recvq recvQueue
	wakec chan struct{}
	msgc  chan func(now time.Time)

	queueDrops atomic.Uint64 // datagrams dropped because recvq was full

	// Closed by the loop.
	handshakeDone chan struct{}
	ready         chan struct{} // closed when 0-RTT or 1-RTT keys allow streams
	loopDone      chan struct{}
	closeErr      error // set before loopDone closes

	// mu guards the stream state (buffers, flow control, accept queues,
	// send queues), which Stream methods touch from other goroutines, and
	// the TLS state snapshot.
	mu            sync.Mutex
	acceptWake    chan struct{} // a bidi stream was queued for AcceptStream
	acceptWakeUni chan struct{} // a uni stream was queued for AcceptUniStream
	tlsState      tls.ConnectionState
	info          ConnectionInfo
	// DATAGRAM queues and the peer's max_datagram_frame_size.
	dgrams          datagramState
	peerMaxDatagram uint64
	alpn            string

	// Everything below belongs to the loop.
	connState
}

// deliver queues a received datagram for the loop. When the loop lags so
// far behind that its queue is full the datagram is dropped, as the
// network would.
func (c *Conn) deliver(d *datagram) {
	if !c.recvq.push(d) {
		c.queueDrops.Add(1)
		d.release()
	}
}

// wake makes the loop run a turn soon.
func (c *Conn) wake() {
	select {
	case c.wakec <- struct{}{}:
	default:
	}
}

// run executes f on the loop and waits for it. It returns false if the
// loop has ended.
func (c *Conn) run(ctx context.Context, f func(now time.Time)) bool {
	done := make(chan struct{})
	g := func(now time.Time) {
		f(now)
		close(done)
	}
	select {
	case c.msgc <- g:
	case <-c.loopDone:
		return false
	case <-ctx.Done():
		return false
	}
	select {
	case <-done:
		return true
	case <-c.loopDone:
		return false
	}
}

// post executes f on the loop without waiting.
func (c *Conn) post(f func(now time.Time)) {
	select {
	case c.msgc <- f:
	case <-c.loopDone:
	}
}

// abort closes the connection with err from outside the loop.
func (c *Conn) abort(err error) {
	c.post(func(now time.Time) { c.closeLocal(now, err) })
}

// Close closes the connection with an application error code and
// reason, and waits until the CONNECTION_CLOSE has been sent. Code 0 with
// an empty reason is a normal close.
func (c *Conn) Close(code uint64, reason string) error {
	c.abort(&ApplicationError{Code: code, Reason: reason})
	select {
	case <-c.closing.sentSignal:
	case <-c.loopDone:
	}
	c.mu.Lock()
	ep, owns := c.ep, c.ownsEndpoint
	c.mu.Unlock()
	if owns {
		ep.Close()
	}
	return nil
}

// kill ends the loop at once, after a close.
func (c *Conn) kill() {
	c.post(func(now time.Time) {
		if !c.closing.active() {
			c.closeLocal(now, &ApplicationError{})
			c.closing.maybeSend(now, c)
		}
		c.closing.done = true
	})
}

// CloseWithError closes the connection with a transport error; it exists
// for probes and tests that close like a misbehaving peer would.
func (c *Conn) CloseWithError(err *TransportError) error {
	c.abort(err)
	select {
	case <-c.closing.sentSignal:
	case <-c.loopDone:
	}
	return nil
}

// Done is closed when the connection has ended; Err then tells why.
func (c *Conn) Done() <-chan struct{} { return c.loopDone }

// Err returns why the connection ended, or nil while it is alive.
func (c *Conn) Err() error {
	select {
	case <-c.loopDone:
		return c.closeErr
	default:
		return nil
	}
}

// Wait blocks until the connection has ended or ctx is done, and returns
// the reason it ended: *TransportError, *ApplicationError,
// IdleTimeoutError, ...
func (c *Conn) Wait(ctx context.Context) error {
	select {
	case <-c.loopDone:
		return c.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ALPN returns the negotiated application protocol.
func (c *Conn) ALPN() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.alpn
}

// ConnectionState returns the TLS state of the connection.
func (c *Conn) ConnectionState() tls.ConnectionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tlsState
}

// LocalAddr returns the local address.
func (c *Conn) LocalAddr() net.Addr {
	c.mu.Lock()
	ep := c.sendEP
	c.mu.Unlock()
	if ep != nil {
		return ep.Addr()
	}
	return c.localEndpoint().Addr()
}

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return net.UDPAddrFromAddrPort(c.peerAddr)
}

// IsClient reports whether this is the client side of the connection.
func (c *Conn) IsClient() bool { return c.isClient }

// ConnectionInfo describes how a connection was set up.
type ConnectionInfo struct {
	Version uint32 // negotiated QUIC version
	Retried bool   // the client processed a Retry / the server validated with one
	// Resumed reports a TLS session resumption; Used0RTT that 0-RTT data
	// was sent (client) or received (server) and not rejected.
	Resumed  bool
	Used0RTT bool
	// VersionNegotiated reports that a Version Negotiation packet made
	// the client change version.
	VersionNegotiated bool
	// MaxDatagramSize is the largest datagram the connection sends now
	// (path MTU discovery keeps it current; see
	// Config.DisablePathMTUDiscovery); 0 until the handshake is confirmed.
	MaxDatagramSize int
}

// ConnectionInfo returns the version and handshake facts of the
// connection, as they stood when the handshake completed.
func (c *Conn) ConnectionInfo() ConnectionInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

// contextBackground is the context of loop calls that cannot be cancelled.
var contextBackground = context.Background()

// ConnStats is a snapshot of a connection's recovery state and counters.
type ConnStats struct {
	SmoothedRTT, RTTVar, MinRTT, LatestRTT time.Duration
	// PeerMaxAckDelay is the max_ack_delay the PTO allows for.
	PeerMaxAckDelay  time.Duration
	CongestionWindow int
	BytesInFlight    int
	PTOCount         int
	// Datagrams sent and received, packets declared lost, PTOs fired.
	DatagramsSent, DatagramsReceived, PacketsLost, PTOs uint64
	// KeyGeneration counts 1-RTT key updates.
	KeyGeneration uint64
	// ECN reports whether the connection still marks its packets ECT(0).
	ECN bool
	// MaxDatagramSize is the largest datagram the connection sends now;
	// PMTUProbes and PMTUProbesLost count path MTU probes, PMTUBlackHoles
	// the times full-size packets stopped arriving and the size fell
	// back to the base (conn_pmtud.go).
	MaxDatagramSize                            int
	PMTUProbes, PMTUProbesLost, PMTUBlackHoles int
}

// Stats returns the connection's current statistics; after the
// connection ends it returns the zero value.
func (c *Conn) Stats() ConnStats {
	var s ConnStats
	c.run(contextBackground, func(now time.Time) {
		r := c.loss.ld.RTT()
		s = ConnStats{
			SmoothedRTT: r.Smoothed(), RTTVar: r.RTTVar(), MinRTT: r.Min(), LatestRTT: r.Latest(),
			PeerMaxAckDelay: c.loss.ld.MaxAckDelay(), CongestionWindow: c.loss.cc.CongestionWindow(),
			BytesInFlight: c.loss.ld.BytesInFlight(), PTOCount: c.loss.ld.PTOCount(),
			DatagramsSent: c.stats.sent, DatagramsReceived: c.stats.recv, PacketsLost: c.stats.lost, PTOs: c.stats.ptos,
			KeyGeneration: c.appKeys.Generation(), ECN: c.ecn.codepoint() != 0,
			MaxDatagramSize: c.datagramSize(), PMTUProbes: c.pmtud.probesSent, PMTUProbesLost: c.pmtud.probesLost,
			PMTUBlackHoles: c.pmtud.blackHoles,
		}
	})
	return s
}
