package analyze

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/keylog"
	"github.com/quiver-quic/quiver/pcap"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// synth builds captures of QUIC connections packet by packet with the wire
// and protect packages and known secrets, so that every fact the analyzer
// reports can be checked against what was put in.
type synth struct {
	t      testing.TB
	buf    bytes.Buffer
	w      *pcap.Writer
	now    time.Time
	client netip.AddrPort
	server netip.AddrPort
	keys   []keylog.Entry
	embed  bool
	// compact shrinks padding and certificates, for small fuzz seeds.
	compact bool
}

func (s *synth) padding(n int) int {
	if s.compact {
		return 8
	}
	return n
}

func newSynth(t testing.TB) *synth {
	s := &synth{
		t:      t,
		now:    time.Unix(1_800_000_000, 0),
		client: netip.MustParseAddrPort("198.18.0.100:50000"),
		server: netip.MustParseAddrPort("198.18.100.100:443"),
		embed:  true,
	}
	w, err := pcap.NewWriterOptions(&s.buf, pcap.Options{SecretsFirst: true})
	if err != nil {
		t.Fatal(err)
	}
	s.w = w
	return s
}

// bytes finishes the capture and returns it.
func (s *synth) bytes() []byte {
	if s.embed && len(s.keys) > 0 {
		if err := s.w.WriteSecrets(keylog.Format(s.keys)); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := s.w.Close(); err != nil {
		s.t.Fatal(err)
	}
	return s.buf.Bytes()
}

func (s *synth) analyze(opts Options) *Trace {
	s.t.Helper()
	tr, err := AnalyzeBytes(s.bytes(), opts)
	if err != nil {
		s.t.Fatal(err)
	}
	return tr
}

// send writes one datagram of coalesced packets.
func (s *synth) send(dir Direction, from netip.AddrPort, pkts ...[]byte) {
	s.now = s.now.Add(time.Millisecond)
	var d []byte
	for _, p := range pkts {
		d = append(d, p...)
	}
	src, dst := from, s.server
	if dir == FromServer {
		src, dst = s.server, from
	}
	if err := s.w.WriteDatagram(s.now, src, dst, d); err != nil {
		s.t.Fatal(err)
	}
}

// sconn is one synthetic connection.
type sconn struct {
	s             *synth
	version       wire.Version
	suite         uint16
	odcid, cc, sc []byte
	random        []byte
	init          [2]*protect.Keys
	hs            [2]*protect.Keys
	early         *protect.Keys
	app           [2][]*protect.Keys
	gen           [2]int
	pn            [3][2]uint64
	token         []byte
	// pref, when set, is offered as the server's preferred_address with
	// the connection ID prefCID.
	pref    netip.AddrPort
	prefCID []byte
}

var seq byte

func (s *synth) conn(version wire.Version, suite uint16, ccidLen int) *sconn {
	seq++
	c := &sconn{s: s, version: version, suite: suite}
	c.odcid = bytes.Repeat([]byte{0xd0 + seq}, 8)
	c.cc = bytes.Repeat([]byte{0xc0 + seq}, ccidLen)
	c.sc = bytes.Repeat([]byte{0x50 + seq}, 8)
	c.random = bytes.Repeat([]byte{seq}, 32)
	ck, sk, err := protect.NewInitialKeys(uint32(version), c.odcid)
	if err != nil {
		s.t.Fatal(err)
	}
	c.init = [2]*protect.Keys{ck, sk}
	secret := func(label string, b byte) *protect.Keys {
		size := 32
		if suite == tls.TLS_AES_256_GCM_SHA384 {
			size = 48
		}
		sec := bytes.Repeat([]byte{b + seq}, size)
		s.keys = append(s.keys, keylog.Entry{Label: label, ClientRandom: c.random, Secret: sec})
		k, err := protect.NewKeys(uint32(version), suite, sec)
		if err != nil {
			s.t.Fatal(err)
		}
		return k
	}
	c.hs[FromClient] = secret(keylog.ClientHandshakeTrafficSecret, 1)
	c.hs[FromServer] = secret(keylog.ServerHandshakeTrafficSecret, 2)
	c.app[FromClient] = []*protect.Keys{secret(keylog.ClientTrafficSecret0, 3)}
	c.app[FromServer] = []*protect.Keys{secret(keylog.ServerTrafficSecret0, 4)}
	c.early = secret(keylog.ClientEarlyTrafficSecret, 5)
	return c
}

func payload(frames []wire.Frame) []byte {
	var p []byte
	for _, f := range frames {
		p = f.Append(p)
	}
	// Leave room for the header protection sample (RFC 9001 §5.4.2).
	for len(p) < 24 {
		p = append(p, 0)
	}
	return p
}

// long builds a protected long-header packet.
func (c *sconn) long(dir Direction, typ wire.PacketType, frames ...wire.Frame) []byte {
	var k *protect.Keys
	space := spaceInitial
	switch typ {
	case wire.PacketTypeInitial:
		k = c.init[dir]
	case wire.PacketTypeHandshake:
		k, space = c.hs[dir], spaceHandshake
	case wire.PacketType0RTT:
		k, space = c.early, spaceApp
	}
	dcid, scid := c.sc, c.cc
	if dir == FromServer {
		dcid, scid = c.cc, c.sc
	}
	if dir == FromClient && c.pn[spaceHandshake][FromServer] == 0 && typ != wire.PacketTypeHandshake {
		dcid = c.odcid
	}
	pl := payload(frames)
	pn := c.pn[space][dir]
	c.pn[space][dir]++
	h := wire.LongHeader{Version: c.version, Type: typ, DCID: dcid, SCID: scid, PacketNumber: pn, PNLen: 2}
	if typ == wire.PacketTypeInitial && dir == FromClient {
		h.Token = c.token
	}
	b, lenOff, pnOff := h.Append(nil)
	wire.PutVarintLen(b[lenOff:], uint64(2+len(pl)+protect.TagSize), 2)
	b = append(b, pl...)
	out, err := k.SealPacket(b, pnOff, pn)
	if err != nil {
		c.s.t.Fatal(err)
	}
	return out
}

// short builds a protected 1-RTT packet with the direction's current key
// generation.
func (c *sconn) short(dir Direction, frames ...wire.Frame) []byte {
	dcid := c.sc
	if dir == FromServer {
		dcid = c.cc
	}
	g := c.gen[dir]
	for len(c.app[dir]) <= g {
		n, err := c.app[dir][len(c.app[dir])-1].Next()
		if err != nil {
			c.s.t.Fatal(err)
		}
		c.app[dir] = append(c.app[dir], n)
	}
	pn := c.pn[spaceApp][dir]
	c.pn[spaceApp][dir]++
	h := wire.ShortHeader{KeyPhase: g%2 == 1, DCID: dcid, PacketNumber: pn, PNLen: 2}
	b, pnOff := h.Append(nil)
	b = append(b, payload(frames)...)
	out, err := c.app[dir][g].SealPacket(b, pnOff, pn)
	if err != nil {
		c.s.t.Fatal(err)
	}
	return out
}

// TLS messages, built just far enough for the analyzer.
func tlsMsg(typ byte, body []byte) []byte {
	return append([]byte{typ, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
}

func ext(typ uint16, data []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, typ)
	b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
	return append(b, data...)
}

func alpnExt(protos ...string) []byte {
	var list []byte
	for _, p := range protos {
		list = append(list, byte(len(p)))
		list = append(list, p...)
	}
	return ext(extALPN, append(binary.BigEndian.AppendUint16(nil, uint16(len(list))), list...))
}

func (c *sconn) clientHello(suites []uint16, extra ...[]byte) []byte {
	b := []byte{3, 3}
	b = append(b, c.random...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(2*len(suites)))
	for _, s := range suites {
		b = binary.BigEndian.AppendUint16(b, s)
	}
	b = append(b, 1, 0)
	tp := &wire.TransportParameters{}
	tp.SetDefaults()
	tp.InitialMaxData = 1 << 20
	tp.HasInitialSourceConnectionID, tp.InitialSourceConnectionID = true, c.cc
	exts := append(alpnExt("hq-interop"), ext(extQUICTransport, tp.Marshal())...)
	for _, e := range extra {
		exts = append(exts, e...)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(exts)))
	return tlsMsg(tlsClientHello, append(b, exts...))
}

func (c *sconn) serverHello(psk bool) []byte {
	b := []byte{3, 3}
	b = append(b, bytes.Repeat([]byte{0xaa}, 32)...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint16(b, c.suite)
	b = append(b, 0)
	var exts []byte
	if psk {
		exts = ext(extPreSharedKey, []byte{0, 0})
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(exts)))
	return tlsMsg(tlsServerHello, append(b, exts...))
}

func (c *sconn) encryptedExtensions(earlyData bool) []byte {
	tp := &wire.TransportParameters{}
	tp.SetDefaults()
	tp.InitialMaxStreamsBidi = 100
	tp.HasOriginalDestinationConnectionID, tp.OriginalDestinationConnectionID = true, c.odcid
	tp.HasInitialSourceConnectionID, tp.InitialSourceConnectionID = true, c.sc
	if c.pref.IsValid() {
		tp.HasPreferredAddress = true
		tp.PreferredAddress = wire.PreferredAddress{IPv4: c.pref.Addr().As4(), IPv4Port: c.pref.Port(), ConnectionID: c.prefCID}
	}
	exts := append(alpnExt("hq-interop"), ext(extQUICTransport, tp.Marshal())...)
	if earlyData {
		exts = append(exts, ext(extEarlyData, nil)...)
	}
	return tlsMsg(tlsEncryptedExtensions, append(binary.BigEndian.AppendUint16(nil, uint16(len(exts))), exts...))
}

// handshake runs a whole handshake: the client's Initial, the server's
// coalesced Initial and Handshake flight, the client's Handshake, then
// HANDSHAKE_DONE in 1-RTT.
func (c *sconn) handshake(resumed bool) {
	s := c.s
	ch := c.clientHello([]uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256})
	s.send(FromClient, s.client, c.long(FromClient, wire.PacketTypeInitial, &wire.CryptoFrame{Data: ch}, &wire.PaddingFrame{Length: s.padding(1100)}))
	c.serverFlight(resumed)
	c.clientFinish()
}

func (c *sconn) serverFlight(resumed bool) {
	s := c.s
	hsData := c.encryptedExtensions(false)
	if !resumed {
		hsData = append(hsData, tlsMsg(tlsCertificate, make([]byte, s.padding(800)))...)
	}
	hsData = append(hsData, tlsMsg(20, make([]byte, 32))...)
	s.send(FromServer, s.client,
		c.long(FromServer, wire.PacketTypeInitial, &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 0, Largest: 0}}}, &wire.CryptoFrame{Data: c.serverHello(resumed)}),
		c.long(FromServer, wire.PacketTypeHandshake, &wire.CryptoFrame{Data: hsData}))
}

func (c *sconn) clientFinish() {
	s := c.s
	s.send(FromClient, s.client,
		c.long(FromClient, wire.PacketTypeInitial, &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 0, Largest: 0}}}, &wire.PaddingFrame{Length: s.padding(1000)}),
		c.long(FromClient, wire.PacketTypeHandshake, &wire.CryptoFrame{Data: tlsMsg(20, make([]byte, 32))}))
	s.send(FromClient, s.client, c.short(FromClient, &wire.StreamFrame{StreamID: 0, Data: []byte("GET /file\r\n"), Fin: true}))
	s.send(FromServer, s.client, c.short(FromServer, &wire.HandshakeDoneFrame{}, &wire.StreamFrame{StreamID: 0, Data: []byte("hello"), Fin: true}))
}
