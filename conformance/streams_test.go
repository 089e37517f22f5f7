package conformance

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// judgeConn records packets on one connection and returns its record.
type judgeConn struct {
	t  *testing.T
	tr *connTrace
	tt *T
}

func newJudgeConn(t *testing.T) *judgeConn {
	tt := &T{sc: &Scenario{ID: "probe-x", Family: "C", Role: ServerRole}, rec: newRecorder(time.Now())}
	return &judgeConn{t: t, tr: tt.rec.newConn("c"), tt: tt}
}

// add records a packet in space sp; firstByte 0 leaves it unknown.
func (j *judgeConn) add(sent bool, sp int, pn uint64, firstByte byte, frames ...wire.Frame) {
	pt := []wire.PacketType{wire.PacketTypeInitial, wire.PacketTypeHandshake, wire.PacketType1RTT}[sp]
	j.tr.recordMeta(sent, time.Now(), pt, 0, sp, pn, nil, nil, 50, 50, rawquic.AppendFrames(nil, frames), pktMeta{firstByte: firstByte})
}

func (j *judgeConn) record() connRecord { return j.tt.records()[0] }

func ack(lo, hi uint64) *wire.AckFrame {
	return &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: lo, Largest: hi}}}
}

func TestJudgeFlowControl(t *testing.T) {
	tp := rawquic.DefaultClientTP(nil)
	tp.InitialMaxStreamDataBidiLocal = 1000
	tp.InitialMaxData = 3000
	j := newJudgeConn(t)
	j.add(false, 2, 0, 0, &wire.StreamFrame{StreamID: 0, Data: make([]byte, 1000)})
	if v, _, _ := judgeFlowControl(j.tt.rec.snapshot(), 0, tp); v != nil {
		t.Fatalf("1000 bytes within a 1000-byte limit judged a violation: %v", v)
	}
	// A raise, then data up to it: fine; one byte more: a violation.
	j.add(true, 2, 0, 0, &wire.MaxStreamDataFrame{StreamID: 0, Maximum: 2000})
	j.add(false, 2, 1, 0, &wire.StreamFrame{StreamID: 0, Offset: 1000, Data: make([]byte, 1000)})
	if v, _, _ := judgeFlowControl(j.tt.rec.snapshot(), 0, tp); v != nil {
		t.Fatalf("data up to a raised limit judged a violation: %v", v)
	}
	j.add(false, 2, 2, 0, &wire.StreamFrame{StreamID: 0, Offset: 2000, Data: []byte("x")})
	v, _, _ := judgeFlowControl(j.tt.rec.snapshot(), 0, tp)
	if v == nil || v.stream != 0 || v.end != 2001 || v.limit != 2000 {
		t.Fatalf("stream overrun: got %+v", v)
	}
	// The connection limit counts every stream, server uni ones too.
	k := newJudgeConn(t)
	k.add(false, 2, 0, 0, &wire.StreamFrame{StreamID: 3, Data: make([]byte, 2500)})
	k.add(false, 2, 1, 0, &wire.StreamFrame{StreamID: 0, Data: make([]byte, 600)})
	v, _, total := judgeFlowControl(k.tt.rec.snapshot(), 0, tp)
	if v == nil || v.stream != ^uint64(0) || total != 3100 {
		t.Fatalf("connection overrun: got %+v, total %d", v, total)
	}
	// A retransmission below the high-water mark adds nothing.
	m := newJudgeConn(t)
	m.add(false, 2, 0, 0, &wire.StreamFrame{StreamID: 0, Data: make([]byte, 900)})
	m.add(false, 2, 1, 0, &wire.StreamFrame{StreamID: 0, Data: make([]byte, 900)})
	if v, _, total := judgeFlowControl(m.tt.rec.snapshot(), 0, tp); v != nil || total != 900 {
		t.Fatalf("retransmission: %v, total %d", v, total)
	}
}

func TestJudgePNLength(t *testing.T) {
	// 1-RTT first byte 0x40 | (length-1).
	j := newJudgeConn(t)
	j.add(false, 2, 5, 0x40) // 1 byte for 5 before any ACK: fine
	j.add(true, 2, 0, 0, ack(0, 5))
	j.add(false, 2, 133, 0x40) // distance 128, range 256: allowed (A.2)
	if s, _ := judgePNLength(j.record()); s != "" {
		t.Fatalf("judged %q", s)
	}
	j.add(false, 2, 134, 0x40) // distance 129 needs 258 > 256
	if s, _ := judgePNLength(j.record()); !strings.Contains(s, "134") {
		t.Fatalf("too short an encoding not found: %q", s)
	}
	k := newJudgeConn(t)
	k.add(false, 0, 300, 0xc0) // 1 byte for 300 before any ACK
	if s, _ := judgePNLength(k.record()); !strings.Contains(s, "in full") {
		t.Fatalf("truncated first packet number not found: %q", s)
	}
	// Unknown lengths (engine packets before FirstByte) are skipped.
	u := newJudgeConn(t)
	u.add(false, 2, 100000, 0)
	if s, _ := judgePNLength(u.record()); s != "" {
		t.Fatalf("unknown length judged: %q", s)
	}
}

func TestJudgeAckOnlyReceived(t *testing.T) {
	j := newJudgeConn(t)
	for _, pn := range []uint64{0, 1, 3} { // 2 skipped
		j.add(true, 2, pn, 0, &wire.PingFrame{})
	}
	j.add(false, 2, 0, 0, &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 3, Largest: 3}, {Smallest: 0, Largest: 1}}})
	if s, _ := judgeAckOnlyReceived(j.record()); s != "" {
		t.Fatalf("honest ACK judged: %q", s)
	}
	j.add(false, 2, 1, 0, ack(0, 3))
	if s, _ := judgeAckOnlyReceived(j.record()); !strings.Contains(s, "[2]") {
		t.Fatalf("skipped number acknowledged not found: %q", s)
	}
	// An Initial packet number acknowledged in the application space.
	k := newJudgeConn(t)
	k.add(true, 0, 0, 0, &wire.PingFrame{})
	k.add(false, 2, 0, 0, ack(0, 0))
	if s, _ := judgeAckOnlyReceived(k.record()); s == "" {
		t.Fatal("cross-space acknowledgment not found")
	}
}

func TestJudgeServerStreams(t *testing.T) {
	// A real ClientHello carrying the tester's parameters.
	tp := rawquic.DefaultClientTP([]byte{1, 2, 3, 4})
	tp.InitialMaxStreamsBidi, tp.InitialMaxStreamsUni = 0, 1
	c := tls.QUICClient(&tls.QUICConfig{TLSConfig: &tls.Config{ServerName: "x", NextProtos: []string{"hq-interop"}, MinVersion: tls.VersionTLS13}})
	defer c.Close()
	c.SetTransportParameters(tp.Marshal())
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var hello []byte
	for ev := c.NextEvent(); ev.Kind != tls.QUICNoEvent; ev = c.NextEvent() {
		if ev.Kind == tls.QUICWriteData {
			hello = append(hello, ev.Data...)
		}
	}
	j := newJudgeConn(t)
	// The ClientHello split over two Initial packets.
	j.add(true, 0, 0, 0, &wire.CryptoFrame{Data: hello[:100]})
	j.add(true, 0, 1, 0, &wire.CryptoFrame{Offset: 100, Data: hello[100:]})
	if got := testerTP(j.record()); got == nil || got.InitialMaxStreamsUni != 1 {
		t.Fatalf("tester parameters from the ClientHello: %+v", got)
	}
	j.add(true, 2, 0, 0, &wire.StreamFrame{StreamID: 0, Data: []byte("GET /\r\n")})
	j.add(false, 2, 0, 0, &wire.StreamFrame{StreamID: 0, Data: []byte("ok")}, &wire.StreamFrame{StreamID: 3, Data: []byte{0}})
	if s, _ := judgeServerStreams(j.record()); s != "" {
		t.Fatalf("streams within limits judged: %q", s)
	}
	if s, _ := judgeServerStreamState(j.record()); s != "" {
		t.Fatalf("answer on an opened stream judged: %q", s)
	}
	j.add(false, 2, 1, 0, &wire.StreamFrame{StreamID: 7, Data: []byte{0}})
	if s, _ := judgeServerStreams(j.record()); !strings.Contains(s, "stream 7") {
		t.Fatalf("second server uni stream beyond a limit of 1 not found: %q", s)
	}
	j.add(true, 2, 1, 0, &wire.MaxStreamsFrame{Maximum: 2})
	k := newJudgeConn(t)
	k.add(true, 0, 0, 0, &wire.CryptoFrame{Data: hello})
	k.add(false, 2, 0, 0, &wire.StreamFrame{StreamID: 1, Data: []byte{0}})
	if s, _ := judgeServerStreams(k.record()); !strings.Contains(s, "bidirectional stream 1") {
		t.Fatalf("server bidi stream with a limit of 0 not found: %q", s)
	}
	for _, id := range []uint64{2, 4} {
		m := newJudgeConn(t)
		m.add(true, 2, 0, 0, &wire.StreamFrame{StreamID: 0, Data: []byte("x")})
		m.add(false, 2, 0, 0, &wire.StreamFrame{StreamID: id, Data: []byte("x")})
		if s, _ := judgeServerStreamState(m.record()); s == "" {
			t.Errorf("STREAM frame on client stream %d not found", id)
		}
	}
}

func TestClassifySpin(t *testing.T) {
	const spin = 0x40 | wire.ShortSpinBit
	for _, tc := range []struct {
		name   string
		server func(tester bool) bool
		want   string
	}{
		{"reflects", func(s bool) bool { return s }, "reflects"},
		{"constant", func(bool) bool { return false }, "constant"},
		{"inverts", func(s bool) bool { return !s }, "varies without following the tester"},
	} {
		j := newJudgeConn(t)
		tester := false
		for i := uint64(0); i < 8; i++ {
			fb := byte(0x40)
			if tester {
				fb = spin
			}
			j.add(true, 2, i, fb, &wire.PingFrame{})
			fb = 0x40
			if tc.server(tester) {
				fb = spin
			}
			j.add(false, 2, i, fb, ack(i, i))
			tester = !tester
		}
		if got, _, _ := classifySpin(j.record().packets); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// rewriteFrames calls edit on every frame of a sent payload with the
// frame's bytes, which edit may change in place (same length).
func rewriteFrames(payload []byte, edit func(f wire.Frame, b []byte)) {
	for off := 0; off < len(payload); {
		f, n, err := wire.ParseFrame(payload[off:])
		if err != nil {
			return
		}
		edit(f, payload[off:off+n])
		off += n
	}
}

// toPing turns a frame's bytes into a PING followed by PADDING.
func toPing(b []byte) {
	b[0] = byte(wire.FrameTypePing)
	clear(b[1:])
}

// TestMisbehavingServerStreams makes Quiver's server break the stream and
// flow-control rules through OnPacketSent rewrites, and checks that the
// scenarios judging them fail or warn.
func TestMisbehavingServerStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("misbehaving servers skipped in -short mode")
	}
	sent := func(edit func(pi quic.PacketInfo, f wire.Frame, b []byte)) func(*quic.Config) {
		return func(c *quic.Config) {
			c.Probe = &quic.Probe{OnPacketSent: func(pi quic.PacketInfo) {
				if pi.Space == quic.SpaceApplication {
					rewriteFrames(pi.Payload, func(f wire.Frame, b []byte) { edit(pi, f, b) })
				}
			}}
		}
	}
	t.Run("no-blocked-frames", func(t *testing.T) {
		addr := startQuiverWith(t, sent(func(_ quic.PacketInfo, f wire.Frame, b []byte) {
			if ft := f.Type(); ft == wire.FrameTypeStreamDataBlocked || ft == wire.FrameTypeDataBlocked {
				toPing(b)
			}
		}))
		expectVerdicts(t, "quiver-no-blocked", addr, map[string][]Verdict{"fc-blocked-signalled": {Warn}})
	})
	t.Run("no-reset-stream", func(t *testing.T) {
		addr := startQuiverWith(t, sent(func(_ quic.PacketInfo, f wire.Frame, b []byte) {
			if f.Type() == wire.FrameTypeResetStream {
				toPing(b)
			}
		}))
		expectVerdicts(t, "quiver-no-reset", addr, map[string][]Verdict{"stream-stop-sending-reset": {Fail}})
	})
	t.Run("stream-offset-jump", func(t *testing.T) {
		// STREAM frames on stream 0 whose offset takes two bytes jump
		// 2000 bytes ahead: beyond every limit the scenario advertises.
		addr := startQuiverWith(t, sent(func(_ quic.PacketInfo, f wire.Frame, b []byte) {
			sf, ok := f.(*wire.StreamFrame)
			if !ok || sf.StreamID != 0 || b[0]&0x04 == 0 || b[1] != 0 || b[2]>>6 != 1 || sf.Offset+2000 >= 1<<14 {
				return
			}
			wire.PutVarintLen(b[2:4], sf.Offset+2000, 2)
		}))
		expectVerdicts(t, "quiver-offset-jump", addr, map[string][]Verdict{"fc-stream-limit-respected": {Fail}, "fc-connection-limit-respected": {Fail}})
	})
	t.Run("answer-on-client-uni", func(t *testing.T) {
		// Responses on stream 0 leave on stream 2, a client
		// unidirectional stream.
		addr := startQuiverWith(t, sent(func(_ quic.PacketInfo, f wire.Frame, b []byte) {
			if sf, ok := f.(*wire.StreamFrame); ok && sf.StreamID == 0 {
				b[1] = 2
			}
		}))
		expectVerdicts(t, "quiver-stream-2", addr, map[string][]Verdict{"stream-server-respects-limits": {Fail}})
	})
	t.Run("ack-ahead", func(t *testing.T) {
		// 1-RTT ACK frames claim one packet more than the largest
		// received (small numbers only, one-byte varint).
		addr := startQuiverWith(t, sent(func(_ quic.PacketInfo, f wire.Frame, b []byte) {
			if a, ok := f.(*wire.AckFrame); ok && b[1]>>6 == 0 && largestIn(a) < 62 {
				b[1]++
			}
		}))
		expectVerdicts(t, "quiver-ack-ahead", addr, map[string][]Verdict{"inv-ack-only-received": {Fail}})
	})
}
