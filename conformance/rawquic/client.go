package rawquic

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Client is a frame-level scripted QUIC client on its own UDP socket,
// built from the wire and protect packages and crypto/tls. Unlike the
// engine it lets a scenario choose every header field (version, connection
// IDs of any length, reserved and fixed bits, packet numbers, datagram
// sizes) and send any frame in any packet type, while still completing a
// real handshake when asked. It acknowledges what it receives at once and
// never retransmits except for its first flight. Its host (Host)
// records what it sends and receives, and P is the host's record of a
// packet.
type Client[P Packet] struct {
	host  Host[P]
	conn  *net.UDPConn   // the socket of the current path
	Local netip.AddrPort // its local address
	Peer  netip.AddrPort

	// paths are the tester's sockets towards the target: path 0 is the
	// one the handshake used; migration scenarios add more. cur is the
	// path the client sends on.
	Paths []*Path
	cur   int
	in    chan In
	done  chan struct{}

	Version     uint32
	ODCID, DCID []byte // original and current Destination Connection ID
	SCID        []byte
	Token       []byte
	ALPN        []string
	tp          []byte // the client's transport parameters as sent

	tls      *tls.QUICConn
	HelloMsg []byte
	sessions tls.ClientSessionCache
	// seal0RTT are the 0-RTT keys when TLS offered early data;
	// earlyRejected is set when the server declined it (RFC 9001
	// §4.6.2).
	Seal0RTT      *protect.Keys
	EarlyRejected bool
	// rewriteHello edits the ClientHello before it is first sent (see
	// Options.RewriteHello).
	rewriteHello func([]byte) []byte
	curves       []tls.CurveID
	serverName   string

	Seal, open [3]*protect.Keys
	NextPN     [3]uint64
	largest    [3]uint64 // NoPacketNumber before the first packet
	Recvd      [3]PNSet
	credit     Credit
	AckOwed    [3]bool
	CryptoOff  [3]uint64
	CryptoQ    [3][]byte
	cryptoIn   [3]CryptoBuffer
	delivered  [3]int

	// NoAcks stops the automatic acknowledgments.
	NoAcks bool
	// NeverAck, when set, picks packets the client never acknowledges
	// (their frames are still processed); later packets are acknowledged
	// as usual, so the server sees that one packet as lost.
	NeverAck func(space int, p P) bool
	// flowLabels counts the IPv6 flow labels of the datagrams received on
	// IPv6 paths (RFC 9000 §9.7), by label.
	FlowLabels map[uint32]int
	// Silent stops everything the client would send on its own: ACKs,
	// its Finished, PATH_RESPONSE (a client that never completes address
	// validation).
	Silent bool
	// RetryToken, when set, rewrites the token the client echoes after a
	// Retry.
	RetryToken func([]byte) []byte
	// DropIn, when set, drops a received datagram before it is processed
	// or acknowledged (simulated loss); path is the socket it came in on.
	DropIn func(path int, d []byte) bool
	// ECNFeedback makes the client's ACK frames carry the ECN counts of
	// the packets it received (RFC 9000 §13.4.1); without it they carry
	// none.
	ECNFeedback bool
	ecnIn       [3][4]uint64 // packets received per space and codepoint
	// StampArrivals keeps the arrival time (the kernel's, when the socket
	// gives it) and size of every datagram received, dropped ones too.
	StampArrivals bool
	Arrivals      []Arrival
	// NoPathResponse, per path, stops the automatic PATH_RESPONSE.
	NoPathResponse map[int]bool
	// BeforeFinished, when set, runs once when the client's Finished is
	// ready to leave; the handshake waits until it returns.
	BeforeFinished func()
	// CoalesceFinished, when set, makes the client's Finished leave in one
	// datagram with an Initial (ACK) before it and a 1-RTT packet after
	// it carrying the frames CoalesceFinished returns.
	CoalesceFinished func() []wire.Frame
	// FirstFlight, when set, sends the ClientHello instead of the one
	// 1200-byte Initial of Handshake, both at the start and after a Retry.
	FirstFlight  func()
	holdFinished bool
	// streams reassembles the server's stream data (client_fetch.go).
	streams   map[uint64]*Stream
	NextBidi  uint64
	H3Control bool
	// readPhase and writePhase are the 1-RTT key phases in use; the
	// client follows the server's key updates. readGen and writeGen
	// count the updates of each direction, so that a client that updated
	// its own keys (updateKeys) does not update them again when the
	// server follows.
	readPhase, WritePhase int
	readGen, WriteGen     int
	// Spin runs the client side of the latency spin bit (RFC 9000
	// §17.4): each 1-RTT packet carries the inverse of the spin value of
	// the highest-numbered 1-RTT packet received.
	Spin    bool
	spinOut bool
	// sparesGiven is set once the client issued spare connection IDs.
	SparesGiven bool
	// FollowRetry makes the client answer a Retry (default true).
	FollowRetry bool
	// ClearQUICBit sends every Handshake and 1-RTT packet with the QUIC
	// bit (0x40) cleared, as a client that negotiated grease_quic_bit
	// (RFC 9287) may; Initial packets keep it set.
	ClearQUICBit bool
	// handshakeOpts and handshakeExtra shape the Handshake packet that
	// carries the client's Finished.
	HandshakeOpts  LongOpts
	HandshakeExtra []wire.Frame

	ServerSCID    []byte
	RetrySCID     []byte
	serverTP      []byte
	TLSDone       bool // the TLS handshake completed on the client side
	Confirmed     bool // HANDSHAKE_DONE received
	HandshakeSent bool // the client's Finished left in a Handshake packet
	TLSErr        error
	PeerClosed    bool
	FirstSent     time.Time
}

// Arrival is one received datagram's arrival.
type Arrival struct {
	At     time.Time
	Size   int
	Kernel bool // at is the kernel's timestamp
}

// Options shape a rawClient.
type Options struct {
	Label      string
	Version    uint32 // default v1
	DCID, SCID []byte // default 8 random bytes each; use empty non-nil for zero length
	ALPN       []string
	TP         *wire.TransportParameters // default: the tester defaults (§2.4)
	RawTP      []byte                    // overrides TP
	LocalIP    netip.Addr                // the socket's local address (default: any)
	Token      []byte                    // the Initial token (a NEW_TOKEN value)
	// RewriteHello replaces the ClientHello crypto/tls wrote before it is
	// sent (and resent). TLS keeps hashing the original, so a handshake
	// the server goes on with cannot complete: such probes judge from the
	// server's Initial packets.
	RewriteHello func([]byte) []byte
	// Curves are the key exchanges offered (default X25519 and P-256,
	// which keep the ClientHello in one Initial packet).
	Curves []tls.CurveID
	// Sessions, when set, keeps the session tickets the server sends and
	// offers one (with early data, when the ticket allows it) in the
	// ClientHello.
	Sessions tls.ClientSessionCache
	// ServerName is the TLS server name to send.
	ServerName string
}

func randomCID() []byte {
	b := make([]byte, 8)
	rand.Read(b)
	return b
}

// New makes a raw client on the connected socket uc, reporting to
// h.
func New[P Packet](h Host[P], uc *net.UDPConn, o Options) *Client[P] {
	rc := &Client[P]{host: h, FollowRetry: true, in: make(chan In, 1024), done: make(chan struct{})}
	h.Cleanup(func() { close(rc.done) })
	ra := uc.RemoteAddr().(*net.UDPAddr).AddrPort()
	rc.Peer = netip.AddrPortFrom(ra.Addr().Unmap(), ra.Port())
	rc.addPath(uc)
	rc.conn, rc.Local = uc, rc.Paths[0].Local
	rc.serverName = o.ServerName
	rc.Version = o.Version
	if rc.Version == 0 {
		rc.Version = protect.Version1
	}
	rc.DCID = o.DCID
	if rc.DCID == nil {
		rc.DCID = randomCID()
	}
	rc.ODCID = rc.DCID
	rc.SCID = o.SCID
	if rc.SCID == nil {
		rc.SCID = randomCID()
	}
	rc.Token = o.Token
	rc.rewriteHello = o.RewriteHello
	rc.curves = o.Curves
	rc.sessions = o.Sessions
	rc.ALPN = o.ALPN
	for i := range rc.largest {
		rc.largest[i] = wire.NoPacketNumber
	}
	if o.RawTP != nil {
		rc.tp = o.RawTP
	} else {
		tp := o.TP
		if tp == nil {
			tp = DefaultClientTP(rc.SCID)
			rc.credit = NewCredit(tp)
		}
		rc.tp = tp.Marshal()
	}
	rc.InitialKeys(rc.DCID)
	return rc
}

// DefaultClientTP are the tester defaults of docs/conformance-model.md, Tester defaults.
func DefaultClientTP(scid []byte) *wire.TransportParameters {
	tp := &wire.TransportParameters{}
	tp.SetDefaults()
	tp.MaxIdleTimeout = 30000
	tp.InitialMaxData = 16 << 20
	tp.InitialMaxStreamDataBidiLocal = 4 << 20
	tp.InitialMaxStreamDataBidiRemote = 4 << 20
	tp.InitialMaxStreamDataUni = 4 << 20
	tp.InitialMaxStreamsBidi = 100
	tp.InitialMaxStreamsUni = 3
	tp.ActiveConnectionIDLimit = 4
	tp.HasInitialSourceConnectionID = true
	tp.InitialSourceConnectionID = scid
	return tp
}

func (rc *Client[P]) InitialKeys(dcid []byte) {
	c, s, err := protect.NewInitialKeys(rc.Version, dcid)
	if err != nil {
		// Versions without known protection (reserved versions for version
		// negotiation) are sealed with v1's salt; the server cannot read
		// them anyway, only their header matters.
		c, s, _ = protect.NewInitialKeys(protect.Version1, dcid)
	}
	rc.Seal[0], rc.open[0] = c, s
}

// ClientHello starts TLS and returns the ClientHello bytes (the Initial
// CRYPTO stream); it is computed once.
func (rc *Client[P]) ClientHello(ctx context.Context) []byte {
	if rc.tls != nil {
		return rc.HelloMsg
	}
	if rc.curves == nil {
		rc.curves = []tls.CurveID{tls.X25519, tls.CurveP256}
	}
	rc.tls = tls.QUICClient(&tls.QUICConfig{TLSConfig: &tls.Config{
		ServerName:         rc.serverName,
		NextProtos:         rc.ALPN,
		InsecureSkipVerify: true,
		MinVersion:         tls.VersionTLS13,
		KeyLogWriter:       rc.host.KeyLog(),
		// By default classical groups only, so the ClientHello fits one
		// Initial packet; a hybrid post-quantum key share alone is 1,216
		// bytes.
		CurvePreferences:   rc.curves,
		ClientSessionCache: rc.sessions,
	}})
	rc.host.Cleanup(func() { rc.tls.Close() })
	rc.tls.SetTransportParameters(rc.tp)
	if err := quic.WithTLS13Suites(nil, func() error { return rc.tls.Start(ctx) }); err != nil {
		rc.host.Errorf("TLS client start: %v", err)
	}
	rc.drainTLS()
	rc.HelloMsg = append([]byte(nil), rc.CryptoQ[0]...)
	if rc.rewriteHello != nil {
		rc.HelloMsg = rc.rewriteHello(rc.HelloMsg)
	}
	return rc.HelloMsg
}

func levelSpace(l tls.QUICEncryptionLevel) int {
	switch l {
	case tls.QUICEncryptionLevelInitial:
		return 0
	case tls.QUICEncryptionLevelHandshake:
		return 1
	case tls.QUICEncryptionLevelApplication:
		return 2
	}
	return -1
}

// drainTLS processes the TLS events: keys, data to send, parameters.
func (rc *Client[P]) drainTLS() {
	for {
		ev := rc.tls.NextEvent()
		switch ev.Kind {
		case tls.QUICNoEvent:
			return
		case tls.QUICSetReadSecret, tls.QUICSetWriteSecret:
			if ev.Level == tls.QUICEncryptionLevelEarly && ev.Kind == tls.QUICSetWriteSecret {
				if k, err := protect.NewKeys(rc.Version, ev.Suite, ev.Data); err == nil {
					rc.Seal0RTT = k
				}
				continue
			}
			sp := levelSpace(ev.Level)
			if sp < 0 {
				continue
			}
			k, err := protect.NewKeys(rc.Version, ev.Suite, ev.Data)
			if err != nil {
				rc.TLSErr = err
				continue
			}
			if ev.Kind == tls.QUICSetReadSecret {
				rc.open[sp] = k
			} else {
				rc.Seal[sp] = k
			}
		case tls.QUICWriteData:
			if sp := levelSpace(ev.Level); sp >= 0 {
				rc.CryptoQ[sp] = append(rc.CryptoQ[sp], ev.Data...)
			}
		case tls.QUICTransportParameters:
			rc.serverTP = append([]byte(nil), ev.Data...)
		case tls.QUICTransportParametersRequired:
			rc.tls.SetTransportParameters(rc.tp)
		case tls.QUICRejectedEarlyData:
			rc.EarlyRejected = true
		case tls.QUICHandshakeDone:
			rc.TLSDone = true
		case tls.QUICErrorEvent:
			rc.TLSErr = ev.Err
		}
	}
}

// LongOpts choose the header of a long-header packet.
type LongOpts struct {
	Version      uint32 // 0: the client's version
	DCID, SCID   []byte // nil: the client's
	Token        []byte // Initial only; nil: the client's token
	ReservedBits byte
	ClearFixed   bool
	PNLen        int // default 4
	PadTo        int // pad the packet with PADDING to this many bytes
	Keys         *protect.Keys
	// Type overrides the packet type the space gives (a 0-RTT packet in
	// the application space).
	Type wire.PacketType
}

// longPacket builds and protects a long-header packet in space (0 Initial,
// 1 Handshake) carrying frames. It takes the next packet number.
func (rc *Client[P]) LongPacket(space int, frames []wire.Frame, o LongOpts) ([]byte, uint64) {
	pt := wire.PacketTypeInitial
	if space == 1 {
		pt = wire.PacketTypeHandshake
	}
	if o.Type != wire.PacketTypeUnknown {
		pt = o.Type
	}
	v := o.Version
	if v == 0 {
		v = rc.Version
	}
	h := wire.LongHeader{Version: wire.Version(v), Type: pt, ClearFixedBit: o.ClearFixed || (rc.ClearQUICBit && space == 1), ReservedBits: o.ReservedBits,
		DCID: o.DCID, SCID: o.SCID, Token: o.Token, LengthLen: 2, PNLen: o.PNLen}
	if h.DCID == nil {
		h.DCID = rc.DCID
	}
	if h.SCID == nil {
		h.SCID = rc.SCID
	}
	if h.Token == nil && pt == wire.PacketTypeInitial {
		h.Token = rc.Token
	}
	if h.PNLen == 0 {
		h.PNLen = 4
	}
	pn := rc.NextPN[space]
	rc.NextPN[space]++
	h.PacketNumber = pn
	hdr, lengthOff, pnOff := h.Append(nil)
	payload := AppendFrames(nil, frames)
	if o.PadTo > 0 {
		if n := o.PadTo - len(hdr) - len(payload) - protect.TagSize; n > 0 {
			payload = append(payload, make([]byte, n)...)
		}
	}
	// The header protection sample needs 4 bytes after the packet number
	// start plus 16 of ciphertext.
	if n := 4 - h.PNLen - len(payload); n > 0 {
		payload = append(payload, make([]byte, n)...)
	}
	wire.PutVarintLen(hdr[lengthOff:], uint64(h.PNLen+len(payload)+protect.TagSize), 2)
	k := o.Keys
	if k == nil {
		k = rc.Seal[space]
	}
	if k == nil {
		rc.host.Errorf("no %s keys to seal with", pt)
	}
	pkt := k.Seal(append([]byte(nil), hdr...), hdr, payload, pn)
	if _, err := k.HeaderProtector().Apply(pkt, pnOff, true); err != nil {
		rc.host.Errorf("header protection: %v", err)
	}
	rc.host.Packet(PacketInfo{Sent: true, At: time.Now(), Type: pt, Version: v, Space: space, PN: pn, DCID: h.DCID, SCID: h.SCID, Size: len(pkt)}, payload)
	return pkt, pn
}

// ShortOpts choose the header of a 1-RTT packet.
type ShortOpts struct {
	DCID         []byte
	ReservedBits byte
	ClearFixed   bool
	KeyPhase     bool
	PNLen        int // default 4
	PN           *uint64
	PadTo        int
	NoPad        bool // do not pad short payloads up to the sample size
	Keys         *protect.Keys
	// HP overrides the header protection of Keys (a packet sealed with
	// keys nobody has, under the real header protection).
	HP *protect.HeaderProtector
	// Path is the path the packet will leave on, for the evidence
	// (default: the current one).
	Path *int
}

// shortPacket builds and protects a 1-RTT packet.
func (rc *Client[P]) ShortPacket(frames []wire.Frame, o ShortOpts) ([]byte, uint64) {
	// KeyPhase flips the bit of the current key phase.
	h := wire.ShortHeader{
		DCID:          o.DCID,
		ReservedBits:  o.ReservedBits,
		ClearFixedBit: o.ClearFixed || rc.ClearQUICBit,
		KeyPhase:      o.KeyPhase != (rc.WritePhase == 1),
		PNLen:         o.PNLen,
		SpinBit:       rc.Spin && rc.spinOut,
	}
	if h.DCID == nil {
		h.DCID = rc.DCID
	}
	if h.PNLen == 0 {
		h.PNLen = 4
	}
	pn := rc.NextPN[2]
	if o.PN != nil {
		pn = *o.PN
	} else {
		rc.NextPN[2]++
	}
	h.PacketNumber = pn
	hdr, pnOff := h.Append(nil)
	payload := AppendFrames(nil, frames)
	if o.PadTo > 0 {
		if n := o.PadTo - len(hdr) - len(payload) - protect.TagSize; n > 0 {
			payload = append(payload, make([]byte, n)...)
		}
	}
	if n := 4 - h.PNLen - len(payload); n > 0 && !o.NoPad {
		payload = append(payload, make([]byte, n)...)
	}
	k := o.Keys
	if k == nil {
		k = rc.Seal[2]
	}
	if k == nil {
		rc.host.Errorf("no 1-RTT keys to seal with")
	}
	pkt := k.Seal(append([]byte(nil), hdr...), hdr, payload, pn)
	hp := k.HeaderProtector()
	if o.HP != nil {
		hp = o.HP
	}
	if len(pkt) >= pnOff+4+protect.SampleSize {
		if _, err := hp.Apply(pkt, pnOff, false); err != nil {
			rc.host.Errorf("header protection: %v", err)
		}
	}
	m := PacketInfo{Sent: true, At: time.Now(), Type: wire.PacketType1RTT, Space: 2, PN: pn, DCID: h.DCID, Size: len(pkt), Path: rc.cur, FirstByte: hdr[0]}
	if o.Path != nil {
		m.Path = *o.Path
	}
	if m.Path > 0 {
		m.Local = rc.Paths[m.Path].Local
	}
	if h.KeyPhase {
		m.KeyPhase = 1
	}
	rc.host.Packet(m, payload)
	return pkt, pn
}

func AppendFrames(b []byte, frames []wire.Frame) []byte {
	for _, f := range frames {
		b = f.Append(b)
	}
	return b
}

// send writes one datagram made of the given packets on the current path.
func (rc *Client[P]) Send(pkts ...[]byte) {
	rc.sendOn(rc.cur, pkts...)
}

// sendOn writes one datagram made of the given packets on path i.
func (rc *Client[P]) sendOn(i int, pkts ...[]byte) {
	var d []byte
	for _, p := range pkts {
		d = append(d, p...)
	}
	if rc.FirstSent.IsZero() {
		rc.FirstSent = time.Now()
	}
	p := rc.Paths[i]
	rc.host.Datagram(time.Now(), true, p.Local, p.Peer, d)
	p.Write(d)
}

// sendClientHello sends the ClientHello in one Initial padded to pad bytes.
func (rc *Client[P]) SendClientHello(ctx context.Context, pad int) {
	ch := rc.ClientHello(ctx)
	rc.CryptoQ[0] = nil
	rc.CryptoOff[0] = uint64(len(ch))
	pkt, _ := rc.LongPacket(0, []wire.Frame{&wire.CryptoFrame{Data: ch}}, LongOpts{PadTo: pad})
	rc.Send(pkt)
}

// Handshake runs a complete handshake: ClientHello in a 1200-byte datagram,
// then the server's flights, the client's Finished, until HANDSHAKE_DONE
// or the deadline. It repeats the ClientHello if nothing comes back.
func (rc *Client[P]) Handshake(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	if rc.FirstFlight != nil {
		rc.ClientHello(ctx)
		rc.FirstFlight()
	} else {
		rc.SendClientHello(ctx, 1200)
	}
	for tries := 0; ; tries++ {
		wait := min(time.Until(deadline), time.Second<<tries)
		if wait <= 0 {
			break
		}
		rc.Receive(ctx, wait, func() bool { return rc.Confirmed || rc.TLSErr != nil || rc.PeerClosed })
		if rc.Confirmed || rc.TLSErr != nil || rc.PeerClosed || ctx.Err() != nil {
			break
		}
		if rc.ServerSCID == nil && rc.FirstFlight != nil {
			rc.FirstFlight()
		} else if rc.ServerSCID == nil {
			// Nothing yet from the server: send the first flight again.
			ch := rc.ClientHello(ctx)
			pkt, _ := rc.LongPacket(0, []wire.Frame{&wire.CryptoFrame{Data: ch}}, LongOpts{PadTo: 1200})
			rc.Send(pkt)
		}
	}
	switch {
	case rc.TLSErr != nil:
		return fmt.Errorf("TLS: %w", rc.TLSErr)
	case rc.Confirmed:
		return nil
	case rc.PeerClosed:
		return errors.New("the server closed the connection")
	case rc.TLSDone:
		return errors.New("the handshake completed but HANDSHAKE_DONE never arrived")
	case rc.ServerSCID == nil:
		return errors.New("no answer from the server")
	}
	return errors.New("the handshake did not complete")
}

// Receive processes incoming datagrams for up to d, or until stop returns
// true; it answers with acknowledgments and TLS data as they are owed.
func (rc *Client[P]) Receive(ctx context.Context, d time.Duration, stop func() bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		if stop != nil && stop() {
			return
		}
		select {
		case in := <-rc.in:
			if rc.StampArrivals {
				at := in.KernelAt
				if at.IsZero() {
					at = in.At
				}
				rc.Arrivals = append(rc.Arrivals, Arrival{At: at, Size: len(in.Data), Kernel: !in.KernelAt.IsZero()})
			}
			if rc.DropIn != nil && rc.DropIn(in.Path, in.Data) {
				rc.host.Datagram(in.At, false, rc.Paths[in.Path].Local, rc.Paths[in.Path].Peer, in.Data)
				continue
			}
			if in.HasFlow {
				if rc.FlowLabels == nil {
					rc.FlowLabels = map[uint32]int{}
				}
				rc.FlowLabels[in.Flow]++
			}
			rc.processDatagram(in)
			rc.Flush()
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (rc *Client[P]) processDatagram(in In) {
	now, d := in.At, in.Data
	if !rc.FirstSent.IsZero() {
		rc.host.NoteRTT(now.Sub(rc.FirstSent))
	}
	rc.host.Datagram(now, false, rc.Paths[in.Path].Local, rc.Paths[in.Path].Peer, d)
	rc.host.KeepRaw(now, d)
	meta := PacketInfo{At: now, Datagram: len(d), Path: in.Path, ECN: in.ECN}
	if in.Path > 0 {
		meta.Local = rc.Paths[in.Path].Local
	}
	rest := d
	for len(rest) > 0 {
		if !wire.IsLongHeader(rest) {
			rc.processShort(rest, meta)
			return
		}
		h, err := wire.ParseHeader(rest, len(rc.SCID))
		if err != nil || h.Version == 0 || h.Type == wire.PacketTypeRetry || !protect.SupportedVersion(uint32(h.Version)) {
			rc.host.HeaderOnly(now, rest, len(d))
			if h.Type == wire.PacketTypeRetry && err == nil {
				rc.handleRetry(rest)
			}
			return
		}
		pkt := append([]byte(nil), rest[:h.PacketLen]...)
		rest = rest[h.PacketLen:]
		sp := SpaceOf(h.Type)
		if sp < 0 || sp > 1 || rc.open[sp] == nil {
			continue
		}
		k := rc.open[sp]
		pnLen, err := k.HeaderProtector().Remove(pkt, h.PNOffset, true)
		if err != nil {
			continue
		}
		pn := wire.DecodePacketNumber(rc.largest[sp], wire.ReadPacketNumber(pkt[h.PNOffset:], pnLen), pnLen*8)
		hdrEnd := h.PNOffset + pnLen
		payload, err := k.Open(nil, pkt[:hdrEnd], pkt[hdrEnd:], pn)
		if err != nil {
			continue
		}
		if h.Type == wire.PacketTypeInitial && rc.ServerSCID == nil {
			// Never nil once set: a server may choose a zero-length
			// connection ID (RFC 9000 §5.1), and nil means "no answer yet".
			rc.ServerSCID = append([]byte{}, h.SCID...)
			rc.DCID = rc.ServerSCID
		}
		m := meta
		m.Type, m.Version, m.Space, m.PN, m.DCID, m.SCID, m.Size = h.Type, uint32(h.Version), sp, pn, h.DCID, h.SCID, len(pkt)
		m.FirstByte = pkt[0]
		p := rc.host.Packet(m, payload)
		rc.onPacket(sp, pn, p, m)
		rc.host.Processed(p)
	}
}

func (rc *Client[P]) processShort(b []byte, meta PacketInfo) {
	now := meta.At
	k := rc.open[2]
	if k == nil || len(b) < 1+len(rc.SCID)+4+protect.SampleSize {
		rc.host.Undecryptable(now, b)
		return
	}
	pkt := append([]byte(nil), b...)
	pnOff := 1 + len(rc.SCID)
	pnLen, err := k.HeaderProtector().Remove(pkt, pnOff, false)
	if err != nil {
		return
	}
	pn := wire.DecodePacketNumber(rc.largest[2], wire.ReadPacketNumber(pkt[pnOff:], pnLen), pnLen*8)
	phase := int(pkt[0]>>2) & 1
	gens := 0 // generations the server moved on
	if phase != rc.readPhase {
		// The server started a key update (RFC 9001 §6), or followed
		// one of the tester's: open with the next generation, and
		// answer in it (§6.2).
		if next, err := k.Next(); err == nil {
			k, gens = next, 1
		}
	}
	payload, err := k.Open(nil, pkt[:pnOff+pnLen], pkt[pnOff+pnLen:], pn)
	if err != nil && phase == rc.readPhase && rc.WriteGen >= rc.readGen+2 {
		// The tester updated twice in a row (tls-key-update-consecutive)
		// and the server followed both at once: the same Key Phase bit,
		// two generations on.
		if k1, err1 := k.Next(); err1 == nil {
			if k2, err2 := k1.Next(); err2 == nil {
				if payload, err = k2.Open(nil, pkt[:pnOff+pnLen], pkt[pnOff+pnLen:], pn); err == nil {
					k, gens = k2, 2
				}
			}
		}
	}
	if err == nil && gens > 0 {
		rc.open[2], rc.readPhase = k, phase
		rc.readGen += gens
		if next, err := rc.Seal[2].Next(); err == nil && rc.WriteGen < rc.readGen {
			rc.Seal[2], rc.WritePhase = next, phase
			rc.WriteGen++
		}
	}
	if err != nil {
		rc.host.Undecryptable(now, b)
		return
	}
	meta.Type, meta.Space, meta.PN, meta.DCID, meta.Size = wire.PacketType1RTT, 2, pn, pkt[1:pnOff], len(pkt)
	meta.FirstByte = pkt[0]
	meta.KeyPhase = int(pkt[0]>>2) & 1
	if rc.Spin && (rc.largest[2] == wire.NoPacketNumber || pn > rc.largest[2]) {
		rc.spinOut = pkt[0]&0x20 == 0
	}
	p := rc.host.Packet(meta, payload)
	rc.onPacket(2, pn, p, meta)
	rc.host.Processed(p)
}

func (rc *Client[P]) handleRetry(b []byte) {
	if !rc.FollowRetry || rc.RetrySCID != nil || rc.ServerSCID != nil {
		return
	}
	r, err := wire.ParseRetry(b)
	if err != nil || protect.VerifyRetry(uint32(r.Version), rc.ODCID, b) != nil {
		return
	}
	rc.RetrySCID = append([]byte{}, r.SCID...) // never nil, as serverSCID
	rc.Token = append([]byte(nil), r.Token...)
	if rc.RetryToken != nil {
		rc.Token = rc.RetryToken(rc.Token)
	}
	rc.DCID = rc.RetrySCID
	rc.InitialKeys(rc.DCID)
	rc.host.Fact("retry.policy", "retry seen")
	if rc.FirstFlight != nil {
		rc.FirstFlight()
		return
	}
	ch := rc.HelloMsg
	pkt, _ := rc.LongPacket(0, []wire.Frame{&wire.CryptoFrame{Data: ch}}, LongOpts{PadTo: 1200})
	rc.Send(pkt)
}

func (rc *Client[P]) onPacket(sp int, pn uint64, p P, m PacketInfo) {
	if rc.largest[sp] == wire.NoPacketNumber || pn > rc.largest[sp] {
		rc.largest[sp] = pn
	}
	if !rc.Recvd[sp].Contains(pn) && (rc.NeverAck == nil || !rc.NeverAck(sp, p)) {
		rc.Recvd[sp].Add(pn)
		rc.ecnIn[sp][m.ECN&3]++
	}
	if p.AckEliciting() && !rc.NoAcks {
		rc.AckOwed[sp] = true
	}
	for _, f := range p.Frames() {
		switch f := f.(type) {
		case *wire.CryptoFrame:
			if rc.tls == nil || rc.TLSErr != nil {
				continue
			}
			rc.cryptoIn[sp].Add(f.Offset, f.Data)
			data := rc.cryptoIn[sp].Contiguous()
			if len(data) > rc.delivered[sp] {
				lvl := []tls.QUICEncryptionLevel{tls.QUICEncryptionLevelInitial, tls.QUICEncryptionLevelHandshake, tls.QUICEncryptionLevelApplication}[sp]
				if err := quic.WithTLS13Suites(nil, func() error { return rc.tls.HandleData(lvl, data[rc.delivered[sp]:]) }); err != nil {
					rc.TLSErr = err
				}
				rc.delivered[sp] = len(data)
				rc.drainTLS()
			}
		case *wire.HandshakeDoneFrame:
			rc.Confirmed = true
		case *wire.ConnectionCloseFrame:
			rc.PeerClosed = true
		case *wire.PathChallengeFrame:
			// docs/conformance-model.md, Tester defaults: the tester answers PATH_CHALLENGE on the
			// path where it arrived, in a 1200-byte datagram.
			if rc.Seal[2] != nil && !rc.NoPathResponse[m.Path] && !rc.Silent {
				path := m.Path
				pkt, _ := rc.ShortPacket([]wire.Frame{&wire.PathResponseFrame{Data: f.Data}}, ShortOpts{PadTo: 1200, Path: &path})
				rc.sendOn(path, pkt)
			}
		case *wire.StreamFrame:
			rc.OnStream(f)
		}
	}
}

// ackFrame builds an ACK frame for everything received in space.
func (rc *Client[P]) AckFrame(sp int) *wire.AckFrame {
	a := &wire.AckFrame{Ranges: rc.Recvd[sp].Ack(32)}
	rc.ecnFeedback(sp, a)
	return a
}

// ecnFeedback adds the ECN counts of space sp to a when the client reports
// them.
func (rc *Client[P]) ecnFeedback(sp int, a *wire.AckFrame) {
	if rc.ECNFeedback {
		a.ECN = true
		a.ECT0, a.ECT1, a.ECNCE = rc.ecnIn[sp][2], rc.ecnIn[sp][1], rc.ecnIn[sp][3]
	}
}

// ackFrameOf builds an ACK frame for the packet numbers pns of space sp.
func (rc *Client[P]) AckFrameOf(sp int, pns []uint64) *wire.AckFrame {
	pns = slices.Clone(pns)
	slices.Sort(pns)
	slices.Reverse(pns)
	a := &wire.AckFrame{}
	for _, pn := range pns {
		if n := len(a.Ranges); n > 0 && a.Ranges[n-1].Smallest == pn+1 {
			a.Ranges[n-1].Smallest = pn
			continue
		}
		if len(a.Ranges) == 32 {
			break
		}
		a.Ranges = append(a.Ranges, wire.AckRange{Smallest: pn, Largest: pn})
	}
	rc.ecnFeedback(sp, a)
	return a
}

// flush sends owed acknowledgments and pending TLS data.
func (rc *Client[P]) Flush() {
	if rc.Silent {
		return
	}
	if rc.BeforeFinished != nil && len(rc.CryptoQ[1]) > 0 && rc.Seal[1] != nil && !rc.holdFinished {
		f := rc.BeforeFinished
		rc.BeforeFinished = nil
		rc.holdFinished = true
		f()
		rc.holdFinished = false
	}
	var hs []byte
	finished := len(rc.CryptoQ[1]) > 0 && !rc.holdFinished
	if rc.Seal[1] != nil && (rc.AckOwed[1] || finished) && !rc.Confirmed {
		var fr []wire.Frame
		if rc.AckOwed[1] || !rc.Recvd[1].Empty() {
			fr = append(fr, rc.AckFrame(1))
		}
		if q := rc.CryptoQ[1]; finished {
			fr = append(fr, &wire.CryptoFrame{Offset: rc.CryptoOff[1], Data: q})
			rc.CryptoOff[1] += uint64(len(q))
			rc.CryptoQ[1] = nil
			fr = append(fr, rc.HandshakeExtra...)
			hs, _ = rc.LongPacket(1, fr, rc.HandshakeOpts)
			rc.HandshakeSent = true
		} else {
			hs, _ = rc.LongPacket(1, fr, LongOpts{})
		}
		rc.AckOwed[1] = false
	}
	if hs != nil && finished && rc.CoalesceFinished != nil && rc.Seal[2] != nil {
		// One datagram: Initial (ACK), Handshake (Finished), 1-RTT, in
		// order of encryption level (RFC 9000 §12.2), the Initial padded
		// so that the datagram is 1200 bytes (§14.1).
		frames := rc.CoalesceFinished()
		rc.CoalesceFinished = nil
		short, _ := rc.ShortPacket(frames, ShortOpts{})
		in, _ := rc.LongPacket(0, []wire.Frame{rc.AckFrame(0)}, LongOpts{PadTo: 1200 - len(hs) - len(short)})
		rc.AckOwed[0] = false
		rc.Send(in, hs, short)
		hs = nil
	}
	var in []byte
	if rc.Seal[0] != nil && rc.AckOwed[0] && !rc.HandshakeSent {
		in, _ = rc.LongPacket(0, []wire.Frame{rc.AckFrame(0)}, LongOpts{PadTo: 1200 - len(hs)})
		rc.AckOwed[0] = false
	}
	if in != nil || hs != nil {
		rc.Send(in, hs)
	}
	if rc.Seal[2] != nil && rc.AckOwed[2] && rc.HandshakeSent {
		pkt, _ := rc.ShortPacket(rc.credit.WithAck([]wire.Frame{rc.AckFrame(2)}), ShortOpts{})
		rc.AckOwed[2] = false
		rc.Send(pkt)
	}
}

// Send1RTT sends frames in a 1-RTT packet of its own datagram.
func (rc *Client[P]) Send1RTT(frames []wire.Frame, o ShortOpts) P {
	pkt, _ := rc.ShortPacket(rc.credit.WithAck(frames), o)
	rc.Send(pkt)
	return rc.LastSent()
}

// Send1RTTOn sends frames in a 1-RTT packet of its own datagram on path i.
func (rc *Client[P]) Send1RTTOn(i int, frames []wire.Frame, o ShortOpts) P {
	o.Path = &i
	pkt, _ := rc.ShortPacket(rc.credit.WithAck(frames), o)
	rc.sendOn(i, pkt)
	return rc.LastSent()
}

// LastSent returns the last packet the client sent, as its host recorded
// it.
func (rc *Client[P]) LastSent() P { return rc.host.LastSent() }

// ServerTP returns the server's transport parameters (nil before
// EncryptedExtensions).
func (rc *Client[P]) ServerTP() *wire.TransportParameters {
	if rc.serverTP == nil {
		return nil
	}
	tp, err := wire.ParseTransportParameters(rc.serverTP, true)
	if err != nil {
		return nil
	}
	return tp
}
