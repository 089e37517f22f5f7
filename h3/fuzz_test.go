package h3

import (
	"bufio"
	"bytes"
	"io"
	"io/fs"
	"strings"
	"testing"
)

func FuzzParseFrame(f *testing.F) {
	for _, fr := range []Frame{
		&DataFrame{Data: []byte("x")},
		&HeadersFrame{FieldSection: encodeRaw(goodRequest)},
		&SettingsFrame{Settings: []Setting{{6, 1 << 20}, {0x21, 0}, {0x33, 1}}},
		&GoAwayFrame{ID: 4}, &MaxPushIDFrame{PushID: 1}, &CancelPushFrame{PushID: 2},
		&PushPromiseFrame{PushID: 1, FieldSection: []byte{0, 0}},
		&UnknownFrame{FrameType: 0x21, Payload: []byte("g")},
	} {
		f.Add(fr.Append(nil))
	}
	f.Add([]byte{0x04, 0x04, 0x06, 0x01, 0x06, 0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, n, err := ParseFrame(b)
		if err != nil {
			if _, ok := asH3Error(err); !ok && err != ErrShortFrame {
				t.Fatalf("untyped error %v", err)
			}
		} else {
			if n <= 0 || n > len(b) {
				t.Fatalf("n = %d of %d", n, len(b))
			}
			// What parses re-encodes to something that parses the same.
			again, m, err := ParseFrame(fr.Append(nil))
			if err != nil || m != len(fr.Append(nil)) || again.Type() != fr.Type() {
				t.Fatalf("re-encoded %v: %v, %v", fr.Type(), again, err)
			}
		}
		// The streaming reader agrees and never panics.
		r := newFrameReader(bufio.NewReaderSize(bytes.NewReader(b), 16), 1<<16)
		for {
			f, dataLen, err := r.readFrame()
			if err != nil {
				if _, ok := asH3Error(err); !ok && err != io.EOF {
					if _, ok := err.(errFieldSectionTooLarge); !ok {
						t.Fatalf("reader: untyped error %v", err)
					}
				}
				break
			}
			if f == nil {
				if err := r.skip(FrameData, dataLen); err != nil {
					break
				}
			}
		}
	})
}

func FuzzHQRequest(f *testing.F) {
	for _, s := range []string{"GET /\r\n", "GET /a/b\n", "GET /../x", "GET /a/../../b\r\n", "GET //x", "GET /%2e%2e/x", "POST /x\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		name, err := ParseHQRequest(line)
		if err != nil {
			return
		}
		if !fs.ValidPath(name) || strings.HasPrefix(name, "/") {
			t.Fatalf("%q gave invalid name %q", line, name)
		}
		for _, elem := range strings.Split(name, "/") {
			if elem == ".." {
				t.Fatalf("%q escapes the root: %q", line, name)
			}
		}
		// The streaming reader yields the same line.
		got, err := readHQRequest(bytes.NewReader(line))
		if err == nil && len(line) <= MaxHQRequest && bytes.IndexByte(line, '\n') == len(line)-1 && !bytes.Equal(got, line) {
			t.Fatalf("readHQRequest(%q) = %q", line, got)
		}
	})
}

func FuzzRequestHead(f *testing.F) {
	f.Add(encodeRaw(goodRequest))
	f.Add(encodeRaw(fieldsOf(":method", "CONNECT", ":authority", "a:1")))
	f.Add(encodeRaw(append(goodRequest[:4:4], fieldsOf("content-length", "3", "te", "trailers")...)))
	f.Fuzz(func(t *testing.T, section []byte) {
		fields, err := decodeFieldSection(section, 1<<16)
		if err != nil {
			return
		}
		rh, err := parseRequestHead(fields)
		if err != nil {
			if e, ok := asH3Error(err); !ok || e.Code != ErrCodeMessageError || !e.Stream {
				t.Fatalf("error %v is not an H3_MESSAGE_ERROR stream error", err)
			}
			return
		}
		if rh.method == "" {
			t.Fatal("accepted a request without :method")
		}
		if _, err := parseResponseHead(fields); err == nil {
			t.Fatal("a section is both a valid request and a valid response")
		}
	})
}
