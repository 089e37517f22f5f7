package h3

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

func TestVarint(t *testing.T) {
	// RFC 9000 §A.1 examples.
	for _, tc := range []struct {
		hex string
		v   uint64
	}{
		{"c2197c5eff14e88c", 151288809941952652},
		{"9d7f3e7d", 494878333},
		{"7bbd", 15293},
		{"25", 37},
		{"4025", 37}, // non-minimal encodings are valid
	} {
		b := mustHex(t, tc.hex)
		v, n := parseVarint(b)
		if v != tc.v || n != len(b) {
			t.Errorf("parseVarint(%s) = %d, %d; want %d, %d", tc.hex, v, n, tc.v, len(b))
		}
		r, err := readVarint(bytes.NewReader(b))
		if err != nil || r != tc.v {
			t.Errorf("readVarint(%s) = %d, %v", tc.hex, r, err)
		}
		if tc.hex != "4025" {
			if got := appendVarint(nil, tc.v); !bytes.Equal(got, b) {
				t.Errorf("appendVarint(%d) = %x, want %s", tc.v, got, tc.hex)
			}
		}
	}
	if _, n := parseVarint([]byte{0x40}); n != 0 {
		t.Errorf("short varint parsed")
	}
}

func TestFrameRoundTrip(t *testing.T) {
	frames := []Frame{
		&DataFrame{Data: []byte("hello")},
		&HeadersFrame{FieldSection: []byte{0, 0, 0xd1}},
		&CancelPushFrame{PushID: 7},
		&SettingsFrame{Settings: []Setting{{0x6, 16384}, {0x21, 1}}},
		&PushPromiseFrame{PushID: 3, FieldSection: []byte{0, 0}},
		&GoAwayFrame{ID: 1 << 40},
		&MaxPushIDFrame{PushID: 9},
		&UnknownFrame{FrameType: 0x21 + 0x1f*5, Payload: []byte("grease")},
	}
	for _, f := range frames {
		b := f.Append(nil)
		got, n, err := ParseFrame(b)
		if err != nil || n != len(b) {
			t.Fatalf("ParseFrame(%v) = %v, %d, %v", f.Type(), got, n, err)
		}
		if !reflect.DeepEqual(got, f) {
			t.Errorf("round trip of %v: got %#v, want %#v", f.Type(), got, f)
		}
		if _, _, err := ParseFrame(b[:len(b)-1]); err != ErrShortFrame {
			t.Errorf("ParseFrame of truncated %v: %v, want ErrShortFrame", f.Type(), err)
		}
	}
}

func TestParseFrameErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		hex  string
		code ErrCode
	}{
		{"GOAWAY with extra byte", "07020000", ErrCodeFrameError},
		{"GOAWAY empty", "0700", ErrCodeFrameError},
		{"MAX_PUSH_ID truncated varint", "0d0140", ErrCodeFrameError},
		{"CANCEL_PUSH extra", "030201ff", ErrCodeFrameError},
		{"SETTINGS id without value", "040106", ErrCodeFrameError},
		{"SETTINGS duplicate", "0404060106 02", ErrCodeSettingsError},
		{"SETTINGS HTTP/2 ENABLE_PUSH", "04020201", ErrCodeSettingsError},
		{"SETTINGS HTTP/2 MAX_FRAME_SIZE", "04020501", ErrCodeSettingsError},
		{"SETTINGS H3_DATAGRAM=2", "0403403302", ErrCodeSettingsError},
		{"PUSH_PROMISE empty", "0500", ErrCodeFrameError},
		{"HTTP/2 PRIORITY", "0200", ErrCodeFrameUnexpected},
		{"HTTP/2 PING", "0600", ErrCodeFrameUnexpected},
		{"HTTP/2 WINDOW_UPDATE", "0800", ErrCodeFrameUnexpected},
		{"HTTP/2 CONTINUATION", "0900", ErrCodeFrameUnexpected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseFrame(mustHex(t, tc.hex))
			e, ok := asH3Error(err)
			if !ok || e.Code != tc.code || e.Stream {
				t.Fatalf("err = %v, want connection error %v", err, tc.code)
			}
		})
	}
}

func TestFrameReaderTruncated(t *testing.T) {
	// RFC 9114 §7.1: a frame cut short by a clean FIN is H3_FRAME_ERROR,
	// while FIN on a frame boundary is a clean end.
	full := (&HeadersFrame{FieldSection: []byte{0, 0, 0xd1}}).Append(nil)
	for cut := 1; cut < len(full); cut++ {
		fr := newFrameReader(bufio.NewReader(bytes.NewReader(full[:cut])), 1024)
		_, _, err := fr.readFrame()
		if e, ok := asH3Error(err); !ok || e.Code != ErrCodeFrameError {
			t.Errorf("cut at %d: %v, want H3_FRAME_ERROR", cut, err)
		}
	}
	fr := newFrameReader(bufio.NewReader(bytes.NewReader(full)), 1024)
	if _, _, err := fr.readFrame(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fr.readFrame(); !isEOF(err) {
		t.Errorf("at boundary: %v, want io.EOF", err)
	}
}

func TestFrameReaderSkipsUnknown(t *testing.T) {
	var b []byte
	b = (&UnknownFrame{FrameType: 0x21, Payload: make([]byte, 5000)}).Append(b)
	b = (&UnknownFrame{FrameType: 0x1234}).Append(b)
	b = (&GoAwayFrame{ID: 8}).Append(b)
	fr := newFrameReader(bufio.NewReader(bytes.NewReader(b)), 16)
	f, _, err := fr.readFrame()
	if err != nil || !reflect.DeepEqual(f, &GoAwayFrame{ID: 8}) {
		t.Fatalf("readFrame = %v, %v", f, err)
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
