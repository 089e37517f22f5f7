package wire

import "testing"

func benchParse(b *testing.B, payload []byte) {
	var p Parser
	parseAll(b, &p, payload)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		for rest := payload; len(rest) > 0; {
			_, n, err := p.Parse(rest)
			if err != nil {
				b.Fatal(err)
			}
			rest = rest[n:]
		}
	}
}

// BenchmarkParseStream parses one STREAM frame carrying 1200 bytes.
func BenchmarkParseStream(b *testing.B) {
	benchParse(b, (&StreamFrame{StreamID: 4, Offset: 1 << 20, Data: make([]byte, 1200)}).Append(nil))
}

// BenchmarkParseAck parses an ACK_ECN frame with 64 ranges.
func BenchmarkParseAck(b *testing.B) {
	f := &AckFrame{AckDelay: 1000, ECN: true, ECT0: 1 << 20}
	pn := uint64(1 << 20)
	for range 64 {
		f.Ranges = append(f.Ranges, AckRange{Smallest: pn - 10, Largest: pn})
		pn -= 13
	}
	benchParse(b, f.Append(nil))
}

// BenchmarkParseMixed parses a typical 1-RTT payload of seven frames.
func BenchmarkParseMixed(b *testing.B) { benchParse(b, mixedPayload()) }

// BenchmarkParseSmallFrames parses a payload of control frames only.
func BenchmarkParseSmallFrames(b *testing.B) {
	var p []byte
	p = (&AckFrame{Ranges: []AckRange{{100, 120}}}).Append(p)
	p = (&MaxDataFrame{Maximum: 1 << 30}).Append(p)
	p = (&MaxStreamsFrame{Bidi: true, Maximum: 200}).Append(p)
	p = (&PingFrame{}).Append(p)
	p = (&PaddingFrame{Length: 20}).Append(p)
	benchParse(b, p)
}

func BenchmarkAppendStream(b *testing.B) {
	f := &StreamFrame{StreamID: 4, Offset: 1 << 20, Data: make([]byte, 1200)}
	buf := make([]byte, 0, 1500)
	b.SetBytes(int64(f.Len()))
	b.ReportAllocs()
	for b.Loop() {
		buf = f.Append(buf[:0])
	}
}

func BenchmarkAppendAck(b *testing.B) {
	f := &AckFrame{AckDelay: 1000}
	pn := uint64(1 << 20)
	for range 64 {
		f.Ranges = append(f.Ranges, AckRange{Smallest: pn - 10, Largest: pn})
		pn -= 13
	}
	buf := make([]byte, 0, 1500)
	b.SetBytes(int64(f.Len()))
	b.ReportAllocs()
	for b.Loop() {
		buf = f.Append(buf[:0])
	}
}

func BenchmarkParseHeaderLong(b *testing.B) {
	pkt := unhex(b, rfc9001ServerInitial)
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHeader(pkt, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseHeaderShort(b *testing.B) {
	pkt := make([]byte, 1200)
	pkt[0] = 0x41
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHeader(pkt, 8); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVarint(b *testing.B) {
	buf := AppendVarint(nil, 151288809941952652)
	buf = AppendVarint(buf, 494878333)
	buf = AppendVarint(buf, 15293)
	buf = AppendVarint(buf, 37)
	b.ReportAllocs()
	for b.Loop() {
		for rest := buf; len(rest) > 0; {
			_, n, _ := ConsumeVarint(rest)
			rest = rest[n:]
		}
	}
}
