package conformance

import (
	"testing"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// fakePacket builds a recorded packet for the judging functions.
func fakePacket(sent bool, space int, pn uint64, frames ...wire.Frame) *packet {
	p := &packet{sent: sent, space: space, pn: pn, frames: frames, at: time.Unix(0, int64(pn))}
	p.ev.PacketType = "1RTT"
	return p
}

func TestJudgeOldKeys(t *testing.T) {
	stale := fakePacket(true, 2, 10, &wire.PingFrame{})
	later := []*packet{fakePacket(true, 2, 11, &wire.PingFrame{}), fakePacket(true, 2, 12, &wire.PingFrame{})}
	for _, tc := range []struct {
		name string
		acks *wire.AckFrame
		want Verdict
	}{
		{"old-key packet acknowledged", ackOf([]uint64{10, 11}), Fail},
		{"dropped, later ones acknowledged", ackOf([]uint64{11, 12}), Pass},
		{"nothing acknowledged", nil, Inconclusive},
	} {
		ps := append([]*packet{stale}, later...)
		if tc.acks != nil {
			ps = append(ps, fakePacket(false, 2, 5, tc.acks))
		}
		if v, s, _ := judgeOldKeys(ps, 0, stale, later); v != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, v, s, tc.want)
		}
	}
}

func TestJudgeConsecutive(t *testing.T) {
	first, second := fakePacket(true, 2, 20, &wire.PingFrame{}), fakePacket(true, 2, 21, &wire.PingFrame{})
	later := []*packet{fakePacket(true, 2, 22, &wire.PingFrame{})}
	for _, tc := range []struct {
		name string
		resp *packet
		want string
	}{
		{"KEY_UPDATE_ERROR", fakePacket(false, 2, 7, &wire.ConnectionCloseFrame{ErrorCode: uint64(wire.KeyUpdateError)}), "close KEY_UPDATE_ERROR"},
		{"other close", fakePacket(false, 2, 7, &wire.ConnectionCloseFrame{ErrorCode: uint64(wire.ProtocolViolation)}), "close PROTOCOL_VIOLATION"},
		{"second acknowledged", fakePacket(false, 2, 7, ackOf([]uint64{20, 21})), "followed both"},
		{"later acknowledged", fakePacket(false, 2, 7, ackOf([]uint64{22})), "followed both"},
		{"first only", fakePacket(false, 2, 7, ackOf([]uint64{20})), "followed the first only"},
		{"silence", nil, ""},
	} {
		ps := []*packet{first, second, later[0]}
		if tc.resp != nil {
			ps = append(ps, tc.resp)
		}
		if got, s, _ := judgeConsecutive(ps, 0, 0, first, second, later); got != tc.want {
			t.Errorf("%s: %q (%s), want %q", tc.name, got, s, tc.want)
		}
	}
}

func TestPhaseSwitch(t *testing.T) {
	a, b := fakePacket(false, 2, 1), fakePacket(false, 2, 2)
	b.ev.KeyPhase = 1
	if p := phaseSwitch([]*packet{a}, 0, 0, 0); p != nil {
		t.Errorf("phase 0 packets counted as a switch")
	}
	if p := phaseSwitch([]*packet{a, b}, 0, 0, 0); p != b {
		t.Errorf("the phase-1 packet was not found")
	}
}

func TestServerUpdates(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	seen := []phaseSeen{
		{pn: 1, phase: false, at: at(1)},
		{pn: 3, phase: true, at: at(3)},  // update
		{pn: 2, phase: false, at: at(4)}, // reordered, not an update
		{pn: 4, phase: true, at: at(5)},
	}
	ups := serverUpdates(seen)
	if len(ups) != 1 || ups[0].pn != 3 {
		t.Fatalf("updates %+v, want one at packet 3", ups)
	}
	if v, _, s := judgeServerKeyUpdate(ups, at(2)); v != Pass {
		t.Errorf("one update after the Finished: %s (%s)", v, s)
	}
	if v, idx, _ := judgeServerKeyUpdate(ups, at(4)); v != Fail || idx != 0 {
		t.Errorf("an update that arrived before the Finished left: %s, requirement %d", v, idx)
	}
	two := serverUpdates(append(seen, phaseSeen{pn: 9, phase: false, at: at(9)}))
	if v, idx, _ := judgeServerKeyUpdate(two, at(2)); v != Fail || idx != 1 {
		t.Errorf("a second update: %s, requirement %d", v, idx)
	}
	if v, _, _ := judgeServerKeyUpdate(nil, at(2)); v != Observed {
		t.Errorf("no update: %s, want observed", v)
	}
}
