package conformance

import (
	"context"
	"fmt"
	"sync"

	"github.com/quiver-quic/quiver/quic/wire"
)

// clearQUICBits clears the QUIC bit of every Handshake and 1-RTT packet in
// the datagram d, in place, and reports how many it cleared.
func clearQUICBits(d []byte) int {
	n := 0
	for off := 0; off < len(d); {
		h, err := wire.ParseHeader(d[off:], 8)
		if err != nil {
			break
		}
		if h.Type == wire.PacketTypeHandshake || h.Type == wire.PacketType1RTT {
			d[off] &^= 0x40
			n++
		}
		off += h.PacketLen
	}
	return n
}

func registerClientGreaseBit() {
	registerClient(&Scenario{
		ID: "cli-grease-quic-bit", Title: "The client accepts packets with the QUIC bit cleared", Requirements: []Requirement{reqGreaseBitAccept},
		Run: func(ctx context.Context, t *T) {
			var mu sync.Mutex
			var s *testServer
			var greased bool
			cleared := 0
			// Once the client's transport parameters say it accepts them,
			// every Handshake and 1-RTT packet leaves with the bit at 0.
			out := func(d []byte) [][]byte {
				mu.Lock()
				defer mu.Unlock()
				if !greased {
					if tp := s.clientTP(); tp != nil && tp.GreaseQUICBit {
						greased = true
					}
				}
				if greased {
					cleared += clearQUICBits(d)
				}
				return [][]byte{d}
			}
			s = t.serve(ctx, serveOptions{Label: "quic bit cleared", Out: out})
			cr := t.launch(ctx, s, smallResource)
			cr.wait(ctx, clientRunWait)
			tp := s.clientTP()
			if tp == nil {
				t.Inconclusive("The client's transport parameters could not be read from its ClientHello.")
			}
			if !tp.GreaseQUICBit {
				t.Unsupported("The client does not advertise grease_quic_bit.")
			}
			own := 0
			for _, d := range s.rawIn() {
				if d.size > 0 && d.b[0]&0x40 == 0 {
					own++
				}
			}
			t.Fact("grease.client-cleared-datagrams", own)
			mu.Lock()
			n := cleared
			mu.Unlock()
			t.Fact("grease.server-cleared-packets", n)
			if cr.downloaded(smallResource) {
				t.Pass("accept", reqGreaseBitAccept, fmt.Sprintf("The client completed the download although %d Handshake and 1-RTT packets from the tester had the QUIC bit cleared.", n))
				return
			}
			if _, _, ok := t.download(ctx, serveOptions{Label: "control"}); ok {
				t.Fail("accept", reqGreaseBitAccept, fmt.Sprintf("The client advertised grease_quic_bit but did not complete the download when the tester cleared the QUIC bit (%d packets), while a control run did (%v).", n, cr.err))
				return
			}
			t.Inconclusive("The client did not complete the download, with or without the QUIC bit cleared.")
		},
	})
}

func init() {
	registerClientGreaseBit()
}
