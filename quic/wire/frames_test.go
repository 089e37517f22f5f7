package wire

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

var token16 = [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

// frameCases is one value of every frame type and variant; it seeds the
// round-trip test and FuzzParseFrame.
func frameCases() []Frame {
	data := []byte("hello, quic")
	return []Frame{
		&PaddingFrame{Length: 1},
		&PaddingFrame{Length: 37},
		&PingFrame{},
		&AckFrame{Ranges: []AckRange{{0, 0}}},
		&AckFrame{Ranges: []AckRange{{Smallest: 90, Largest: 100}, {Smallest: 50, Largest: 80}, {Smallest: 0, Largest: 48}}, AckDelay: 1234},
		&AckFrame{Ranges: []AckRange{{Smallest: 1 << 40, Largest: 1<<40 + 5}}, AckDelay: 7, ECN: true, ECT0: 10, ECT1: 1 << 20, ECNCE: 3},
		&ResetStreamFrame{StreamID: 4, ErrorCode: 0x1234, FinalSize: 1 << 33},
		&StopSendingFrame{StreamID: 1 << 61, ErrorCode: 7},
		&CryptoFrame{Offset: 0, Data: data},
		&CryptoFrame{Offset: 1 << 20, Data: []byte{}},
		&NewTokenFrame{Token: []byte{0xde, 0xad, 0xbe, 0xef}},
		&StreamFrame{StreamID: 0, Data: data},
		&StreamFrame{StreamID: 3, Data: data, Fin: true},
		&StreamFrame{StreamID: 5, Offset: 1000, HasOffset: true, Data: data},
		&StreamFrame{StreamID: 7, Offset: 1000, HasOffset: true, Data: data, Fin: true},
		&StreamFrame{StreamID: 8, HasOffset: true, Data: data},
		&StreamFrame{StreamID: 9, Data: data, NoLength: true},
		&StreamFrame{StreamID: 10, Data: []byte{}, NoLength: true, Fin: true},
		&StreamFrame{StreamID: 11, Offset: 1 << 50, HasOffset: true, Data: data, NoLength: true},
		&StreamFrame{StreamID: 12, Offset: 1 << 50, HasOffset: true, Data: []byte{}, NoLength: true, Fin: true},
		&StreamFrame{StreamID: 13, Fin: true, Data: []byte{}},
		&MaxDataFrame{Maximum: 1 << 30},
		&MaxStreamDataFrame{StreamID: 2, Maximum: 99},
		&MaxStreamsFrame{Bidi: true, Maximum: 100},
		&MaxStreamsFrame{Bidi: false, Maximum: MaxStreams},
		&DataBlockedFrame{Limit: 5},
		&StreamDataBlockedFrame{StreamID: 6, Limit: 1 << 40},
		&StreamsBlockedFrame{Bidi: true, Limit: 3},
		&StreamsBlockedFrame{Bidi: false, Limit: MaxStreams},
		&NewConnectionIDFrame{SequenceNumber: 3, RetirePriorTo: 1, ConnectionID: []byte{1, 2, 3, 4, 5, 6, 7, 8}, StatelessResetToken: token16},
		&NewConnectionIDFrame{SequenceNumber: 9, RetirePriorTo: 9, ConnectionID: bytes.Repeat([]byte{7}, 20), StatelessResetToken: token16},
		&RetireConnectionIDFrame{SequenceNumber: 2},
		&PathChallengeFrame{Data: [8]byte{1, 2, 3, 4, 5, 6, 7, 8}},
		&PathResponseFrame{Data: [8]byte{8, 7, 6, 5, 4, 3, 2, 1}},
		&ConnectionCloseFrame{ErrorCode: uint64(ProtocolViolation), FrameType: FrameTypeAckFrequency, Reason: []byte("bad frame")},
		&ConnectionCloseFrame{Application: true, ErrorCode: 0x100, Reason: []byte{}},
		&HandshakeDoneFrame{},
		&DatagramFrame{Data: data},
		&DatagramFrame{Data: data, NoLength: true},
		&DatagramFrame{Data: []byte{}},
		&AckFrequencyFrame{SequenceNumber: 1, AckElicitingThreshold: 9, RequestedMaxAckDelay: 25000, ReorderingThreshold: 3},
		&ImmediateAckFrame{},
	}
}

func TestFrameRoundTrip(t *testing.T) {
	var p Parser
	for _, f := range frameCases() {
		b := f.Append([]byte{0xff}) // a prefix checks Append appends
		b = b[1:]
		if len(b) != f.Len() {
			t.Errorf("%T %+v: Len %d, encoded %d bytes", f, f, f.Len(), len(b))
		}
		got, n, err := p.Parse(b)
		if err != nil {
			t.Errorf("%T %+v: parse %x: %v", f, f, b, err)
			continue
		}
		if n != len(b) {
			t.Errorf("%T: parsed %d of %d bytes", f, n, len(b))
		}
		if got.Type() != f.Type() {
			t.Errorf("%T: type %v, want %v", f, got.Type(), f.Type())
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", f) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, f)
		}
		if re := got.Append(nil); !bytes.Equal(re, b) {
			t.Errorf("%T: re-encoded %x, want %x", f, re, b)
		}
		if !f.Type().Known() {
			t.Errorf("%v not Known", f.Type())
		}
		// Every strict prefix of a frame that has a length is truncated;
		// frames without one (PADDING, NoLength STREAM/DATAGRAM) may parse.
		for i := 1; i < len(b); i++ {
			if _, _, err := p.Parse(b[:i]); err == nil {
				switch g := f.(type) {
				case *PaddingFrame:
				case *StreamFrame:
					if !g.NoLength {
						t.Errorf("%T: prefix %x parsed", f, b[:i])
					}
				case *DatagramFrame:
					if !g.NoLength {
						t.Errorf("%T: prefix %x parsed", f, b[:i])
					}
				default:
					t.Errorf("%T: prefix %x parsed", f, b[:i])
				}
			}
		}
	}
}

// TestAckFrequencyVectors uses the test vectors of
// docs/ack-frequency-engine.md §1 (draft-ietf-quic-ack-frequency-14
// codepoints).
func TestAckFrequencyVectors(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		f    Frame
		code TransportErrorCode
	}{
		{"40af0009800061a803", &AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 9, RequestedMaxAckDelay: 25000, ReorderingThreshold: 3}, NoError},
		{"40af013f800249f003", &AckFrequencyFrame{SequenceNumber: 1, AckElicitingThreshold: 63, RequestedMaxAckDelay: 150000, ReorderingThreshold: 3}, NoError},
		{"40af020980fa000003", nil, ProtocolViolation},
		{"1f", &ImmediateAckFrame{}, NoError},
		{"40ac", nil, FrameEncodingError}, // legacy IMMEDIATE_ACK (draft-01 to -06) is unknown here
	} {
		b := unhex(t, tc.hex)
		got, n, err := ParseFrame(b)
		if tc.f == nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != tc.code {
				t.Errorf("%s: err %v, want %v", tc.hex, err, tc.code)
			}
			continue
		}
		if err != nil || n != len(b) || fmt.Sprint(got) != fmt.Sprint(tc.f) {
			t.Errorf("%s: got %+v, %d, %v; want %+v", tc.hex, got, n, err, tc.f)
		}
		if enc := tc.f.Append(nil); !bytes.Equal(enc, b) {
			t.Errorf("encode %+v = %x, want %s", tc.f, enc, tc.hex)
		}
	}
}

func TestFrameErrors(t *testing.T) {
	big := AppendVarint(nil, MaxVarint)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	v := func(x uint64) []byte { return AppendVarint(nil, x) }
	for _, tc := range []struct {
		name   string
		b      []byte
		code   TransportErrorCode
		reason string
	}{
		{"empty", nil, FrameEncodingError, "§12.4"},
		{"unknown type", []byte{0x21}, FrameEncodingError, "unknown frame type"},
		{"unknown 2-byte type", []byte{0x40, 0x40}, FrameEncodingError, "unknown frame type"},
		{"non-minimal PING", []byte{0x40, 0x01}, ProtocolViolation, "shortest possible"},
		{"non-minimal STREAM", []byte{0x40, 0x08, 0, 0}, ProtocolViolation, "shortest possible"},
		{"non-minimal MAX_DATA", []byte{0x40, 0x10, 0}, ProtocolViolation, "shortest possible"},
		{"truncated type", []byte{0x40}, FrameEncodingError, "truncated"},
		{"ACK first range underflow", []byte{0x02, 5, 0, 0, 6}, FrameEncodingError, "§19.3.1"},
		{"ACK gap underflow", []byte{0x02, 10, 0, 1, 2, 7, 0}, FrameEncodingError, "§19.3.1"},
		{"ACK gap to exactly -1", []byte{0x02, 10, 0, 1, 2, 7, 0}, FrameEncodingError, "§19.3.1"},
		{"ACK range length underflow", []byte{0x02, 10, 0, 1, 2, 0, 7}, FrameEncodingError, "§19.3.1"},
		{"ACK range count too big", []byte{0x02, 10, 0, 5, 0, 0, 0}, FrameEncodingError, "§20.1"},
		{"ACK truncated", []byte{0x02, 10, 0}, FrameEncodingError, "truncated"},
		{"ACK_ECN truncated counts", []byte{0x03, 10, 0, 0, 0, 1, 1}, FrameEncodingError, "truncated"},
		{"STREAM offset+len > 2^62-1", cat([]byte{0x0e, 0}, big, []byte{1, 'x'}), FrameEncodingError, "§19.8"},
		{"STREAM data past end", []byte{0x0a, 0, 5, 'a'}, FrameEncodingError, "truncated"},
		{"CRYPTO offset+len > 2^62-1", cat([]byte{0x06}, big, []byte{1, 'x'}), FrameEncodingError, "§19.6"},
		{"NEW_TOKEN empty", []byte{0x07, 0}, FrameEncodingError, "§19.7"},
		{"MAX_STREAMS > 2^60", cat([]byte{0x12}, v(MaxStreams+1)), FrameEncodingError, "§19.11"},
		{"MAX_STREAMS uni > 2^60", cat([]byte{0x13}, v(MaxStreams+1)), FrameEncodingError, "§19.11"},
		{"STREAMS_BLOCKED > 2^60", cat([]byte{0x16}, v(MaxStreams+1)), FrameEncodingError, "§19.14"},
		{"NEW_CONNECTION_ID length 0", cat([]byte{0x18, 1, 0, 0}, token16[:]), FrameEncodingError, "§19.15"},
		{"NEW_CONNECTION_ID length 21", cat([]byte{0x18, 1, 0, 21}, make([]byte, 21), token16[:]), FrameEncodingError, "§19.15"},
		{"NEW_CONNECTION_ID retire > seq", cat([]byte{0x18, 1, 2, 4, 1, 2, 3, 4}, token16[:]), FrameEncodingError, "Retire Prior To"},
		{"NEW_CONNECTION_ID truncated token", []byte{0x18, 1, 0, 1, 9, 0, 0}, FrameEncodingError, "truncated"},
		{"PATH_CHALLENGE short", []byte{0x1a, 1, 2, 3}, FrameEncodingError, "truncated"},
		{"CONNECTION_CLOSE reason past end", []byte{0x1c, 1, 0, 10, 'a'}, FrameEncodingError, "truncated"},
		{"DATAGRAM length past end", []byte{0x31, 4, 'a'}, FrameEncodingError, "truncated"},
		{"ACK_FREQUENCY delay 2^14 ms", cat([]byte{0x40, 0xaf, 0, 1}, v(16384000), []byte{1}), ProtocolViolation, "2^14"},
	} {
		_, _, err := ParseFrame(tc.b)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: err = %v, want *Error", tc.name, err)
			continue
		}
		if e.Code != tc.code || !strings.Contains(e.Error(), tc.reason) {
			t.Errorf("%s: err = %v, want code %v and %q", tc.name, e, tc.code, tc.reason)
		}
	}
}

func TestAckFrameRanges(t *testing.T) {
	// An ACK with ranges 1-2 gap: Largest 10, first range 0 -> [10,10];
	// gap 0 -> largest 8; length 1 -> [7,8]; gap 5 -> largest 0, [0,0].
	b := []byte{0x02, 10, 0x40, 0x20, 2, 0, 0, 1, 5, 0}
	f, n, err := ParseFrame(b)
	if err != nil || n != len(b) {
		t.Fatalf("parse: %v, %d", err, n)
	}
	ack := f.(*AckFrame)
	want := []AckRange{{10, 10}, {7, 8}, {0, 0}}
	if fmt.Sprint(ack.Ranges) != fmt.Sprint(want) || ack.AckDelay != 32 {
		t.Fatalf("ranges %v delay %d, want %v 32", ack.Ranges, ack.AckDelay, want)
	}
	for pn, in := range map[uint64]bool{0: true, 1: false, 6: false, 7: true, 8: true, 9: false, 10: true, 11: false} {
		if ack.Acks(pn) != in {
			t.Errorf("Acks(%d) = %v", pn, !in)
		}
	}
	if ack.LargestAcked() != 10 {
		t.Errorf("LargestAcked = %d", ack.LargestAcked())
	}
}

func TestPaddingRun(t *testing.T) {
	b := append(make([]byte, 100), 0x01, 0, 0)
	var p Parser
	f, n, err := p.Parse(b)
	if err != nil || n != 100 || f.(*PaddingFrame).Length != 100 {
		t.Fatalf("got %+v, %d, %v", f, n, err)
	}
	f, n, err = p.Parse(b[100:])
	if err != nil || n != 1 || f.Type() != FrameTypePing {
		t.Fatalf("got %+v, %d, %v", f, n, err)
	}
	f, n, err = p.Parse(b[101:])
	if err != nil || n != 2 || f.(*PaddingFrame).Length != 2 {
		t.Fatalf("got %+v, %d, %v", f, n, err)
	}
}

// TestRawFrame checks that arbitrary bytes are written verbatim.
func TestRawFrame(t *testing.T) {
	f := &RawFrame{Bytes: []byte{0x40, 0x01}}
	if got := f.Append([]byte{9}); !bytes.Equal(got, []byte{9, 0x40, 0x01}) || f.Len() != 2 || f.Type() != FrameTypePing {
		t.Errorf("RawFrame: %x, %d, %v", got, f.Len(), f.Type())
	}
}

// TestFrameTypeTable checks the "Pkts" column and flags of RFC 9000 §12.4
// Table 3 for a few rows, plus the extension frames.
func TestFrameTypeTable(t *testing.T) {
	I, Z, H, O := PacketTypeInitial, PacketType0RTT, PacketTypeHandshake, PacketType1RTT
	for _, tc := range []struct {
		t             FrameType
		pkts          []PacketType
		eliciting, cc bool
		probing       bool
	}{
		{FrameTypePadding, []PacketType{I, H, Z, O}, false, true, true},
		{FrameTypePing, []PacketType{I, H, Z, O}, true, true, false},
		{FrameTypeAck, []PacketType{I, H, O}, false, false, false},
		{FrameTypeAckECN, []PacketType{I, H, O}, false, false, false},
		{FrameTypeCrypto, []PacketType{I, H, O}, true, true, false},
		{FrameTypeNewToken, []PacketType{O}, true, true, false},
		{FrameTypeStream | 7, []PacketType{Z, O}, true, true, false},
		{FrameTypeNewConnectionID, []PacketType{Z, O}, true, true, true},
		{FrameTypePathChallenge, []PacketType{Z, O}, true, true, true},
		{FrameTypePathResponse, []PacketType{O}, true, true, true},
		{FrameTypeConnectionClose, []PacketType{I, H, Z, O}, false, true, false},
		{FrameTypeConnectionCloseApplication, []PacketType{Z, O}, false, true, false},
		{FrameTypeHandshakeDone, []PacketType{O}, true, true, false},
		{FrameTypeDatagram, []PacketType{Z, O}, true, true, false},
		{FrameTypeDatagramLen, []PacketType{Z, O}, true, true, false},
		{FrameTypeAckFrequency, []PacketType{O}, true, true, false},
		{FrameTypeImmediateAck, []PacketType{O}, true, true, false},
		{0x21, nil, false, false, false},
	} {
		for pt := PacketTypeUnknown; pt <= PacketType1RTT+1; pt++ {
			want := false
			for _, a := range tc.pkts {
				want = want || a == pt
			}
			if got := tc.t.AllowedIn(pt); got != want {
				t.Errorf("%v.AllowedIn(%v) = %v, want %v", tc.t, pt, got, want)
			}
		}
		if tc.t.AckEliciting() != tc.eliciting || tc.t.CongestionControlled() != tc.cc || tc.t.Probing() != tc.probing {
			t.Errorf("%v: eliciting %v cc %v probing %v", tc.t, tc.t.AckEliciting(), tc.t.CongestionControlled(), tc.t.Probing())
		}
	}
	if !(FrameTypeStream | 1).FlowControlled() || FrameTypeCrypto.FlowControlled() {
		t.Error("FlowControlled")
	}
}

func TestParseAllocs(t *testing.T) {
	payload := mixedPayload()
	var p Parser
	parseAll(t, &p, payload) // warm up the ACK range buffer
	allocs := testing.AllocsPerRun(100, func() { parseAll(t, &p, payload) })
	if allocs != 0 {
		t.Errorf("parsing a packet payload allocates %v times, want 0", allocs)
	}
}

func parseAll(t testing.TB, p *Parser, b []byte) {
	for len(b) > 0 {
		_, n, err := p.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
}

// mixedPayload is a typical 1-RTT payload: an ACK with a few ranges, flow
// control updates, two STREAM frames and padding.
func mixedPayload() []byte {
	var b []byte
	b = (&AckFrame{Ranges: []AckRange{{990, 1000}, {900, 980}, {500, 800}}, AckDelay: 100}).Append(b)
	b = (&MaxDataFrame{Maximum: 1 << 24}).Append(b)
	b = (&MaxStreamDataFrame{StreamID: 4, Maximum: 1 << 22}).Append(b)
	b = (&PingFrame{}).Append(b)
	b = (&StreamFrame{StreamID: 4, Offset: 1 << 20, Data: make([]byte, 500)}).Append(b)
	b = (&CryptoFrame{Offset: 3000, Data: make([]byte, 100)}).Append(b)
	b = (&StreamFrame{StreamID: 8, Offset: 1 << 10, Data: make([]byte, 500), NoLength: true}).Append(b)
	return b
}

func TestErrorStrings(t *testing.T) {
	for c, want := range map[TransportErrorCode]string{
		NoError: "NO_ERROR", FrameEncodingError: "FRAME_ENCODING_ERROR", NoViablePath: "NO_VIABLE_PATH",
		CryptoError(0x78): "CRYPTO_ERROR(0x178)", 0x1234: "0x1234", VersionNegotiationError: "VERSION_NEGOTIATION_ERROR",
	} {
		if c.String() != want {
			t.Errorf("%#x.String() = %q, want %q", uint64(c), c.String(), want)
		}
	}
	if a, ok := CryptoError(120).TLSAlert(); !ok || a != 120 {
		t.Error("TLSAlert")
	}
	if _, ok := ProtocolViolation.TLSAlert(); ok {
		t.Error("TLSAlert of PROTOCOL_VIOLATION")
	}
	e := &Error{Code: FrameEncodingError, FrameType: FrameTypeAck, Reason: "x"}
	if e.Error() != "quic: FRAME_ENCODING_ERROR in frame 0x2: x" {
		t.Errorf("Error() = %q", e.Error())
	}
}

// TestAckFrameNoRanges: an ACK frame without a range acknowledges nothing,
// so it has no encoding; before, it was written as an acknowledgment of
// packet 0, which a tester filtering its ACKs sent by mistake.
func TestAckFrameNoRanges(t *testing.T) {
	for _, f := range []*AckFrame{{}, {ECN: true, ECT0: 3}, {AckDelay: 40}} {
		if got := f.Append([]byte{0xaa}); len(got) != 1 {
			t.Errorf("%+v: Append wrote % x, want nothing", f, got[1:])
		}
		if f.Len() != 0 {
			t.Errorf("%+v: Len %d, want 0", f, f.Len())
		}
		if f.Acks(0) {
			t.Errorf("%+v acknowledges packet 0", f)
		}
	}
	one := &AckFrame{Ranges: []AckRange{{Smallest: 0, Largest: 0}}}
	if b := one.Append(nil); len(b) != one.Len() || len(b) != 5 {
		t.Errorf("ACK of packet 0: % x (Len %d)", b, one.Len())
	}
}
