package quic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

const (
	testServerAddr = "10.0.0.1:443"
	testClientAddr = "10.0.0.2:5000"
)

// pair starts a server endpoint serving sized responses and a client
// connection to it over n.
func pair(t *testing.T, n *memNet, scfg, ccfg *Config) (*Endpoint, *Endpoint, *Conn, error) {
	t.Helper()
	sep, err := NewEndpoint(n.listen(testServerAddr), scfg)
	if err != nil {
		t.Fatal(err)
	}
	cep, err := NewEndpoint(n.listen(testClientAddr), nil)
	if err != nil {
		t.Fatal(err)
	}
	go serveSized(t.Context(), sep)
	c, err := cep.Dial(t.Context(), "udp", testServerAddr, ccfg)
	return sep, cep, c, err
}

func fetch(ctx context.Context, c *Conn, size int) error {
	s, err := c.OpenStream(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(s, "GET /%d\r\n", size)
	s.CloseWrite()
	got, err := io.ReadAll(s)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, pattern(size)) {
		return fmt.Errorf("got %d bytes, want %d (content differs)", len(got), size)
	}
	return nil
}

func TestSynctestHandshakeAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(10 * time.Millisecond)
		sep, err := NewEndpoint(n.listen(testServerAddr), testServerConfig(t, "hq-interop"))
		if err != nil {
			t.Fatal(err)
		}
		defer sep.Close()
		cep, _ := NewEndpoint(n.listen(testClientAddr), nil)
		defer cep.Close()
		start := time.Now()
		c, err := cep.Dial(t.Context(), "udp", testServerAddr, testClientConfig(t, "hq-interop"))
		if err != nil {
			t.Fatal(err)
		}
		// One round trip for the handshake (20 ms): 1-RTT handshake.
		if el := time.Since(start); el != 20*time.Millisecond {
			t.Errorf("handshake took %v, want 20ms", el)
		}
		if c.ALPN() != "hq-interop" {
			t.Errorf("ALPN %q", c.ALPN())
		}
		sc, err := sep.Accept(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		c.Close(42, "bye")
		err = sc.Wait(t.Context())
		var ae *ApplicationError
		if !errors.As(err, &ae) || ae.Code != 42 || ae.Reason != "bye" || !ae.Remote {
			t.Fatalf("server saw %v, want remote application error 42 bye", err)
		}
		err = c.Wait(t.Context())
		if !errors.As(err, &ae) || ae.Remote {
			t.Fatalf("client saw %v, want local application error", err)
		}
	})
}

func TestSynctestTransfer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy func(n int, from, to netip.AddrPort, b []byte) (bool, time.Duration)
	}{
		{"clean", nil},
		{"drop-every-7th", dropEvery(7)},
		{"drop-every-3rd", dropEvery(3)},
		{"reorder", func(n int, _, _ netip.AddrPort, _ []byte) (bool, time.Duration) {
			if n%5 == 0 {
				return false, 3 * time.Millisecond
			}
			return false, 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newMemNet(10 * time.Millisecond)
				n.policy = tc.policy
				sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), testClientConfig(t, "hq-interop"))
				defer sep.Close()
				defer cep.Close()
				if err != nil {
					t.Fatal(err)
				}
				for _, size := range []int{0, 1, 5000, 1 << 20} {
					if err := fetch(t.Context(), c, size); err != nil {
						t.Fatalf("size %d: %v", size, err)
					}
				}
				c.Close(0, "")
			})
		})
	}
}

// dropEvery drops every nth datagram in each direction. (Counting both
// directions together can lock into a pattern where every ACK is lost.)
func dropEvery(n int) func(int, netip.AddrPort, netip.AddrPort, []byte) (bool, time.Duration) {
	count := map[netip.AddrPort]int{}
	return func(_ int, from, _ netip.AddrPort, _ []byte) (bool, time.Duration) {
		count[from]++
		return count[from]%n == 0, 0
	}
}

func TestSynctestIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(10 * time.Millisecond)
		scfg := testServerConfig(t, "hq-interop")
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.MaxIdleTimeout = 2 * time.Second
		sep, cep, c, err := pair(t, n, scfg, ccfg)
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		// Cut the link: nothing more arrives.
		n.mu.Lock()
		n.policy = func(int, netip.AddrPort, netip.AddrPort, []byte) (bool, time.Duration) { return true, 0 }
		n.mu.Unlock()
		err = c.Wait(t.Context())
		if !errors.As(err, new(IdleTimeoutError)) {
			t.Fatalf("got %v, want idle timeout", err)
		}
		// RFC 9000 §10.1: the effective timeout is the minimum of both
		// sides' values (2s), but at least 3 PTO.
		if el := time.Since(start); el < 2*time.Second || el > 3*time.Second {
			t.Errorf("idle timeout after %v", el)
		}
	})
}

// TestProbeInjectForbiddenFrame injects a HANDSHAKE_DONE from the
// client; RFC 9000 §19.20 makes the server close with PROTOCOL_VIOLATION.
func TestProbeInjectForbiddenFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), testClientConfig(t, "hq-interop"))
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		c.InjectFrames(SpaceApplication, &wire.HandshakeDoneFrame{})
		err = c.Wait(t.Context())
		var te *TransportError
		if !errors.As(err, &te) || te.Code != wire.ProtocolViolation || !te.Remote {
			t.Fatalf("got %v, want remote PROTOCOL_VIOLATION", err)
		}
	})
}

// TestProbeRawTransportParameters sends a transport parameter list without
// initial_source_connection_id; RFC 9000 §7.3 makes the server close with
// TRANSPORT_PARAMETER_ERROR.
func TestProbeRawTransportParameters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.Probe = &Probe{RawTransportParameters: []wire.TransportParameter{
			{ID: uint64(wire.TPInitialMaxData), Value: wire.AppendVarint(nil, 1<<20)},
		}}
		sep, cep, _, err := pair(t, n, testServerConfig(t, "hq-interop"), ccfg)
		defer sep.Close()
		defer cep.Close()
		var te *TransportError
		if !errors.As(err, &te) || te.Code != wire.TransportParameterError || !te.Remote {
			t.Fatalf("dial: %v, want remote TRANSPORT_PARAMETER_ERROR", err)
		}
	})
}

// TestProbeObserveAndNoAcks checks the observe hooks, and that a client
// with automatic ACKs switched off never sends an ACK frame while the
// transfer still completes (the server retransmits on PTO).
func TestProbeObserveAndNoAcks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		var sentAcks, sent, recv int
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.Probe = &Probe{
			NoAcks: true,
			OnPacketSent: func(p PacketInfo) {
				sent++
				var parser wire.Parser
				for b := p.Payload; len(b) > 0; {
					f, n, err := parser.Parse(b)
					if err != nil {
						break
					}
					if _, ok := f.(*wire.AckFrame); ok {
						sentAcks++
					}
					b = b[n:]
				}
			},
			OnPacketReceived: func(p PacketInfo) { recv++ },
		}
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), ccfg)
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 3000); err != nil {
			t.Fatal(err)
		}
		c.Close(0, "")
		if sentAcks != 0 {
			t.Errorf("client sent %d ACK frames with NoAcks", sentAcks)
		}
		if sent == 0 || recv == 0 {
			t.Errorf("hooks saw %d sent, %d received packets", sent, recv)
		}
	})
}

// TestStatelessReset restarts the server endpoint (losing all state): its
// answer to the client's next packet is a stateless reset, which the
// client recognises by the token from the server's transport parameters.
func TestStatelessReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		scfg := testServerConfig(t, "hq-interop")
		sep, cep, c, err := pair(t, n, scfg, testClientConfig(t, "hq-interop"))
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		// Make sure the server has completed its handshake too.
		if err := fetch(t.Context(), c, 10); err != nil {
			t.Fatal(err)
		}
		// Keep the reset key, lose the connections: a server restart that
		// kept its static key.
		salt := sep.resetSalt
		srv := netip.MustParseAddrPort(testServerAddr)
		n.mu.Lock()
		n.policy = func(_ int, from, _ netip.AddrPort, _ []byte) (bool, time.Duration) { return from == srv, 0 }
		n.mu.Unlock()
		sep.Close() // its CONNECTION_CLOSE is lost, as in a crash
		n.mu.Lock()
		n.policy = nil
		n.mu.Unlock()
		sep2, err := NewEndpoint(n.listen(testServerAddr), scfg)
		if err != nil {
			t.Fatal(err)
		}
		sep2.resetSalt = salt
		defer sep2.Close()
		s, _ := c.OpenStream(t.Context())
		s.Write([]byte("GET /1\r\n" + string(make([]byte, 100))))
		err = c.Wait(t.Context())
		if !errors.Is(err, errStatelessReset) {
			t.Fatalf("got %v, want stateless reset", err)
		}
	})
}

// TestKeyUpdate forces key updates on the client between transfers; the
// server follows (RFC 9001 §6.2) and data keeps flowing.
func TestKeyUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), testClientConfig(t, "hq-interop"))
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if err := fetch(t.Context(), c, 50000); err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			if err := c.ForceKeyUpdate(); err != nil {
				t.Fatal(err)
			}
		}
		if err := fetch(t.Context(), c, 50000); err != nil {
			t.Fatal(err)
		}
		var gen uint64
		c.run(t.Context(), func(time.Time) { gen = c.appKeys.Generation() })
		if gen != 3 {
			t.Errorf("key generation %d, want 3", gen)
		}
		c.Close(0, "")
	})
}

// TestNATRebinding moves the client to a new address in the middle of a
// download: the server follows it after path validation, under a new
// connection ID, and the download completes.
func TestNATRebinding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		var dcids = map[string]bool{}
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.Probe = &Probe{OnPacketReceived: func(p PacketInfo) {
			if p.Space == SpaceApplication {
				dcids[string(p.DCID)] = true
			}
		}}
		scfg := testServerConfig(t, "hq-interop")
		sep, cep, c, err := pair(t, n, scfg, ccfg)
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 1000); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- fetch(t.Context(), c, 2<<20) }()
		time.Sleep(30 * time.Millisecond)
		n.rebind(testClientAddr, "10.0.0.3:6000")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		sc := serverConn(sep)
		var migrations uint64
		var validated bool
		sc.run(t.Context(), func(time.Time) { migrations, validated = sc.stats.migrations, sc.addrValidated })
		if migrations != 1 || !validated {
			t.Errorf("server saw %d migrations, path validated %v", migrations, validated)
		}
		if got := sc.RemoteAddr().String(); got != "10.0.0.3:6000" {
			t.Errorf("server sends to %s", got)
		}
		if len(dcids) < 2 {
			t.Errorf("server used %d connection IDs; want a new one after the address change", len(dcids))
		}
		c.Close(0, "")
	})
}

// TestDatagrams sends DATAGRAM frames both ways (RFC 9221), checks the
// size limit, and that an endpoint which did not offer datagrams refuses
// to send them.
func TestDatagrams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		scfg := testServerConfig(t, "hq-interop")
		scfg.MaxDatagramFrameSize = 1200
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.MaxDatagramFrameSize = 500
		sep, err := NewEndpoint(n.listen(testServerAddr), scfg)
		if err != nil {
			t.Fatal(err)
		}
		defer sep.Close()
		go func() {
			sc, err := sep.Accept(t.Context())
			if err != nil {
				return
			}
			for {
				b, err := sc.ReceiveDatagram(t.Context())
				if err != nil {
					return
				}
				sc.SendDatagram(append([]byte("echo:"), b...))
			}
		}()
		cep, _ := NewEndpoint(n.listen(testClientAddr), nil)
		defer cep.Close()
		c, err := cep.Dial(t.Context(), "udp", testServerAddr, ccfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			if err := c.SendDatagram([]byte(fmt.Sprint("ping ", i))); err != nil {
				t.Fatal(err)
			}
			b, err := c.ReceiveDatagram(t.Context())
			if err != nil || string(b) != fmt.Sprint("echo:ping ", i) {
				t.Fatalf("got %q, %v", b, err)
			}
		}
		if err := c.SendDatagram(make([]byte, 1300)); err == nil {
			t.Errorf("a datagram larger than the peer's limit was accepted")
		}
		c.Close(0, "")
	})
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), testClientConfig(t, "hq-interop"))
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SendDatagram([]byte("x")); !errors.Is(err, ErrDatagramsNotNegotiated) {
			t.Fatalf("got %v, want ErrDatagramsNotNegotiated", err)
		}
		c.Close(0, "")
	})
}

// clientPacketsFor counts the 1-RTT packets a client sends while it
// downloads size bytes from a server configured with scfg; setup runs on
// the server's connection after a first small request.
func clientPacketsFor(t *testing.T, scfg *Config, size int, setup func(sc *Conn)) int {
	var sent atomic.Int64
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.Probe = &Probe{OnPacketSent: func(p PacketInfo) {
			if p.Space == SpaceApplication {
				sent.Add(1)
			}
		}}
		sep, cep, c, err := pair(t, n, scfg, ccfg)
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 100); err != nil {
			t.Fatal(err)
		}
		if setup != nil {
			setup(serverConn(sep))
		}
		sent.Store(0)
		if err := fetch(t.Context(), c, size); err != nil {
			t.Fatal(err)
		}
		c.Close(0, "")
	})
	return int(sent.Load())
}

// serverConn returns the (single) connection of a server endpoint.
func serverConn(sep *Endpoint) *Conn {
	sep.mu.Lock()
	defer sep.mu.Unlock()
	for c := range sep.all {
		return c
	}
	return nil
}

// TestAckFrequency has the server (the data sender) ask the client for
// one ACK per ten packets: the client then sends far fewer packets for
// the same download.
func TestAckFrequency(t *testing.T) {
	base := clientPacketsFor(t, testServerConfig(t, "hq-interop"), 2<<20, nil)
	reduced := clientPacketsFor(t, testServerConfig(t, "hq-interop"), 2<<20, func(sc *Conn) {
		if err := sc.SetAckFrequency(9, 20*time.Millisecond, 3); err != nil {
			t.Error(err)
		}
		if err := sc.SendImmediateAck(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("client packets for 2 MB: %d with RFC 9000 ACKs, %d with threshold 9", base, reduced)
	if reduced*3 > base {
		t.Errorf("ACK_FREQUENCY threshold 9 left %d client packets (baseline %d)", reduced, base)
	}
}

// TestAutomaticKeyUpdate lowers the key update interval: the client
// updates its keys by itself several times during a download, waiting
// each time for an acknowledgment in the current phase.
func TestAutomaticKeyUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), testClientConfig(t, "hq-interop"))
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		c.run(t.Context(), func(time.Time) { c.keyUpdate.interval = 20 })
		if err := fetch(t.Context(), c, 2<<20); err != nil {
			t.Fatal(err)
		}
		var gen uint64
		c.run(t.Context(), func(time.Time) { gen = c.appKeys.Generation() })
		if gen < 3 {
			t.Errorf("key generation %d after a 2 MB download, want several updates", gen)
		}
		c.Close(0, "")
	})
}

// TestKeepAlive keeps an idle connection alive past the idle timeout.
func TestKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.MaxIdleTimeout = 2 * time.Second
		ccfg.KeepAlivePeriod = 500 * time.Millisecond
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), ccfg)
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		if err := c.Err(); err != nil {
			t.Fatalf("connection died while idle: %v", err)
		}
		if err := fetch(t.Context(), c, 100); err != nil {
			t.Fatal(err)
		}
		c.Close(0, "")
	})
}

// TestAckFrequencyPolicy checks the fixed and adaptive sender policies
// through Config.AckFrequency: both cut the client's ACK packets.
func TestAckFrequencyPolicy(t *testing.T) {
	run := func(pol AckFrequencyPolicy) int {
		scfg := testServerConfig(t, "hq-interop")
		scfg.AckFrequency = pol
		return clientPacketsFor(t, scfg, 4<<20, nil)
	}
	base := run(AckFrequencyPolicy{})
	fixed := run(AckFrequencyPolicy{Ratio: 10})
	rtt := run(AckFrequencyPolicy{Ratio: 10, MaxAckDelay: -1})
	adaptive := run(AckFrequencyPolicy{Ratio: AdaptiveAckRatio})
	t.Logf("client packets for 4 MB: RFC 9000 %d, fixed 1:10 %d, fixed 1:10 rtt/4 %d, adaptive %d", base, fixed, rtt, adaptive)
	if fixed*2 > base || rtt*2 > base || adaptive >= base {
		t.Errorf("policies did not reduce ACKs enough")
	}
}

// TestVersionNegotiationReserved has a client start with a reserved
// version (RFC 9000 §6.3): the server answers with Version Negotiation and
// the client carries on with v1.
func TestVersionNegotiationReserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.Versions = []uint32{0x1a2a3a4a, Version1}
		sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), ccfg)
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if info := c.ConnectionInfo(); info.Version != Version1 || !info.VersionNegotiated {
			t.Errorf("connection info %+v", info)
		}
		if err := fetch(t.Context(), c, 1000); err != nil {
			t.Fatal(err)
		}
		c.Close(0, "")
	})
}

// TestProbeSkipPacketNumbersAndStats skips every 10th packet number on
// the server (a gap the client must tolerate, RFC 9000 §12.3) and reads
// the connection statistics.
func TestProbeSkipPacketNumbersAndStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(10 * time.Millisecond)
		scfg := testServerConfig(t, "hq-interop")
		k := 0
		scfg.Probe = &Probe{SkipPacketNumber: func(space int) bool {
			k++
			return space == SpaceApplication && k%10 == 0
		}}
		sep, cep, c, err := pair(t, n, scfg, testClientConfig(t, "hq-interop"))
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 300<<10); err != nil {
			t.Fatal(err)
		}
		st := c.Stats()
		if st.SmoothedRTT < 20*time.Millisecond || st.SmoothedRTT > 30*time.Millisecond || st.DatagramsReceived == 0 {
			t.Errorf("stats %+v", st)
		}
		c.Close(0, "")
	})
}

// TestProbeHoldBackFinished holds back the client's Finished: the
// client's handshake completes, the server's never does, and Accept
// returns nothing.
func TestProbeHoldBackFinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(10 * time.Millisecond)
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.Probe = &Probe{OnHandshakeFlight: func(space int, b []byte) []byte {
			if space == SpaceHandshake {
				return nil
			}
			return b
		}}
		sep, err := NewEndpoint(n.listen(testServerAddr), testServerConfig(t, "hq-interop"))
		if err != nil {
			t.Fatal(err)
		}
		defer sep.Close()
		cep, _ := NewEndpoint(n.listen(testClientAddr), nil)
		defer cep.Close()
		c, err := cep.Dial(t.Context(), "udp", testServerAddr, ccfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if sc, err := sep.Accept(ctx); err == nil {
			t.Fatalf("server accepted %v without the client's Finished", sc.RemoteAddr())
		}
		c.Close(0, "")
	})
}

// TestConnectionIDLengths runs a transfer with client connection IDs of
// zero, 4 and 20 bytes and server IDs of 5 bytes.
func TestConnectionIDLengths(t *testing.T) {
	for _, l := range []int{-1, 4, 20} {
		t.Run(fmt.Sprint(l), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newMemNet(5 * time.Millisecond)
				scfg := testServerConfig(t, "hq-interop")
				scfg.ConnectionIDLength = 5
				sep, err := NewEndpoint(n.listen(testServerAddr), scfg)
				if err != nil {
					t.Fatal(err)
				}
				defer sep.Close()
				go serveSized(t.Context(), sep)
				ccfg := testClientConfig(t, "hq-interop")
				ccfg.ConnectionIDLength = l
				cep, _ := NewEndpoint(n.listen(testClientAddr), ccfg)
				defer cep.Close()
				c, err := cep.Dial(t.Context(), "udp", testServerAddr, ccfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := fetch(t.Context(), c, 200<<10); err != nil {
					t.Fatal(err)
				}
				c.Close(0, "")
			})
		})
	}
}

// TestClientMigration moves the client to a new socket in the middle of a
// download (RFC 9000 §9): it continues under a new connection ID, both
// paths are validated, and the download completes.
func TestClientMigration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		dcids := map[string]bool{}
		scfg := testServerConfig(t, "hq-interop")
		scfg.Probe = &Probe{OnPacketReceived: func(p PacketInfo) {
			if p.Space == SpaceApplication {
				dcids[string(p.DCID)] = true
			}
		}}
		sep, cep, c, err := pair(t, n, scfg, testClientConfig(t, "hq-interop"))
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 1000); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- fetch(t.Context(), c, 2<<20) }()
		time.Sleep(30 * time.Millisecond)
		if err := c.Migrate(n.listen("10.0.0.2:7000")); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := c.LocalAddr().String(); got != "10.0.0.2:7000" {
			t.Errorf("client local address %s", got)
		}
		sc := serverConn(sep)
		if got := sc.RemoteAddr().String(); got != "10.0.0.2:7000" {
			t.Errorf("server sends to %s", got)
		}
		if len(dcids) < 2 {
			t.Errorf("client used %d connection IDs, want a new one after migrating", len(dcids))
		}
		c.Close(0, "")
	})
}

// TestNewToken: a server that requires address validation sends a Retry
// to a new client, then a NEW_TOKEN; the client's next connection carries
// the token and skips the Retry round trip (RFC 9000 §8.1.3).
func TestNewToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(10 * time.Millisecond)
		scfg := testServerConfig(t, "hq-interop")
		scfg.RequireRetry = true
		sep, err := NewEndpoint(n.listen(testServerAddr), scfg)
		if err != nil {
			t.Fatal(err)
		}
		defer sep.Close()
		go serveSized(t.Context(), sep)
		store := NewTokenStore()
		for i := 0; i < 2; i++ {
			cep, _ := NewEndpoint(n.listen(testClientAddr), nil)
			ccfg := testClientConfig(t, "hq-interop")
			ccfg.TokenStore = store
			start := time.Now()
			c, err := cep.Dial(t.Context(), "udp", testServerAddr, ccfg)
			if err != nil {
				t.Fatal(err)
			}
			el := time.Since(start)
			if err := fetch(t.Context(), c, 1000); err != nil {
				t.Fatal(err)
			}
			info := c.ConnectionInfo()
			c.Close(0, "")
			cep.Close()
			if i == 0 && (!info.Retried || el != 40*time.Millisecond) {
				t.Errorf("first connection: retried %v, handshake %v; want a Retry and 40ms", info.Retried, el)
			}
			if i == 1 && (info.Retried || el != 20*time.Millisecond) {
				t.Errorf("second connection: retried %v, handshake %v; want no Retry and 20ms", info.Retried, el)
			}
		}
	})
}

// TestCompatibleVersionNegotiation: a client that starts in v1 and
// offers [v1, v2] in version_information is moved to v2 by a server that
// prefers v2 (RFC 9368 §2.3, RFC 9369 §4).
func TestCompatibleVersionNegotiation(t *testing.T) {
	for _, tc := range []struct {
		name           string
		server, client []uint32
		want           uint32
	}{
		{"upgrade", []uint32{Version2, Version1}, []uint32{Version1, Version2}, Version2},
		{"server-prefers-v1", []uint32{Version1, Version2}, []uint32{Version1, Version2}, Version1},
		{"client-v1-only", []uint32{Version2, Version1}, []uint32{Version1}, Version1},
		{"client-starts-v2", []uint32{Version1, Version2}, []uint32{Version2, Version1}, Version1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newMemNet(5 * time.Millisecond)
				scfg := testServerConfig(t, "hq-interop")
				scfg.Versions = tc.server
				ccfg := testClientConfig(t, "hq-interop")
				ccfg.Versions = tc.client
				sep, cep, c, err := pair(t, n, scfg, ccfg)
				defer sep.Close()
				defer cep.Close()
				if err != nil {
					t.Fatal(err)
				}
				if err := fetch(t.Context(), c, 100000); err != nil {
					t.Fatal(err)
				}
				if info := c.ConnectionInfo(); info.Version != tc.want || info.VersionNegotiated {
					t.Errorf("client connection info %+v, want version %#x", info, tc.want)
				}
				if info := serverConn(sep).ConnectionInfo(); info.Version != tc.want {
					t.Errorf("server connection info %+v, want version %#x", info, tc.want)
				}
				c.Close(0, "")
			})
		})
	}
}

// TestVersionInformationValidated: a Chosen Version other than the
// version in use closes the connection with VERSION_NEGOTIATION_ERROR
// (RFC 9368 §4), at the server and at the client.
func TestVersionInformationValidated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client bool // the client lies (else the server)
	}{{"client-lies", true}, {"server-lies", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newMemNet(5 * time.Millisecond)
				scfg := testServerConfig(t, "hq-interop")
				ccfg := testClientConfig(t, "hq-interop")
				lie := &Probe{TransportParameters: func(p *wire.TransportParameters) {
					if !p.HasVersionInformation {
						t.Error("no version_information sent")
					}
					p.VersionInformation.Chosen = wire.Version(Version2)
				}}
				if tc.client {
					ccfg.Probe = lie
				} else {
					scfg.Probe = lie
				}
				sep, cep, c, err := pair(t, n, scfg, ccfg)
				defer sep.Close()
				defer cep.Close()
				if err == nil {
					// The client's handshake may complete before the
					// server reads its parameters; the close follows.
					_, err = c.AcceptStream(t.Context())
				}
				var te *TransportError
				if !errors.As(err, &te) || te.Code != wire.VersionNegotiationError || te.Remote != tc.client {
					t.Fatalf("err = %v, want VERSION_NEGOTIATION_ERROR (remote %v)", err, tc.client)
				}
			})
		})
	}
}

// TestVersionNegotiationEmptyIgnored: a Version Negotiation packet that
// lists no version is ignored (RFC 8999 §6: "An endpoint MUST ignore a
// packet that contains no Supported Version fields"), so the client keeps
// trying until its own deadline instead of giving up.
func TestVersionNegotiationEmptyIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		srv := n.listen(testServerAddr)
		defer srv.Close()
		go func() {
			buf := make([]byte, 2048)
			nb, from, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			h, err := wire.ParseHeader(buf[:nb], 0)
			if err != nil {
				t.Errorf("client Initial: %v", err)
				return
			}
			srv.WriteTo(wire.AppendVersionNegotiation(nil, 0xc0, h.SCID, h.DCID), from)
		}()
		cep, err := NewEndpoint(n.listen(testClientAddr), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cep.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err = cep.Dial(ctx, "udp", testServerAddr, testClientConfig(t, "hq-interop"))
		var vne *VersionNegotiationError
		if err == nil || errors.As(err, &vne) {
			t.Fatalf("Dial: %v, want the context's deadline (the empty Version Negotiation ignored)", err)
		}
	})
}
