package quic

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// zeroRTTSetup runs a first connection that leaves a session ticket in
// the client's cache.
func zeroRTTSetup(t *testing.T, n *memNet, scfg *Config) (*Endpoint, *Endpoint, tls.ClientSessionCache) {
	cache := tls.NewLRUClientSessionCache(4)
	sep, err := NewEndpoint(n.listen(testServerAddr), scfg)
	if err != nil {
		t.Fatal(err)
	}
	go serveSized(t.Context(), sep)
	cep, _ := NewEndpoint(n.listen(testClientAddr), nil)
	ccfg := testClientConfig(t, "hq-interop")
	ccfg.TLSConfig.ClientSessionCache = cache
	ccfg.Allow0RTT = true
	c, err := cep.Dial(t.Context(), "udp", testServerAddr, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := fetch(t.Context(), c, 100); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the ticket arrives after the handshake
	c.Close(0, "")
	return sep, cep, cache
}

func Test0RTT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(10 * time.Millisecond)
		scfg := testServerConfig(t, "hq-interop")
		scfg.Allow0RTT = true
		var skl bytes.Buffer
		scfg.KeyLog = &skl
		sep, cep, cache := zeroRTTSetup(t, n, scfg)
		defer sep.Close()
		defer cep.Close()

		var early int
		var ckl bytes.Buffer
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.TLSConfig.ClientSessionCache = cache
		ccfg.Allow0RTT = true
		ccfg.KeyLog = &ckl
		ccfg.Probe = &Probe{OnPacketSent: func(p PacketInfo) {
			if p.Type == wire.PacketType0RTT {
				early++
			}
		}}
		start := time.Now()
		c, err := cep.DialEarly(t.Context(), "udp", testServerAddr, ccfg)
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el != 0 {
			t.Errorf("DialEarly returned after %v, want at once", el)
		}
		const size = 3000
		s, err := c.OpenStream(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(s, "GET /%d\r\n", size)
		s.CloseWrite()
		got, err := io.ReadAll(s)
		if err != nil || !bytes.Equal(got, pattern(size)) {
			t.Fatalf("got %d bytes, err %v", len(got), err)
		}
		// One round trip: the request went in 0-RTT.
		if el := time.Since(start); el != 20*time.Millisecond {
			t.Errorf("response after %v, want 20ms (one round trip)", el)
		}
		if early == 0 {
			t.Errorf("no 0-RTT packet sent")
		}
		info := c.ConnectionInfo()
		if !info.Resumed || !info.Used0RTT {
			t.Errorf("connection info %+v", info)
		}
		c.Close(0, "")
		for _, kl := range []*bytes.Buffer{&ckl, &skl} {
			if !strings.Contains(kl.String(), "CLIENT_EARLY_TRAFFIC_SECRET") {
				t.Errorf("key log lacks CLIENT_EARLY_TRAFFIC_SECRET:\n%s", kl)
			}
		}
	})
}

// Test0RTTRejected changes the server's limits between the connections:
// it must reject 0-RTT (RFC 9000 §7.4.1), and the client sends the request
// again in 1-RTT.
func Test0RTTRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(10 * time.Millisecond)
		scfg := testServerConfig(t, "hq-interop")
		scfg.Allow0RTT = true
		sep, cep, cache := zeroRTTSetup(t, n, scfg)
		defer sep.Close()
		defer cep.Close()
		scfg.InitialMaxData = 1 << 20 // the server now offers less

		ccfg := testClientConfig(t, "hq-interop")
		ccfg.TLSConfig.ClientSessionCache = cache
		ccfg.Allow0RTT = true
		c, err := cep.DialEarly(t.Context(), "udp", testServerAddr, ccfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 3000); err != nil {
			t.Fatal(err)
		}
		if info := c.ConnectionInfo(); !info.Resumed || info.Used0RTT {
			t.Errorf("connection info %+v, want resumed without 0-RTT", info)
		}
		c.Close(0, "")
	})
}

// TestTicketVersionBound: a ticket from a version 1 connection is neither
// offered by a client starting in version 2 nor, when a client offers it
// anyway (Probe.AnyVersionTickets), accepted by the server, which answers
// with a full handshake and no 0-RTT (RFC 9369 §5). A version 1
// connection with the same ticket still resumes.
func TestTicketVersionBound(t *testing.T) {
	for _, tc := range []struct {
		name       string
		versions   []uint32
		anyVersion bool
		resumed    bool
	}{
		{"v2-client-skips-v1-ticket", []uint32{Version2}, false, false},
		{"v2-server-refuses-v1-ticket", []uint32{Version2}, true, false},
		{"v1-resumes", []uint32{Version1}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newMemNet(10 * time.Millisecond)
				scfg := testServerConfig(t, "hq-interop")
				scfg.Allow0RTT = true
				scfg.Versions = []uint32{Version1, Version2}
				sep, cep, cache := zeroRTTSetup(t, n, scfg)
				defer sep.Close()
				defer cep.Close()
				var early int
				ccfg := testClientConfig(t, "hq-interop")
				ccfg.TLSConfig.ClientSessionCache = cache
				ccfg.Allow0RTT = true
				ccfg.Versions = tc.versions
				ccfg.Probe = &Probe{AnyVersionTickets: tc.anyVersion, OnPacketSent: func(p PacketInfo) {
					if p.Type == wire.PacketType0RTT {
						early++
					}
				}}
				c, err := cep.DialEarly(t.Context(), "udp", testServerAddr, ccfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := fetch(t.Context(), c, 3000); err != nil {
					t.Fatal(err)
				}
				info := c.ConnectionInfo()
				c.Close(0, "")
				if info.Version != tc.versions[0] || info.Resumed != tc.resumed || info.Used0RTT != tc.resumed {
					t.Errorf("connection info %+v, want version %#x, resumed and 0-RTT %v", info, tc.versions[0], tc.resumed)
				}
				if tc.anyVersion && early == 0 {
					t.Errorf("the client sent no 0-RTT, so the server's check was not exercised")
				}
			})
		})
	}
}

// TestEarlyFrames: Probe.EarlyFrames leave in the client's first 0-RTT
// packet, before anything the dialing goroutine does; after a Retry, which
// discards every 0-RTT packet before it (RFC 9000 §17.2.5), they leave
// again in a 0-RTT packet to the connection ID the Retry gave.
func TestEarlyFrames(t *testing.T) {
	for _, retry := range []bool{false, true} {
		t.Run(fmt.Sprintf("retry=%v", retry), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newMemNet(10 * time.Millisecond)
				scfg := testServerConfig(t, "hq-interop")
				scfg.Allow0RTT = true
				scfg.RequireRetry = retry
				sep, cep, cache := zeroRTTSetup(t, n, scfg)
				defer sep.Close()
				defer cep.Close()

				var first0RTT *PacketInfo
				var dcids []string // of the 0-RTT packets that carry the PING
				ccfg := testClientConfig(t, "hq-interop")
				ccfg.TLSConfig.ClientSessionCache = cache
				ccfg.Allow0RTT = true
				ccfg.Probe = &Probe{EarlyFrames: []wire.Frame{&wire.PingFrame{}}, OnPacketSent: func(p PacketInfo) {
					if p.Type != wire.PacketType0RTT {
						return
					}
					if first0RTT == nil {
						p.Payload = bytes.Clone(p.Payload)
						first0RTT = &p
					}
					if len(p.Payload) > 0 && p.Payload[0] == 0x01 {
						dcids = append(dcids, string(p.DCID))
					}
				}}
				c, err := cep.DialEarly(t.Context(), "udp", testServerAddr, ccfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := fetch(t.Context(), c, 1000); err != nil {
					t.Fatal(err)
				}
				c.Close(0, "")
				if first0RTT == nil || len(first0RTT.Payload) == 0 || first0RTT.Payload[0] != 0x01 {
					t.Fatalf("first 0-RTT packet %+v, want a PING first", first0RTT)
				}
				want := 1
				if retry {
					want = 2
				}
				if len(dcids) != want || (retry && dcids[0] == dcids[1]) {
					t.Errorf("PING in %d 0-RTT packets (DCIDs %x), want %d to distinct connection IDs", len(dcids), dcids, want)
				}
			})
		})
	}
}
