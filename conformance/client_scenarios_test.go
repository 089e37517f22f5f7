package conformance

import (
	"testing"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// The judging logic of the second family M set, on made-up traces: each
// rule can fail.

func TestActedOnRetry(t *testing.T) {
	t0 := time.Now()
	scid, token := []byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte("retry-token")
	in := func(at time.Duration, typ wire.PacketType, dcid, tok []byte) rawDatagram {
		return rawDatagram{at: t0.Add(at), header: wire.Header{Long: true, Type: typ, DCID: dcid, Token: tok}}
	}
	other := []byte{9, 9, 9, 9, 9, 9, 9, 9}
	good := []rawDatagram{in(-time.Millisecond, wire.PacketTypeInitial, scid, token), in(time.Millisecond, wire.PacketTypeInitial, other, nil)}
	if d := actedOnRetry(good, t0, scid, token); d != nil {
		t.Errorf("a client that ignored the Retry was judged to act on it: %+v", d.header)
	}
	for name, ds := range map[string][]rawDatagram{
		"new connection ID": {in(time.Millisecond, wire.PacketTypeHandshake, scid, nil)},
		"token":             {in(time.Millisecond, wire.PacketTypeInitial, other, token)},
	} {
		if actedOnRetry(ds, t0, scid, token) == nil {
			t.Errorf("%s: a client that used the Retry's %s was not caught", name, name)
		}
	}
}

func TestAckOnlyViolations(t *testing.T) {
	sent := func(pn uint64, elicit bool) *packet {
		return &packet{sent: true, space: spaceApp, pn: pn, ackEliciting: elicit}
	}
	ack := func(elicit bool, rs ...wire.AckRange) *packet {
		return &packet{space: spaceApp, ackEliciting: elicit, frames: []wire.Frame{&wire.AckFrame{Ranges: rs}}}
	}
	// Tester: 1 PING, 2 ACK-only, 3 ACK-only, 4 PING.
	base := []*packet{sent(1, true), sent(2, false), sent(3, false)}
	ok := append(append([]*packet(nil), base...), ack(false, wire.AckRange{Smallest: 1, Largest: 1}), sent(4, true), ack(false, wire.AckRange{Smallest: 1, Largest: 4}))
	if bad := ackOnlyViolations(ok, 0, 0); len(bad) != 0 {
		t.Errorf("acknowledgments of PINGs (with ACK-only packets in range) were judged violations: %d", len(bad))
	}
	bad := append(append([]*packet(nil), base...), ack(false, wire.AckRange{Smallest: 1, Largest: 1}), ack(false, wire.AckRange{Smallest: 1, Largest: 3}))
	if got := ackOnlyViolations(bad, 0, 0); len(got) != 1 {
		t.Errorf("an ACK-only packet answering only ACK-only packets: %d violations, want 1", len(got))
	}
	eliciting := append(append([]*packet(nil), base...), ack(true, wire.AckRange{Smallest: 2, Largest: 3}))
	if got := ackOnlyViolations(eliciting, 0, 0); len(got) != 0 {
		t.Errorf("an ack-eliciting packet acknowledging ACK-only packets is allowed, got %d violations", len(got))
	}
}

func TestAckOf(t *testing.T) {
	a := ackOf([]uint64{7, 1, 2, 3, 9, 2})
	want := []wire.AckRange{{Smallest: 9, Largest: 9}, {Smallest: 7, Largest: 7}, {Smallest: 1, Largest: 3}}
	if len(a.Ranges) != len(want) {
		t.Fatalf("ranges %v, want %v", a.Ranges, want)
	}
	for i := range want {
		if a.Ranges[i] != want[i] {
			t.Errorf("range %d: %v, want %v", i, a.Ranges[i], want[i])
		}
	}
}

func TestClearQUICBits(t *testing.T) {
	h := wire.ShortHeader{DCID: []byte{1, 2, 3, 4, 5, 6, 7, 8}, PNLen: 2, PacketNumber: 5}
	b, _ := h.Append(nil)
	b = append(b, make([]byte, 30)...)
	if n := clearQUICBits(b); n != 1 || b[0]&0x40 != 0 {
		t.Errorf("1-RTT packet: cleared %d, first byte %#x", n, b[0])
	}
}

func TestH3FrameTypes(t *testing.T) {
	b := cat(settingsFrame(6, 100), rawquic.H3Frame(h3FrameMaxPushID, []byte{4}), rawquic.H3Frame(h3FrameGoaway, []byte{8}))
	got := h3FrameTypes(b)
	if len(got) != 3 || got[1] != h3FrameMaxPushID || got[2] != h3FrameGoaway {
		t.Errorf("frame types %v", got)
	}
	if got := h3FrameTypes(b[:len(b)-1]); len(got) != 2 {
		t.Errorf("a truncated frame is not listed: %v", got)
	}
}

func TestControlStreamEnd(t *testing.T) {
	ps := []*packet{
		{sent: true, frames: []wire.Frame{&wire.StreamFrame{StreamID: 7, Data: []byte{0x02}}}},
		{sent: true, frames: []wire.Frame{&wire.StreamFrame{StreamID: 3, Data: cat([]byte{h3StreamTypeControl}, settingsFrame())}}},
		{sent: true, frames: []wire.Frame{&wire.StreamFrame{StreamID: 3, Offset: 3, Data: rawquic.H3Frame(h3FrameGoaway, []byte{8})}}},
		{sent: false, frames: []wire.Frame{&wire.StreamFrame{StreamID: 2, Data: []byte{0}}}},
	}
	id, end, data, ok := controlStreamEnd(ps, 0, true)
	if !ok || id != 3 || end != 6 || len(data) != 6 {
		t.Errorf("control stream %d end %d data %x ok %v, want 3, 6", id, end, data, ok)
	}
	if id, _, _, ok := controlStreamEnd(ps, 0, false); !ok || id != 2 {
		t.Errorf("client control stream %d ok %v, want 2", id, ok)
	}
}

func TestJudgeECN(t *testing.T) {
	for _, c := range []struct {
		f    ecnFeedback
		want Verdict
	}{
		{ecnFeedback{frames: 0, sentApp: 100, markedCE: 10, total: 100}, Unsupported},
		{ecnFeedback{frames: 5, ect0: 90, ce: 10, sentApp: 100, markedCE: 10, total: 100}, Pass},
		{ecnFeedback{frames: 5, ect0: 100, ce: 0, sentApp: 100, markedCE: 10, total: 100}, Fail},
		{ecnFeedback{frames: 5, ect0: 200, ce: 10, sentApp: 100, markedCE: 10, total: 100}, Fail},
		{ecnFeedback{frames: 5, ect0: 0, ce: 10, sentApp: 100, markedCE: 10, total: 100}, Fail},
	} {
		if got, s := judgeECN(c.f); got != c.want {
			t.Errorf("%+v: %s (%s), want %s", c.f, got, s, c.want)
		}
	}
}
