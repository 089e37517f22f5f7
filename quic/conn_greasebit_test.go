package quic

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// TestFixedBitZero sends a 1-RTT packet with the QUIC bit 0 and a
// reserved bit set. A server that does not advertise grease_quic_bit
// discards it unopened (RFC 9000 §17.3.1: "Packets containing a zero
// value for this bit are not valid packets in this version and MUST be
// discarded"), so the connection lives on; one that advertises it (the
// default) must accept it (RFC 9287 §3), so it opens the packet and
// closes with PROTOCOL_VIOLATION for the reserved bit.
func TestFixedBitZero(t *testing.T) {
	for _, tc := range []struct {
		name     string
		noGrease bool
	}{{"discarded-without-grease_quic_bit", true}, {"accepted-with-grease_quic_bit", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newMemNet(5 * time.Millisecond)
				scfg := testServerConfig(t, "hq-interop")
				scfg.DisableGreaseQUICBit = tc.noGrease
				sep, cep, c, err := pair(t, n, scfg, testClientConfig(t, "hq-interop"))
				defer sep.Close()
				defer cep.Close()
				if err != nil {
					t.Fatal(err)
				}
				if err := fetch(t.Context(), c, 10); err != nil {
					t.Fatal(err)
				}
				if err := c.SendCustomPacket(SpaceApplication, CustomPacket{ClearFixedBit: true, ReservedBits: 1}, &wire.PingFrame{}); err != nil {
					t.Fatal(err)
				}
				if tc.noGrease {
					time.Sleep(time.Second)
					if err := fetch(t.Context(), c, 1000); err != nil {
						t.Fatalf("after a packet with the QUIC bit 0: %v", err)
					}
					c.Close(0, "")
					return
				}
				err = c.Wait(t.Context())
				var te *TransportError
				if !errors.As(err, &te) || te.Code != wire.ProtocolViolation || !te.Remote {
					t.Fatalf("got %v, want remote PROTOCOL_VIOLATION", err)
				}
			})
		})
	}
}

// TestGreaseQUICBitSending counts the server's short-header packets with
// the QUIC bit 0: some when the client advertised grease_quic_bit, none
// when it did not (RFC 9287 §3.1).
func TestGreaseQUICBitSending(t *testing.T) {
	for _, tc := range []struct {
		name     string
		noGrease bool
	}{{"client-advertises", false}, {"client-does-not", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newMemNet(5 * time.Millisecond)
				var cleared, total atomic.Int64
				server := netip.MustParseAddrPort(testServerAddr)
				n.policy = func(_ int, from, _ netip.AddrPort, b []byte) (bool, time.Duration) {
					if from == server && len(b) > 0 {
						if b[0]&wire.HeaderFormBit == 0 || wire.PacketTypeFromLongTypeBits(wire.Version(Version1), (b[0]&wire.LongTypeMask)>>4) == wire.PacketTypeHandshake {
							total.Add(1)
							if b[0]&wire.FixedBit == 0 {
								cleared.Add(1)
							}
						}
					}
					return false, 0
				}
				ccfg := testClientConfig(t, "hq-interop")
				ccfg.DisableGreaseQUICBit = tc.noGrease
				sep, cep, c, err := pair(t, n, testServerConfig(t, "hq-interop"), ccfg)
				defer sep.Close()
				defer cep.Close()
				if err != nil {
					t.Fatal(err)
				}
				if err := fetch(t.Context(), c, 200000); err != nil {
					t.Fatal(err)
				}
				c.Close(0, "")
				if tc.noGrease && cleared.Load() != 0 {
					t.Errorf("%d of %d packets with the QUIC bit 0, though the client did not advertise grease_quic_bit", cleared.Load(), total.Load())
				}
				if !tc.noGrease && (cleared.Load() == 0 || cleared.Load() == total.Load()) {
					t.Errorf("%d of %d packets with the QUIC bit 0, want some but not all", cleared.Load(), total.Load())
				}
			})
		})
	}
}
