package quic

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// testPeer is a frame-level scripted QUIC client for engine tests: a real
// tls.QUICConn for the handshake, and otherwise exactly the packets and
// frames the test writes. It talks to a Quiver server over a memNet inside
// a synctest bubble. It never acknowledges anything unless told to.
type testPeer struct {
	t       *testing.T
	pc      *memConn
	server  netip.AddrPort
	tls     *tls.QUICConn
	version uint32
	odcid   []byte
	dcid    []byte
	scid    []byte
	gotSCID bool

	read, write [numSpaces]*protect.Keys
	app         protect.KeyPhase
	pn          [numSpaces]uint64
	largest     [numSpaces]uint64
	crypto      [numSpaces]cryptoStream
	parser      wire.Parser
	done        bool // TLS handshake complete
	params      *wire.TransportParameters
	// doubleHandshakeCrypto sends each Handshake CRYPTO frame twice in its
	// packet, as a client whose retransmission joins the original may.
	doubleHandshakeCrypto bool
	// extendInitialCrypto sends, before the first Handshake CRYPTO frame,
	// an Initial CRYPTO frame past the end of the ClientHello.
	extendInitialCrypto bool
}

func newTestPeer(t *testing.T, n *memNet, serverAddr string) *testPeer {
	p := &testPeer{t: t, pc: n.listen(testClientAddr), server: netip.MustParseAddrPort(serverAddr), version: Version1}
	p.odcid = make([]byte, 8)
	rand.Read(p.odcid)
	p.dcid = p.odcid
	p.scid = make([]byte, 8)
	rand.Read(p.scid)
	for i := range p.largest {
		p.largest[i] = wire.NoPacketNumber
	}
	ck, sk, err := protect.NewInitialKeys(p.version, p.odcid)
	if err != nil {
		t.Fatal(err)
	}
	p.write[initialSpace], p.read[initialSpace] = ck, sk
	t.Cleanup(func() {
		p.pc.Close()
		if p.tls != nil {
			p.tls.Close()
		}
	})
	return p
}

// handshake runs the TLS handshake to completion, sending CRYPTO data and
// the ACKs the server needs, and returns the server's transport
// parameters.
func (p *testPeer) handshake(alpn string) *wire.TransportParameters {
	p.t.Helper()
	_, pool := testCertificate(p.t)
	p.tls = tls.QUICClient(&tls.QUICConfig{TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{alpn}, MinVersion: tls.VersionTLS13}})
	var tp wire.TransportParameters
	tp.SetDefaults()
	tp.HasInitialSourceConnectionID = true
	tp.InitialSourceConnectionID = p.scid
	tp.InitialMaxData = 1 << 20
	tp.InitialMaxStreamDataBidiLocal = 1 << 20
	tp.InitialMaxStreamDataBidiRemote = 1 << 20
	tp.InitialMaxStreamDataUni = 1 << 20
	tp.InitialMaxStreamsBidi = 10
	tp.InitialMaxStreamsUni = 10
	p.tls.SetTransportParameters(tp.Marshal())
	if err := p.tls.Start(context.Background()); err != nil {
		p.t.Fatal(err)
	}
	p.tlsEvents()
	for !p.done {
		p.readDatagram(func(space spaceID, f wire.Frame) {})
	}
	return p.params
}

func (p *testPeer) tlsEvents() {
	for {
		e := p.tls.NextEvent()
		switch e.Kind {
		case tls.QUICNoEvent:
			return
		case tls.QUICSetReadSecret, tls.QUICSetWriteSecret:
			write := e.Kind == tls.QUICSetWriteSecret
			if e.Level == tls.QUICEncryptionLevelApplication {
				if write {
					p.app.InstallWrite(p.version, e.Suite, e.Data)
				} else {
					p.app.InstallRead(p.version, e.Suite, e.Data)
				}
				continue
			}
			k, err := protect.NewKeys(p.version, e.Suite, e.Data)
			if err != nil {
				p.t.Fatal(err)
			}
			if write {
				p.write[spaceForLevel(e.Level)] = k
			} else {
				p.read[spaceForLevel(e.Level)] = k
			}
		case tls.QUICWriteData:
			sp := spaceForLevel(e.Level)
			off := uint64(len(p.crypto[sp].out))
			p.crypto[sp].write(e.Data)
			for len(e.Data) > 0 {
				n := min(len(e.Data), 1000)
				f := &wire.CryptoFrame{Offset: off, Data: e.Data[:n]}
				if p.extendInitialCrypto && sp == handshakeSpace {
					p.extendInitialCrypto = false
					p.writeFrames(initialSpace, &wire.CryptoFrame{Offset: uint64(len(p.crypto[initialSpace].out)), Data: []byte{1, 0, 0, 0}})
				}
				if p.doubleHandshakeCrypto && sp == handshakeSpace {
					p.writeFrames(sp, f, f)
				} else {
					p.writeFrames(sp, f)
				}
				off += uint64(n)
				e.Data = e.Data[n:]
			}
		case tls.QUICTransportParameters:
			tp, err := wire.ParseTransportParameters(e.Data, true)
			if err != nil {
				p.t.Fatalf("server transport parameters: %v", err)
			}
			p.params = tp
		case tls.QUICHandshakeDone:
			p.done = true
		}
	}
}

// writeFrames sends frames in one packet of space, in a datagram of its
// own (padded to 1200 bytes for Initial packets).
func (p *testPeer) writeFrames(space spaceID, frames ...wire.Frame) {
	p.t.Helper()
	var payload []byte
	for _, f := range frames {
		payload = f.Append(payload)
	}
	pn := p.pn[space]
	p.pn[space]++
	var b []byte
	var pnOff int
	if space == appSpace {
		h := wire.ShortHeader{DCID: p.dcid, PacketNumber: pn, PNLen: 4, KeyPhase: p.app.Phase() == 1}
		b, pnOff = h.Append(nil)
	} else {
		h := wire.LongHeader{Version: wire.Version(p.version), Type: space.packetType(), DCID: p.dcid, SCID: p.scid, PacketNumber: pn, PNLen: 4, LengthLen: 2}
		var lenOff int
		b, lenOff, pnOff = h.Append(nil)
		if space == initialSpace {
			for len(b)+len(payload)+16 < minInitialDatagramSize {
				payload = append(payload, 0)
			}
		}
		wire.PutVarintLen(b[lenOff:], uint64(4+len(payload)+16), 2)
	}
	for len(payload) < 4 {
		payload = append(payload, 0)
	}
	b = append(b, payload...)
	b = append(b, make([]byte, 16)...)[:len(b)]
	k := p.write[space]
	if space == appSpace {
		k = p.app.Write()
	}
	out, err := k.SealPacket(b, pnOff, pn)
	if err != nil {
		p.t.Fatal(err)
	}
	p.pc.WriteTo(out, net.UDPAddrFromAddrPort(p.server))
}

// readDatagram waits for a datagram from the server and calls f with
// every frame of every packet it can decrypt. CRYPTO frames also go to
// TLS, and packets that carry CRYPTO data are acknowledged.
func (p *testPeer) readDatagram(f func(space spaceID, fr wire.Frame)) bool {
	p.t.Helper()
	var pkt memPkt
	select {
	case pkt = <-p.pc.in:
	case <-time.After(time.Minute):
		p.t.Fatal("no datagram from the server within a minute")
	}
	p.processDatagram(pkt.b, f)
	return true
}

// readFor processes the datagrams that arrive within d, as readDatagram
// does, and returns how many there were.
func (p *testPeer) readFor(d time.Duration, f func(space spaceID, fr wire.Frame)) int {
	p.t.Helper()
	n := 0
	deadline := time.After(d)
	for {
		select {
		case pkt := <-p.pc.in:
			n++
			p.processDatagram(pkt.b, f)
		case <-deadline:
			return n
		}
	}
}

// processDatagram decrypts what it can of datagram b and calls f with
// every frame; see readDatagram.
func (p *testPeer) processDatagram(b []byte, f func(space spaceID, fr wire.Frame)) bool {
	p.t.Helper()
	for len(b) > 0 {
		h, err := wire.ParseHeader(b, len(p.scid))
		if err != nil {
			return false
		}
		pb := b[:h.PacketLen]
		b = b[h.PacketLen:]
		var space spaceID
		switch h.Type {
		case wire.PacketTypeInitial:
			space = initialSpace
		case wire.PacketTypeHandshake:
			space = handshakeSpace
		case wire.PacketType1RTT:
			space = appSpace
		default:
			continue
		}
		if h.Long && !p.gotSCID {
			p.gotSCID = true
			p.dcid = append([]byte(nil), h.SCID...)
		}
		var hp *protect.HeaderProtector
		if space == appSpace {
			hp = p.app.ReadHeader()
		} else if p.read[space] != nil {
			hp = p.read[space].HeaderProtector()
		}
		if hp == nil {
			continue
		}
		pnLen, err := hp.Remove(pb, h.PNOffset, h.Long)
		if err != nil {
			continue
		}
		pn := wire.DecodePacketNumber(p.largest[space], wire.ReadPacketNumber(pb[h.PNOffset:], pnLen), pnLen*8)
		hdr := h.PNOffset + pnLen
		var payload []byte
		if space == appSpace {
			payload, _, err = p.app.Open(pb[hdr:hdr], pb[:hdr], pb[hdr:], pn, boolBit(wire.KeyPhase(pb[0])))
		} else {
			payload, err = p.read[space].OpenPacket(pb, hdr, pn)
		}
		if err != nil {
			continue
		}
		if p.largest[space] == wire.NoPacketNumber || pn > p.largest[space] {
			p.largest[space] = pn
		}
		sawCrypto := false
		for len(payload) > 0 {
			fr, n, err := p.parser.Parse(payload)
			if err != nil {
				p.t.Fatalf("server sent an invalid frame: %v", err)
			}
			payload = payload[n:]
			if cf, ok := fr.(*wire.CryptoFrame); ok {
				sawCrypto = true
				ready, _ := p.crypto[space].receive(cf.Offset, cf.Data)
				for _, d := range ready {
					if err := p.tls.HandleData(space.tlsLevel(), d); err != nil {
						p.t.Fatalf("TLS: %v", err)
					}
				}
			}
			f(space, fr)
		}
		if sawCrypto {
			p.tlsEvents()
			if space != appSpace && p.write[space] != nil {
				p.writeFrames(space, &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 0, Largest: p.largest[space]}}})
			}
		}
	}
	return true
}

// wantFrame reads until a frame satisfies match, failing with reason if
// the server goes quiet first.
func (p *testPeer) wantFrame(reason string, match func(space spaceID, f wire.Frame) bool) {
	p.t.Helper()
	found := false
	for !found {
		p.readDatagram(func(space spaceID, f wire.Frame) {
			if !found && match(space, f) {
				found = true
			}
		})
	}
}

// wantClose waits for a CONNECTION_CLOSE with a transport error code.
func (p *testPeer) wantClose(reason string, code wire.TransportErrorCode) {
	p.t.Helper()
	var got *wire.ConnectionCloseFrame
	p.wantFrame(reason, func(_ spaceID, f wire.Frame) bool {
		if cc, ok := f.(*wire.ConnectionCloseFrame); ok {
			c := *cc
			got = &c
			return true
		}
		return false
	})
	if got.Application || wire.TransportErrorCode(got.ErrorCode) != code {
		p.t.Fatalf("%s: got CONNECTION_CLOSE %+v, want transport error %v", reason, got, code)
	}
}

// wantIdle checks that the server sends nothing for a second.
func (p *testPeer) wantIdle(reason string) {
	p.t.Helper()
	time.Sleep(time.Second) // synctest time: returns as soon as all else is blocked
	synctest.Wait()
	select {
	case pkt := <-p.pc.in:
		p.t.Fatalf("%s: got a %d-byte datagram, want none", reason, len(pkt.b))
	default:
	}
}

// startPeerTest starts a Quiver server with cfg and a scripted peer that
// completes the handshake.
// newServerAndPeer starts a server endpoint with the test configuration on
// a memNet (closed with the test) and a raw test peer towards it.
func newServerAndPeer(t *testing.T) (*memNet, *testPeer) {
	n := newMemNet(5 * time.Millisecond)
	ep, err := NewEndpoint(n.listen(testServerAddr), testServerConfig(t, "hq-interop"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	return n, newTestPeer(t, n, testServerAddr)
}

func startPeerTest(t *testing.T, cfg *Config) (*testPeer, *Endpoint) {
	n := newMemNet(5 * time.Millisecond)
	ep, err := NewEndpoint(n.listen(testServerAddr), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	go func() {
		for {
			c, err := ep.Accept(t.Context())
			if err != nil {
				return
			}
			go func() {
				for {
					s, err := c.AcceptStream(t.Context())
					if err != nil {
						return
					}
					go func() {
						b := make([]byte, 1<<16)
						for {
							if _, err := s.Read(b); err != nil {
								return
							}
						}
					}()
				}
			}()
		}
	}()
	p := newTestPeer(t, n, testServerAddr)
	p.handshake("hq-interop")
	return p, ep
}

// TestPeerDuplicateFinished sends the client's Finished twice in one
// Handshake packet. The first copy completes the handshake, and the
// server discards the Handshake space (RFC 9001 §4.9.2) before it reads
// the second; the copy must be ignored as the duplicate it is (RFC 9000
// §2.2), not handed to TLS, which closed such connections with
// CRYPTO_ERROR "handshake data received at wrong level" in the
// handshakeloss interop cell.
func TestPeerDuplicateFinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, p := newServerAndPeer(t)
		p.doubleHandshakeCrypto = true
		p.handshake("hq-interop")
		var closed *wire.ConnectionCloseFrame
		p.wantFrame("HANDSHAKE_DONE after the doubled Finished", func(space spaceID, f wire.Frame) bool {
			if cc, ok := f.(*wire.ConnectionCloseFrame); ok && closed == nil {
				closed = cc
			}
			_, ok := f.(*wire.HandshakeDoneFrame)
			return closed != nil || ok && space == appSpace
		})
		if closed != nil {
			t.Fatalf("server closed with %+v", closed)
		}
	})
}

// TestPeerInitialCryptoPastEnd: after the server has moved to Handshake
// keys, Initial CRYPTO data past the end of the ClientHello is a
// PROTOCOL_VIOLATION (RFC 9001 §4.1.3).
func TestPeerInitialCryptoPastEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, p := newServerAndPeer(t)
		p.extendInitialCrypto = true
		p.handshake("hq-interop")
		var closed *wire.ConnectionCloseFrame
		p.wantFrame("CONNECTION_CLOSE after Initial CRYPTO past the ClientHello", func(space spaceID, f wire.Frame) bool {
			closed, _ = f.(*wire.ConnectionCloseFrame)
			return closed != nil
		})
		if wire.TransportErrorCode(closed.ErrorCode) != wire.ProtocolViolation {
			t.Fatalf("server closed with %+v, want PROTOCOL_VIOLATION", closed)
		}
	})
}

func TestPeerHandshake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := startPeerTest(t, testServerConfig(t, "hq-interop"))
		if p.params == nil || p.params.InitialMaxStreamsBidi != defaultMaxStreams {
			t.Fatalf("server transport parameters %+v", p.params)
		}
		// RFC 9000 §19.20: "The server MUST send a HANDSHAKE_DONE frame as
		// soon as the handshake is complete".
		p.wantFrame("HANDSHAKE_DONE after the client Finished", func(space spaceID, f wire.Frame) bool {
			_, ok := f.(*wire.HandshakeDoneFrame)
			return ok && space == appSpace
		})
	})
}

func TestPeerStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame wire.Frame
		code  wire.TransportErrorCode
	}{
		// RFC 9000 §19.8: STREAM for a locally initiated stream that has
		// not yet been created (server-initiated bidi stream 1).
		{"stream-on-unopened-server-stream", &wire.StreamFrame{StreamID: 1, Data: []byte("x")}, wire.StreamStateError},
		// RFC 9000 §4.6: beyond initial_max_streams_bidi (100 streams:
		// IDs 0..396).
		{"stream-beyond-limit", &wire.StreamFrame{StreamID: 400, Data: []byte("x")}, wire.StreamLimitError},
		// RFC 9000 §4.1: more data than initial_max_stream_data.
		{"flow-control", &wire.StreamFrame{StreamID: 0, Offset: defaultInitialMaxStreamData, Data: []byte("x")}, wire.FlowControlError},
		// RFC 9000 §19.7: a client sending NEW_TOKEN.
		{"new-token-from-client", &wire.NewTokenFrame{Token: []byte{1}}, wire.ProtocolViolation},
		// RFC 9000 §19.5: STOP_SENDING for a receive-only stream (client uni 2).
		{"stop-sending-receive-only", &wire.StopSendingFrame{StreamID: 2}, wire.StreamStateError},
		// RFC 9000 §19.13: STREAM_DATA_BLOCKED for a send-only stream
		// (server-initiated uni 3, send-only at the server).
		{"stream-data-blocked-send-only", &wire.StreamDataBlockedFrame{StreamID: 3, Limit: 10}, wire.StreamStateError},
		// draft-ietf-quic-ack-frequency §4: Requested Max Ack Delay below
		// our min_ack_delay (1 ms).
		{"ack-frequency-below-min-ack-delay", &wire.AckFrequencyFrame{RequestedMaxAckDelay: 500}, wire.ProtocolViolation},
		// RFC 9000 §12.4: unknown frame type.
		{"unknown-frame", &wire.RawFrame{Bytes: []byte{0x40, 0x55}}, wire.FrameEncodingError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, _ := startPeerTest(t, testServerConfig(t, "hq-interop"))
				p.writeFrames(appSpace, tc.frame)
				p.wantClose(tc.name, tc.code)
			})
		})
	}
}

// TestPeerClosingState checks the closing state: after its
// CONNECTION_CLOSE the server answers further packets with
// CONNECTION_CLOSE at a limited rate (RFC 9000 §10.2.1); once the state
// is gone, a packet for the old connection ID gets a stateless reset
// carrying the token the server announced (§10.3).
func TestPeerClosingState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := startPeerTest(t, testServerConfig(t, "hq-interop"))
		p.writeFrames(appSpace, &wire.NewTokenFrame{Token: []byte{1}})
		p.wantClose("first close", wire.ProtocolViolation)
		p.writeFrames(appSpace, &wire.PingFrame{})
		p.wantClose("close repeated in the closing state", wire.ProtocolViolation)
		p.writeFrames(appSpace, &wire.PingFrame{})
		p.wantClose("answered: 2nd packet", wire.ProtocolViolation)
		p.writeFrames(appSpace, &wire.PingFrame{})
		p.wantIdle("3rd packet in the closing state: not answered (1st, 2nd, 4th... are)")
		time.Sleep(10 * time.Second) // well past 3×PTO: the closing state ends
		p.writeFrames(appSpace, &wire.PingFrame{}, &wire.PaddingFrame{Length: 40})
		pkt := <-p.pc.in
		tok := p.params.StatelessResetToken
		if len(pkt.b) < 21 || string(pkt.b[len(pkt.b)-16:]) != string(tok[:]) {
			t.Fatalf("got %x, want a stateless reset ending in %x", pkt.b, tok)
		}
	})
}

// TestCustomPacketReservedBits has a Quiver client send a 1-RTT packet
// with reserved bits set; RFC 9000 §17.3.1 makes the server close with
// PROTOCOL_VIOLATION.
func TestCustomPacketReservedBits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), testClientConfig(t, "hq-interop"))
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 10); err != nil {
			t.Fatal(err)
		}
		if err := c.SendCustomPacket(SpaceApplication, CustomPacket{ReservedBits: 1}, &wire.PingFrame{}); err != nil {
			t.Fatal(err)
		}
		err = c.Wait(t.Context())
		var te *TransportError
		if !errors.As(err, &te) || te.Code != wire.ProtocolViolation || !te.Remote {
			t.Fatalf("got %v, want remote PROTOCOL_VIOLATION", err)
		}
	})
}

// TestAmplificationLimit sends a ClientHello and then stays silent: the
// server retransmits its flight on PTO but never sends more than three
// times the bytes it received (RFC 9000 §8.1).
func TestAmplificationLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, p := newServerAndPeer(t)
		var sent int
		n.mu.Lock()
		n.policy = func(_ int, from, _ netip.AddrPort, b []byte) (bool, time.Duration) {
			if from == p.pc.addr {
				sent += len(b)
			}
			return false, 0
		}
		n.mu.Unlock()
		startClientHello(t, p) // sends the ClientHello, nothing more
		time.Sleep(20 * time.Second)
		received := 0
		for done := false; !done; {
			select {
			case pkt := <-p.pc.in:
				received += len(pkt.b)
			default:
				done = true
			}
		}
		t.Logf("client sent %d bytes, server answered %d", sent, received)
		if received == 0 || received > 3*sent {
			t.Fatalf("server sent %d bytes for %d received; limit %d", received, sent, 3*sent)
		}
	})
}
