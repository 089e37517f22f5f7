package quic

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

func ignoreFrames(spaceID, wire.Frame) {}

// ackedWithin reports whether the server sends an ACK frame in the
// Application Data space within wait.
func ackedWithin(p *testPeer, wait time.Duration) bool {
	p.t.Helper()
	acked := false
	p.readFor(wait, func(space spaceID, f wire.Frame) {
		if _, ok := f.(*wire.AckFrame); ok && space == appSpace {
			acked = true
		}
	})
	return acked
}

// TestAckFrequencyReorderingThreshold checks the receiver's reaction to
// a gap after ACK_FREQUENCY (draft-ietf-quic-ack-frequency-14 §6.2): "If
// the most recent ACK_FREQUENCY frame received from the peer has a
// Reordering Threshold value of 0, the endpoint SHOULD NOT send an
// immediate acknowledgment in response to packets received out of order,
// and instead rely on the peer's Ack-Eliciting Threshold and Requested Max
// Ack Delay"; with 1, RFC 9000 §13.2.1's immediate ACK applies; with 3,
// a one-packet gap stays within the reordering window.
func TestAckFrequencyReorderingThreshold(t *testing.T) {
	for _, tc := range []struct {
		reorder   uint64
		immediate bool
	}{{0, false}, {1, true}, {3, false}} {
		t.Run(fmt.Sprint("rt=", tc.reorder), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, _ := startPeerTest(t, testServerConfig(t, "hq-interop"))
				p.readFor(time.Second, ignoreFrames)
				p.writeFrames(appSpace, &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 0, Largest: p.largest[appSpace]}}},
					&wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 9, RequestedMaxAckDelay: 200_000, ReorderingThreshold: tc.reorder})
				// The first 1-RTT packet is acknowledged within D
				// (docs/ack-frequency-engine.md §3: before the first ACK, the first
				// pending packet's arrival + D); what follows within D of
				// that ACK waits for T or the deadline.
				if !ackedWithin(p, 250*time.Millisecond) {
					t.Fatal("the ACK_FREQUENCY packet was not acknowledged within D")
				}
				p.writeFrames(appSpace, &wire.PingFrame{})
				if ackedWithin(p, 20*time.Millisecond) {
					t.Fatal("an in-order packet with T = 9 was acknowledged at once")
				}
				gapped := p.pn[appSpace]
				p.pn[appSpace]++ // a gap
				p.writeFrames(appSpace, &wire.PingFrame{})
				if got := ackedWithin(p, 20*time.Millisecond); got != tc.immediate {
					t.Errorf("after a one-packet gap: acknowledged at once = %v, want %v", got, tc.immediate)
				}
				// The missing packet, late.
				next := p.pn[appSpace]
				p.pn[appSpace] = gapped
				p.writeFrames(appSpace, &wire.PingFrame{})
				p.pn[appSpace] = next
				if got := ackedWithin(p, 20*time.Millisecond); got != tc.immediate {
					t.Errorf("after a reordered packet: acknowledged at once = %v, want %v", got, tc.immediate)
				}
				// The delayed ACK still comes within D.
				if !ackedWithin(p, 250*time.Millisecond) && !tc.immediate {
					t.Error("no ACK within the requested max ack delay")
				}
			})
		})
	}
}

// TestAdaptiveAckPolicy checks the adaptive policy against
// docs/ack-frequency-engine.md §5: T stays 1 until 100 ack-eliciting packets are
// acknowledged (not sent), then gives about A ACKs per congestion window
// for the A asked for, including A below the default of 4.
func TestAdaptiveAckPolicy(t *testing.T) {
	const mss = maxDatagramSize
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		pol   AckFrequencyPolicy
		cwnd  int
		srtt  time.Duration
		acked uint64
		wantT uint64
		wantD time.Duration
	}{
		{"before-100-acked", AckFrequencyPolicy{}, 100 * mss, 40 * ms, 99, 1, 10 * ms},
		{"default-A-4", AckFrequencyPolicy{}, 100 * mss, 40 * ms, 100, 24, 10 * ms},
		{"A-2", AckFrequencyPolicy{Acks: 2}, 100 * mss, 40 * ms, 100, 49, 20 * ms},
		{"A-1", AckFrequencyPolicy{Acks: 1}, 40 * mss, 40 * ms, 500, 39, 40 * ms},
		{"A-8", AckFrequencyPolicy{Acks: 8}, 100 * mss, 40 * ms, 100, 11, 5 * ms},
		{"Tmax", AckFrequencyPolicy{Acks: 1}, 1000 * mss, 40 * ms, 100, 63, 40 * ms},
		{"Tmax-set", AckFrequencyPolicy{MaxThreshold: 9}, 1000 * mss, 40 * ms, 100, 9, 10 * ms},
		{"small-window", AckFrequencyPolicy{}, 4 * mss, 40 * ms, 1000, 1, 10 * ms},
		{"D-floor", AckFrequencyPolicy{}, 100 * mss, 2 * ms, 100, 24, ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotT, gotD := adaptiveAckPolicy(tc.pol, tc.cwnd, tc.srtt, ms, tc.acked)
			if gotT != tc.wantT || gotD != tc.wantD {
				t.Errorf("T, D = %d, %v; want %d, %v", gotT, gotD, tc.wantT, tc.wantD)
			}
		})
	}
}

// TestAckFrequencyInvalidDelay (the parser enforces it): "values of 2^14 milliseconds or greater
// are invalid for max_ack_delay ... Receipt of an invalid value MUST be
// treated as a connection error of type PROTOCOL_VIOLATION"
// (draft-ietf-quic-ack-frequency-14 §4).
func TestAckFrequencyInvalidDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := startPeerTest(t, testServerConfig(t, "hq-interop"))
		p.writeFrames(appSpace, &wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 1, RequestedMaxAckDelay: 1 << 14 * 1000, ReorderingThreshold: 1})
		p.wantClose("Requested Max Ack Delay of 2^14 ms", wire.ProtocolViolation)
	})
}

// TestMinAckDelayNotAboveMaxAckDelay: "An endpoint's min_ack_delay MUST
// NOT be greater than its max_ack_delay" (draft §3), whatever the
// configuration asks.
func TestMinAckDelayNotAboveMaxAckDelay(t *testing.T) {
	for _, tc := range []struct{ min, max, want time.Duration }{
		{0, 0, defaultMinAckDelay},
		{30 * time.Millisecond, 0, defaultMaxAckDelay},
		{5 * time.Millisecond, 2500 * time.Microsecond, 2 * time.Millisecond},
		{time.Millisecond, 500 * time.Microsecond, 0},
		{-1, 0, 0},
	} {
		cfg := &Config{MinAckDelay: tc.min, MaxAckDelay: tc.max}
		if got := cfg.minAckDelay(); got != tc.want {
			t.Errorf("MinAckDelay %v, MaxAckDelay %v: min_ack_delay %v, want %v", tc.min, tc.max, got, tc.want)
		}
	}
}
