package quic

import (
	"context"
	"crypto/tls"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// packetTypes lists the long header packet types coalesced in datagram b
// (1-RTT packets end the list).
func packetTypes(b []byte, cidLen int) []wire.PacketType {
	var ts []wire.PacketType
	for len(b) > 0 {
		h, err := wire.ParseHeader(b, cidLen)
		if err != nil {
			break
		}
		ts = append(ts, h.Type)
		if !h.Long {
			break
		}
		b = b[h.PacketLen:]
	}
	return ts
}

// startClientHello starts a scripted client's TLS handshake and sends its
// ClientHello, nothing more.
func startClientHello(t *testing.T, p *testPeer) {
	t.Helper()
	_, pool := testCertificate(t)
	p.tls = tls.QUICClient(&tls.QUICConfig{TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"hq-interop"}, MinVersion: tls.VersionTLS13}})
	var tp wire.TransportParameters
	tp.SetDefaults()
	tp.HasInitialSourceConnectionID = true
	tp.InitialSourceConnectionID = p.scid
	p.tls.SetTransportParameters(tp.Marshal())
	if err := p.tls.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.tlsEvents()
}

// startBareServer starts a Quiver server and a scripted client that has
// sent its ClientHello and nothing more.
func startBareServer(t *testing.T) *testPeer {
	t.Helper()
	n := newMemNet(5 * time.Millisecond)
	ep, err := NewEndpoint(n.listen(testServerAddr), testServerConfig(t, "hq-interop"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	p := newTestPeer(t, n, testServerAddr)
	startClientHello(t, p)
	return p
}

// TestServerPTOProbesInitial has a client that never acknowledges the
// server's first flight. Every PTO probe the server sends must then carry
// an Initial packet along with its Handshake packets, since the client may
// have no Handshake keys: RFC 9002 §6.2.4, "the sender SHOULD send
// ack-eliciting packets from other packet number spaces with in-flight
// data, coalescing packets if possible. This is particularly valuable when
// the server has both Initial and Handshake data in flight".
func TestServerPTOProbesInitial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startBareServer(t)
		// Anti-amplification credit for several PTO rounds: padded
		// Initial packets with ACK frames only, which ask for nothing.
		for range 4 {
			p.writeFrames(initialSpace, &wire.PaddingFrame{Length: 1})
		}
		bursts := map[time.Duration][]wire.PacketType{}
		start := time.Now()
		deadline := time.After(8 * time.Second)
	loop:
		for {
			select {
			case pkt := <-p.pc.in:
				at := time.Since(start)
				bursts[at] = append(bursts[at], packetTypes(pkt.b, len(p.scid))...)
			case <-deadline:
				break loop
			}
		}
		if len(bursts) < 3 {
			t.Fatalf("%d bursts from the server in 8 s, want the first flight and at least two PTO rounds: %v", len(bursts), bursts)
		}
		for at, types := range bursts {
			hasInitial, hasHandshake := false, false
			for _, ty := range types {
				hasInitial = hasInitial || ty == wire.PacketTypeInitial
				hasHandshake = hasHandshake || ty == wire.PacketTypeHandshake
			}
			t.Logf("t+%v: %v", at, types)
			if hasHandshake && !hasInitial {
				t.Errorf("t+%v: the server probed with Handshake packets only while its Initial flight was unacknowledged: %v", at, types)
			}
		}
	})
}

// TestServerResendsInitialOnClientProbe: a client Initial that brings no
// new CRYPTO data while the server's Initial flight is unacknowledged
// shows that the ServerHello was lost; the server resends it at once
// rather than at its next PTO (RFC 9002 §6.2.3: "When a server receives an
// Initial packet containing duplicate CRYPTO data, it can assume the
// client did not receive all of the server's CRYPTO data sent in Initial
// packets ... an endpoint MAY, for a limited number of times per
// connection, send a packet containing unacknowledged CRYPTO data earlier
// than the PTO expiry").
func TestServerResendsInitialOnClientProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startBareServer(t)
		// The first flight is lost: read and ignored.
		drain := func(d time.Duration) (elicit int) {
			deadline := time.After(d)
			for {
				select {
				case pkt := <-p.pc.in:
					// RFC 9000 §14.1: the server pads datagrams with
					// ack-eliciting Initial packets to 1200 bytes; an
					// ACK-only answer is short.
					if ts := packetTypes(pkt.b, len(p.scid)); len(ts) > 0 && ts[0] == wire.PacketTypeInitial && len(pkt.b) >= minInitialDatagramSize {
						elicit++
					}
				case <-deadline:
					return elicit
				}
			}
		}
		drain(100 * time.Millisecond)
		resent := 0
		for i := range 4 {
			// The client's anti-deadlock probe (RFC 9002 §6.2.2.1): an
			// Initial PING, well before the server's PTO (1 s).
			p.writeFrames(initialSpace, &wire.PingFrame{})
			n := drain(50 * time.Millisecond)
			t.Logf("client probe %d: ack-eliciting Initial datagrams from the server: %d", i, n)
			if n > 0 {
				resent++
			}
		}
		if resent == 0 {
			t.Fatal("the server answered client Initial probes with ACKs only; its ServerHello waited for the PTO")
		}
		if resent == 4 {
			t.Fatal("the server resent its Initial CRYPTO on every client probe; RFC 9002 §6.2.3 limits it")
		}
	})
}

// TestClientAntiDeadlockProbeInHandshake: the server's Handshake packets
// never arrive, and it is blocked by the amplification limit; the client,
// holding Handshake keys from the ServerHello, must probe with a Handshake
// packet (RFC 9002 §6.2.2.1: "When the PTO fires, the client MUST send a
// Handshake packet if it has Handshake keys, otherwise it MUST send an
// Initial packet").
func TestClientAntiDeadlockProbeInHandshake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		scfg := testServerConfig(t, "hq-interop")
		scfg.Probe = &Probe{OnSendDatagram: func(b []byte) [][]byte {
			// Keep only the Initial packets of each datagram.
			out := b[:0:0]
			for rest := b; len(rest) > 0; {
				h, err := wire.ParseHeader(rest, 8)
				if err != nil || !h.Long {
					break
				}
				if h.Type == wire.PacketTypeInitial {
					out = append(out, rest[:h.PacketLen]...)
				}
				rest = rest[h.PacketLen:]
			}
			if len(out) == 0 {
				return nil
			}
			return [][]byte{out}
		}}
		var handshakeProbes, initialProbes atomic.Int32
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.Probe = &Probe{OnPacketSent: func(pi PacketInfo) {
			switch pi.Space {
			case SpaceHandshake:
				handshakeProbes.Add(1)
			case SpaceInitial:
				initialProbes.Add(1)
			}
		}}
		sep, err := NewEndpoint(n.listen(testServerAddr), scfg)
		if err != nil {
			t.Fatal(err)
		}
		defer sep.Close()
		cep, err := NewEndpoint(n.listen(testClientAddr), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cep.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 6*time.Second)
		defer cancel()
		_, err = cep.Dial(ctx, "udp", testServerAddr, ccfg)
		if err == nil {
			t.Fatal("handshake completed without the server's Handshake packets")
		}
		t.Logf("dial: %v", err)
		t.Logf("client PING probes: %d Handshake, %d Initial", handshakeProbes.Load(), initialProbes.Load())
		if handshakeProbes.Load() == 0 {
			t.Fatal("the client with Handshake keys never probed in the Handshake space")
		}
	})
}
