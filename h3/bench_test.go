package h3

import (
	"context"
	"io"
	"net/http"
	"testing"
	"testing/fstest"
)

const benchSize = 10 << 20

// BenchmarkH3Download measures a 10 MB HTTP/3 download over the in-memory
// connection: the cost of h3 itself (framing, copies, QPACK), not of QUIC.
func BenchmarkH3Download(b *testing.B) {
	files := fstest.MapFS{"10m": {Data: randomBytes(benchSize, 1)}}
	client, server := newMemPair(ALPNH3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- (&Server{Handler: FileHandler(files)}).ServeConn(ctx, server) }()
	cc, err := NewClientConn(ctx, client, nil)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://quiver.test/10m", nil)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, onlyReader{resp.Body}, buf)
		resp.Body.Close()
		if err != nil || n != benchSize {
			b.Fatalf("got %d bytes, %v", n, err)
		}
	}
	b.StopTimer()
	cc.Close()
	<-done
}

// BenchmarkHQDownload is the same transfer with hq-interop.
func BenchmarkHQDownload(b *testing.B) {
	files := fstest.MapFS{"10m": {Data: randomBytes(benchSize, 1)}}
	client, server := newMemPair(ALPNHQInterop)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ServeHQ(ctx, server, files)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		if n, err := GetHQ(ctx, client, "/10m", io.Discard); err != nil || n != benchSize {
			b.Fatalf("got %d bytes, %v", n, err)
		}
	}
	b.StopTimer()
	client.Close(0, "")
}
