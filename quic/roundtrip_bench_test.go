package quic

import (
	"context"
	"sync"
	"testing"
	"time"
)

// BenchmarkStreamRoundTrip opens one bidirectional stream per operation
// over loopback, sends a 100-byte request and reads a 100-byte answer:
// the per-packet send and receive paths with small packets, client and
// server in this process.
func BenchmarkStreamRoundTrip(b *testing.B) {
	var wg sync.WaitGroup
	defer wg.Wait() // last: after the endpoint closed and ctx is done
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ep, err := Listen("udp", "127.0.0.1:0", testServerConfig(b, "hq-interop"))
	if err != nil {
		b.Fatal(err)
	}
	defer ep.Close()
	wg.Go(func() { serveSized(ctx, ep) })
	c, err := Dial(ctx, "udp", ep.Addr().String(), testClientConfig(b, "hq-interop"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(0, "")
	b.ReportAllocs()
	for b.Loop() {
		if err := fetch(ctx, c, 100); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDatagramRoundTrip sends one 100-byte DATAGRAM frame (RFC 9221)
// per operation over loopback and waits for the server's echo. A datagram
// may be lost: after a second without the echo it is sent again.
func BenchmarkDatagramRoundTrip(b *testing.B) {
	var wg sync.WaitGroup
	defer wg.Wait() // last: after the endpoint closed and ctx is done
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scfg := testServerConfig(b, "hq-interop")
	scfg.MaxDatagramFrameSize = 1200
	ep, err := Listen("udp", "127.0.0.1:0", scfg)
	if err != nil {
		b.Fatal(err)
	}
	defer ep.Close()
	wg.Go(func() {
		sc, err := ep.Accept(ctx)
		if err != nil {
			return
		}
		for {
			d, err := sc.ReceiveDatagram(ctx)
			if err != nil {
				return
			}
			sc.SendDatagram(d)
		}
	})
	ccfg := testClientConfig(b, "hq-interop")
	ccfg.MaxDatagramFrameSize = 1200
	c, err := Dial(ctx, "udp", ep.Addr().String(), ccfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(0, "")
	msg := pattern(100)
	b.ReportAllocs()
	for b.Loop() {
		for {
			if err := c.SendDatagram(msg); err != nil {
				b.Fatal(err)
			}
			wctx, wcancel := context.WithTimeout(ctx, time.Second)
			_, err := c.ReceiveDatagram(wctx)
			wcancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				b.Fatal(err)
			}
		}
	}
}
