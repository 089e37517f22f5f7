package conformance

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// expectSentence runs one scenario against addr and checks its verdict and
// that its sentence contains want (for scenarios cited from knowledge,
// whose judgements report observed with the verdict they would have).
func expectSentence(t *testing.T, name, addr, id string, v Verdict, want string) {
	t.Helper()
	rep := runSuite(
		t,
		Target{Name: name, Address: addr, ALPN: []string{"hq-interop"}, SmallPath: "/" + smallFile, LargePath: "/" + largeFile},
		[]string{id},
		nil,
	)
	got, s := verdictOf(rep, id)
	if got != v || !strings.Contains(s, want) {
		t.Errorf("%s against %s: %s (%s), want %s with %q", id, name, got, s, v, want)
	}
}

// TestMisbehavingServerGreaseBit: a server that advertises grease_quic_bit
// but discards packets with the bit cleared.
func TestMisbehavingServerGreaseBit(t *testing.T) {
	addr := startQuiverWith(t, func(c *quic.Config) {
		c.DisableGreaseQUICBit = true
		c.Probe = &quic.Probe{TransportParameters: func(tp *wire.TransportParameters) { tp.GreaseQUICBit = true }}
	})
	expectSentence(t, "quiver-gqb-liar", addr, "grease-quic-bit-accepted", Observed, "would be fail")
}

func TestJudgeDatagramSizes(t *testing.T) {
	for _, tc := range []struct {
		sizes []int
		want  Verdict
	}{
		{nil, Unsupported},
		{[]int{103, 193}, Pass},
		{[]int{200}, Pass},
		{[]int{103, 201}, Fail},
		{[]int{403}, Fail},
	} {
		if v, s, _ := judgeDatagramSizes(tc.sizes, 200); v != tc.want {
			t.Errorf("judgeDatagramSizes(%v, 200) = %s (%s), want %s", tc.sizes, v, s, tc.want)
		}
	}
}

func TestJudgeQUICBitGrease(t *testing.T) {
	for _, tc := range []struct {
		set, cleared int
		want         Verdict
	}{
		{5, 5, Inconclusive},
		{400, 0, Warn},
		{0, 400, Warn},
		{200, 190, Pass},
		{399, 1, Pass},
	} {
		if v, s := judgeQUICBitGrease(tc.set, tc.cleared); v != tc.want {
			t.Errorf("judgeQUICBitGrease(%d, %d) = %s (%s), want %s", tc.set, tc.cleared, v, s, tc.want)
		}
	}
}

func TestJudgeClosingRate(t *testing.T) {
	if v, _ := judgeClosingRate(50, 50); v != Warn {
		t.Errorf("one closing packet per packet: %s, want warn", v)
	}
	if v, _ := judgeClosingRate(50, 6); v != Pass {
		t.Errorf("six closing packets for fifty: %s, want pass", v)
	}
}

// closePkt is a received packet carrying one frame, for the placement
// judges.
func closePkt(space int, at time.Duration, f wire.Frame) *packet {
	names := map[int]string{0: "initial", 1: "handshake", 2: "1RTT"}
	return &packet{space: space, at: time.Unix(0, 0).Add(at), scid: []byte{1, 2, 3, 4}, frames: []wire.Frame{f}, ev: PacketEvent{PacketType: names[space]}}
}

func TestJudgeClosePlacement(t *testing.T) {
	app := &wire.ConnectionCloseFrame{Application: true, ErrorCode: 0x103, Reason: []byte("h3")}
	conv := func(code wire.TransportErrorCode, reason string) *wire.ConnectionCloseFrame {
		return &wire.ConnectionCloseFrame{ErrorCode: uint64(code), Reason: []byte(reason)}
	}
	rules := map[string]func(c connRecord) (string, []*packet){
		"1d-in-long": placementJudge(placement1dInLong), "reason": placementJudge(placementReason),
		"code": placementJudge(placementCode), "after-confirmed": placementJudge(placementAfterConfirmed),
	}
	for _, tc := range []struct {
		name    string
		packets []*packet
		broken  string // the rule that must fire, "" for none
	}{
		{"1rtt-app-close", []*packet{closePkt(2, 0, app)}, ""},
		{"app-close-in-handshake", []*packet{closePkt(1, 0, app)}, "1d-in-long"},
		{"converted-clean", []*packet{closePkt(0, 0, conv(wire.ApplicationError, "")), closePkt(1, 0, conv(wire.ApplicationError, "")), closePkt(2, 0, app)}, ""},
		{"converted-with-reason", []*packet{closePkt(1, 0, conv(wire.ApplicationError, "secret")), closePkt(2, 0, app)}, "reason"},
		{"converted-other-code", []*packet{closePkt(1, 0, conv(wire.InternalError, "")), closePkt(2, time.Millisecond, app)}, "code"},
		{"transport-close-in-handshake", []*packet{closePkt(1, 0, conv(wire.ProtocolViolation, "bad"))}, ""},
		{"close-after-confirmation", []*packet{closePkt(2, 0, &wire.HandshakeDoneFrame{}), closePkt(1, time.Second, conv(wire.ProtocolViolation, ""))}, "after-confirmed"},
	} {
		c := connRecord{packets: tc.packets}
		for name, judge := range rules {
			s, _ := judge(c)
			if (s != "") != (name == tc.broken) {
				t.Errorf("%s: rule %s said %q", tc.name, name, s)
			}
		}
	}
}

// TestMisbehavingServerIgnoresReset: a server that never sees 50-byte
// datagrams (the size of the tester's stateless reset) goes on after one.
func TestMisbehavingServerIgnoresReset(t *testing.T) {
	addr := startQuiverWith(t, func(c *quic.Config) {
		c.Probe = &quic.Probe{DropIncoming: func(b []byte) bool { return len(b) == 50 && b[0]&0x80 == 0 }}
	})
	expectVerdicts(t, "quiver-ignores-resets", addr, map[string][]Verdict{"sr-honoured-by-server": {Fail}})
}

func TestJudgeSRSizes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		probes []srProbe
		want   map[string]Verdict // check name → verdict; nothing else may fire
	}{
		{"conforming", []srProbe{{1200, [][]byte{make([]byte, 43)}}, {18, nil}, {30, [][]byte{make([]byte, 29)}}, {43, [][]byte{make([]byte, 42)}}, {60, [][]byte{make([]byte, 43)}}}, nil},
		{"answers-18", []srProbe{{18, [][]byte{make([]byte, 21)}}}, map[string]Verdict{"too-small": Fail}},
		{"long-header", []srProbe{{60, [][]byte{append([]byte{0xc0}, make([]byte, 40)...)}}}, map[string]Verdict{"short-header": Fail}},
		{"amplifies", []srProbe{{60, [][]byte{make([]byte, 180)}}}, map[string]Verdict{"amplification": Fail, "smaller": Observed}},
		{"not-one-shorter", []srProbe{{43, [][]byte{make([]byte, 30)}}}, map[string]Verdict{"one-shorter": Warn}},
		{"not-smaller", []srProbe{{60, [][]byte{make([]byte, 60)}}}, map[string]Verdict{"smaller": Observed}},
	} {
		got := map[string]Verdict{}
		for _, j := range judgeSRSizes(tc.probes) {
			got[j.name] = j.verdict
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: judged %v, want %v", tc.name, got, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: judged %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}

func TestForeignOutcome(t *testing.T) {
	for _, tc := range []struct {
		pre, acked, answered bool
		want                 Verdict
	}{
		{false, true, true, Inconclusive},
		{true, true, true, Pass},
		{true, false, false, Fail},
		{true, false, true, Inconclusive},
	} {
		if got := foreignOutcome(tc.pre, tc.acked, tc.answered); got != tc.want {
			t.Errorf("foreignOutcome(%v, %v, %v) = %s, want %s", tc.pre, tc.acked, tc.answered, got, tc.want)
		}
	}
}

// preferredAddressServer is Quiver's server offering a preferred address
// on another port of the loopback address.
func preferredAddressServer(t *testing.T, probe *quic.Probe) string {
	return startQuiverWith(t, func(c *quic.Config) {
		c.PreferredAddress = &quic.PreferredAddress{IPv4: netip.MustParseAddrPort("127.0.0.1:0")}
		c.Probe = probe
	})
}

// TestPreferredAddressServer: with a preferred address configured, the
// prefaddr scenarios run and pass; a server whose PATH_CHALLENGE frames
// never leave fails prefaddr-migrate.
func TestPreferredAddressServer(t *testing.T) {
	addr := preferredAddressServer(t, nil)
	expectVerdicts(t, "quiver-prefaddr", addr, map[string][]Verdict{
		"prefaddr-format": {Pass}, "prefaddr-migrate": {Pass}, "prefaddr-no-early-switch": {Pass},
	})
	t.Run("no-path-challenge", func(t *testing.T) {
		addr := preferredAddressServer(t, &quic.Probe{OnPacketSent: func(pi quic.PacketInfo) {
			for off := 0; off < len(pi.Payload); {
				f, n, err := wire.ParseFrame(pi.Payload[off:])
				if err != nil {
					return
				}
				if f.Type() == wire.FrameTypePathChallenge {
					pi.Payload[off] = byte(wire.FrameTypePing)
					clear(pi.Payload[off+1 : off+n]) // PADDING
				}
				off += n
			}
		}})
		expectVerdicts(t, "quiver-prefaddr-no-challenge", addr, map[string][]Verdict{"prefaddr-migrate": {Fail}})
	})
}

// TestRetryTokenStale: Quiver's Retry tokens live 10 s, so one replayed
// after retryStaleAfter is refused.
func TestRetryTokenStale(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 15 s")
	}
	addr := startQuiverWith(t, func(c *quic.Config) { c.RequireRetry = true })
	expectVerdicts(t, "quiver-retry", addr, map[string][]Verdict{"retry-token-stale": {Pass}})
}

func TestJudgeReorderAcks(t *testing.T) {
	for _, tc := range []struct {
		largest        []uint64
		missing, extra int
	}{
		{[]uint64{5, 9, 10}, 0, 0},
		{[]uint64{1, 5, 8, 9, 10}, 0, 2},
		{[]uint64{10}, 2, 0},
		{nil, 3, 0},
	} {
		m, e := judgeReorderAcks(tc.largest)
		if len(m) != tc.missing || len(e) != tc.extra {
			t.Errorf("judgeReorderAcks(%v) = missing %v, extra %v; want %d and %d", tc.largest, m, e, tc.missing, tc.extra)
		}
	}
}

func TestFirstNonProbing(t *testing.T) {
	probing := &packet{space: 2, frames: []wire.Frame{&wire.PathResponseFrame{}, &wire.PaddingFrame{Length: 1000}}}
	challenge := &packet{space: 2, frames: []wire.Frame{&wire.PathChallengeFrame{}}}
	ack := &packet{space: 2, frames: []wire.Frame{&wire.AckFrame{Ranges: []wire.AckRange{{Largest: 3}}}, &wire.PathResponseFrame{}}}
	if p := firstNonProbing([]*packet{probing, challenge}); p != nil {
		t.Errorf("probing packets judged non-probing: %v", p.frames)
	}
	if p := firstNonProbing([]*packet{probing, ack}); p != ack {
		t.Errorf("a packet with an ACK frame is non-probing, got %v", p)
	}
}

func TestJudgeCCReset(t *testing.T) {
	grown := ccRun{ref: 14520, flight: 60984}
	reset := []ccRun{{ref: 14520, flight: 13068}, {ref: 14520, flight: 14520}, {ref: 14520, flight: 13068}}
	kept := []ccRun{{ref: 14520, flight: 60000}, {ref: 14520, flight: 58000}, {ref: 14520, flight: 61000}}
	mixed := []ccRun{{ref: 14520, flight: 60000}, {ref: 14520, flight: 14520}, {ref: 14520, flight: 61000}}
	for _, tc := range []struct {
		name    string
		control ccRun
		moves   []ccRun
		want    Verdict
	}{
		{"reset", grown, reset, Pass},
		{"kept", grown, kept, Fail},
		{"mixed", grown, mixed, Inconclusive},
		{"window-never-grew", ccRun{ref: 14520, flight: 14520}, kept, Inconclusive},
		{"no-control", ccRun{problem: "no flight"}, reset, Inconclusive},
	} {
		if v, s := judgeCCReset(tc.control, tc.moves); v != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, v, s, tc.want)
		}
	}
}
