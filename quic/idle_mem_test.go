package quic

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"
)

// TestIdleConnMemory opens QUIVER_IDLE_CONNS connections (skipped when
// unset) from one client endpoint to a server endpoint in this process and
// logs the heap they hold per connection, client and server ends together
// (runtime.MemStats.HeapInuse after a GC, before and after). The quic-go
// figure comes from the same measurement in peers/quicgo: quicgo-peer
// -idleconns N.
func TestIdleConnMemory(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("QUIVER_IDLE_CONNS"))
	if err != nil || n <= 0 {
		t.Skip("set QUIVER_IDLE_CONNS=N to measure N idle connections")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	scfg := testServerConfig(t, "hq-interop")
	scfg.MaxIdleTimeout = 5 * time.Minute
	sep, err := Listen("udp", "127.0.0.1:0", scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sep.Close()
	// As the quic-go side: no certificate verification, so that neither
	// keeps verified chains the other does not.
	ccfg := &Config{TLSConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"hq-interop"}}}
	ccfg.MaxIdleTimeout = 5 * time.Minute
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	cep, err := NewEndpoint(pc, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cep.Close()
	var server []*Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for len(server) < n {
			c, err := sep.Accept(ctx)
			if err != nil {
				return
			}
			server = append(server, c)
		}
	}()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	h0 := heap()
	client := make([]*Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := cep.Dial(ctx, "udp", sep.Addr().String(), ccfg)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		client = append(client, c)
	}
	<-accepted
	// Measure once every handshake is confirmed (HANDSHAKE_DONE in;
	// ConnectionInfo.MaxDatagramSize is 0 until then), not after a guess.
	for _, c := range client {
		for c.ConnectionInfo().MaxDatagramSize == 0 {
			select {
			case <-c.Done():
				t.Fatal("a connection ended before its handshake was confirmed")
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(time.Millisecond):
			}
		}
	}
	h1 := heap()
	t.Logf("quiver idle connections: %d, heap in use %d B per connection (client and server ends)", len(client), (h1-h0)/uint64(n))
	if path := os.Getenv("QUIVER_IDLE_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		pprof.WriteHeapProfile(f)
		f.Close()
	}
	runtime.KeepAlive(server)
}
