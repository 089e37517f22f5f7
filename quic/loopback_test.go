package quic

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// serveSink accepts connections and, on each bidi stream, reads a decimal
// size line and answers with that many bytes of pattern.
func serveSized(ctx context.Context, ep *Endpoint) {
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
					req, _ := io.ReadAll(s)
					var n int
					fmt.Sscanf(string(req), "GET /%d", &n)
					buf := pattern(n)
					s.Write(buf)
					s.CloseWrite()
				}()
			}
		}()
	}
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

func TestLoopbackTransfer(t *testing.T) {
	for _, size := range []int{1, 1000, 100 << 10, 10 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ep, err := Listen("udp", "127.0.0.1:0", testServerConfig(t, "hq-interop"))
			if err != nil {
				t.Fatal(err)
			}
			defer ep.Close()
			go serveSized(ctx, ep)
			c, err := Dial(ctx, "udp", ep.Addr().String(), testClientConfig(t, "hq-interop"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(0, "")
			s, err := c.OpenStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(s, "GET /%d\r\n", size)
			s.CloseWrite()
			start := time.Now()
			got, err := io.ReadAll(s)
			if err != nil {
				t.Fatal(err)
			}
			el := time.Since(start)
			if !bytes.Equal(got, pattern(size)) {
				t.Fatalf("got %d bytes, want %d (mismatch)", len(got), size)
			}
			t.Logf("%d bytes in %v (%.0f Mbit/s)", size, el, float64(size)*8/el.Seconds()/1e6)
		})
	}
}

// TestECNMarking runs over real loopback sockets: both ends mark their
// packets ECT(0), read the marks of the other's, and keep marking because
// the ACKs report the counts (RFC 9000 §13.4.2). With DisableECN nothing
// is marked.
func TestECNMarking(t *testing.T) {
	for _, disable := range []bool{false, true} {
		t.Run(fmt.Sprintf("disable=%v", disable), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var mu sync.Mutex
			marks := map[string]map[uint8]int{"server": {}, "client": {}}
			probe := func(who string) *Probe {
				return &Probe{OnPacketReceived: func(p PacketInfo) {
					mu.Lock()
					marks[who][p.ECN]++
					mu.Unlock()
				}}
			}
			scfg := testServerConfig(t, "hq-interop")
			scfg.Probe = probe("server")
			scfg.DisableECN = disable
			ep, err := Listen("udp", "127.0.0.1:0", scfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ep.Close()
			go serveSized(ctx, ep)
			ccfg := testClientConfig(t, "hq-interop")
			ccfg.Probe = probe("client")
			ccfg.DisableECN = disable
			c, err := Dial(ctx, "udp", ep.Addr().String(), ccfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := fetch(ctx, c, 500<<10); err != nil {
				t.Fatal(err)
			}
			c.Close(0, "")
			mu.Lock()
			defer mu.Unlock()
			t.Logf("ECN codepoints received: %v", marks)
			for who, m := range marks {
				if disable && m[2] > 0 || !disable && m[2] < m[0] {
					t.Errorf("%s received %v", who, m)
				}
			}
		})
	}
}

// TestDialReleasesSocket: a connection from the package-level Dial owns
// its UDP socket and closes it when it ends on its own (the peer's close,
// idle timeout), not only on Close; the port can then be bound again. A
// connection dialed from a shared Endpoint leaves the endpoint open.
func TestDialReleasesSocket(t *testing.T) {
	for _, how := range []string{"peer-close", "idle-timeout", "shared-endpoint"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			scfg := testServerConfig(t, "hq-interop")
			if how == "idle-timeout" {
				scfg.MaxIdleTimeout = 300 * time.Millisecond
			}
			ep, err := Listen("udp", "127.0.0.1:0", scfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ep.Close()
			go func() {
				for {
					sc, err := ep.Accept(ctx)
					if err != nil {
						return
					}
					if how != "idle-timeout" {
						sc.Close(0, "bye")
					}
				}
			}()
			var c *Conn
			var shared *Endpoint
			if how == "shared-endpoint" {
				if shared, err = Listen("udp", "127.0.0.1:0", testClientConfig(t, "hq-interop")); err != nil {
					t.Fatal(err)
				}
				defer shared.Close()
				c, err = shared.Dial(ctx, "udp", ep.Addr().String(), testClientConfig(t, "hq-interop"))
			} else {
				c, err = Dial(ctx, "udp4", ep.Addr().String(), testClientConfig(t, "hq-interop"))
			}
			if err != nil {
				t.Fatal(err)
			}
			local := c.LocalAddr().(*net.UDPAddr)
			select {
			case <-c.Done():
			case <-ctx.Done():
				t.Fatal("the connection did not end")
			}
			t.Logf("connection ended: %v", c.Err())
			if shared != nil {
				// The shared endpoint still works: another connection.
				c2, err := shared.Dial(ctx, "udp", ep.Addr().String(), testClientConfig(t, "hq-interop"))
				if err != nil {
					t.Fatalf("the shared endpoint no longer dials after one of its connections ended: %v", err)
				}
				c2.Close(0, "")
				return
			}
			pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero, Port: local.Port})
			if err != nil {
				t.Fatalf("the ended connection still holds its socket: %v", err)
			}
			pc.Close()
		})
	}
}
