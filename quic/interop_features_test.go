package quic_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// h3Get fetches file-n over HTTP/3 and checks it byte for byte.
func h3Get(t *testing.T, ctx context.Context, cc *h3.ClientConn, p *peers.Process, n int) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("https://%s/%s", p.Addr, fileName(n)), nil)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET /%s: %v\n%s", fileName(n), err, p.Output())
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, content(n)) {
		t.Fatalf("GET /%s: status %d, %d bytes, err %v", fileName(n), resp.StatusCode, len(got), err)
	}
}

// TestInteropKeyUpdate starts two key updates from a Quiver client against
// the ngtcp2 and quic-go (HTTP/3) and x/net (hq-interop) servers, with a
// download after each.
// RFC 9001 §6.1: "An endpoint MUST NOT initiate a subsequent key update
// unless it has received an acknowledgment for a packet that was sent
// protected with keys from the current key phase", so the second update is
// only allowed once the peer has acknowledged a packet in the new phase;
// and each download after an update arrives in packets the peer protected
// with its updated keys (§6.2: the peer "MUST update its send keys to the
// corresponding key phase in response").
func TestInteropKeyUpdate(t *testing.T) {
	for _, pc := range []struct{ name, alpn string }{{"ngtcp2", h3.ALPNH3}, {"quic-go", h3.ALPNH3}, {"go-x-net", peers.ALPNHQ}} {
		t.Run(pc.name, func(t *testing.T) {
			im := needPeer(t, pc.name, "server")
			sizes := interopSizes[:3]
			e := newInteropEnv(t, sizes...)
			tcase := "http3"
			if pc.alpn == peers.ALPNHQ {
				tcase = "keyupdate"
			}
			p, pool := e.peerServer(im, peers.ServerOpts{ALPN: pc.alpn, TestCase: tcase})
			var phases [2]atomic.Int64 // 1-RTT packets received per key phase bit
			cfg := &quic.Config{
				TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{pc.alpn}},
				Probe: &quic.Probe{OnPacketReceived: func(pi quic.PacketInfo) {
					if pi.Type == wire.PacketType1RTT {
						if pi.KeyPhase {
							phases[1].Add(1)
						} else {
							phases[0].Add(1)
						}
					}
				}},
			}
			c, err := quic.Dial(e.ctx, "udp", p.Addr, cfg)
			if err != nil {
				t.Fatalf("dial %s: %v\n%s", p.Addr, err, p.Output())
			}
			defer c.Close(0, "")
			get := func(n int) { hqFetchAll(t, e.ctx, c, p, []int{n}) }
			if pc.alpn == h3.ALPNH3 {
				cc, err := h3.NewClientConn(e.ctx, h3Conn{c}, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				get = func(n int) { h3Get(t, e.ctx, cc, p, n) }
			}
			get(sizes[1]) // the handshake is confirmed by now
			if phases[1].Load() != 0 {
				t.Fatalf("%d packets in key phase 1 before any update", phases[1].Load())
			}
			var gen uint64
			for i := 1; i <= 2; i++ {
				before := [2]int64{phases[0].Load(), phases[1].Load()}
				if err := c.ForceKeyUpdate(); err != nil {
					t.Fatalf("key update %d: %v", i, err)
				}
				get(sizes[2])
				// The peer may update on its own too (x/net does in its
				// keyupdate test case), so the generation only has to move.
				g := c.Stats().KeyGeneration
				if g <= gen {
					t.Fatalf("after update %d the key generation is %d, was %d", i, g, gen)
				}
				gen = g
				// The peer answered in the new phase: the download came in
				// packets with the current Key Phase bit.
				if got := phases[g%2].Load() - before[g%2]; got < 100 {
					t.Fatalf("after update %d, %d packets arrived in key phase %d; the peer did not follow", i, got, g%2)
				}
			}
		})
	}
}

// TestInteropResumptionH3 resumes a TLS session with the ngtcp2 and quic-go
// HTTP/3 servers: the second connection uses the ticket of the first
// (RFC 9001 §4.5) and completes without a certificate.
func TestInteropResumptionH3(t *testing.T) {
	for _, name := range []string{"ngtcp2", "quic-go"} {
		t.Run(name, func(t *testing.T) {
			im := needPeer(t, name, "server")
			n := interopSizes[0]
			e := newInteropEnv(t, n)
			p, pool := e.peerServer(im, peers.ServerOpts{ALPN: h3.ALPNH3, TestCase: "http3"})
			cache := &notifyingCache{ClientSessionCache: tls.NewLRUClientSessionCache(4), stored: make(chan struct{})}
			cfg := &quic.Config{TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{h3.ALPNH3}, ClientSessionCache: cache}}
			for i := 0; i < 2; i++ {
				c, err := quic.Dial(e.ctx, "udp", p.Addr, cfg)
				if err != nil {
					t.Fatalf("dial %d: %v\n%s", i, err, p.Output())
				}
				cc, err := h3.NewClientConn(e.ctx, h3Conn{c}, nil)
				if err != nil {
					t.Fatal(err)
				}
				h3Get(t, e.ctx, cc, p, n)
				if i == 0 {
					select {
					case <-cache.stored:
					case <-e.ctx.Done():
						t.Fatalf("no session ticket from %s", name)
					}
				}
				resumed := c.ConnectionInfo().Resumed
				cc.Close()
				c.Close(0, "")
				if want := i == 1; resumed != want {
					t.Fatalf("connection %d: resumed %v, want %v", i, resumed, want)
				}
			}
		})
	}
}

// notifyingCache closes stored when the first session is put.
type notifyingCache struct {
	tls.ClientSessionCache
	once   sync.Once
	stored chan struct{}
}

func (c *notifyingCache) Put(key string, cs *tls.ClientSessionState) {
	c.ClientSessionCache.Put(key, cs)
	if cs != nil {
		c.once.Do(func() { close(c.stored) })
	}
}

// TestInteropDatagram exchanges DATAGRAM frames (RFC 9221) with quic-go,
// whose peer echoes each one: both sides announced max_datagram_frame_size,
// so each may send them (§3: "An endpoint MUST NOT send DATAGRAM frames
// until it has received the max_datagram_frame_size transport parameter
// with a non-zero value").
func TestInteropDatagram(t *testing.T) {
	im := needPeer(t, "quic-go", "server")
	e := newInteropEnv(t, interopSizes[0])
	p, pool := e.peerServer(im, peers.ServerOpts{ALPN: peers.ALPNHQ, TestCase: "transfer"})
	cfg := &quic.Config{
		TLSConfig:            &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{peers.ALPNHQ}},
		MaxDatagramFrameSize: 1200,
	}
	c, err := quic.Dial(e.ctx, "udp", p.Addr, cfg)
	if err != nil {
		t.Fatalf("dial: %v\n%s", err, p.Output())
	}
	defer c.Close(0, "")
	hqFetchAll(t, e.ctx, c, p, interopSizes[:1])
	const n = 20
	sent := map[string]bool{}
	for i := range n {
		b := bytes.Repeat([]byte{byte(i)}, 400+i)
		sent[string(b)] = true
		if err := c.SendDatagram(b); err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
	}
	got := 0
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	for got < n {
		b, err := c.ReceiveDatagram(ctx)
		if err != nil {
			break
		}
		if !sent[string(b)] {
			t.Fatalf("echo of %d bytes matches nothing sent", len(b))
		}
		delete(sent, string(b))
		got++
	}
	// Loopback loses nothing in practice, but DATAGRAM is unreliable (RFC 9221
	// §5): ask for most, not all.
	if got < n*3/4 {
		t.Fatalf("%d of %d datagrams came back from quic-go\n%s", got, n, p.Output())
	}
	t.Logf("%d of %d datagrams echoed by quic-go", got, n)
}

// TestInteropStatelessReset "restarts" a Quiver server under a quic-go and
// an x/net client: the first endpoint's socket is closed without a word
// while the client's request is still unacknowledged, and a new endpoint
// with the same StatelessResetKey takes the port. The client's next packet
// gets a Stateless Reset (RFC 9000 §10.3), which the client must recognise
// by its token and end the connection with (§10.3.1: "the endpoint MUST
// enter the draining period and not send any further packets on this
// connection") instead of waiting for its idle timeout.
func TestInteropStatelessReset(t *testing.T) {
	for _, name := range []string{"go-x-net", "quic-go"} {
		t.Run(name, func(t *testing.T) {
			im := needPeer(t, name, "client")
			e := newInteropEnv(t, interopSizes[0])
			cert, _, err := peers.SelfSigned()
			if err != nil {
				t.Fatal(err)
			}
			var key [32]byte
			copy(key[:], "quiver stateless reset test key!")
			tc := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{peers.ALPNHQ}}
			pc1, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			// The first endpoint acknowledges nothing, so the client's
			// request stays in flight and its PTO keeps sending.
			// The server must not die before the client has confirmed the
			// handshake: until HANDSHAKE_DONE arrives a client arms no PTO
			// for 1-RTT packets (RFC 9002 §6.2.1: "An endpoint MUST NOT set
			// its PTO timer for the Application Data packet number space
			// until the handshake is confirmed") and probes only with
			// Handshake packets, which carry no token a reset could match.
			// AcceptStream can return before the connection's goroutine has
			// even sent HANDSHAKE_DONE, so the event waited for is the
			// client's ACK of the packet that carried it.
			confirmed := handshakeDoneAcked()
			ep1, err := quic.NewEndpoint(pc1, &quic.Config{TLSConfig: tc, StatelessResetKey: key, Probe: &quic.Probe{
				NoAcks: true, OnPacketSent: confirmed.sent, OnPacketReceived: confirmed.received,
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer ep1.Close()
			addr := pc1.LocalAddr().(*net.UDPAddr)
			resets := make(chan *quic.Endpoint, 1)
			go func() {
				c, err := ep1.Accept(e.ctx)
				if err != nil {
					return
				}
				if _, err := c.AcceptStream(e.ctx); err != nil {
					return
				}
				select {
				case <-confirmed.done:
				case <-e.ctx.Done():
					return
				}
				// The request arrived and the client confirmed the
				// handshake: the server dies here and a new one takes
				// its port.
				pc1.Close()
				pc2, err := net.ListenUDP("udp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				ep2, err := quic.NewEndpoint(pc2, &quic.Config{TLSConfig: tc, StatelessResetKey: key})
				if err != nil {
					t.Error(err)
					return
				}
				resets <- ep2
			}()
			out := t.TempDir()
			start := time.Now()
			res, err := im.RunClient(e.ctx, peers.ClientOpts{URLs: []string{fmt.Sprintf("https://%s/%s", addr, fileName(interopSizes[0]))}, OutDir: out, ALPN: peers.ALPNHQ, TestCase: "transfer"})
			el := time.Since(start)
			select {
			case ep2 := <-resets:
				defer ep2.Close()
			default:
				t.Fatalf("the first server never saw the request (client: %v)", err)
			}
			output := ""
			if res != nil {
				output = res.Output
			}
			// x/net's interop client logs a failed fetch and still exits
			// 0, so the proof is what the client says, not its status.
			if b, _ := os.ReadFile(filepath.Join(out, fileName(interopSizes[0]))); bytes.Equal(b, content(interopSizes[0])) {
				t.Fatalf("the %s client downloaded the file although its server was gone:\n%s", name, output)
			}
			if !strings.Contains(strings.ToLower(output), "stateless reset") {
				t.Fatalf("the %s client ended after %v without reporting a stateless reset: %v\n%s", name, el, err, output)
			}
			t.Logf("%s client ended after %v: %s", name, el.Round(time.Millisecond), lastLineOf(output))
		})
	}
}

// doneAck watches a server's packets for the client's acknowledgement of
// HANDSHAKE_DONE; done closes when it arrives. The probe's hooks run on
// the connection's goroutine, but sent and received are guarded anyway.
type doneAck struct {
	mu   sync.Mutex
	pns  []uint64 // 1-RTT packets that carried HANDSHAKE_DONE
	once sync.Once
	done chan struct{}
}

func handshakeDoneAcked() *doneAck { return &doneAck{done: make(chan struct{})} }

func (d *doneAck) sent(pi quic.PacketInfo) {
	if pi.Space != 2 {
		return
	}
	for _, f := range framesOf(pi.Payload) {
		if _, ok := f.(*wire.HandshakeDoneFrame); ok {
			d.mu.Lock()
			d.pns = append(d.pns, pi.PacketNumber)
			d.mu.Unlock()
		}
	}
}

func (d *doneAck) received(pi quic.PacketInfo) {
	if pi.Space != 2 {
		return
	}
	for _, f := range framesOf(pi.Payload) {
		ack, ok := f.(*wire.AckFrame)
		if !ok {
			continue
		}
		d.mu.Lock()
		for _, pn := range d.pns {
			if ack.Acks(pn) {
				d.once.Do(func() { close(d.done) })
			}
		}
		d.mu.Unlock()
	}
}

// framesOf parses a packet's frames as far as they parse.
func framesOf(payload []byte) []wire.Frame {
	var fs []wire.Frame
	for rest := payload; len(rest) > 0; {
		f, k, err := wire.ParseFrame(rest)
		if err != nil || k == 0 {
			break
		}
		fs = append(fs, f)
		rest = rest[k:]
	}
	return fs
}

func lastLineOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// TestInteropMigrationH3 moves a Quiver client to a new local port in the
// middle of an HTTP/3 download from ngtcp2 and quic-go: the server must
// validate the new path (RFC 9000 §9.3: "An endpoint MUST perform path
// validation (Section 8.2) if it detects any change to a peer's address")
// and the download must finish byte-exact on it.
func TestInteropMigrationH3(t *testing.T) {
	for _, name := range []string{"ngtcp2", "quic-go"} {
		t.Run(name, func(t *testing.T) {
			im := needPeer(t, name, "server")
			n := interopSizes[3]
			e := newInteropEnv(t, interopSizes[0], n)
			p, pool := e.peerServer(im, peers.ServerOpts{ALPN: h3.ALPNH3, TestCase: "http3"})
			var challenges atomic.Int64 // PATH_CHALLENGEs received from the server
			cfg := &quic.Config{
				TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{h3.ALPNH3}},
				Probe: &quic.Probe{OnPacketReceived: func(pi quic.PacketInfo) {
					if pi.Type == wire.PacketType1RTT && bytes.IndexByte(pi.Payload, 0x1a) >= 0 {
						// 0x1a is PATH_CHALLENGE's type; parse to be sure.
						for rest := pi.Payload; len(rest) > 0; {
							f, k, err := wire.ParseFrame(rest)
							if err != nil || k == 0 {
								break
							}
							if _, ok := f.(*wire.PathChallengeFrame); ok {
								challenges.Add(1)
							}
							rest = rest[k:]
						}
					}
				}},
			}
			c, err := quic.Dial(e.ctx, "udp", p.Addr, cfg)
			if err != nil {
				t.Fatalf("dial: %v\n%s", err, p.Output())
			}
			defer c.Close(0, "")
			cc, err := h3.NewClientConn(e.ctx, h3Conn{c}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			h3Get(t, e.ctx, cc, p, interopSizes[0]) // confirms the handshake
			req, _ := http.NewRequestWithContext(e.ctx, "GET", fmt.Sprintf("https://%s/%s", p.Addr, fileName(n)), nil)
			resp, err := cc.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			first := make([]byte, 64<<10)
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				t.Fatal(err)
			}
			old := c.LocalAddr().String()
			pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Migrate(pc); err != nil {
				t.Fatalf("migrate: %v", err)
			}
			rest, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("download across the migration: %v\n%s", err, p.Output())
			}
			if got := append(first, rest...); !bytes.Equal(got, content(n)) {
				t.Fatalf("got %d bytes, not the file", len(got))
			}
			if now := c.LocalAddr().String(); now != pc.LocalAddr().String() {
				t.Errorf("local address %v after migrating from %v, want %v", now, old, pc.LocalAddr())
			}
			if challenges.Load() == 0 {
				t.Errorf("%s never sent PATH_CHALLENGE to the new address", name)
			}
		})
	}
}
