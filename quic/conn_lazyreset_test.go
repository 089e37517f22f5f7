package quic

import (
	"io"
	"testing"
	"testing/synctest"
	"time"
)

// TestLazyResetReply runs request-response exchanges in which the server
// answers, closes its side and stops the client's (STOP_SENDING), as the
// RPC's QUIC transport does. The client's RESET_STREAM in reply (RFC 9000
// §3.5) rides with its next request instead of costing a datagram per
// exchange, and still reaches the server: every stream ends on both sides.
//
// A connection whose Policy says ResetReplyAtOnce (every Probe, and here
// a Hooks built on NoHooks that asks for it) replies at once: two
// datagrams per exchange.
func TestLazyResetReply(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hooks  Hooks
		atOnce bool
	}{{"no hooks", nil, false}, {"NoHooks", NoHooks{}, false}, {"Probe", &Probe{}, true}, {"policy", atOnceHooks{}, true}} {
		t.Run(tc.name, func(t *testing.T) { testLazyResetReply(t, tc.hooks, tc.atOnce) })
	}
}

// atOnceHooks asks for immediate replies through its Policy alone.
type atOnceHooks struct{ NoHooks }

func (atOnceHooks) Policy() Policy { return Policy{ResetReplyAtOnce: true} }

func testLazyResetReply(t *testing.T, hooks Hooks, atOnce bool) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		sep, err := NewEndpoint(n.listen(testServerAddr), testServerConfig(t, "hq-interop"))
		if err != nil {
			t.Fatal(err)
		}
		defer sep.Close()
		cep, _ := NewEndpoint(n.listen(testClientAddr), nil)
		defer cep.Close()
		resets := make(chan error, 100)
		go func() {
			sc, err := sep.Accept(t.Context())
			if err != nil {
				return
			}
			for {
				s, err := sc.AcceptStream(t.Context())
				if err != nil {
					return
				}
				go func() {
					req := make([]byte, 4)
					if _, err := io.ReadFull(s, req); err != nil {
						resets <- err
						return
					}
					s.Write([]byte("answer"))
					s.Close() // FIN, and STOP_SENDING: the client's side is open
					// The client's reset ends the read side.
					_, err := io.ReadAll(s)
					resets <- err
				}()
			}
		}()
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.Probe = hooks
		c, err := cep.Dial(t.Context(), "udp", testServerAddr, ccfg)
		if err != nil {
			t.Fatal(err)
		}
		exchange := func() {
			s, err := c.OpenStream(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			s.Write([]byte("ask!"))
			if got, err := io.ReadAll(s); err != nil || string(got) != "answer" {
				t.Fatalf("answer %q, %v", got, err)
			}
			s.Close()
		}
		exchange()
		synctest.Wait()
		time.Sleep(100 * time.Millisecond) // fake time: the first exchange's ACKs settle
		const k = 10
		// Each exchange ends with every goroutine blocked (fake time does
		// not move while synctest.Wait waits), so a reset sent at once has
		// left before the next request is written, never in its datagram.
		var sent uint64
		for i := range k {
			before := c.Stats().DatagramsSent
			exchange()
			synctest.Wait()
			d := c.Stats().DatagramsSent - before
			sent += d
			if atOnce && d < 2 {
				t.Errorf("exchange %d: the client sent %d datagram(s), want the request and the reset at once (two)", i, d)
			}
		}
		time.Sleep(100 * time.Millisecond) // past max_ack_delay: the last reset goes with the ACK
		synctest.Wait()
		// One datagram per exchange, the request with the previous reset;
		// an immediate ACK now and then when the server's answer and FIN
		// leave in two packets (two stream calls).
		if !atOnce && sent > k+k/2 {
			t.Errorf("%d exchanges: the client sent %d datagrams, want about one per exchange (at most %d)", k, sent, k+k/2)
		}
		for i := range k + 1 {
			select {
			case err := <-resets:
				if err == nil {
					t.Errorf("stream %d: read side ended without the client's reset", i)
				}
			default:
				t.Fatalf("stream %d: the server's read side has not ended (no RESET_STREAM)", i)
			}
		}
	})
}
