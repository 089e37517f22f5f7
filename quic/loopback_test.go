package quic

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
