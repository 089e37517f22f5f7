package quic

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestLoopbackThroughput transfers QUIVER_BENCH_MB megabytes (default 100)
// from a Quiver server to a Quiver client over loopback and reports the
// goodput. It is skipped in -short mode.
func TestLoopbackThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("long transfer")
	}
	mb := 100
	if v, err := strconv.Atoi(os.Getenv("QUIVER_BENCH_MB")); err == nil {
		mb = v
	}
	size := mb << 20
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ep, err := Listen("udp", "127.0.0.1:0", testServerConfig(t, "hq-interop"))
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	chunk := pattern(1 << 20)
	go func() {
		c, err := ep.Accept(ctx)
		if err != nil {
			return
		}
		s, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		io.ReadAll(s)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := s.Write(chunk); err != nil {
				return
			}
		}
		s.CloseWrite()
	}()
	c, err := Dial(ctx, "udp", ep.Addr().String(), testClientConfig(t, "hq-interop"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(0, "")
	s, _ := c.OpenStream(ctx)
	fmt.Fprintf(s, "GET /\r\n")
	s.CloseWrite()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	start := time.Now()
	n, err := io.Copy(io.Discard, s)
	el := time.Since(start)
	runtime.ReadMemStats(&ms1)
	t.Logf("%d allocations (%.2f per KB), %d MB allocated", ms1.Mallocs-ms0.Mallocs, float64(ms1.Mallocs-ms0.Mallocs)/float64(size>>10), (ms1.TotalAlloc-ms0.TotalAlloc)>>20)
	if err != nil || n != int64(size) {
		t.Fatalf("got %d bytes, err %v", n, err)
	}
	t.Logf("%d MB in %v: %.0f Mbit/s", mb, el, float64(size)*8/el.Seconds()/1e6)
}
