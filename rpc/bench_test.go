package rpc

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/quiver-quic/quiver/quic"
)

// BenchmarkUnary measures one unary call of 581 bytes (the echo of
// 'quiver bench rpc', protobuf codec) per transport at concurrency 1, 64 and
// 512, client and server in this process. Run with -benchmem: allocations
// and bytes per call count both ends and are steady even on a loaded
// machine, unlike the time; datagrams/op (both directions) too, for the
// QUIC transports.
//
//	go test ./rpc -run '^$' -bench Unary -benchmem
func BenchmarkUnary(b *testing.B) {
	const size = 581
	for _, k := range kits(b) {
		switch k.name {
		case "tcp", "quic", "http3":
		default:
			continue
		}
		for _, conc := range []int{1, 64, 512} {
			b.Run(fmt.Sprintf("%s/conc=%d", k.name, conc), func(b *testing.B) {
				srv := NewServer()
				Register(srv, "Bench.Echo", func(ctx context.Context, r *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
					return r, nil
				})
				l := k.listen(b, "")
				served := make(chan error, 1)
				go func() { served <- srv.Serve(l) }()
				tr := k.dial(l.Addr())
				c := NewClient(tr, WithCodec(Proto))
				// datagrams counts both directions at the client of the
				// QUIC transports.
				datagrams := func() uint64 {
					var qc *quic.Conn
					switch t := tr.(type) {
					case *quicTransport:
						qc = t.conn
					case *httpTransport:
						if rt, ok := t.rt.(*h3RoundTripper); ok {
							qc = rt.qc
						}
					}
					if qc == nil {
						return 0
					}
					st := qc.Stats()
					return st.DatagramsSent + st.DatagramsReceived
				}
				defer func() {
					c.Close()
					srv.Close()
					<-served
				}()
				ctx := context.Background()
				payload := wrapperspb.Bytes(make([]byte, size))
				call := func() error {
					resp, err := Call[wrapperspb.BytesValue, wrapperspb.BytesValue](ctx, c, "Bench.Echo", payload)
					if err == nil && len(resp.Value) != size {
						err = fmt.Errorf("answer of %d bytes, want %d", len(resp.Value), size)
					}
					return err
				}
				// The handshake and the first call's set-up are not
				// measured.
				if err := call(); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				d0 := datagrams()
				b.ResetTimer()
				var next atomic.Int64
				var wg sync.WaitGroup
				var fail atomic.Value
				for range conc {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							if err := call(); err != nil {
								fail.CompareAndSwap(nil, err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				if d := datagrams(); d > 0 {
					b.ReportMetric(float64(d-d0)/float64(b.N), "datagrams/op")
				}
				if err, _ := fail.Load().(error); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
