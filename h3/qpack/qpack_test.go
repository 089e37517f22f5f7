package qpack

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
)

func TestIntegers(t *testing.T) {
	for _, n := range []int{3, 4, 5, 6, 7, 8} {
		for _, v := range []uint64{0, 1, 1<<n - 2, 1<<n - 1, 1 << n, 127, 128, 1337, 1<<32 + 5, maxInt} {
			b := appendInt(nil, n, 0, v)
			got, rest, err := readInt(append(b, 0xee), n)
			if err != nil || got != v || !bytes.Equal(rest, []byte{0xee}) {
				t.Errorf("prefix %d, %d: got %d, %v, rest %x", n, v, got, err, rest)
			}
			if _, _, err := readInt(b[:len(b)-1], n); len(b) > 1 && !errors.Is(err, errIncomplete) {
				t.Errorf("prefix %d, %d cut short: %v", n, v, err)
			}
		}
	}
	// RFC 7541 §C.1.2: 1337 with a 5-bit prefix is 1f 9a 0a.
	if b := appendInt(nil, 5, 0, 1337); !bytes.Equal(b, []byte{0x1f, 0x9a, 0x0a}) {
		t.Errorf("1337: %x", b)
	}
	if _, _, err := readInt([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 8); !errors.Is(err, errIntTooLarge) {
		t.Errorf("a 70-bit integer: %v", err)
	}
}

func TestStrings(t *testing.T) {
	for _, s := range []string{"", "a", "www.example.com", strings.Repeat("\xff", 40), "custom-value"} {
		b := appendString(nil, 7, 0, s)
		got, rest, err := readString(b, 7, 100)
		if err != nil || got != s || len(rest) != 0 {
			t.Errorf("%q: %q, %v", s, got, err)
		}
		if _, _, err := readString(b, 7, uint64(len(s))-1); len(s) > 0 && !errors.Is(err, errStringTooLarge) {
			t.Errorf("%q over the limit: %v", s, err)
		}
	}
}

// pair is an encoder and a decoder wired to each other as the two ends
// of a connection; instructions travel when flush is called.
type pair struct {
	enc         *Encoder
	dec         *Decoder
	toDec, toEn bytes.Buffer
}

func newPair(t *testing.T, capacity, blocked uint64) *pair {
	p := &pair{}
	p.enc = NewEncoder(0, func(b []byte) { p.toDec.Write(b) })
	p.dec = NewDecoder(capacity, blocked, func(b []byte) { p.toEn.Write(b) })
	p.enc.SetPeerSettings(capacity)
	return p
}

func (p *pair) flush(t *testing.T) {
	t.Helper()
	if err := p.dec.WriteEncoderStream(p.toDec.Bytes()); err != nil {
		t.Fatal(err)
	}
	p.toDec.Reset()
	if err := p.enc.WriteDecoderStream(p.toEn.Bytes()); err != nil {
		t.Fatal(err)
	}
	p.toEn.Reset()
}

func TestDynamicTableRoundTrip(t *testing.T) {
	p := newPair(t, 4096, 16)
	fields := []HeaderField{{":status", "200"}, {"content-type", "text/html; charset=utf-8"}, {"server", "quiver"},
		{"x-quiver", "dynamic"}, {"content-length", "47"}, {"accept-ranges", "bytes"}}
	var sizes []int
	for i := 0; i < 3; i++ {
		sec := p.enc.Encode(uint64(4*i), fields)
		sizes = append(sizes, len(sec))
		p.flush(t) // inserts reach the decoder before the section
		got, err := p.dec.Decode(context.Background(), uint64(4*i), sec, 1<<16)
		if err != nil {
			t.Fatalf("section %d: %v", i, err)
		}
		if len(got) != len(fields) {
			t.Fatalf("section %d: %v", i, got)
		}
		for j := range got {
			if got[j] != fields[j] {
				t.Errorf("section %d field %d: %v, want %v", i, j, got[j], fields[j])
			}
		}
		p.flush(t) // Section Acknowledgment and Insert Count Increment
	}
	// The first section had to spell the fields out; the later ones
	// refer to the entries the decoder acknowledged.
	if sizes[1] >= sizes[0] || sizes[1] > 20 {
		t.Errorf("section sizes %v: the dynamic table saved nothing", sizes)
	}
	if p.enc.InsertCount() == 0 || p.enc.KnownReceivedCount() != p.enc.InsertCount() {
		t.Errorf("inserts %d, known %d", p.enc.InsertCount(), p.enc.KnownReceivedCount())
	}
	if len(p.enc.sections) != 0 {
		t.Errorf("sections left unacknowledged: %v", p.enc.sections)
	}
}

func TestEncoderStaticOnlyWithoutCapacity(t *testing.T) {
	var emitted []byte
	enc := NewEncoder(0, func(b []byte) { emitted = append(emitted, b...) })
	enc.SetPeerSettings(0)
	sec := enc.Encode(0, []HeaderField{{"x-a", "1"}, {"server", "quiver"}})
	// RFC 9204 §3.2.3: no encoder instruction when the capacity is 0.
	if len(emitted) != 0 || sec[0] != 0 {
		t.Errorf("emitted %x, section %x", emitted, sec)
	}
	dec := NewDecoder(0, 0, func([]byte) {})
	if got, err := dec.Decode(context.Background(), 0, sec, 1<<10); err != nil || len(got) != 2 || got[1].Value != "quiver" {
		t.Errorf("%v, %v", got, err)
	}
}

// TestEviction fills a small table: acknowledged, unreferenced entries
// are evicted; the encoder never evicts one a pending section refers to.
func TestEviction(t *testing.T) {
	p := newPair(t, 256, 0)
	for i := 0; i < 40; i++ {
		f := []HeaderField{{"x-n", strings.Repeat("v", i%7)}, {"server", "quiver"}}
		sec := p.enc.Encode(uint64(4*i), f)
		p.flush(t)
		got, err := p.dec.Decode(context.Background(), uint64(4*i), sec, 1<<16)
		if err != nil || got[0] != f[0] || got[1] != f[1] {
			t.Fatalf("round %d: %v, %v", i, got, err)
		}
		if i%3 != 0 {
			p.flush(t)
		}
		if p.dec.t.size > 256 || p.enc.t.size > 256 {
			t.Fatalf("table sizes %d, %d above 256", p.enc.t.size, p.dec.t.size)
		}
	}
	if p.enc.t.dropped == 0 {
		t.Error("nothing was evicted")
	}
}

func TestBlockedDecode(t *testing.T) {
	d := NewDecoder(4096, 1, func([]byte) {})
	// Required Insert Count 1 (encoded 2), Base 1, Indexed relative 0.
	sec := []byte{0x02, 0x00, 0x80}
	done := make(chan error, 1)
	var got []HeaderField
	go func() {
		var err error
		got, err = d.Decode(context.Background(), 0, sec, 1<<10)
		done <- err
	}()
	if err := d.WriteEncoderStream(appendInsertLiteral(appendSetCapacity(nil, 4096), "x-late", "1")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || len(got) != 1 || got[0] != (HeaderField{"x-late", "1"}) {
		t.Errorf("%v, %v", got, err)
	}
	// A cancelled wait sends Stream Cancellation.
	var out []byte
	d = NewDecoder(4096, 1, func(b []byte) { out = append(out, b...) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Decode(ctx, 8, sec, 1<<10); !errors.Is(err, context.Canceled) || !bytes.Equal(out, appendCancelStream(nil, 8)) {
		t.Errorf("%v, emitted %x", err, out)
	}
}

func wantCode(t *testing.T, what string, err error, code uint64) {
	t.Helper()
	var qe *Error
	if !errors.As(err, &qe) || qe.Code != code {
		t.Errorf("%s: %v, want code %#x", what, err, code)
	}
}

func TestDecoderErrors(t *testing.T) {
	newDec := func() *Decoder { return NewDecoder(256, 1, func([]byte) {}) }
	ctx := context.Background()
	wantCode(t, "capacity above the maximum", newDec().WriteEncoderStream(appendSetCapacity(nil, 257)), ErrEncoderStream)
	tooLarge := appendInsertLiteral(appendSetCapacity(nil, 64), "x-quiver", strings.Repeat("q", 160))
	wantCode(t, "entry too large", newDec().WriteEncoderStream(tooLarge), ErrEncoderStream)
	static120 := appendInsertNameRef(appendSetCapacity(nil, 256), true, 120, "x")
	wantCode(t, "static index 120 on the encoder stream", newDec().WriteEncoderStream(static120), ErrEncoderStream)
	wantCode(t, "relative index beyond the inserts", newDec().WriteEncoderStream(appendDuplicate(appendSetCapacity(nil, 256), 0)), ErrEncoderStream)
	d := newDec()
	// Evict entry 0 by inserting entries until it goes, then name it.
	ins := appendSetCapacity(nil, 100)
	ins = appendInsertLiteral(ins, "x-a", strings.Repeat("a", 30))
	ins = appendInsertLiteral(ins, "x-b", strings.Repeat("b", 30))
	if err := d.WriteEncoderStream(ins); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "evicted entry on the encoder stream", d.WriteEncoderStream(appendDuplicate(nil, 1)), ErrEncoderStream)
	_, err := d.Decode(ctx, 0, []byte{0x03, 0x00, 0x81}, 1<<10) // RIC 2, Base 2, relative 1 = absolute 0
	wantCode(t, "evicted entry in a field line", err, ErrDecompressionFailed)

	d = newDec()
	d.WriteEncoderStream(appendInsertLiteral(appendSetCapacity(nil, 256), "x-quiver", "1"))
	_, err = d.Decode(ctx, 0, []byte{0x02, 0x00, 0x10}, 1<<10) // RIC 1, Base 1, post-base index 0 = absolute 1
	wantCode(t, "reference at the Required Insert Count", err, ErrDecompressionFailed)
	_, err = d.Decode(ctx, 0, []byte{0x02, 0x81, 0x80}, 1<<10) // Sign 1 with Delta Base 1 = RIC
	wantCode(t, "negative Base", err, ErrDecompressionFailed)
	_, err = d.Decode(ctx, 0, []byte{0x0f, 0x00}, 1<<10) // EncodedInsertCount 15 > 2 × 8
	wantCode(t, "impossible Encoded Required Insert Count", err, ErrDecompressionFailed)
	_, err = d.Decode(ctx, 0, []byte{0x00, 0x00, 0xff, 0x39}, 1<<10) // static index 120
	wantCode(t, "static index 120", err, ErrDecompressionFailed)
	_, err = d.Decode(ctx, 0, []byte{0x00, 0x00, 0x5f}, 1<<10) // name ref, no value
	wantCode(t, "truncated field line", err, ErrDecompressionFailed)

	// Too large: a field section whose references add up beyond the limit.
	d = newDec()
	d.WriteEncoderStream(appendInsertLiteral(appendSetCapacity(nil, 256), "x-big", strings.Repeat("b", 100)))
	sec := []byte{0x02, 0x00}
	for i := 0; i < 100; i++ {
		sec = append(sec, 0x80)
	}
	var tl *TooLargeError
	if _, err := d.Decode(ctx, 0, sec, 1000); !errors.As(err, &tl) {
		t.Errorf("100 references to a 137-byte entry under a 1000-byte limit: %v", err)
	}
}

// One blocked stream is allowed, a second is an error (synctest: Wait
// returns once the first is parked on the decoder).
func TestBlockedStreamsExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDecoder(256, 1, func([]byte) {})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := d.Decode(ctx, 0, []byte{0x04, 0x00, 0x80}, 1<<10); done <- err }()
		synctest.Wait()
		_, err := d.Decode(context.Background(), 4, []byte{0x04, 0x00, 0x80}, 1<<10)
		wantCode(t, "a second blocked stream with SETTINGS_QPACK_BLOCKED_STREAMS 1", err, ErrDecompressionFailed)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("the blocked stream: %v", err)
		}
	})
}

func TestEncoderErrors(t *testing.T) {
	p := newPair(t, 4096, 0)
	wantCode(t, "Section Acknowledgment for a stream with nothing pending", p.enc.WriteDecoderStream(appendSectionAck(nil, 4)), ErrDecoderStream)
	p = newPair(t, 4096, 0)
	wantCode(t, "Insert Count Increment of 0", p.enc.WriteDecoderStream(appendCountIncrement(nil, 0)), ErrDecoderStream)
	p = newPair(t, 4096, 0)
	p.enc.Encode(0, []HeaderField{{"x-one", "1"}})
	wantCode(t, "Insert Count Increment beyond the inserts", p.enc.WriteDecoderStream(appendCountIncrement(nil, 2)), ErrDecoderStream)
	p = newPair(t, 4096, 0)
	p.enc.Encode(0, []HeaderField{{"x-one", "1"}})
	if err := p.enc.WriteDecoderStream(appendCountIncrement(nil, 1)); err != nil {
		t.Errorf("a valid increment: %v", err)
	}
	// Instructions may arrive a byte at a time.
	p = newPair(t, 4096, 0)
	p.enc.Encode(0, []HeaderField{{"x-one", "1"}})
	for _, c := range appendCountIncrement(nil, 1) {
		if err := p.enc.WriteDecoderStream([]byte{c}); err != nil {
			t.Fatal(err)
		}
	}
	if p.enc.KnownReceivedCount() != 1 {
		t.Errorf("known %d", p.enc.KnownReceivedCount())
	}
}

// A peer that acknowledges inserts but never field sections: the encoder
// stops referring to the table once maxPendingSections wait.
func TestEncoderBoundsPendingSections(t *testing.T) {
	p := newPair(t, 4096, 0)
	f := []HeaderField{{"x-quiver", "bounded"}}
	p.enc.Encode(0, f)
	p.flush(t) // the insert is acknowledged
	for i := 1; i <= maxPendingSections+10; i++ {
		sec := p.enc.Encode(uint64(4*i), f)
		if dynamic := sec[0] != 0; dynamic != (i <= maxPendingSections) {
			t.Fatalf("section %d: Required Insert Count byte %#x", i, sec[0])
		}
	}
	if p.enc.pending != maxPendingSections {
		t.Errorf("%d sections pending", p.enc.pending)
	}
	// Stream Cancellation releases them.
	if err := p.enc.WriteDecoderStream(appendCancelStream(nil, 4)); err != nil || p.enc.pending != maxPendingSections-1 {
		t.Errorf("after a cancellation: %d pending, %v", p.enc.pending, err)
	}
}
