package conformance

import (
	"bytes"
	"testing"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic/wire"
)

func TestQPACKReadInt(t *testing.T) {
	for _, tc := range []struct {
		bits int
		v    uint64
	}{{5, 0}, {5, 30}, {5, 31}, {5, 1337}, {7, 127}, {6, 1 << 40}, {8, 255}, {3, 10}} {
		b := qpackInt(0, tc.bits, tc.v)
		got, n := qpackReadInt(b, tc.bits)
		if got != tc.v || n != len(b) {
			t.Errorf("prefix %d, %d: decoded %d in %d bytes from %x", tc.bits, tc.v, got, n, b)
		}
		if _, n := qpackReadInt(b[:len(b)-1], tc.bits); len(b) > 1 && n != 0 {
			t.Errorf("prefix %d, %d: a truncated integer decoded", tc.bits, tc.v)
		}
	}
	// RFC 7541 §C.1.2: 1337 with a 5-bit prefix is 1f 9a 0a.
	if b := qpackInt(0, 5, 1337); !bytes.Equal(b, []byte{0x1f, 0x9a, 0x0a}) {
		t.Errorf("1337 encodes as %x", b)
	}
}

func TestLiteralSectionDecodes(t *testing.T) {
	fs := []hfield{{":method", "GET"}, {":path", "/x"}, {"X-Quiver", "1"}}
	got, err := decodeStaticSection(literalSection(fs))
	if err != nil || len(got) != 3 {
		t.Fatalf("decoded %v, %v", got, err)
	}
	for i, f := range fs {
		if got[i].Name != f.name || got[i].Value != f.value {
			t.Errorf("field %d: %v, want %v", i, got[i], f)
		}
	}
	if _, err := decodeStaticSection([]byte{0x02, 0x00, 0x80}); err != errDynamicSection {
		t.Errorf("a section with Required Insert Count 1 decoded statically: %v", err)
	}
}

func TestParseQPACKInstructions(t *testing.T) {
	enc := cat([]byte{0x02}[:0], qpackInt(0x20, 5, 220), insertLiteral("x-quiver", "v"), insertStaticNameRef(1, "/a"), qpackInt(0x00, 5, 0))
	ins, rest := parseEncoderStream(enc)
	want := []qpackInstr{
		{kind: qpackSetCapacity, value: 220},
		{kind: qpackInsertLiteral},
		{kind: qpackInsertNameRef, value: 1, static: true},
		{kind: qpackDuplicate},
	}
	if len(rest) != 0 || len(ins) != len(want) {
		t.Fatalf("parsed %v, rest %x", ins, rest)
	}
	for i := range want {
		if ins[i] != want[i] {
			t.Errorf("instruction %d: %+v, want %+v", i, ins[i], want[i])
		}
	}
	if ins, rest := parseEncoderStream(enc[:len(enc)-3]); len(ins) != 2 || len(rest) == 0 {
		t.Errorf("truncated: %v, rest %x", ins, rest)
	}
	dec := cat(qpackInt(0x80, 7, 4), qpackInt(0x40, 6, 8), qpackInt(0x00, 6, 3))
	ins, rest = parseDecoderStream(dec)
	if len(rest) != 0 || len(ins) != 3 || ins[0] != (qpackInstr{kind: qpackSectionAck, value: 4}) ||
		ins[1] != (qpackInstr{kind: qpackStreamCancel, value: 8}) || ins[2] != (qpackInstr{kind: qpackInsertCountIncrement, value: 3}) {
		t.Errorf("decoder instructions %+v, rest %x", ins, rest)
	}
}

func TestEncodedInsertCount(t *testing.T) {
	// RFC 9204 §4.5.1.1 with MaxTableCapacity 4096: MaxEntries 128.
	for _, tc := range []struct{ ric, enc uint64 }{{0, 0}, {1, 2}, {255, 256}, {256, 1}} {
		if got := encodedInsertCount(tc.ric, 4096); got != tc.enc {
			t.Errorf("Required Insert Count %d encodes as %d, want %d", tc.ric, got, tc.enc)
		}
	}
}

func TestIsReservedH3(t *testing.T) {
	for v, want := range map[uint64]bool{0x21: true, 0x40: true, 0x1f*1000 + 0x21: true, 0x20: false, 0x4242: false, 0x00: false, 0x41: false} {
		if isReservedH3(v) != want {
			t.Errorf("isReservedH3(0x%x) = %v", v, !want)
		}
	}
}

// seenPacket builds a received packet carrying frames.
func seenPacket(frames ...wire.Frame) *packet {
	return &packet{space: spaceApp, frames: frames}
}

func response(status, body string) []byte {
	return cat(headersFrameOf(literalSection([]hfield{{":status", status}})), rawquic.H3Frame(0x00, []byte(body)))
}

func streamPacket(id uint64, data []byte, fin bool) *packet {
	return seenPacket(&wire.StreamFrame{StreamID: id, Data: data, Fin: fin})
}

func TestJudgeMalformed(t *testing.T) {
	msg := uint64(h3.ErrCodeMessageError)
	for _, tc := range []struct {
		name string
		ps   []*packet
		want Verdict
	}{
		{"stream error", []*packet{seenPacket(&wire.ResetStreamFrame{StreamID: 0, ErrorCode: msg})}, Pass},
		{"stop sending", []*packet{seenPacket(&wire.StopSendingFrame{StreamID: 0, ErrorCode: msg})}, Pass},
		{"connection close", []*packet{seenPacket(&wire.ConnectionCloseFrame{Application: true, ErrorCode: msg})}, Pass},
		{"400 and FIN", []*packet{streamPacket(0, response("400", "bad"), true)}, Pass},
		{"400 without end", []*packet{streamPacket(0, response("400", "bad"), false)}, Inconclusive},
		{"200", []*packet{streamPacket(0, response("200", "ok"), true)}, Fail},
		{"other code", []*packet{seenPacket(&wire.ResetStreamFrame{StreamID: 0, ErrorCode: uint64(h3.ErrCodeRequestRejected)})}, Warn},
		{"transport close", []*packet{seenPacket(&wire.ConnectionCloseFrame{ErrorCode: 0x0a})}, Warn},
		{"other stream", []*packet{seenPacket(&wire.ResetStreamFrame{StreamID: 4, ErrorCode: msg})}, Inconclusive},
		{"nothing", nil, Inconclusive},
	} {
		v := h3Observe(tc.ps, -1, 0)
		if j := judgeMalformed(v, 0, "a malformed request"); j.v != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, j.v, j.sentence, tc.want)
		}
	}
	// A 2xx to a Content-Length mismatch is observed: detection is not
	// required (RFC 9114 §4.1.2, "that are detected").
	v := h3Observe([]*packet{streamPacket(0, response("200", "ok"), true)}, -1, 0)
	if j := judgeContentLength(v, 0, "a mismatch"); j.v != Observed {
		t.Errorf("content-length 200: %s", j.v)
	}
	v = h3Observe([]*packet{streamPacket(0, response("405", ""), true)}, -1, 0)
	if j := judgeContentLength(v, 0, "a mismatch"); j.v != Pass {
		t.Errorf("content-length 405: %s", j.v)
	}
}

func TestJudgeGoesOn(t *testing.T) {
	ok := streamPacket(0, response("200", "hello"), true)
	for _, tc := range []struct {
		name string
		ps   []*packet
		want Verdict
	}{
		{"answered", []*packet{ok}, Pass},
		{"answered then stopped", []*packet{ok, seenPacket(&wire.StopSendingFrame{StreamID: 0, ErrorCode: uint64(h3.ErrCodeNoError)})}, Pass},
		{"closed", []*packet{seenPacket(&wire.ConnectionCloseFrame{Application: true, ErrorCode: uint64(h3.ErrCodeFrameUnexpected)})}, Fail},
		{"answered then closed", []*packet{ok, seenPacket(&wire.ConnectionCloseFrame{Application: true, ErrorCode: uint64(h3.ErrCodeStreamCreationError)})}, Fail},
		{"reset", []*packet{seenPacket(&wire.ResetStreamFrame{StreamID: 0, ErrorCode: uint64(h3.ErrCodeFrameUnexpected)})}, Fail},
		{"no error close", []*packet{seenPacket(&wire.ConnectionCloseFrame{Application: true, ErrorCode: uint64(h3.ErrCodeNoError)})}, Inconclusive},
		{"half", []*packet{streamPacket(0, response("200", "hello"), false)}, Inconclusive},
	} {
		if j := judgeGoesOn(h3Observe(tc.ps, -1, 0), 0, "reserved things"); j.v != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, j.v, j.sentence, tc.want)
		}
	}
}

func TestJudgeControlStream(t *testing.T) {
	ctrl := func(id uint64, frames ...[]byte) *packet {
		return streamPacket(id, cat(append([][]byte{{0x00}}, frames...)...), false)
	}
	for _, tc := range []struct {
		name string
		ps   []*packet
		want Verdict
	}{
		{"good", []*packet{ctrl(3, settingsFrame(1, 0), rawquic.H3Frame(0x21, nil))}, Pass},
		{"none", nil, Fail},
		{"two streams", []*packet{ctrl(3, settingsFrame()), ctrl(7, settingsFrame())}, Fail},
		{"goaway first", []*packet{ctrl(3, rawquic.H3Frame(0x07, []byte{0}), settingsFrame())}, Fail},
		{"two settings", []*packet{ctrl(3, settingsFrame(), settingsFrame())}, Fail},
		{"type only", []*packet{ctrl(3)}, Inconclusive},
	} {
		if j := judgeControlStream(h3Observe(tc.ps, -1, 0)); j.v != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, j.v, j.sentence, tc.want)
		}
	}
	open := h3Observe([]*packet{streamPacket(0, response("200", "x"), false)}, -1, 0)
	if j := judgeResponseEnds(open, 0); j.v != Fail {
		t.Errorf("a response without FIN: %s", j.v)
	}
}

func TestJudgeNoPush(t *testing.T) {
	ok := streamPacket(0, response("200", "x"), true)
	if j := judgeNoPush(h3Observe([]*packet{ok}, -1, 0), []uint64{0}); j.v != Pass {
		t.Errorf("plain answer: %s", j.v)
	}
	push := streamPacket(3, []byte{0x01, 0x00}, false)
	if j := judgeNoPush(h3Observe([]*packet{ok, push}, -1, 0), []uint64{0}); j.v != Fail {
		t.Errorf("push stream: %s", j.v)
	}
	promise := streamPacket(0, cat(rawquic.H3Frame(0x05, []byte{0, 0, 0}), response("200", "x")), true)
	if j := judgeNoPush(h3Observe([]*packet{promise}, -1, 0), []uint64{0}); j.v != Fail {
		t.Errorf("PUSH_PROMISE: %s", j.v)
	}
}

func TestJudgeUniLimit(t *testing.T) {
	got := judgeUniLimit(2, 512)
	if got[0].v != Fail || got[1].v != Warn {
		t.Errorf("2 streams, 512 bytes: %s, %s", got[0].v, got[1].v)
	}
	got = judgeUniLimit(3, 1024)
	if got[0].v != Pass || got[1].v != Pass {
		t.Errorf("3 streams, 1024 bytes: %s, %s", got[0].v, got[1].v)
	}
	if _, ok := greaseSetting([]h3.Setting{{ID: 1}, {ID: 0x1f*7 + 0x21}}); !ok {
		t.Error("reserved setting not found")
	}
	if _, ok := greaseSetting([]h3.Setting{{ID: 1}, {ID: 6}}); ok {
		t.Error("reserved setting found where there is none")
	}
}

// FuzzH3Observe feeds arbitrary server stream bytes through the tester's
// readers: none may panic.
func FuzzH3Observe(f *testing.F) {
	f.Add([]byte{0x00, 0x04, 0x00}, []byte{0x01, 0x03, 0x00, 0x00, 0xd9})
	f.Add([]byte{0x02, 0x3f, 0xe1, 0x1f, 0x40, 0x01}, []byte{0x01, 0x02, 0x80})
	f.Fuzz(func(t *testing.T, uni, bidi []byte) {
		v := h3Observe([]*packet{streamPacket(3, uni, true), streamPacket(0, bidi, true)}, -1, 0)
		v.uniStreams()
		v.response(0)
		parseEncoderStream(uni)
		parseDecoderStream(uni)
		judgeControlStream(v)
		judgeMalformed(v, 0, "x")
		judgeGoesOn(v, 0, "x")
	})
}

func TestJudgeQPACK(t *testing.T) {
	ok := streamPacket(0, response("200", "x"), true)
	dynamic := streamPacket(4, cat(headersFrameOf([]byte{0x02, 0x00, 0x80}), rawquic.H3Frame(0x00, []byte("x"))), true)
	dec := func(b ...byte) *packet { return streamPacket(11, append([]byte{0x03}, b...), false) }
	enc := func(b ...byte) *packet { return streamPacket(7, append([]byte{0x02}, b...), false) }
	for _, tc := range []struct {
		name string
		ps   []*packet
		want Verdict
	}{
		{"acked", []*packet{ok, dec(0x80)}, Pass},
		{"other stream acked", []*packet{ok, dec(0x84)}, Fail},
		{"no decoder stream", []*packet{ok}, Fail},
		{"closed", []*packet{seenPacket(&wire.ConnectionCloseFrame{Application: true, ErrorCode: 0x200})}, Inconclusive},
		{"nothing", nil, Inconclusive},
	} {
		if j := judgeSectionAck(h3Observe(tc.ps, -1, 0), 0); j.v != tc.want {
			t.Errorf("section ack, %s: %s (%s), want %s", tc.name, j.v, j.sentence, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		ps   []*packet
		want Verdict
	}{
		{"static", []*packet{ok, enc()}, Pass},
		{"capacity 0 instruction", []*packet{ok, enc(0x20)}, Fail},
		{"dynamic section", []*packet{ok, dynamic}, Fail},
		{"no answer", []*packet{enc()}, Inconclusive},
	} {
		if j := judgeZeroCapacity(h3Observe(tc.ps, -1, 0), []uint64{0, 4}); j.v != tc.want {
			t.Errorf("zero capacity, %s: %s (%s), want %s", tc.name, j.v, j.sentence, tc.want)
		}
	}
	dynamic2 := streamPacket(8, cat(headersFrameOf([]byte{0x02, 0x00, 0x80}), rawquic.H3Frame(0x00, []byte("x"))), true)
	for _, tc := range []struct {
		name              string
		ps                []*packet
		capacity, blocked Verdict
		dynamic           bool
	}{
		{"static", []*packet{ok}, Pass, Pass, false},
		{"one blocked", []*packet{ok, enc(0x3f, 0xe1, 0x01), dynamic}, Pass, Pass, true},
		{"capacity too big", []*packet{ok, enc(0x3f, 0xe2, 0x01)}, Fail, Pass, false},
		{"two blocked", []*packet{dynamic, dynamic2}, Pass, Fail, true},
	} {
		js, dyn := judgeCapacityRespected(h3Observe(tc.ps, -1, 0), []uint64{0, 4, 8}, 256, 1)
		if js[0].v != tc.capacity || js[1].v != tc.blocked || dyn != tc.dynamic {
			t.Errorf("capacity respected, %s: %s, %s, dynamic %v (%s / %s)", tc.name, js[0].v, js[1].v, dyn, js[0].sentence, js[1].sentence)
		}
	}
}

func TestDynamicRequest(t *testing.T) {
	p := &Profile{Target: Target{Address: "127.0.0.1:443"}}
	ins, section, n := dynamicRequest(p, "/small.txt", 4096, 4096)
	if n != 3 || len(ins) != 4 {
		t.Fatalf("%d inserts, %d instructions", n, len(ins))
	}
	parsed, rest := parseEncoderStream(cat(ins...))
	if len(parsed) != 4 || len(rest) != 0 || parsed[0] != (qpackInstr{kind: qpackSetCapacity, value: 4096}) {
		t.Errorf("instructions parse as %+v, rest %x", parsed, rest)
	}
	// Required Insert Count 3 with MaxEntries 128 encodes as 4; Base 3.
	if enc, _ := sectionInsertCount(section); enc != 4 || section[1] != 0x00 {
		t.Errorf("section prefix %x", section[:2])
	}
	// Only the entries that fit are inserted: 50 bytes hold ":path:
	// /small.txt" (47 bytes) but not ":authority: localhost" (51).
	_, _, n = dynamicRequest(p, "/small.txt", 4096, 50)
	if n != 1 {
		t.Errorf("capacity 50 holds %d inserts, want 1", n)
	}
}
