package quic_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/quic"
)

// TestInteropThroughput compares, side by side in one run, the goodput of
// a 100 MB hq-interop download: from a quic-go server by a Quiver client
// and by a quic-go client, and from a Quiver server by a quic-go client.
// Set QUIVER_BENCH=1 to run it. The quic-go client's figures include its
// process start and writing the file.
func TestInteropThroughput(t *testing.T) {
	if os.Getenv("QUIVER_BENCH") == "" {
		t.Skip("set QUIVER_BENCH=1")
	}
	const size = 100 << 20
	im := needPeer(t, "quic-go", "server")
	e := newInteropEnv(t, size)
	p, pool := e.peerServer(im, peers.ServerOpts{ALPN: peers.ALPNHQ, TestCase: "transfer"})
	mbps := func(d time.Duration) float64 { return float64(size) * 8 / d.Seconds() / 1e6 }
	for round := 0; round < 3; round++ {
		c, err := quic.Dial(e.ctx, "udp", p.Addr, &quic.Config{TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{peers.ALPNHQ}}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		s, _ := c.OpenStream(e.ctx)
		fmt.Fprintf(s, "GET /%s\r\n", fileName(size))
		s.CloseWrite()
		n, err := io.Copy(io.Discard, s)
		el := time.Since(start)
		c.Close(0, "")
		if err != nil || n != size {
			t.Fatalf("quiver: %d bytes, %v", n, err)
		}
		t.Logf("quiver client <- quic-go server: %.0f Mbit/s", mbps(el))
		res := e.peerClient(im, p.Addr, peers.ALPNHQ, "transfer", size)
		t.Logf("quic-go client <- quic-go server: %.0f Mbit/s", mbps(res.Duration))
	}
	ep := e.quiverServer(&quic.Config{}, peers.ALPNHQ)
	go serveHQ(e.ctx, ep, e.root)
	for round := 0; round < 3; round++ {
		res := e.peerClient(im, ep.Addr().String(), peers.ALPNHQ, "transfer", size)
		t.Logf("quic-go client <- quiver server: %.0f Mbit/s", mbps(res.Duration))
	}
}
