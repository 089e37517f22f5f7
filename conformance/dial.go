package conformance

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/qlog"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// DialOptions shape a tester connection made with Quiver's engine.
type DialOptions struct {
	// Label names the connection in the evidence ("control", "variant 2").
	Label string
	// ALPN overrides the profile's application protocol.
	ALPN []string
	// Versions overrides the engine's default [v1].
	Versions []uint32
	// Probe carries extra hooks (transport parameter edits, NoAcks, …).
	// The recording hooks are wired around the ones given here.
	Probe quic.Probe
	// Config edits the engine configuration before dialing.
	Config func(*quic.Config)
	// Early dials with quic.DialEarly: when the client resumes a session
	// whose ticket allows early data, Dial returns as soon as the 0-RTT
	// keys are ready, and frames injected now travel in 0-RTT packets.
	Early bool
	// HandshakeTimeout bounds the handshake (default: the settle window
	// plus one second, within the scenario's deadline).
	HandshakeTimeout time.Duration
}

// Conn is a tester connection: the engine's connection (nil when the
// handshake failed) plus its recorded trace.
type Conn struct {
	*quic.Conn
	t     *T
	trace *connTrace
}

// ID is the connection's index in the scenario's evidence.
func (c *Conn) ID() int { return c.trace.id }

// TransportParameters returns the server's transport parameters, decoded
// from its EncryptedExtensions.
func (c *Conn) TransportParameters() *wire.TransportParameters {
	tp, _ := c.trace.transportParameters()
	return tp
}

// Dial opens a tester connection to the target with the engine, the probe
// hooks wired to the scenario's recorder, and qlog and key log going to
// the artifacts. It returns the Conn even when the handshake fails, so the
// packets exchanged stay available; err tells why it failed.
func (t *T) Dial(ctx context.Context, o DialOptions) (*Conn, error) {
	trace := t.rec.newConn(o.Label)
	trace.compactOnRecord = true
	c := &Conn{t: t, trace: trace}
	alpn := o.ALPN
	if alpn == nil {
		alpn = []string{t.alpn()}
	}
	cfg := &quic.Config{
		TLSConfig: &tls.Config{
			ServerName:         t.profile.sni(),
			NextProtos:         alpn,
			InsecureSkipVerify: true, // conformance, not authentication: any certificate will do
		},
		Versions:                o.Versions,
		KeyLog:                  t.rec,
		MaxIdleTimeout:          30 * time.Second,
		MaxUniStreams:           3,
		ActiveConnectionIDLimit: 4,
		// docs/conformance-model.md, Tester defaults: no greasing unless a
		// scenario asks for it.
		DisableGreaseQUICBit: true,
	}
	if t.dir != "" {
		dir := t.dir
		cfg.Tracer = func(odcid []byte, isClient bool) qlog.Recorder {
			w, err := qlog.NewFileWriter(dir, odcid, qlog.VantageClient)
			if err != nil {
				return nil
			}
			t.cleanup(func() { w.Close() })
			return w
		}
	}
	p := o.Probe
	version := uint32(quic.Version1)
	if len(o.Versions) > 0 {
		version = o.Versions[0]
	}
	var (
		mu          sync.Mutex
		firstSent   time.Time
		lastVersion = map[wire.PacketType]uint32{}
	)
	user := o.Probe
	p.OnPacketSent = func(pi quic.PacketInfo) {
		now := time.Now()
		mu.Lock()
		if firstSent.IsZero() {
			firstSent = now
		}
		mu.Unlock()
		v := uint32(0)
		if pi.Type.IsLong() {
			v = version
		}
		trace.record(true, now, pi.Type, v, pi.Space, pi.PacketNumber, pi.DCID, pi.SCID, pi.Size, pi.DatagramSize, pi.Payload)
		if user.OnPacketSent != nil {
			user.OnPacketSent(pi)
		}
	}
	p.OnPacketReceived = func(pi quic.PacketInfo) {
		now := time.Now()
		mu.Lock()
		if !firstSent.IsZero() {
			t.noteRTT(now.Sub(firstSent))
		}
		v := lastVersion[pi.Type]
		mu.Unlock()
		trace.recordMeta(
			false,
			now,
			pi.Type,
			v,
			pi.Space,
			pi.PacketNumber,
			pi.DCID,
			pi.SCID,
			pi.Size,
			pi.DatagramSize,
			pi.Payload,
			pktMeta{firstByte: pi.FirstByte},
		)
		if user.OnPacketReceived != nil {
			user.OnPacketReceived(pi)
		}
	}
	p.DropIncoming = func(b []byte) bool {
		now := time.Now()
		t.rec.addDatagram(datagramRec{at: now, sent: false, local: trace.localAddr(), peer: trace.peerAddr(), b: append([]byte(nil), b...)})
		trace.keepRaw(now, b)
		// Long headers: remember each packet type's version for the
		// decrypted events that follow, and record the packets the engine
		// never hands to OnPacketReceived (Version Negotiation, Retry).
		for rest := b; len(rest) > 0 && wire.IsLongHeader(rest); {
			h, err := wire.ParseHeader(rest, 0)
			if err != nil && !errors.Is(err, wire.ErrUnsupportedVersion) {
				break
			}
			mu.Lock()
			lastVersion[h.Type] = uint32(h.Version)
			mu.Unlock()
			if h.Version == 0 || h.Type == wire.PacketTypeRetry || h.Type == wire.PacketType0RTT {
				// A server never sends 0-RTT (RFC 9001 §5.6), and the
				// engine drops one unread: keep its header as evidence.
				trace.recordHeaderOnly(now, rest, len(b))
			}
			if h.PacketLen <= 0 || h.PacketLen > len(rest) || h.Version == 0 || h.Type == wire.PacketTypeRetry {
				break
			}
			rest = rest[h.PacketLen:]
		}
		if trace.isStatelessReset(b) {
			trace.recordStatelessReset(now, len(b))
		}
		if user.DropIncoming != nil {
			return user.DropIncoming(b)
		}
		return false
	}
	p.OnSendDatagram = func(b []byte) [][]byte {
		out := [][]byte{b}
		if user.OnSendDatagram != nil {
			out = user.OnSendDatagram(b)
		}
		now := time.Now()
		for _, d := range out {
			t.rec.addDatagram(datagramRec{at: now, sent: true, local: trace.localAddr(), peer: trace.peerAddr(), b: append([]byte(nil), d...)})
		}
		return out
	}
	cfg.Probe = &p
	t.mu.Lock()
	cfg.TLS13Suites = t.suites
	t.mu.Unlock()
	if o.Config != nil {
		o.Config(cfg)
	}
	if addr, err := netip.ParseAddrPort(t.profile.Target.Address); err == nil {
		trace.setAddrs(netip.AddrPort{}, addr)
	} else if ua, err := net.ResolveUDPAddr("udp", t.profile.Target.Address); err == nil {
		trace.setAddrs(netip.AddrPort{}, ua.AddrPort())
	}
	hto := o.HandshakeTimeout
	if hto == 0 {
		hto = t.Settle() + time.Second
	}
	dctx, cancel := context.WithTimeout(ctx, hto)
	defer cancel()
	dial := quic.Dial
	if o.Early {
		dial = quic.DialEarly
	}
	qc, err := dial(dctx, "udp", t.profile.Target.Address, cfg)
	if err != nil {
		trace.noteRemoteClose(err)
		return c, fmt.Errorf("handshake with %s: %w", t.profile.Target.Address, err)
	}
	c.Conn = qc
	if ua, ok := qc.LocalAddr().(*net.UDPAddr); ok {
		trace.setAddrs(ua.AddrPort(), trace.peerAddr())
	}
	t.cleanup(func() {
		done := make(chan struct{})
		go func() { qc.Close(0, ""); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
	})
	return c, nil
}

func (c *connTrace) localAddr() netip.AddrPort {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.local
}

func (c *connTrace) peerAddr() netip.AddrPort {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.peer
}

// recordHeaderOnly records a Version Negotiation or Retry packet.
func (c *connTrace) recordHeaderOnly(at time.Time, b []byte, dgram int) *packet {
	p := &packet{at: at, conn: c.id, space: -1, datagram: dgram}
	if len(b) > 0 {
		// Unprotected in Version Negotiation and Retry packets.
		p.firstByte = b[0]
	}
	p.ev = PacketEvent{Direction: "received", Number: -1, Size: len(b)}
	if vn, err := wire.ParseVersionNegotiation(b); err == nil && wire.IsLongHeader(b) && len(b) >= 5 && b[1]|b[2]|b[3]|b[4] == 0 {
		p.ev.PacketType = "version_negotiation"
		p.dcid, p.scid = append([]byte(nil), vn.DCID...), append([]byte(nil), vn.SCID...)
		for v := range vn.Versions.All() {
			p.ev.Frames = append(p.ev.Frames, fmt.Sprintf("version 0x%08x", uint32(v)))
		}
	} else if r, err := wire.ParseRetry(b); err == nil {
		p.ev.PacketType = "retry"
		p.ev.Version = uint32(r.Version)
		p.dcid, p.scid = append([]byte(nil), r.DCID...), append([]byte(nil), r.SCID...)
		p.ev.Frames = []string{fmt.Sprintf("token len=%d", len(r.Token))}
	} else if h, err := wire.ParseHeader(b, 0); err == nil && h.Type == wire.PacketType0RTT {
		p.ev.PacketType = "0RTT"
		p.ev.Version = uint32(h.Version)
		p.dcid, p.scid = append([]byte(nil), h.DCID...), append([]byte(nil), h.SCID...)
		p.ev.Frames = []string{"(0-RTT packet from the server, not decrypted)"}
	} else {
		p.ev.PacketType = "unparsed"
	}
	p.ev.DCID = fmt.Sprintf("%x", p.dcid)
	p.ev.SCID = fmt.Sprintf("%x", p.scid)
	c.r.addPacket(p)
	return p
}

// noteRemoteClose records the peer's CONNECTION_CLOSE from the engine's
// error when the engine did not hand the packet that carried it to
// OnPacketReceived (see HOOKS-NEEDED.md). The event says so.
func (c *connTrace) noteRemoteClose(err error) {
	var cc *wire.ConnectionCloseFrame
	var te *quic.TransportError
	var ae *quic.ApplicationError
	switch {
	case errors.As(err, &te) && te.Remote:
		cc = &wire.ConnectionCloseFrame{ErrorCode: uint64(te.Code), FrameType: wire.FrameType(te.FrameType), Reason: []byte(te.Reason)}
	case errors.As(err, &ae) && ae.Remote:
		cc = &wire.ConnectionCloseFrame{Application: true, ErrorCode: ae.Code, Reason: []byte(ae.Reason)}
	default:
		return
	}
	c.r.mu.Lock()
	if c.closeNoted {
		c.r.mu.Unlock()
		return
	}
	c.closeNoted = true
	for _, p := range c.r.packets {
		if p.conn == c.id && !p.sent && p.closeFrame() != nil {
			c.r.mu.Unlock()
			return
		}
	}
	c.r.mu.Unlock()
	p := &packet{at: time.Now(), conn: c.id, space: -1, frames: []wire.Frame{cc}}
	p.ev = PacketEvent{Direction: "received", PacketType: "unknown", Number: -1,
		Frames: []string{frameString(cc), "(reported by the engine's connection error; the carrying packet was not surfaced to the probe)"}}
	c.r.addPacket(p)
}

// recordStatelessReset records a datagram that ends in one of the
// server's stateless reset tokens.
func (c *connTrace) recordStatelessReset(at time.Time, size int) {
	p := &packet{at: at, conn: c.id, space: -1, datagram: size}
	p.ev = PacketEvent{Direction: "received", PacketType: "stateless_reset", Number: -1, Size: size}
	c.r.addPacket(p)
}

// alpn is the application protocol the scenario speaks: the one its needs
// name, or the profile's default.
func (t *T) alpn() string {
	if t.sc != nil {
		for _, n := range t.sc.Needs {
			switch n {
			case NeedH3:
				return "h3"
			case NeedHQ:
				return "hq-interop"
			}
		}
	}
	return t.profile.ALPN()
}

func (p *Profile) sni() string {
	if p.Target.SNI != "" {
		return p.Target.SNI
	}
	host, _, err := net.SplitHostPort(p.Target.Address)
	if err != nil {
		return ""
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return "localhost" // an IP address is not a server name; self-signed test servers answer to localhost
	}
	return host
}

// Inject queues frames for the next packet of space.
func (c *Conn) Inject(space int, frames ...wire.Frame) {
	if c.Conn != nil {
		c.Conn.InjectFrames(space, frames...)
	}
}

// Ping sends a PING in a 1-RTT packet.
func (c *Conn) Ping() { c.Inject(quic.SpaceApplication, &wire.PingFrame{}) }

// h3Adapter makes a quic.Conn an h3.Conn.
type h3Adapter struct{ c *quic.Conn }

func (a h3Adapter) OpenStream(ctx context.Context) (h3.Stream, error) {
	s, err := a.c.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (a h3Adapter) OpenUniStream(ctx context.Context) (h3.Stream, error) {
	s, err := a.c.OpenUniStream(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (a h3Adapter) AcceptStream(ctx context.Context) (h3.Stream, error) {
	s, err := a.c.AcceptStream(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (a h3Adapter) AcceptUniStream(ctx context.Context) (h3.Stream, error) {
	s, err := a.c.AcceptUniStream(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (a h3Adapter) Close(code uint64, reason string) error { return a.c.Close(code, reason) }
func (a h3Adapter) ALPN() string                           { return a.c.ALPN() }

// Fetch requests path over the connection's application protocol
// (hq-interop or h3) and returns the body's first bytes (all of a body up
// to 1 MiB; see FetchLen for larger resources).
func (c *Conn) Fetch(ctx context.Context, path string) ([]byte, error) {
	var buf prefixBuffer
	err := c.fetchTo(ctx, path, &buf)
	return buf.b, err
}

// FetchLen requests path and reads the whole body without keeping it: it
// returns the body's length, so that a download of any size runs in
// bounded memory.
func (c *Conn) FetchLen(ctx context.Context, path string) (int64, error) {
	var buf prefixBuffer
	err := c.fetchTo(ctx, path, &buf)
	return buf.n, err
}

func (c *Conn) fetchTo(ctx context.Context, path string, w io.Writer) error {
	if c.Conn == nil {
		return errors.New("no connection")
	}
	switch c.ALPN() {
	case h3.ALPNHQInterop:
		_, err := h3.GetHQ(ctx, h3Adapter{c.Conn}, path, w)
		return err
	case h3.ALPNH3:
		cc, err := c.h3Client(ctx)
		if err != nil {
			return err
		}
		req, err := newGet(ctx, c.t.profile, path)
		if err != nil {
			return err
		}
		resp, err := cc.RoundTrip(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(w, resp.Body)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("HTTP status %d", resp.StatusCode)
		}
		return err
	}
	return fmt.Errorf("no client for application protocol %q", c.ALPN())
}

// h3Client starts HTTP/3 on the connection (once).
func (c *Conn) h3Client(ctx context.Context) (*h3.ClientConn, error) {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if c.trace.h3 != nil {
		return c.trace.h3, nil
	}
	cc, err := h3.NewClientConn(ctx, h3Adapter{c.Conn}, nil)
	if err != nil {
		return nil, err
	}
	c.trace.h3 = cc
	return cc, nil
}

// prefixBuffer counts what is written and keeps the first rawKeep bytes,
// so that a large download (or a flooding target) costs no memory.
type prefixBuffer struct {
	b []byte
	n int64
}

func (l *prefixBuffer) Write(p []byte) (int, error) {
	if len(l.b) < rawquic.Keep {
		l.b = append(l.b, p[:min(len(p), rawquic.Keep-len(l.b))]...)
	}
	l.n += int64(len(p))
	return len(p), nil
}
