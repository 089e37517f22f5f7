package quic

import (
	"context"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Each probe hook that the other probe tests do not cover gets a test
// here that shows it changes the engine's behaviour: the same exchange is
// run with and without the hook, and only the hooked one deviates.

// dropServerDatagram drops the server's nth large datagram (one that
// carries stream data) and nothing else.
func dropServerDatagram(nth int) func(int, netip.AddrPort, netip.AddrPort, []byte) (bool, time.Duration) {
	server := netip.MustParseAddrPort(testServerAddr)
	large := 0
	return func(_ int, from, _ netip.AddrPort, b []byte) (bool, time.Duration) {
		if from != server || len(b) < 1000 || b[0]&0x80 != 0 {
			return false, 0
		}
		large++
		return large == nth, 0
	}
}

func TestProbeNoRetransmit(t *testing.T) {
	for _, hook := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			n := newMemNet(5 * time.Millisecond)
			n.policy = dropServerDatagram(3)
			scfg := testServerConfig(t, "hq-interop")
			if hook {
				scfg.Probe = &Probe{NoRetransmit: true}
			}
			sep, cep, c, err := pair(t, n, scfg, testClientConfig(t, "hq-interop"))
			defer sep.Close()
			defer cep.Close()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err = fetch(ctx, c, 30000)
			switch {
			case hook && err == nil:
				t.Error("with NoRetransmit the lost stream data came back anyway")
			case !hook && err != nil:
				t.Errorf("without the hook the download failed: %v", err)
			}
			c.Close(0, "")
		})
	}
}

func TestProbeNoFlowControlCredit(t *testing.T) {
	for _, hook := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			n := newMemNet(5 * time.Millisecond)
			ccfg := testClientConfig(t, "hq-interop")
			ccfg.InitialMaxStreamData = 8000
			var maxFrames int
			ccfg.Probe = &Probe{NoFlowControlCredit: hook, OnPacketSent: func(p PacketInfo) {
				maxFrames += countFrames(p.Payload, func(f wire.Frame) bool {
					switch f.(type) {
					case *wire.MaxStreamDataFrame, *wire.MaxDataFrame:
						return true
					}
					return false
				})
			}}
			sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), ccfg)
			defer sep.Close()
			defer cep.Close()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err = fetch(ctx, c, 40000)
			switch {
			case hook && (err == nil || maxFrames > 0):
				t.Errorf("with NoFlowControlCredit: download error %v, %d credit frames sent; want a stall and none", err, maxFrames)
			case !hook && (err != nil || maxFrames == 0):
				t.Errorf("without the hook: download error %v, %d credit frames", err, maxFrames)
			}
			c.Close(0, "")
		})
	}
}

func TestProbeRewriteClientHello(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rewrite func([]byte) []byte
		wantErr bool
	}{
		{"identity", func(b []byte) []byte { return b }, false},
		// Cut the ClientHello short: the server cannot parse it and must
		// fail the handshake.
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newMemNet(5 * time.Millisecond)
				ccfg := testClientConfig(t, "hq-interop")
				var seen []byte
				ccfg.Probe = &Probe{RewriteClientHello: func(b []byte) []byte {
					seen = append([]byte(nil), b...)
					return tc.rewrite(b)
				}}
				ccfg.MaxIdleTimeout = 5 * time.Second
				sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), ccfg)
				defer sep.Close()
				defer cep.Close()
				if len(seen) < 4 || seen[0] != 0x01 {
					t.Fatalf("the hook saw %x, want a ClientHello (handshake type 1)", seen[:min(len(seen), 8)])
				}
				if (err != nil) != tc.wantErr {
					t.Fatalf("dial error %v, want error %v", err, tc.wantErr)
				}
				if c != nil {
					c.Close(0, "")
				}
			})
		})
	}
}

func TestProbeNoKeyUpdateAck(t *testing.T) {
	for _, hook := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			n := newMemNet(5 * time.Millisecond)
			ccfg := testClientConfig(t, "hq-interop")
			acksAfterUpdate := 0
			var updated bool
			ccfg.Probe = &Probe{NoKeyUpdateAck: hook, OnPacketSent: func(p PacketInfo) {
				if updated && p.Space == SpaceApplication {
					acksAfterUpdate += countFrames(p.Payload, func(f wire.Frame) bool { _, ok := f.(*wire.AckFrame); return ok })
				}
			}}
			sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), ccfg)
			defer sep.Close()
			defer cep.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := fetch(t.Context(), c, 10000); err != nil {
				t.Fatal(err)
			}
			sc := serverConn(sep)
			c.run(t.Context(), func(time.Time) { updated = true })
			if err := sc.ForceKeyUpdate(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			// More than the congestion window (slow start doubled it during
			// the first download), so that the download needs ACKs.
			ferr := fetch(ctx, c, 200000) // new-phase server packets to acknowledge
			if hook {
				// The server's new-phase packets are never acknowledged,
				// so the download cannot finish.
				if ferr == nil {
					t.Errorf("with NoKeyUpdateAck the download finished (%d ACK frames after the update); want a stall", acksAfterUpdate)
				}
			} else {
				var gen uint64
				c.run(t.Context(), func(time.Time) { gen = c.appKeys.Generation() })
				if ferr != nil || gen == 0 || acksAfterUpdate == 0 {
					t.Errorf("without the hook: download error %v, key generation %d, %d ACK frames after the update", ferr, gen, acksAfterUpdate)
				}
			}
			c.Close(0, "")
		})
	}
}

// countFrames counts the frames of a plaintext payload that match.
func countFrames(payload []byte, match func(wire.Frame) bool) int {
	var p wire.Parser
	n := 0
	for len(payload) > 0 {
		f, used, err := p.Parse(payload)
		if err != nil {
			return n
		}
		if match(f) {
			n++
		}
		payload = payload[used:]
	}
	return n
}
