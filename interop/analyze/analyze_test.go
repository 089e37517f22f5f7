package analyze

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func oneConn(t *testing.T, tr *Trace) *Conn {
	t.Helper()
	if len(tr.Conns) != 1 {
		t.Fatalf("got %d connections, want 1", len(tr.Conns))
	}
	return tr.Conns[0]
}

func TestHandshakeAndKeyUpdates(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version wire.Version
		suite   uint16
		ccid    int
	}{
		{"v1-aes128", wire.Version1, tls.TLS_AES_128_GCM_SHA256, 8},
		{"v1-aes256", wire.Version1, tls.TLS_AES_256_GCM_SHA384, 4},
		{"v1-chacha20", wire.Version1, tls.TLS_CHACHA20_POLY1305_SHA256, 8},
		{"v2-aes128", wire.Version2, tls.TLS_AES_128_GCM_SHA256, 8},
		{"v1-zero-length-client-cid", wire.Version1, tls.TLS_AES_128_GCM_SHA256, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSynth(t)
			c := s.conn(tc.version, tc.suite, tc.ccid)
			c.handshake(false)
			// Two client key updates and one server update, with a
			// late packet of the old phase after the first update.
			for i := range 10 {
				if i == 3 || i == 7 {
					c.gen[FromClient]++
				}
				if i == 5 {
					c.gen[FromServer]++
				}
				s.send(FromClient, s.client, c.short(FromClient, &wire.PingFrame{}))
				s.send(FromServer, s.client, c.short(FromServer, &wire.StreamFrame{StreamID: 0, Offset: uint64(i) * 100, Data: make([]byte, 100)}))
			}
			tr := s.analyze(Options{})
			cn := oneConn(t, tr)
			if tr.Undecryptable != 0 || tr.Unattributed != 0 {
				for _, p := range tr.Packets {
					if p.Error != "" {
						t.Logf("%s %s pn %d: %s", p.Dir, p.TypeName, p.PN, p.Error)
					}
				}
				t.Fatalf("undecryptable %d, unattributed %d", tr.Undecryptable, tr.Unattributed)
			}
			if done, attempts := tr.Handshakes(); done != 1 || attempts != 1 {
				t.Errorf("handshakes completed %d attempts %d, want 1 1", done, attempts)
			}
			if !slices.Equal(cn.ClientVersions, []wire.Version{tc.version}) || !slices.Equal(cn.ServerVersions, []wire.Version{tc.version}) {
				t.Errorf("versions %v %v", cn.ClientVersions, cn.ServerVersions)
			}
			if cn.KeyPhases[FromClient].Generations != 2 || cn.KeyPhases[FromServer].Generations != 1 {
				t.Errorf("key generations client %d server %d, want 2 1", cn.KeyPhases[FromClient].Generations, cn.KeyPhases[FromServer].Generations)
			}
			if cn.KeyPhases[FromClient].Packets[1] != 4 {
				t.Errorf("client key phase 1 packets %d, want 4", cn.KeyPhases[FromClient].Packets[1])
			}
			if cn.ClientHello == nil || len(cn.ClientHello.CipherSuites) != 3 || cn.ClientHello.ALPN[0] != "hq-interop" {
				t.Errorf("client hello %+v", cn.ClientHello)
			}
			if cn.ClientHello.TransportParameters == nil || cn.ClientHello.TransportParameters.InitialMaxData != 1<<20 {
				t.Errorf("client transport parameters %+v (%s)", cn.ClientHello.TransportParameters, cn.ClientHello.TPError)
			}
			if cn.ServerHello == nil || cn.ServerHello.CipherSuite != tc.suite {
				t.Errorf("server hello %+v", cn.ServerHello)
			}
			if !cn.ServerCertificate || cn.Resumed() {
				t.Errorf("certificate %v resumed %v", cn.ServerCertificate, cn.Resumed())
			}
			if cn.EncryptedExtensions == nil || cn.EncryptedExtensions.ALPN != "hq-interop" || cn.EncryptedExtensions.TransportParameters.InitialMaxStreamsBidi != 100 {
				t.Errorf("encrypted extensions %+v", cn.EncryptedExtensions)
			}
			if cn.ClientHelloSends != 1 {
				t.Errorf("ClientHello sent %d times", cn.ClientHelloSends)
			}
			if cn.ServerStreamBytes != 5+1000 {
				t.Errorf("server stream bytes %d", cn.ServerStreamBytes)
			}
			if cn.Amplification.Exceeded || cn.Amplification.Validated.IsZero() {
				t.Errorf("amplification %+v", cn.Amplification)
			}
		})
	}
}

func TestKeysFromFileOnly(t *testing.T) {
	s := newSynth(t)
	s.embed = false
	c := s.conn(wire.Version1, tls.TLS_AES_128_GCM_SHA256, 8)
	c.handshake(false)
	tr := s.analyze(Options{})
	cn := oneConn(t, tr)
	// Without keys only the Initials open; the client's 1-RTT packet
	// stands in for HANDSHAKE_DONE.
	if cn.HandshakeKeys || cn.HandshakeDone || !cn.Completed() {
		t.Errorf("keys %v done %v completed %v", cn.HandshakeKeys, cn.HandshakeDone, cn.Completed())
	}
	tr = s.analyzeAgain(Options{KeyLog: s.keys})
	if cn := oneConn(t, tr); !cn.HandshakeDone || tr.Undecryptable != 0 {
		t.Errorf("with the key log: done %v undecryptable %d", cn.HandshakeDone, tr.Undecryptable)
	}
}

func (s *synth) analyzeAgain(opts Options) *Trace {
	tr, err := AnalyzeBytes(s.buf.Bytes(), opts)
	if err != nil {
		s.t.Fatal(err)
	}
	return tr
}

func TestRetry(t *testing.T) {
	s := newSynth(t)
	c := s.conn(wire.Version1, tls.TLS_AES_128_GCM_SHA256, 8)
	ch := c.clientHello([]uint16{tls.TLS_AES_128_GCM_SHA256})
	s.send(FromClient, s.client, c.long(FromClient, wire.PacketTypeInitial, &wire.CryptoFrame{Data: ch}, &wire.PaddingFrame{Length: 1100}))
	s.send(FromClient, s.client, c.long(FromClient, wire.PacketTypeInitial, &wire.CryptoFrame{Data: ch}, &wire.PaddingFrame{Length: 1100}))
	// The server answers with a Retry carrying a new SCID and a token.
	retrySCID := []byte{9, 9, 9, 9, 9, 9, 9, 9}
	r := wire.Retry{Version: wire.Version1, DCID: c.cc, SCID: retrySCID, Token: []byte("token-123")}
	rb, err := protect.AppendRetryIntegrityTag(uint32(wire.Version1), c.odcid, r.AppendWithoutTag(nil))
	if err != nil {
		t.Fatal(err)
	}
	s.send(FromServer, s.client, rb)
	// The client derives new Initial keys from the Retry's SCID and
	// sends the token; its packet numbers continue.
	ck, sk, _ := protect.NewInitialKeys(uint32(wire.Version1), retrySCID)
	c.init = [2]*protect.Keys{ck, sk}
	c.token, c.odcid = r.Token, retrySCID
	s.send(FromClient, s.client, c.long(FromClient, wire.PacketTypeInitial, &wire.CryptoFrame{Data: ch}, &wire.PaddingFrame{Length: 1100}))
	c.serverFlight(false)
	c.clientFinish()

	tr := s.analyze(Options{})
	cn := oneConn(t, tr)
	if len(cn.Retries) != 1 || !cn.Retries[0].TagValid || string(cn.Retries[0].Token) != "token-123" {
		t.Fatalf("retries %+v", cn.Retries)
	}
	if !cn.RetryTokenReused || !cn.RetryPNsContinue || !cn.RetryDCID {
		t.Errorf("token reused %v, pns continue %v, dcid %v", cn.RetryTokenReused, cn.RetryPNsContinue, cn.RetryDCID)
	}
	if done, attempts := tr.Handshakes(); done != 1 || attempts != 1 {
		t.Errorf("handshakes %d/%d", done, attempts)
	}
	if tr.Undecryptable != 0 {
		t.Errorf("undecryptable %d", tr.Undecryptable)
	}
	if cn.ClientHelloSends != 3 {
		t.Errorf("ClientHello sends %d, want 3", cn.ClientHelloSends)
	}
}

func TestResumptionAndZeroRTT(t *testing.T) {
	s := newSynth(t)
	c1 := s.conn(wire.Version1, tls.TLS_AES_128_GCM_SHA256, 8)
	c1.handshake(false)
	c2 := s.conn(wire.Version1, tls.TLS_AES_128_GCM_SHA256, 8)
	ch := c2.clientHello([]uint16{tls.TLS_AES_128_GCM_SHA256}, ext(extEarlyData, nil), ext(extPreSharedKey, make([]byte, 10)))
	s.send(FromClient, s.client,
		c2.long(FromClient, wire.PacketTypeInitial, &wire.CryptoFrame{Data: ch}, &wire.PaddingFrame{Length: 900}),
		c2.long(FromClient, wire.PacketType0RTT, &wire.StreamFrame{StreamID: 4, Data: []byte("GET /two\r\n"), Fin: true}))
	c2.serverFlight(true)
	c2.clientFinish()
	tr := s.analyze(Options{})
	if len(tr.Conns) != 2 {
		t.Fatalf("%d connections", len(tr.Conns))
	}
	a, b := tr.Conns[0], tr.Conns[1]
	if a.Resumed() || !b.Resumed() || b.ServerCertificate {
		t.Errorf("resumed %v %v, second certificate %v", a.Resumed(), b.Resumed(), b.ServerCertificate)
	}
	if b.ZeroRTTPackets != 1 || b.ZeroRTTStreamBytes != 10 || !b.ClientHello.EarlyData {
		t.Errorf("0-RTT packets %d stream bytes %d early_data %v", b.ZeroRTTPackets, b.ZeroRTTStreamBytes, b.ClientHello.EarlyData)
	}
	if done, attempts := tr.Handshakes(); done != 2 || attempts != 2 {
		t.Errorf("handshakes %d/%d", done, attempts)
	}
}

func TestVersionNegotiation(t *testing.T) {
	s := newSynth(t)
	// A greasing client first: an unknown version the analyzer cannot
	// decrypt but must attribute.
	grease := []byte{0xc0, 0x1a, 0x2a, 0x3a, 0x4a, 8, 1, 2, 3, 4, 5, 6, 7, 8, 4, 7, 7, 7, 7}
	grease = append(grease, make([]byte, 1200-len(grease))...)
	s.send(FromClient, s.client, grease)
	vn := wire.AppendVersionNegotiation(nil, 0x80, []byte{7, 7, 7, 7}, []byte{1, 2, 3, 4, 5, 6, 7, 8}, wire.Version1, wire.Version2)
	s.send(FromServer, s.client, vn)
	c := s.conn(wire.Version1, tls.TLS_AES_128_GCM_SHA256, 8)
	c.handshake(false)
	tr := s.analyze(Options{})
	if len(tr.VersionNegotiations) != 1 || !slices.Equal(tr.VersionNegotiations[0].Versions, []wire.Version{wire.Version1, wire.Version2}) {
		t.Errorf("version negotiation %+v", tr.VersionNegotiations)
	}
	if done, _ := tr.Handshakes(); done != 1 {
		t.Errorf("handshakes %d", done)
	}
}

func TestAmplificationExceeded(t *testing.T) {
	s := newSynth(t)
	c := s.conn(wire.Version1, tls.TLS_AES_128_GCM_SHA256, 8)
	ch := c.clientHello([]uint16{tls.TLS_AES_128_GCM_SHA256})
	s.send(FromClient, s.client, c.long(FromClient, wire.PacketTypeInitial, &wire.CryptoFrame{Data: ch}, &wire.PaddingFrame{Length: 1100}))
	for range 4 {
		s.send(FromServer, s.client, c.long(FromServer, wire.PacketTypeHandshake, &wire.CryptoFrame{Data: make([]byte, 1100)}))
	}
	tr := s.analyze(Options{})
	am := oneConn(t, tr).Amplification
	if !am.Exceeded || am.MaxRatio < 3 || !am.Validated.IsZero() {
		t.Errorf("amplification %+v", am)
	}
}

func TestPathValidation(t *testing.T) {
	// Zero-length client CIDs make the server's packets findable only by
	// the client's address, which the rebinding changes.
	for _, ccid := range []int{8, 0} {
		t.Run(fmt.Sprintf("client-cid-%d", ccid), func(t *testing.T) { testPathValidation(t, ccid) })
	}
}

func testPathValidation(t *testing.T, ccid int) {
	s := newSynth(t)
	c := s.conn(wire.Version1, tls.TLS_AES_128_GCM_SHA256, ccid)
	c.handshake(false)
	rebound := netip.MustParseAddrPort("198.18.0.100:50001")
	s.send(FromClient, rebound, c.short(FromClient, &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 0, Largest: 0}}}, &wire.StreamFrame{StreamID: 4, Data: []byte("x")}))
	s.send(FromServer, rebound, c.short(FromServer, &wire.PathChallengeFrame{Data: [8]byte{1, 2, 3}}, &wire.PaddingFrame{Length: 40}))
	s.send(FromClient, rebound, c.short(FromClient, &wire.PathResponseFrame{Data: [8]byte{1, 2, 3}}))
	s.send(FromServer, rebound, c.short(FromServer, &wire.StreamFrame{StreamID: 0, Offset: 5, Data: make([]byte, 1000)}))
	s.send(FromClient, rebound, c.short(FromClient, &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 0, Largest: 3}}, ECN: true, ECT0: 4}))
	tr := s.analyze(Options{})
	cn := oneConn(t, tr)
	if tr.Unattributed != 0 || tr.Undecryptable != 0 {
		t.Errorf("unattributed %d, undecryptable %d", tr.Unattributed, tr.Undecryptable)
	}
	if len(cn.Paths) != 2 {
		t.Fatalf("paths %+v", cn.Paths)
	}
	p := cn.Paths[1]
	if p.Client != rebound || !p.ChallengedByServer || !p.FirstServerChallenge || !p.Validated || p.Exceeded {
		t.Errorf("new path %+v", p)
	}
	if cn.ECN[FromClient].Frames != 1 || cn.ECN[FromClient].Last != [3]uint64{4, 0, 0} {
		t.Errorf("ECN %+v", cn.ECN[FromClient])
	}
	if cn.ServerChallenges != 1 || cn.UnansweredChallenges != 0 {
		t.Errorf("challenges %d unanswered %d", cn.ServerChallenges, cn.UnansweredChallenges)
	}
}

// TestPreferredAddress follows a client to the server's preferred address
// (RFC 9000 §9.6): the connection ID offered in preferred_address finds
// the connection, and the paths record who challenged whom and where the
// answers came from.
func TestPreferredAddress(t *testing.T) {
	s := newSynth(t)
	c := s.conn(wire.Version1, tls.TLS_AES_128_GCM_SHA256, 8)
	orig, pref := s.server, netip.MustParseAddrPort("198.18.100.100:4434")
	c.pref, c.prefCID = pref, bytes.Repeat([]byte{0xee}, 8)
	c.handshake(false)
	// The client validates the preferred address under the new
	// connection ID; the server answers there and validates the path back.
	s.server, c.sc = pref, c.prefCID
	s.send(FromClient, s.client, c.short(FromClient, &wire.PathChallengeFrame{Data: [8]byte{7}}, &wire.PaddingFrame{Length: 1100}))
	s.send(FromServer, s.client, c.short(FromServer, &wire.PathResponseFrame{Data: [8]byte{7}}, &wire.PathChallengeFrame{Data: [8]byte{9}}, &wire.PaddingFrame{Length: 1100}))
	s.send(FromClient, s.client, c.short(FromClient, &wire.PathResponseFrame{Data: [8]byte{9}}, &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 0, Largest: 2}}}))
	s.send(FromServer, s.client, c.short(FromServer, &wire.StreamFrame{StreamID: 4, Data: []byte("moved")}))
	tr := s.analyze(Options{ServerAddrs: []netip.AddrPort{orig}})
	cn := oneConn(t, tr)
	if tr.Unattributed != 0 || tr.Undecryptable != 0 {
		t.Errorf("unattributed %d, undecryptable %d", tr.Unattributed, tr.Undecryptable)
	}
	if got := cn.PreferredAddrs(); len(got) != 1 || got[0] != pref {
		t.Errorf("preferred addresses %v, want [%v]", got, pref)
	}
	if len(cn.Paths) != 2 {
		t.Fatalf("paths %+v", cn.Paths)
	}
	p := cn.Paths[1]
	if p.Server != pref || !p.ChallengedByClient || !p.ClientValidated || !p.ClientValidatedFromServer || !p.ChallengedByServer || !p.Validated {
		t.Errorf("path to the preferred address %+v", p)
	}
}
