package netem

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic"
)

// These tests show how the engine runs over the in-process Network and
// through the Relay: any net.PacketConn goes to quic.NewEndpoint.

var (
	certOnce sync.Once
	cert     tls.Certificate
	certPool *x509.CertPool
)

func engineConfigs(t testing.TB) (server, client *quic.Config) {
	certOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1),
			Subject:      pkix.Name{CommonName: "localhost"},
			// synctest bubbles start in 2000.
			NotBefore:             time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC),
			NotAfter:              time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
			DNSNames:              []string{"localhost"},
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		leaf, _ := x509.ParseCertificate(der)
		cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
		certPool = x509.NewCertPool()
		certPool.AddCert(leaf)
	})
	return &quic.Config{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"hq-interop"}}},
		&quic.Config{TLSConfig: &tls.Config{RootCAs: certPool, ServerName: "localhost", NextProtos: []string{"hq-interop"}}}
}

// serveEcho echoes every stream of every connection until ctx ends.
func serveEcho(ctx context.Context, ep *quic.Endpoint) {
	for {
		c, err := ep.Accept(ctx)
		if err != nil {
			return
		}
		go func() {
			for {
				s, err := c.AcceptStream(ctx)
				if err != nil {
					return
				}
				go func() {
					io.Copy(s, s)
					s.CloseWrite()
				}()
			}
		}()
	}
}

// echoStream sends size bytes on a new stream and checks they come back.
func echoStream(t *testing.T, ctx context.Context, c *quic.Conn, size int) {
	t.Helper()
	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i * 7)
	}
	go func() {
		s.Write(want)
		s.CloseWrite()
	}()
	got, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("echo of %d bytes: got %d bytes, err %v", size, len(got), err)
	}
}

func TestEngineOverNetwork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		scfg, ccfg := engineConfigs(t)
		n := newNetwork(t, NetworkConfig{Seed: 1, Link: Link{Delay: 10 * time.Millisecond}})
		server := netip.MustParseAddrPort("10.0.0.1:443")
		sconn := listen(t, n, server)
		cconn := listen(t, n, netip.MustParseAddrPort("10.0.0.2:0"))
		// Lossy, rate-limited download direction.
		n.SetLink(server, cconn.AddrPort(), Link{Rate: 10e6, Delay: 10 * time.Millisecond, QueuePackets: 25, Loss: 0.02, MaxRun: 3})

		sep, err := quic.NewEndpoint(sconn, scfg)
		if err != nil {
			t.Fatal(err)
		}
		defer sep.Close()
		cep, err := quic.NewEndpoint(cconn, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cep.Close()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go serveEcho(ctx, sep)

		start := time.Now()
		c, err := cep.Dial(ctx, "udp", server.String(), ccfg)
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 20*time.Millisecond || el > 200*time.Millisecond {
			t.Errorf("handshake took %v on a 20 ms round trip", el)
		}
		echoStream(t, ctx, c, 200_000)
		c.Close(0, "")
		if s := n.Stats(server, cconn.AddrPort()); s.Delivered == 0 {
			t.Errorf("no traffic crossed the download link: %+v", s)
		}
	})
}

func TestEngineThroughRelay(t *testing.T) {
	scfg, ccfg := engineConfigs(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sep, err := quic.Listen("udp", "127.0.0.1:0", scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sep.Close()
	go serveEcho(ctx, sep)

	l := Link{Rate: 100e6, Delay: 2 * time.Millisecond, Loss: 0.02, MaxRun: 3}
	r := startRelay(t, RelayConfig{Server: sep.Addr().(*net.UDPAddr).AddrPort(), ToServer: l, ToClient: l, Seed: 5})
	c, err := quic.Dial(ctx, "udp", r.Addr().String(), ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(0, "")
	echoStream(t, ctx, c, 500_000)
	if toServer, toClient := r.Stats(); toServer.Delivered == 0 || toClient.Delivered == 0 {
		t.Errorf("relay stats %+v %+v", toServer, toClient)
	}
}
