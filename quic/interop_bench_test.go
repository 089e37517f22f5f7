package quic_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/quic"
)

// TestInteropThroughput compares, side by side in one run, the goodput of
// a 100 MB hq-interop download from a quic-go server by a Quiver client
// and by a quic-go client. Set QUIVER_BENCH=1 to run it.
func TestInteropThroughput(t *testing.T) {
	if os.Getenv("QUIVER_BENCH") == "" {
		t.Skip("set QUIVER_BENCH=1")
	}
	const size = 100 << 20
	srvImpl := needPeer(t, "quic-go", "server")
	dir := t.TempDir()
	root := filepath.Join(dir, "www")
	os.Mkdir(root, 0o755)
	os.WriteFile(filepath.Join(root, "big"), content(size), 0o644)
	certFile, keyFile, _ := peers.WriteSelfSignedCert(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	p, err := srvImpl.StartServer(ctx, peers.ServerOpts{CertFile: certFile, KeyFile: keyFile, Root: root, ALPN: peers.ALPNHQ, TestCase: "transfer"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	for round := 0; round < 3; round++ {
		c, err := quic.Dial(ctx, "udp", p.Addr, &quic.Config{TLSConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{peers.ALPNHQ}}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		s, _ := c.OpenStream(ctx)
		fmt.Fprintf(s, "GET /big\r\n")
		s.CloseWrite()
		n, err := io.Copy(io.Discard, s)
		el := time.Since(start)
		c.Close(0, "")
		if err != nil || n != size {
			t.Fatalf("quiver: %d bytes, %v", n, err)
		}
		t.Logf("quiver client <- quic-go server: %.0f Mbit/s", float64(size)*8/el.Seconds()/1e6)
		out := t.TempDir()
		res, err := srvImpl.RunClient(ctx, peers.ClientOpts{URLs: []string{"https://" + p.Addr + "/big"}, OutDir: out, ALPN: peers.ALPNHQ, TestCase: "transfer"})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("quic-go client <- quic-go server: %.0f Mbit/s (process time incl. start)", float64(size)*8/res.Duration.Seconds()/1e6)
	}
	cert, _, _ := peers.SelfSigned()
	ep, err := quic.Listen("udp", "127.0.0.1:0", &quic.Config{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{peers.ALPNHQ}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	go serveHQ(ctx, ep, root)
	for round := 0; round < 3; round++ {
		out := t.TempDir()
		res, err := srvImpl.RunClient(ctx, peers.ClientOpts{URLs: []string{fmt.Sprintf("https://%s/big", ep.Addr())}, OutDir: out, ALPN: peers.ALPNHQ, TestCase: "transfer"})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("quic-go client <- quiver server: %.0f Mbit/s (process time incl. start)", float64(size)*8/res.Duration.Seconds()/1e6)
	}
}
