package quic

import (
	"bytes"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// pathFrameSizes returns a Probe hook that records the size of each
// received datagram that carries a frame matching want.
func pathFrameSizes(mu *sync.Mutex, sizes *[]int, want func(wire.Frame) bool) func(PacketInfo) {
	return func(p PacketInfo) {
		var parser wire.Parser
		b := p.Payload
		for len(b) > 0 {
			f, n, err := parser.Parse(b)
			if err != nil {
				return
			}
			b = b[n:]
			if want(f) {
				mu.Lock()
				*sizes = append(*sizes, p.DatagramSize)
				mu.Unlock()
				return
			}
		}
	}
}

// TestPathFramesPadded rebinds the client's address: the server's
// PATH_CHALLENGE and the client's PATH_RESPONSE travel in datagrams of at
// least 1200 bytes (RFC 9000 §8.2.1: "An endpoint MUST expand datagrams
// that contain a PATH_CHALLENGE frame to at least the smallest allowed
// maximum datagram size of 1200 bytes"; §8.2.2, the same for
// PATH_RESPONSE).
func TestPathFramesPadded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		var mu sync.Mutex
		var challenges, responses []int
		ccfg := testClientConfig(t, "hq-interop")
		ccfg.Probe = &Probe{OnPacketReceived: pathFrameSizes(&mu, &challenges, func(f wire.Frame) bool {
			_, ok := f.(*wire.PathChallengeFrame)
			return ok
		})}
		scfg := testServerConfig(t, "hq-interop")
		scfg.Probe = &Probe{OnPacketReceived: pathFrameSizes(&mu, &responses, func(f wire.Frame) bool {
			_, ok := f.(*wire.PathResponseFrame)
			return ok
		})}
		sep, cep, c, err := pair(t, n, scfg, ccfg)
		defer sep.Close()
		defer cep.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := fetch(t.Context(), c, 1000); err != nil {
			t.Fatal(err)
		}
		n.rebind(testClientAddr, "10.0.0.3:6000")
		// The first datagram from the new address is a full-size one, so
		// that the anti-amplification limit of the unvalidated path (three
		// times what it received, RFC 9000 §8.1) allows 1200 bytes; after
		// it, little data in flight: the path frames would travel alone.
		s, err := c.OpenStream(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		s.Write(append([]byte("GET /10\r\n"), bytes.Repeat([]byte{' '}, 3000)...))
		s.CloseWrite()
		if _, err := io.ReadAll(s); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		// The client moved to a new IP address: validating it reset the
		// server's congestion controller and RTT estimator (RFC 9000 §9.4).
		sc := serverConn(sep)
		var resets int
		sc.run(t.Context(), func(time.Time) { resets = sc.cids.recoveryResets })
		if resets != 1 {
			t.Errorf("server reset recovery %d times after the client moved to a new IP, want 1", resets)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(challenges) == 0 || len(responses) == 0 {
			t.Fatalf("saw %d PATH_CHALLENGE and %d PATH_RESPONSE datagrams, want both", len(challenges), len(responses))
		}
		for _, s := range challenges {
			if s < minInitialDatagramSize {
				t.Errorf("PATH_CHALLENGE in a %d-byte datagram", s)
			}
		}
		for _, s := range responses {
			if s < minInitialDatagramSize {
				t.Errorf("PATH_RESPONSE in a %d-byte datagram", s)
			}
		}
		c.Close(0, "")
	})
}
