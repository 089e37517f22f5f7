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
