package quic_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

var interopSizes = []int{1 << 10, 100 << 10, 1 << 20, 10 << 20}

// needPeer finds a peer implementation, or skips (fails when
// QUIVER_REQUIRE_PEERS=1) if it is not installed.
func needPeer(t *testing.T, name, role string) peers.Impl {
	t.Helper()
	im, err := peers.Find(name)
	if err == nil {
		_, err = im.Binary(role)
	}
	if err != nil {
		if os.Getenv("QUIVER_REQUIRE_PEERS") == "1" {
			t.Fatalf("peer %s %s: %v", name, role, err)
		}
		t.Skipf("peer %s %s not available (%v); run %s", name, role, err, peers.InstallCommand)
	}
	return im
}

func writeFiles(t *testing.T, dir string) {
	for _, n := range interopSizes {
		if err := os.WriteFile(filepath.Join(dir, fileName(n)), content(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func content(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131 + i>>10)
	}
	return b
}

// hqGet fetches path over hq-interop on a new stream.
func hqGet(ctx context.Context, c *quic.Conn, path string) ([]byte, error) {
	s, err := c.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(s, "GET %s\r\n", path); err != nil {
		return nil, err
	}
	s.CloseWrite()
	return io.ReadAll(s)
}

func TestInteropQuiverClient(t *testing.T) {
	for _, name := range []string{"quic-go", "go-x-net"} {
		t.Run(name, func(t *testing.T) {
			im := needPeer(t, name, "server")
			dir := t.TempDir()
			root := filepath.Join(dir, "www")
			os.Mkdir(root, 0o755)
			writeFiles(t, root)
			certFile, keyFile, err := peers.WriteSelfSignedCert(dir)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			p, err := im.StartServer(ctx, peers.ServerOpts{CertFile: certFile, KeyFile: keyFile, Root: root, ALPN: peers.ALPNHQ, TestCase: "transfer"})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			pem, _ := os.ReadFile(certFile)
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			cfg := &quic.Config{TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{peers.ALPNHQ}}}
			c, err := quic.Dial(ctx, "udp", p.Addr, cfg)
			if err != nil {
				t.Fatalf("dial %s: %v\n%s", p.Addr, err, p.Output())
			}
			defer c.Close(0, "")
			for _, n := range interopSizes {
				start := time.Now()
				got, err := hqGet(ctx, c, "/"+fileName(n))
				if err != nil {
					t.Fatalf("GET /%d: %v\n%s", n, err, p.Output())
				}
				if !bytes.Equal(got, content(n)) {
					t.Fatalf("GET /%d: got %d bytes, not the file", n, len(got))
				}
				t.Logf("GET /%d: %v", n, time.Since(start))
			}
		})
	}
}

// serveHQ serves files from root over hq-interop.
func serveHQ(ctx context.Context, ep *quic.Endpoint, root string) {
	for {
		c, err := ep.Accept(ctx)
		if err != nil {
			return
		}
		go serveConnHQ(ctx, c, root)
	}
}

// serveConnHQ answers hq-interop requests on one connection.
func serveConnHQ(ctx context.Context, c *quic.Conn, root string) {
	for {
		s, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		go func() {
			defer s.Close()
			req, err := io.ReadAll(io.LimitReader(s, 4096))
			if err != nil && !errors.Is(err, io.EOF) {
				s.Reset(1)
				return
			}
			line, _, _ := strings.Cut(string(req), "\n")
			path := strings.TrimSpace(strings.TrimPrefix(line, "GET "))
			b, err := os.ReadFile(filepath.Join(root, filepath.Clean("/"+path)))
			if err != nil {
				s.Reset(2)
				return
			}
			s.Write(b)
		}()
	}
}

func TestInteropQuiverServer(t *testing.T) {
	for _, name := range []string{"quic-go", "go-x-net"} {
		t.Run(name, func(t *testing.T) {
			im := needPeer(t, name, "client")
			dir := t.TempDir()
			root := filepath.Join(dir, "www")
			os.Mkdir(root, 0o755)
			writeFiles(t, root)
			cert, _, err := peers.SelfSigned()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{peers.ALPNHQ}}})
			if err != nil {
				t.Fatal(err)
			}
			defer ep.Close()
			go serveHQ(ctx, ep, root)
			var urls []string
			for _, n := range interopSizes {
				urls = append(urls, fmt.Sprintf("https://%s/%s", ep.Addr(), fileName(n)))
			}
			out := filepath.Join(dir, "out")
			os.Mkdir(out, 0o755)
			res, err := im.RunClient(ctx, peers.ClientOpts{URLs: urls, OutDir: out, ALPN: peers.ALPNHQ, TestCase: "transfer"})
			if err != nil {
				out := ""
				if res != nil {
					out = res.Output
				}
				t.Fatalf("%s client: %v\n%s", name, err, out)
			}
			for _, n := range interopSizes {
				got, err := os.ReadFile(filepath.Join(out, fileName(n)))
				if err != nil || !bytes.Equal(got, content(n)) {
					t.Fatalf("file %d: %d bytes, err %v", n, len(got), err)
				}
			}
			t.Logf("%s client fetched %d files in %v", name, len(urls), res.Duration)
		})
	}
}

// h3Conn adapts a *quic.Conn to the h3 package's connection interface.
type h3Conn struct{ c *quic.Conn }

func (a h3Conn) OpenStream(ctx context.Context) (h3.Stream, error) {
	s, err := a.c.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (a h3Conn) OpenUniStream(ctx context.Context) (h3.Stream, error) {
	s, err := a.c.OpenUniStream(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (a h3Conn) AcceptStream(ctx context.Context) (h3.Stream, error) {
	s, err := a.c.AcceptStream(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (a h3Conn) AcceptUniStream(ctx context.Context) (h3.Stream, error) {
	s, err := a.c.AcceptUniStream(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (a h3Conn) Close(code uint64, reason string) error { return a.c.Close(code, reason) }
func (a h3Conn) ALPN() string                           { return a.c.ALPN() }

func TestInteropQuiverClientH3(t *testing.T) {
	for _, name := range []string{"ngtcp2", "quic-go"} {
		t.Run(name, func(t *testing.T) {
			im := needPeer(t, name, "server")
			dir := t.TempDir()
			root := filepath.Join(dir, "www")
			os.Mkdir(root, 0o755)
			writeFiles(t, root)
			certFile, keyFile, err := peers.WriteSelfSignedCert(dir)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			p, err := im.StartServer(ctx, peers.ServerOpts{CertFile: certFile, KeyFile: keyFile, Root: root, ALPN: h3.ALPNH3, TestCase: "http3"})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			cfg := &quic.Config{TLSConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{h3.ALPNH3}}}
			c, err := quic.Dial(ctx, "udp", p.Addr, cfg)
			if err != nil {
				t.Fatalf("dial %s: %v\n%s", p.Addr, err, p.Output())
			}
			defer c.Close(0, "")
			cc, err := h3.NewClientConn(ctx, h3Conn{c}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			for _, n := range interopSizes {
				start := time.Now()
				req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("https://%s/%s", p.Addr, fileName(n)), nil)
				resp, err := cc.RoundTrip(req)
				if err != nil {
					t.Fatalf("GET /%d: %v\n%s", n, err, p.Output())
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || !bytes.Equal(got, content(n)) {
					t.Fatalf("GET /%d: status %d, %d bytes, err %v", n, resp.StatusCode, len(got), err)
				}
				t.Logf("GET /%d: %v", n, time.Since(start))
			}
		})
	}
}

func TestInteropQuiverServerH3(t *testing.T) {
	for _, name := range []string{"ngtcp2", "quic-go"} {
		t.Run(name, func(t *testing.T) {
			im := needPeer(t, name, "client")
			dir := t.TempDir()
			root := filepath.Join(dir, "www")
			os.Mkdir(root, 0o755)
			writeFiles(t, root)
			cert, _, err := peers.SelfSigned()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{h3.ALPNH3}}})
			if err != nil {
				t.Fatal(err)
			}
			defer ep.Close()
			srv := &h3.Server{Handler: h3.FileHandler(os.DirFS(root))}
			go func() {
				for {
					c, err := ep.Accept(ctx)
					if err != nil {
						return
					}
					go srv.ServeConn(ctx, h3Conn{c})
				}
			}()
			var urls []string
			for _, n := range interopSizes {
				urls = append(urls, fmt.Sprintf("https://%s/%s", ep.Addr(), fileName(n)))
			}
			out := filepath.Join(dir, "out")
			os.Mkdir(out, 0o755)
			res, err := im.RunClient(ctx, peers.ClientOpts{URLs: urls, OutDir: out, ALPN: h3.ALPNH3, TestCase: "http3"})
			if err != nil {
				o := ""
				if res != nil {
					o = res.Output
				}
				t.Fatalf("%s client: %v\n%s", name, err, o)
			}
			for _, n := range interopSizes {
				got, err := os.ReadFile(filepath.Join(out, fileName(n)))
				if err != nil || !bytes.Equal(got, content(n)) {
					t.Fatalf("file %d: %d bytes, err %v", n, len(got), err)
				}
			}
			t.Logf("%s client fetched %d files in %v", name, len(urls), res.Duration)
		})
	}
}

// fileName is the name of the test file of n bytes. It is not a bare
// number: ngtcp2's server answers GET /N with N generated bytes.
func fileName(n int) string { return fmt.Sprintf("file-%d", n) }

// TestInteropHandshakeVariants covers Retry, Version Negotiation and QUIC
// v2 against real peers.
func TestInteropHandshakeVariants(t *testing.T) {
	type tc struct {
		name     string
		peer     string
		retry    bool
		versions []uint32
		tcase    string
	}
	for _, c := range []tc{
		{"retry/quic-go", "quic-go", true, nil, "retry"},
		{"retry/go-x-net", "go-x-net", true, nil, "retry"},
		{"vn-v2-to-v1/go-x-net", "go-x-net", false, []uint32{quic.Version2, quic.Version1}, "transfer"},
		{"v2/quic-go", "quic-go", false, []uint32{quic.Version2}, "v2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			im := needPeer(t, c.peer, "server")
			dir := t.TempDir()
			root := filepath.Join(dir, "www")
			os.Mkdir(root, 0o755)
			writeFiles(t, root)
			certFile, keyFile, err := peers.WriteSelfSignedCert(dir)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if !im.Supports("server", c.tcase) {
				t.Skipf("%s server does not support %s", c.peer, c.tcase)
			}
			p, err := im.StartServer(ctx, peers.ServerOpts{CertFile: certFile, KeyFile: keyFile, Root: root, ALPN: peers.ALPNHQ, TestCase: c.tcase, Retry: c.retry})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			var obs observer
			cfg := &quic.Config{
				TLSConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{peers.ALPNHQ}},
				Versions:  c.versions,
				Probe:     &quic.Probe{OnPacketReceived: obs.record},
			}
			conn, err := quic.Dial(ctx, "udp", p.Addr, cfg)
			if err != nil {
				t.Fatalf("dial: %v\n%s", err, p.Output())
			}
			defer conn.Close(0, "")
			n := interopSizes[1]
			got, err := hqGet(ctx, conn, "/"+fileName(n))
			if err != nil || !bytes.Equal(got, content(n)) {
				t.Fatalf("GET: %d bytes, err %v", len(got), err)
			}
			if c.retry && !conn.ConnectionInfo().Retried {
				t.Errorf("no Retry was processed")
			}
			if want := c.versions; len(want) == 1 && conn.ConnectionInfo().Version != want[0] {
				t.Errorf("version %#x, want %#x", conn.ConnectionInfo().Version, want[0])
			}
			t.Logf("version %#x, retried %v", conn.ConnectionInfo().Version, conn.ConnectionInfo().Retried)
		})
	}
}

type observer struct {
	mu    sync.Mutex
	types map[string]int
}

func (o *observer) record(p quic.PacketInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.types == nil {
		o.types = make(map[string]int)
	}
	o.types[p.Type.String()]++
}

// TestInteropRetryServer has quic-go and x/net clients connect to a
// Quiver server that requires Retry, and a quic-go client speak v2 to it.
func TestInteropRetryServer(t *testing.T) {
	for _, name := range []string{"quic-go", "go-x-net", "quic-go/v2"} {
		t.Run(name, func(t *testing.T) {
			tcase := "retry"
			if strings.HasSuffix(name, "/v2") {
				name, tcase = strings.TrimSuffix(name, "/v2"), "v2"
			}
			im := needPeer(t, name, "client")
			dir := t.TempDir()
			root := filepath.Join(dir, "www")
			os.Mkdir(root, 0o755)
			writeFiles(t, root)
			cert, _, err := peers.SelfSigned()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{RequireRetry: tcase == "retry", TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{peers.ALPNHQ}}})
			if err != nil {
				t.Fatal(err)
			}
			defer ep.Close()
			go serveHQ(ctx, ep, root)
			out := filepath.Join(dir, "out")
			os.Mkdir(out, 0o755)
			url := fmt.Sprintf("https://%s/%s", ep.Addr(), fileName(1<<20))
			res, err := im.RunClient(ctx, peers.ClientOpts{URLs: []string{url}, OutDir: out, ALPN: peers.ALPNHQ, TestCase: tcase})
			if err != nil {
				o := ""
				if res != nil {
					o = res.Output
				}
				t.Fatalf("%s client: %v\n%s", name, err, o)
			}
			got, _ := os.ReadFile(filepath.Join(out, fileName(1<<20)))
			if !bytes.Equal(got, content(1<<20)) {
				t.Fatalf("got %d bytes", len(got))
			}
		})
	}
}

// TestInterop0RTT resumes with 0-RTT against quic-go in both roles: a
// Quiver client gets a ticket from a quic-go server and sends its second
// request in 0-RTT; a quic-go client does the same to a Quiver server.
func TestInterop0RTT(t *testing.T) {
	t.Run("quiver-client", func(t *testing.T) {
		im := needPeer(t, "quic-go", "server")
		dir := t.TempDir()
		root := filepath.Join(dir, "www")
		os.Mkdir(root, 0o755)
		writeFiles(t, root)
		certFile, keyFile, err := peers.WriteSelfSignedCert(dir)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := im.StartServer(ctx, peers.ServerOpts{CertFile: certFile, KeyFile: keyFile, Root: root, ALPN: peers.ALPNHQ, TestCase: "zerortt"})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Stop()
		cache := tls.NewLRUClientSessionCache(4)
		var early int
		cfg := &quic.Config{
			TLSConfig: &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{peers.ALPNHQ}, ClientSessionCache: cache},
			Allow0RTT: true,
			Probe: &quic.Probe{OnPacketSent: func(pi quic.PacketInfo) {
				if pi.Type == wire.PacketType0RTT {
					early++
				}
			}},
		}
		n := interopSizes[0]
		for i := 0; i < 2; i++ {
			c, err := quic.DialEarly(ctx, "udp", p.Addr, cfg)
			if err != nil {
				t.Fatalf("dial %d: %v\n%s", i, err, p.Output())
			}
			got, err := hqGet(ctx, c, "/"+fileName(n))
			if err != nil || !bytes.Equal(got, content(n)) {
				t.Fatalf("connection %d: %d bytes, %v", i, len(got), err)
			}
			if i == 0 {
				time.Sleep(100 * time.Millisecond) // let the ticket arrive
			}
			info := c.ConnectionInfo()
			c.Close(0, "")
			if i == 1 && (!info.Resumed || !info.Used0RTT || early == 0) {
				t.Fatalf("second connection: %+v, %d 0-RTT packets", info, early)
			}
		}
	})
	t.Run("quic-go-client", func(t *testing.T) {
		im := needPeer(t, "quic-go", "client")
		dir := t.TempDir()
		root := filepath.Join(dir, "www")
		os.Mkdir(root, 0o755)
		writeFiles(t, root)
		cert, _, err := peers.SelfSigned()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{Allow0RTT: true, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{peers.ALPNHQ}}})
		if err != nil {
			t.Fatal(err)
		}
		defer ep.Close()
		var mu sync.Mutex
		var conns []*quic.Conn
		go func() {
			for {
				c, err := ep.Accept(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				go serveConnHQ(ctx, c, root)
			}
		}()
		var urls []string
		for _, n := range interopSizes[:2] {
			urls = append(urls, fmt.Sprintf("https://%s/%s", ep.Addr(), fileName(n)))
		}
		out := filepath.Join(dir, "out")
		os.Mkdir(out, 0o755)
		res, err := im.RunClient(ctx, peers.ClientOpts{URLs: urls, OutDir: out, ALPN: peers.ALPNHQ, TestCase: "zerortt"})
		if err != nil {
			o := ""
			if res != nil {
				o = res.Output
			}
			t.Fatalf("quic-go client: %v\n%s", err, o)
		}
		for _, n := range interopSizes[:2] {
			got, _ := os.ReadFile(filepath.Join(out, fileName(n)))
			if !bytes.Equal(got, content(n)) {
				t.Fatalf("file %d: %d bytes", n, len(got))
			}
		}
		ep.Close()
		used, resumed := 0, 0
		mu.Lock()
		for _, c := range conns {
			if c.ConnectionInfo().Used0RTT {
				used++
			}
			if c.ConnectionInfo().Resumed {
				resumed++
			}
		}
		mu.Unlock()
		if resumed == 0 {
			t.Errorf("none of %d connections resumed", len(conns))
		}
		if used == 0 {
			// On loopback the handshake can complete before the quic-go
			// client's goroutine writes its request: then it goes in 1-RTT.
			t.Logf("none of %d connections carried 0-RTT data this time", len(conns))
		}
	})
}
