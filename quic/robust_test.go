package quic

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// TestHandshakeSurvivesFlightLoss drops, one at a time, each of the first
// flights of the handshake — every datagram one side sends at one instant
// of the bubble's clock — and requires the handshake and a download to
// complete anyway: loss recovery (RFC 9002 §6.2.4 probes, and the client's
// anti-deadlock PTO of §6.2.2.1) must carry the handshake over any single
// lost flight.
func TestHandshakeSurvivesFlightLoss(t *testing.T) {
	for _, side := range []string{"client", "server"} {
		for flight := 1; flight <= 3; flight++ {
			t.Run(side+"-flight-"+string(rune('0'+flight)), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					from := netip.MustParseAddrPort(testClientAddr)
					if side == "server" {
						from = netip.MustParseAddrPort(testServerAddr)
					}
					var instants int
					var last time.Time
					dropped := 0
					n := newMemNet(10 * time.Millisecond)
					n.policy = func(_ int, src, _ netip.AddrPort, _ []byte) (bool, time.Duration) {
						if src != from {
							return false, 0
						}
						if now := time.Now(); !now.Equal(last) {
							last = now
							instants++
						}
						if instants == flight {
							dropped++
							return true, 0
						}
						return false, 0
					}
					sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), testClientConfig(t, "hq-interop"))
					defer sep.Close()
					defer cep.Close()
					if err != nil {
						t.Fatalf("handshake after losing the %s's flight %d: %v", side, flight, err)
					}
					if err := fetch(t.Context(), c, 20000); err != nil {
						t.Fatalf("download after losing the %s's flight %d: %v", side, flight, err)
					}
					if dropped == 0 {
						t.Fatalf("the %s sent fewer than %d flights: nothing was dropped", side, flight)
					}
					c.Close(0, "")
				})
			})
		}
	}
}

// TestTransferOverImpairedLink downloads byte-exact over a link with 5 %
// random loss in each direction, reordering, and a 20 ms delay with
// jitter, with a fixed seed so a failure replays.
func TestTransferOverImpairedLink(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run("seed-"+string(rune('0'+seed)), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 0x9e3779b9))
				lost, reordered, total := 0, 0, 0
				n := newMemNet(20 * time.Millisecond)
				n.policy = func(_ int, _, _ netip.AddrPort, _ []byte) (bool, time.Duration) {
					total++
					if rng.Float64() < 0.05 {
						lost++
						return true, 0
					}
					extra := time.Duration(rng.IntN(3000)) * time.Microsecond // jitter
					if rng.Float64() < 0.05 {
						reordered++
						extra += 15 * time.Millisecond // overtaken by later datagrams
					}
					return false, extra
				}
				sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), testClientConfig(t, "hq-interop"))
				defer sep.Close()
				defer cep.Close()
				if err != nil {
					t.Fatal(err)
				}
				for _, size := range []int{1000, 1 << 20, 3 << 20} {
					if err := fetch(t.Context(), c, size); err != nil {
						t.Fatalf("size %d: %v", size, err)
					}
				}
				c.Close(0, "")
				if lost == 0 || reordered == 0 {
					t.Fatalf("the link lost %d and reordered %d of %d datagrams: the impairment did not happen", lost, reordered, total)
				}
				t.Logf("%d datagrams, %d lost, %d reordered", total, lost, reordered)
			})
		})
	}
}

// FuzzEstablishedConnReceive sends arbitrary frame bytes in a correctly
// protected 1-RTT packet to an established server connection: whatever
// they are, the engine must neither crash nor wedge. Afterwards it either
// closed the connection with a CONNECTION_CLOSE or still acknowledges a
// PING.
func FuzzEstablishedConnReceive(f *testing.F) {
	seeds := [][]byte{
		{0x01},                         // PING
		{0x08, 0x00, 0x41, 0x41},       // STREAM 0 without length
		{0x0a, 0x04, 0x02, 'h', 'i'},   // STREAM 4 with length
		{0x02, 0x05, 0x00, 0x00, 0x05}, // ACK of an unsent packet
		{0x06, 0x00, 0x04, 0x01, 0x02, 0x03, 0x04},
		{0x1c, 0x0a, 0x00, 0x00},             // CONNECTION_CLOSE
		{0x18, 0x01, 0x00, 0x08, 1, 2, 3, 4}, // truncated NEW_CONNECTION_ID
		{0xaf, 0x00, 0x0a, 0x40, 0x19, 0x01}, // ACK_FREQUENCY
		{0x30, 0x61, 0x62},                   // DATAGRAM without support
		{0x1e},                               // HANDSHAKE_DONE from a client
		{0x13, 0x7f, 0xff, 0xff, 0xff},       // MAX_STREAMS uni
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, frames []byte) {
		if len(frames) == 0 || len(frames) > 1100 {
			return
		}
		synctest.Test(t, func(t *testing.T) {
			p, ep := startPeerTest(t, testServerConfig(t, "hq-interop"))
			sc := serverConn(ep)
			p.writeFrames(appSpace, &wire.RawFrame{Bytes: frames})
			p.writeFrames(appSpace, &wire.PingFrame{})
			ping := p.pn[appSpace] - 1
			for {
				select {
				case pkt := <-p.pc.in:
					// Put the datagram back for the scripted peer's own
					// decryption and look at its frames.
					p.pc.in <- pkt
					answered := false
					p.readDatagram(func(_ spaceID, fr wire.Frame) {
						switch fr := fr.(type) {
						case *wire.ConnectionCloseFrame:
							answered = true
						case *wire.AckFrame:
							for _, r := range fr.Ranges {
								if r.Smallest <= ping && ping <= r.Largest {
									answered = true
								}
							}
						}
					})
					if answered {
						return
					}
				case <-time.After(10 * time.Second):
					// Silence is right only for a connection that has
					// ended, e.g. draining after the peer's own
					// CONNECTION_CLOSE (RFC 9000 §10.2.2).
					if sc == nil {
						t.Fatal("no server connection")
					}
					select {
					case <-sc.Done():
						return
					default:
						t.Fatalf("the connection neither acknowledged a PING nor closed within 10 s after frames %x", frames)
					}
				}
			}
		})
	})
}
