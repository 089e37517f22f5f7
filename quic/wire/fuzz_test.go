package wire

import (
	"bytes"
	"fmt"
	"testing"
)

func FuzzParseFrame(f *testing.F) {
	for _, fr := range frameCases() {
		f.Add(fr.Append(nil))
	}
	f.Add(mixedPayload())
	f.Add([]byte{0x02, 10, 0, 1, 2, 7, 0})
	f.Add([]byte{0x40, 0xaf, 0, 9, 0x80, 0, 0x61, 0xa8, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p, q Parser
		for len(b) > 0 {
			fr, n, err := p.Parse(b)
			if err != nil {
				if _, ok := err.(*Error); !ok {
					t.Fatalf("error %v is not *Error", err)
				}
				return
			}
			if n <= 0 || n > len(b) {
				t.Fatalf("consumed %d of %d", n, len(b))
			}
			enc := fr.Append(nil)
			if len(enc) != fr.Len() {
				t.Fatalf("%T: Len %d, Append %d bytes", fr, fr.Len(), len(enc))
			}
			// Encoding is canonical: parsing it again gives the same frame
			// and the same bytes, whatever non-minimal varints b held.
			fr2, n2, err := q.Parse(enc)
			if err != nil || n2 != len(enc) {
				t.Fatalf("%T %+v: re-parse of %x: %d, %v", fr, fr, enc, n2, err)
			}
			if fmt.Sprintf("%+v", fr2) != fmt.Sprintf("%+v", fr) {
				t.Fatalf("re-parse:\n got %+v\nwant %+v", fr2, fr)
			}
			b = b[n:]
		}
	})
}

func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{rfc9001ClientInitialHeader, rfc9369ClientInitialHeader, rfc9001ServerInitial,
		rfc9369ServerInitial, rfc9001Retry, rfc9369Retry, rfc9001ShortHeader} {
		f.Add(unhex(f, s), 0)
	}
	f.Add(AppendVersionNegotiation(nil, 0x80, []byte{1}, []byte{2}, Version1, Version2), 8)
	f.Fuzz(func(t *testing.T, b []byte, dcidLen int) {
		dcidLen &= 31
		h, err := ParseHeader(b, dcidLen)
		if err != nil {
			return
		}
		if h.PacketLen > len(b) || h.PNOffset > h.PacketLen || h.PacketLen <= 0 {
			t.Fatalf("offsets %+v for %d bytes", h, len(b))
		}
		switch h.Type {
		case PacketTypeInitial, PacketType0RTT, PacketTypeHandshake:
			if uint64(h.PacketLen-h.PNOffset) != h.Length {
				t.Fatalf("Length %d, PNOffset %d, PacketLen %d", h.Length, h.PNOffset, h.PacketLen)
			}
			// The fields re-encode to the same header bytes, apart from
			// the varint sizes of the token length and Length fields.
			lh := LongHeader{Version: h.Version, Type: h.Type, ClearFixedBit: !h.FixedBit,
				ReservedBits: ReservedBits(h.FirstByte, true), DCID: h.DCID, SCID: h.SCID, Token: h.Token,
				Length: h.Length, LengthLen: VarintLen(h.Length), PNLen: PacketNumberLen(h.FirstByte)}
			enc, _, pnOff := lh.Append(nil)
			h2, err := ParseHeader(append(enc[:pnOff], make([]byte, h.Length)...), 0)
			if err != nil || h2.Type != h.Type || !bytes.Equal(h2.DCID, h.DCID) || !bytes.Equal(h2.SCID, h.SCID) ||
				!bytes.Equal(h2.Token, h.Token) || h2.Length != h.Length || h2.FirstByte != h.FirstByte {
				t.Fatalf("re-encode: %+v, %v; want %+v", h2, err, h)
			}
		case PacketTypeRetry:
			if len(h.RetryTag) != RetryTagLen {
				t.Fatal("Retry tag length")
			}
		case PacketType1RTT:
			if len(h.DCID) != dcidLen {
				t.Fatal("short DCID length")
			}
		}
	})
}

func FuzzVersionNegotiation(f *testing.F) {
	f.Add(AppendVersionNegotiation(nil, 0x80, []byte{1, 2, 3}, []byte{4}, Version1, Version2, 0x0a0a0a0a))
	f.Add(AppendVersionNegotiation(nil, 0xff, nil, nil))
	f.Add(unhex(f, rfc9001Retry))
	f.Fuzz(func(t *testing.T, b []byte) {
		vn, err := ParseVersionNegotiation(b)
		if err != nil {
			return
		}
		var vs []Version
		for v := range vn.Versions.All() {
			vs = append(vs, v)
		}
		if len(vs) != vn.Versions.Len() {
			t.Fatalf("All yields %d, Len %d", len(vs), vn.Versions.Len())
		}
		if enc := AppendVersionNegotiation(nil, vn.FirstByte, vn.DCID, vn.SCID, vs...); !bytes.Equal(enc, b) {
			t.Fatalf("re-encoded %x, want %x", enc, b)
		}
	})
}

func FuzzTransportParameters(f *testing.F) {
	f.Add(fullServerParams().Marshal(), true)
	f.Add(unhex(f, "c0000000ff04de1b0243e8"), false)
	f.Add([]byte{0x0a, 1, 21}, false)
	f.Fuzz(func(t *testing.T, b []byte, fromServer bool) {
		p, err := ParseTransportParameters(b, fromServer)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Code != TransportParameterError {
				t.Fatalf("error %v", err)
			}
			return
		}
		// Raw re-encodes the same list; IDs and lengths come out in their
		// shortest encoding, so compare lists rather than bytes.
		list, err := ParseTransportParameterList(p.Marshal())
		if err != nil || fmt.Sprint(list) != fmt.Sprint(p.Raw) {
			t.Fatalf("Raw re-encoding gives %v, %v; want %v", list, err, p.Raw)
		}
		p.Raw = nil
		enc := p.Marshal()
		p2, err := ParseTransportParameters(enc, fromServer)
		if err != nil {
			t.Fatalf("re-parse of %x: %v", enc, err)
		}
		p2.Raw = nil
		if fmt.Sprintf("%+v", p2) != fmt.Sprintf("%+v", p) {
			t.Fatalf("re-parse:\n got %+v\nwant %+v", p2, p)
		}
	})
}
