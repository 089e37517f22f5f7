package wire

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestLongTypeBits(t *testing.T) {
	// RFC 9000 §17.2 Table 5 for version 1; RFC 9369 §3.2: "Initial:
	// 0b01, 0-RTT: 0b10, Handshake: 0b11, Retry: 0b00" for version 2.
	want := map[Version][4]byte{
		Version1:       {0, 1, 2, 3},
		VersionDraft29: {0, 1, 2, 3},
		Version2:       {1, 2, 3, 0},
	}
	for v, bits := range want {
		for i, pt := range []PacketType{PacketTypeInitial, PacketType0RTT, PacketTypeHandshake, PacketTypeRetry} {
			got, ok := LongTypeBits(v, pt)
			if !ok || got != bits[i] {
				t.Errorf("LongTypeBits(%v, %v) = %d, %v; want %d", v, pt, got, ok, bits[i])
			}
			if back := PacketTypeFromLongTypeBits(v, bits[i]); back != pt {
				t.Errorf("PacketTypeFromLongTypeBits(%v, %d) = %v, want %v", v, bits[i], back, pt)
			}
		}
	}
	if _, ok := LongTypeBits(Version1, PacketType1RTT); ok {
		t.Error("1-RTT has long type bits")
	}
}

func TestVersions(t *testing.T) {
	for v, grease := range map[Version]bool{0x0a0a0a0a: true, 0x1a2a3a4a: true, 0xfafafafa: true, Version1: false, Version2: false, 0x0a0a0a0b: false} {
		if IsGrease(v) != grease {
			t.Errorf("IsGrease(%#x) = %v", uint32(v), !grease)
		}
	}
	for v, s := range map[Version]string{Version1: "v1", Version2: "v2", VersionDraft29: "draft-29", 0x0a0a0a0a: "0xa0a0a0a"} {
		if v.String() != s {
			t.Errorf("%#x.String() = %q, want %q", uint32(v), v.String(), s)
		}
	}
}

// Packets pasted from RFC 9001 Appendix A and RFC 9369 Appendix A.
const (
	// RFC 9001 A.2: unprotected client Initial header.
	rfc9001ClientInitialHeader = "c300000001088394c8f03e5157080000449e00000002"
	// RFC 9369 A.2: unprotected client Initial header, version 2.
	rfc9369ClientInitialHeader = "d36b3343cf088394c8f03e5157080000449e00000002"
	// RFC 9001 A.3: protected server Initial packet.
	rfc9001ServerInitial = "cf000000010008f067a5502a4262b5004075c0d95a482cd0991cd25b0aac406a" +
		"5816b6394100f37a1c69797554780bb38cc5a99f5ede4cf73c3ec2493a1839b3" +
		"dbcba3f6ea46c5b7684df3548e7ddeb9c3bf9c73cc3f3bded74b562bfb19fb84" +
		"022f8ef4cdd93795d77d06edbb7aaf2f58891850abbdca3d20398c276456cbc4" +
		"2158407dd074ee"
	// RFC 9369 A.3: protected server Initial packet, version 2.
	rfc9369ServerInitial = "dc6b3343cf0008f067a5502a4262b5004075d92faaf16f05d8a4398c47089698" +
		"baeea26b91eb761d9b89237bbf87263017915358230035f7fd3945d88965cf17" +
		"f9af6e16886c61bfc703106fbaf3cb4cfa52382dd16a393e42757507698075b2" +
		"c984c707f0a0812d8cd5a6881eaf21ceda98f4bd23f6fe1a3e2c43edd9ce7ca8" +
		"4bed8521e2e140"
	// RFC 9001 A.4 and RFC 9369 A.4: Retry packets.
	rfc9001Retry = "ff000000010008f067a5502a4262b5746f6b656e04a265ba2eff4d829058fb3f0f2496ba"
	rfc9369Retry = "cf6b3343cf0008f067a5502a4262b5746f6b656ec8646ce8bfe33952d955543665dcc7b6"
	// RFC 9001 A.5: unprotected short header, packet number 654360564.
	rfc9001ShortHeader = "4200bff4"
)

func TestLongHeaderEncodeRFC(t *testing.T) {
	for _, tc := range []struct {
		v   Version
		hex string
	}{{Version1, rfc9001ClientInitialHeader}, {Version2, rfc9369ClientInitialHeader}} {
		h := LongHeader{Version: tc.v, Type: PacketTypeInitial, DCID: unhex(t, "8394c8f03e515708"),
			SCID: []byte{}, Length: 0, LengthLen: 2, PacketNumber: 2, PNLen: 4}
		b, lenOff, pnOff := h.Append(nil)
		PutVarintLen(b[lenOff:], 1182, h.LengthLen)
		if want := unhex(t, tc.hex); !bytes.Equal(b, want) {
			t.Errorf("%v: header %x, want %x", tc.v, b, want)
		}
		if len(b) != h.Len() || pnOff != len(b)-4 || lenOff != pnOff-2 {
			t.Errorf("%v: Len %d, offsets %d %d, len %d", tc.v, h.Len(), lenOff, pnOff, len(b))
		}
		// The header parses back once a payload of Length-4 bytes follows.
		pkt := append(b, make([]byte, 1182-4)...)
		ph, err := ParseHeader(pkt, 0)
		if err != nil || ph.Type != PacketTypeInitial || ph.Version != tc.v || ph.Length != 1182 ||
			ph.PNOffset != pnOff || ph.PacketLen != len(pkt) || !bytes.Equal(ph.DCID, h.DCID) || len(ph.SCID) != 0 || len(ph.Token) != 0 {
			t.Errorf("%v: parsed %+v, %v", tc.v, ph, err)
		}
		if PacketNumberLen(pkt[0]) != 4 || ReservedBits(pkt[0], true) != 0 {
			t.Errorf("first byte %#x", pkt[0])
		}
	}
}

func TestParseHeaderRFCServerInitial(t *testing.T) {
	for _, tc := range []struct {
		v   Version
		hex string
	}{{Version1, rfc9001ServerInitial}, {Version2, rfc9369ServerInitial}} {
		b := unhex(t, tc.hex)
		// A coalesced datagram: the Initial followed by a short header
		// packet.
		dgram := append(slices.Clone(b), 0x40, 1, 2, 3, 4, 5)
		h, err := ParseHeader(dgram, 0)
		if err != nil {
			t.Fatalf("%v: %v", tc.v, err)
		}
		if !h.Long || !h.FixedBit || h.Type != PacketTypeInitial || h.Version != tc.v || len(h.DCID) != 0 ||
			!bytes.Equal(h.SCID, unhex(t, "f067a5502a4262b5")) || len(h.Token) != 0 || h.Length != 0x75 ||
			h.PNOffset != 18 || h.PacketLen != len(b) {
			t.Errorf("%v: %+v", tc.v, h)
		}
		s, err := ParseHeader(dgram[h.PacketLen:], 0)
		if err != nil || s.Long || s.Type != PacketType1RTT || s.PNOffset != 1 || s.PacketLen != 6 {
			t.Errorf("coalesced short header: %+v, %v", s, err)
		}
		// Any truncation of the Initial is reported.
		for i := range h.PacketLen {
			if _, err := ParseHeader(b[:i], 0); err == nil {
				t.Errorf("%v: truncated to %d parsed", tc.v, i)
			}
		}
	}
}

func TestRetryRFC(t *testing.T) {
	for _, tc := range []struct {
		v   Version
		hex string
		tag string
	}{{Version1, rfc9001Retry, "04a265ba2eff4d829058fb3f0f2496ba"}, {Version2, rfc9369Retry, "c8646ce8bfe33952d955543665dcc7b6"}} {
		b := unhex(t, tc.hex)
		r, err := ParseRetry(b)
		if err != nil || r.Version != tc.v || len(r.DCID) != 0 || !bytes.Equal(r.SCID, unhex(t, "f067a5502a4262b5")) ||
			string(r.Token) != "token" || !bytes.Equal(r.IntegrityTag, unhex(t, tc.tag)) {
			t.Fatalf("%v: %+v, %v", tc.v, r, err)
		}
		enc := r.AppendWithoutTag(nil)
		if !bytes.Equal(enc, b[:len(b)-16]) {
			t.Errorf("%v: re-encoded %x, want %x", tc.v, enc, b[:len(b)-16])
		}
		pseudo := AppendRetryPseudoPacket(nil, unhex(t, "8394c8f03e515708"), enc)
		if want := append(unhex(t, "088394c8f03e515708"), enc...); !bytes.Equal(pseudo, want) {
			t.Errorf("pseudo-packet %x", pseudo)
		}
	}
	if _, err := ParseRetry(unhex(t, rfc9001Retry)[:20]); err == nil {
		t.Error("Retry shorter than its tag parsed")
	}
	if _, err := ParseRetry(unhex(t, rfc9001ServerInitial)); !errors.Is(err, ErrInvalidHeader) {
		t.Errorf("Initial parsed as Retry: %v", err)
	}
}

func TestShortHeader(t *testing.T) {
	h := ShortHeader{PacketNumber: 654360564, PNLen: 3}
	b, pnOff := h.Append(nil)
	if !bytes.Equal(b, unhex(t, rfc9001ShortHeader)) || pnOff != 1 || h.Len() != 4 {
		t.Errorf("RFC 9001 A.5 header: %x, %d", b, pnOff)
	}
	dcid := []byte{1, 2, 3, 4}
	h = ShortHeader{DCID: dcid, SpinBit: true, KeyPhase: true, ReservedBits: 3, ClearFixedBit: true, PacketNumber: 0x1234, PNLen: 2}
	b, pnOff = h.Append(nil)
	if b[0] != 0x20|0x18|0x04|0x01 || pnOff != 5 || !bytes.Equal(b[1:5], dcid) || ReadPacketNumber(b[5:], 2) != 0x1234 {
		t.Errorf("short header %x", b)
	}
	p, err := ParseHeader(append(b, 0xaa), 4)
	if err != nil || p.Long || p.FixedBit || !p.SpinBit() || !bytes.Equal(p.DCID, dcid) || p.PNOffset != 5 || p.PacketLen != 8 {
		t.Errorf("parsed %+v, %v", p, err)
	}
	if !KeyPhase(b[0]) || ReservedBits(b[0], false) != 3 || PacketNumberLen(b[0]) != 2 {
		t.Errorf("bits of %#x", b[0])
	}
	if _, err := ParseHeader(b[:3], 4); err == nil {
		t.Error("short header with truncated DCID parsed")
	}
}

func TestLongHeaderInvalidValues(t *testing.T) {
	// Probes send invalid headers on purpose: everything is written.
	h := LongHeader{Version: 0x1a2a3a4a, Type: PacketTypeHandshake, ClearFixedBit: true, ReservedBits: 2,
		DCID: bytes.Repeat([]byte{1}, 30), SCID: []byte{2}, Token: []byte("ignored for Handshake"),
		Length: 77, LengthLen: 8, PacketNumber: 0x01020304, PNLen: 4}
	b, lenOff, pnOff := h.Append(nil)
	if b[0] != 0x80|0x20|0x08|0x03 || len(b) != h.Len() || lenOff != 1+4+1+30+1+1 || pnOff != lenOff+8 {
		t.Errorf("header %x", b)
	}
	ph, err := ParseHeader(b, 0)
	if !errors.Is(err, ErrUnsupportedVersion) || ph.Version != 0x1a2a3a4a || len(ph.DCID) != 30 || len(ph.SCID) != 1 {
		t.Errorf("unknown version: %+v, %v", ph, err)
	}
	h.Version = Version1
	b, _, _ = h.Append(nil)
	if _, err := ParseHeader(b, 0); !errors.Is(err, ErrConnectionIDTooLong) {
		t.Errorf("30-byte DCID in v1: %v", err)
	}
	// Initial with a token.
	h = LongHeader{Version: Version1, Type: PacketTypeInitial, DCID: []byte{1, 2}, Token: []byte("tok"), Length: 5, PNLen: 1}
	b, _, pnOff = h.Append(nil)
	b = append(b, 1, 2, 3, 4)
	ph, err = ParseHeader(b, 0)
	if err != nil || string(ph.Token) != "tok" || ph.PNOffset != pnOff || ph.PacketLen != len(b) {
		t.Errorf("Initial with token: %+v, %v", ph, err)
	}
	// Length larger than the datagram.
	if _, err := ParseHeader(b[:len(b)-1], 0); !errors.Is(err, ErrTruncated) {
		t.Errorf("short Length: %v", err)
	}
}

func TestVersionNegotiation(t *testing.T) {
	dcid, scid := []byte{1, 2, 3}, bytes.Repeat([]byte{9}, 200) // RFC 8999 allows 255
	b := AppendVersionNegotiation(nil, 0x80|0x35, dcid, scid, Version2, Version1, 0x0a1a2a3a)
	vn, err := ParseVersionNegotiation(b)
	if err != nil || vn.FirstByte != 0xb5 || !bytes.Equal(vn.DCID, dcid) || !bytes.Equal(vn.SCID, scid) {
		t.Fatalf("%+v, %v", vn, err)
	}
	got := slices.Collect(vn.Versions.All())
	if !slices.Equal(got, []Version{Version2, Version1, 0x0a1a2a3a}) || vn.Versions.Len() != 3 || vn.Versions.At(1) != Version1 {
		t.Errorf("versions %v", got)
	}
	if !vn.Versions.Contains(Version1) || vn.Versions.Contains(VersionDraft29) {
		t.Error("Contains")
	}
	if _, err := ParseVersionNegotiation(b[:len(b)-1]); err == nil {
		t.Error("VN with a partial version parsed")
	}
	if _, err := ParseVersionNegotiation(unhex(t, rfc9001Retry)); err == nil {
		t.Error("Retry parsed as VN")
	}
	allocs := testing.AllocsPerRun(100, func() {
		vn, _ := ParseVersionNegotiation(b)
		n := 0
		for range vn.Versions.All() {
			n++
		}
	})
	if allocs != 0 {
		t.Errorf("VN parse and iteration allocate %v times", allocs)
	}
}

func TestParseHeaderErrorsAreSentinels(t *testing.T) {
	for _, b := range [][]byte{nil, {0xc0}, {0xc0, 0, 0, 0, 1, 5}} {
		_, err := ParseHeader(b, 8)
		if err == nil || !strings.HasPrefix(err.Error(), "wire:") {
			t.Errorf("%x: %v", b, err)
		}
	}
}

func TestPNLenOutOfRange(t *testing.T) {
	for _, n := range []int{0, 5, -1} {
		h := LongHeader{Version: Version1, Type: PacketTypeHandshake, PNLen: n, PacketNumber: 7}
		b, _, pnOff := h.Append(nil)
		if len(b) != h.Len() || len(b)-pnOff != 4 || PacketNumberLen(b[0]) != 4 {
			t.Errorf("PNLen %d: %x", n, b)
		}
		s := ShortHeader{PNLen: n}
		sb, _ := s.Append(nil)
		if len(sb) != s.Len() || PacketNumberLen(sb[0]) != 4 {
			t.Errorf("short PNLen %d: %x", n, sb)
		}
	}
}
