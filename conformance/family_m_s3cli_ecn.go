package conformance

import (
	"context"
	"fmt"
	"sync"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family M, ECN feedback (catalogue §4, cli-ecn): the tester's server,
// on its own UDP socket so that it can mark, sends every datagram ECT(0)
// and one in ten CE during a 1 MiB download.

var reqCliECNFeedback = rfc9000("13.4.1", Must, "Even if an endpoint does not set an ECT field in packets it sends, the endpoint MUST provide feedback about ECN markings it receives, if these are accessible.")

func init() { registerClientECN() }

// ecnFeedback is the largest ECN counts the client reported in the
// application space.
type ecnFeedback struct {
	frames          int
	ect0, ect1, ce  uint64
	sentApp         int
	markedCE, total int
}

// judgeECN maps the client's feedback to a verdict: nothing reported is
// unsupported; counts without any CE although CE marks went out, or more
// counts than packets sent, fail.
func judgeECN(f ecnFeedback) (Verdict, string) {
	switch {
	case f.frames == 0:
		return Unsupported, fmt.Sprintf("The client sent no ACK frame with ECN counts although all %d datagrams of the tester were marked (%d CE).", f.total, f.markedCE)
	case f.ect0+f.ect1+f.ce > uint64(f.sentApp):
		return Fail, fmt.Sprintf("The client's ECN counts (ECT(0) %d, ECT(1) %d, CE %d) add up to more than the %d 1-RTT packets the tester sent.", f.ect0, f.ect1, f.ce, f.sentApp)
	case f.ce == 0 && f.markedCE >= 5:
		return Fail, fmt.Sprintf("The client reported ECT(0) %d but CE 0, although %d of the tester's datagrams were marked CE: the counts leave out the CE marks.", f.ect0, f.markedCE)
	case f.ect0 == 0:
		return Fail, fmt.Sprintf("The client reported CE %d but ECT(0) 0, although the tester marked its other datagrams ECT(0).", f.ce)
	}
	return Pass, fmt.Sprintf("The client's ECN counts (ECT(0) %d, CE %d over %d 1-RTT packets, %d datagrams marked CE) include the tester's marks.", f.ect0, f.ce, f.sentApp, f.markedCE)
}

func registerClientECN() {
	registerClient(&Scenario{
		ID: "cli-ecn", Title: "The client reports the ECN marks it receives", Requirements: []Requirement{reqCliECNFeedback},
		Run: func(ctx context.Context, t *T) {
			var mu sync.Mutex
			var f ecnFeedback
			clientMarked := 0
			probe := quic.Probe{
				ECN: func() uint8 {
					mu.Lock()
					defer mu.Unlock()
					f.total++
					if f.total%10 == 0 {
						f.markedCE++
						return 3
					}
					return 2
				},
				OnPacketReceived: func(pi quic.PacketInfo) {
					if pi.ECN != 0 {
						mu.Lock()
						clientMarked++
						mu.Unlock()
					}
				},
			}
			s := t.serve(ctx, serveOptions{Label: "ecn", Probe: probe, RealSocket: true})
			cr := t.launch(ctx, s, largeResource)
			cr.wait(ctx, clientRunWait)
			ps := t.rec.snapshot()
			var last *packet
			for _, p := range ps {
				if p.conn != s.trace.id || p.space != spaceApp {
					continue
				}
				if p.sent {
					f.sentApp++
					continue
				}
				for _, fr := range p.frames {
					if a, ok := fr.(*wire.AckFrame); ok && a.ECN {
						f.frames++
						f.ect0, f.ect1, f.ce = max(f.ect0, a.ECT0), max(f.ect1, a.ECT1), max(f.ce, a.ECNCE)
						last = p
					}
				}
			}
			mu.Lock()
			fb, own := f, clientMarked
			mu.Unlock()
			t.Fact("ecn.client-marked-packets", own)
			t.Fact("ecn.download", cr.downloaded(largeResource))
			if fb.sentApp == 0 {
				t.Inconclusive(fmt.Sprintf("The client never reached the 1-RTT download (%v).", cr.err))
			}
			v, sentence := judgeECN(fb)
			var evs []PacketEvent
			if last != nil {
				evs = events(Response, last)
			}
			switch v {
			case Unsupported:
				t.Unsupported(sentence)
			case Fail:
				t.Fail("feedback", reqCliECNFeedback, sentence, evs...)
			default:
				t.Pass("feedback", reqCliECNFeedback, sentence, evs...)
			}
		},
	})
}
