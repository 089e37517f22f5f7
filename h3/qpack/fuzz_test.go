package qpack

import (
	"context"
	"errors"
	"testing"
)

// Fuzz targets for the parsers a peer feeds: the encoder stream (into a
// Decoder), the decoder stream (into an Encoder) and field sections. A
// hostile peer may get a connection error, never a panic, a hang or a
// table above its capacity.

func FuzzEncoderStream(f *testing.F) {
	f.Add(appendInsertLiteral(appendSetCapacity(nil, 4096), "x-quiver", "dynamic"))
	f.Add(appendDuplicate(appendInsertNameRef(appendSetCapacity(nil, 200), true, 17, "GET"), 0))
	f.Add(appendSetCapacity(nil, 1<<40))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(512, 4, func([]byte) {})
		// In two writes, cut anywhere: a stream delivers bytes in pieces.
		cut := len(b) / 3
		err := d.WriteEncoderStream(b[:cut])
		if err == nil {
			err = d.WriteEncoderStream(b[cut:])
		}
		var qe *Error
		if err != nil && (!errors.As(err, &qe) || qe.Code != ErrEncoderStream) {
			t.Fatalf("error of the wrong kind: %v", err)
		}
		if d.t.size > d.t.capacity || d.t.capacity > 512 {
			t.Fatalf("table of %d bytes, capacity %d", d.t.size, d.t.capacity)
		}
		if uint64(len(d.buf)) > 2*2*512+32 {
			t.Fatalf("%d bytes buffered", len(d.buf))
		}
	})
}

func FuzzDecoderStream(f *testing.F) {
	f.Add(appendCountIncrement(appendSectionAck(nil, 0), 1))
	f.Add(appendCancelStream(nil, 1<<40))
	f.Add([]byte{0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		e := NewEncoder(0, func([]byte) {})
		e.SetPeerSettings(4096)
		e.Encode(0, []HeaderField{{"x-a", "1"}, {"x-b", "2"}})
		err := e.WriteDecoderStream(b)
		var qe *Error
		if err != nil && (!errors.As(err, &qe) || qe.Code != ErrDecoderStream) {
			t.Fatalf("error of the wrong kind: %v", err)
		}
		if e.known > e.t.inserted() {
			t.Fatalf("Known Received Count %d above %d inserts", e.known, e.t.inserted())
		}
	})
}

func FuzzDecodeSection(f *testing.F) {
	p := &pair{}
	p.enc = NewEncoder(0, func([]byte) {})
	p.enc.SetPeerSettings(256)
	f.Add(p.enc.Encode(0, []HeaderField{{":status", "200"}, {"x-quiver", "1"}}))
	f.Add([]byte{0x02, 0x00, 0x80, 0x10, 0x00, 0x01, 0x41})
	f.Add([]byte{0x00, 0x00, 0x2f, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(256, 0, func([]byte) {})
		// Two entries, so that dynamic references can resolve.
		if err := d.WriteEncoderStream(appendInsertLiteral(appendInsertLiteral(appendSetCapacity(nil, 256), "x-a", "1"), "x-b", "2")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a section that would block must not hang the fuzzer
		fields, err := d.Decode(ctx, 0, b, 4096)
		var qe *Error
		var tl *TooLargeError
		if err != nil && !errors.As(err, &qe) && !errors.As(err, &tl) && !errors.Is(err, context.Canceled) {
			t.Fatalf("error of the wrong kind: %v", err)
		}
		var size uint64
		for _, f := range fields {
			size += f.Size()
		}
		if size > 4096 {
			t.Fatalf("decoded %d bytes under a 4096-byte limit", size)
		}
	})
}
