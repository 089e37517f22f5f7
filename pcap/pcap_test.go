package pcap

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

type dgram struct {
	t        time.Time
	src, dst netip.AddrPort
	payload  []byte
}

func sampleDatagrams() []dgram {
	c4, s4 := netip.MustParseAddrPort("192.0.2.10:50123"), netip.MustParseAddrPort("198.51.100.1:443")
	c6, s6 := netip.MustParseAddrPort("[2001:db8::10]:40000"), netip.MustParseAddrPort("[2001:db8::1]:4433")
	return []dgram{
		{t0, c4, s4, bytes.Repeat([]byte{0xc3}, 1200)},
		{t0.Add(1500 * time.Microsecond), s4, c4, []byte{0x40, 1, 2}},
		{t0.Add(time.Second + 1), c6, s6, bytes.Repeat([]byte{0x55}, 1351)},
		{t0.Add(2 * time.Second), s6, c6, nil},
		// A v4-mapped v6 address, as a dual-stack socket reports it, is recorded as IPv4.
		{t0.Add(3 * time.Second), netip.MustParseAddrPort("[::ffff:192.0.2.10]:50123"), s4, []byte("x")},
	}
}

func writeCapture(t testing.TB, opts Options, secrets []byte, secretsAfter bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriterOptions(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if secrets != nil && !secretsAfter {
		if err := w.WriteSecrets(secrets); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range sampleDatagrams() {
		if err := w.WriteDatagram(d.t, d.src, d.dst, d.payload); err != nil {
			t.Fatal(err)
		}
	}
	if secrets != nil && secretsAfter {
		if err := w.WriteSecrets(secrets); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const keylogText = "CLIENT_HANDSHAKE_TRAFFIC_SECRET 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f 1111\n"

func checkPackets(t *testing.T, got []Packet, snapLen int) {
	t.Helper()
	want := sampleDatagrams()
	if len(got) != len(want) {
		t.Fatalf("read %d packets, wrote %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if !g.Time.Equal(w.t) {
			t.Errorf("packet %d: time %v, want %v", i, g.Time, w.t)
		}
		wsrc := netip.AddrPortFrom(w.src.Addr().Unmap(), w.src.Port())
		if g.Src != wsrc || g.Dst != w.dst {
			t.Errorf("packet %d: %v -> %v, want %v -> %v", i, g.Src, g.Dst, wsrc, w.dst)
		}
		if g.Length != len(w.payload) {
			t.Errorf("packet %d: length %d, want %d", i, g.Length, len(w.payload))
		}
		wantPayload := w.payload
		if snapLen > 0 {
			hdr := 28
			if w.dst.Addr().Is6() {
				hdr = 48
			}
			if keep := max(snapLen-hdr, 0); keep < len(wantPayload) {
				wantPayload = wantPayload[:keep]
			}
		}
		if !bytes.Equal(g.Payload, wantPayload) {
			t.Errorf("packet %d: payload %d bytes, want %d", i, len(g.Payload), len(wantPayload))
		}
		if g.Truncated() != (len(wantPayload) < len(w.payload)) {
			t.Errorf("packet %d: Truncated() = %v", i, g.Truncated())
		}
	}
}

func TestRoundTrip(t *testing.T) {
	c, err := ReadAll(bytes.NewReader(writeCapture(t, Options{}, []byte(keylogText), false)))
	if err != nil {
		t.Fatal(err)
	}
	checkPackets(t, c.Packets, 0)
	if string(c.Secrets) != keylogText {
		t.Errorf("secrets = %q", c.Secrets)
	}
	if c.Skipped != 0 {
		t.Errorf("skipped %d packets", c.Skipped)
	}
}

// blockTypes lists the block types of a little-endian pcapng file in order.
func blockTypes(t *testing.T, b []byte) []uint32 {
	t.Helper()
	var types []uint32
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("trailing %d bytes", len(b))
		}
		typ, n := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
		if n%4 != 0 || int(n) > len(b) || binary.LittleEndian.Uint32(b[n-4:]) != n {
			t.Fatalf("bad block length %d", n)
		}
		types = append(types, typ)
		b = b[n:]
	}
	return types
}

func TestSecretsFirst(t *testing.T) {
	// Secrets arrive after the packets, as they do in a live capture, yet
	// must precede them in the file.
	file := writeCapture(t, Options{SecretsFirst: true}, []byte(strings.TrimSuffix(keylogText, "\n")), true)
	got := blockTypes(t, file)
	want := []uint32{blockSHB, blockIDB, blockDSB, blockEPB, blockEPB, blockEPB, blockEPB, blockEPB}
	if !equalU32(got, want) {
		t.Fatalf("block order %x, want %x", got, want)
	}
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	// The reader ends the key log with a newline so that logs concatenate.
	if string(r.Secrets()) != keylogText {
		t.Errorf("secrets before the first packet = %q", r.Secrets())
	}
	// In call order, the same calls put the secrets last.
	got = blockTypes(t, writeCapture(t, Options{}, []byte(keylogText), true))
	if got[len(got)-1] != blockDSB || got[1] != blockIDB {
		t.Errorf("streaming block order %x", got)
	}
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSnapLen(t *testing.T) {
	c, err := ReadAll(bytes.NewReader(writeCapture(t, Options{SnapLen: 128}, nil, false)))
	if err != nil {
		t.Fatal(err)
	}
	checkPackets(t, c.Packets, 128)
}

// TestIPv4Checksum uses the header of the worked example in the Wikipedia
// article "Internet checksum" (IPv4 header checksum), whose fields match
// what the writer emits: DF set, TTL 64, UDP, 0x73 bytes in total.
func TestIPv4Checksum(t *testing.T) {
	src := netip.MustParseAddrPort("192.168.0.1:1")
	dst := netip.MustParseAddrPort("192.168.0.199:2")
	pkt, err := appendIPUDP(nil, src, dst, make([]byte, 0x73-28))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hex.DecodeString("450000730000400040110000c0a80001c0a800c7")
	want[10], want[11] = 0xb8, 0x61
	if !bytes.Equal(pkt[:20], want) {
		t.Errorf("IPv4 header\n%x, want\n%x", pkt[:20], want)
	}
}

// TestUDPChecksumVerifies checks the UDP checksum the way a receiver does:
// the one's complement sum over pseudo-header and datagram is all ones.
func TestUDPChecksumVerifies(t *testing.T) {
	for _, d := range sampleDatagrams() {
		pkt, err := appendIPUDP(nil, d.src, d.dst, d.payload)
		if err != nil {
			t.Fatal(err)
		}
		hdr := 20
		if pkt[0]>>4 == 6 {
			hdr = 40
		}
		udp := pkt[hdr:]
		sa, da := d.src.Addr().Unmap(), d.dst.Addr().Unmap()
		if got := checksum(pseudoHeaderSum(sa, da, len(udp)), udp); got != 0xffff {
			t.Errorf("%v -> %v: UDP checksum does not verify (sum %#x)", d.src, d.dst, got)
		}
		if binary.BigEndian.Uint16(udp[6:]) == 0 {
			t.Errorf("%v -> %v: zero UDP checksum", d.src, d.dst)
		}
		if hdr == 20 && checksum(0, pkt[:20]) != 0xffff {
			t.Errorf("%v -> %v: IPv4 header checksum does not verify", d.src, d.dst)
		}
	}
}

func TestWriteDatagramRejects(t *testing.T) {
	w, err := NewWriter(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	v4, v6 := netip.MustParseAddrPort("192.0.2.1:1"), netip.MustParseAddrPort("[2001:db8::1]:1")
	for name, err := range map[string]error{
		"mixed families": w.WriteDatagram(t0, v4, v6, nil),
		"no address":     w.WriteDatagram(t0, netip.AddrPort{}, v4, nil),
		"too big for v4": w.WriteDatagram(t0, v4, v4, make([]byte, 65508)),
		"too big for v6": w.WriteDatagram(t0, v6, v6, make([]byte, 65528)),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A rejected datagram does not break the writer.
	if err := w.WriteDatagram(t0, v4, v4, make([]byte, 65507)); err != nil {
		t.Errorf("largest IPv4 datagram: %v", err)
	}
	w.Close()
	if err := w.WriteDatagram(t0, v4, v4, nil); err == nil {
		t.Error("write after Close accepted")
	}
}

// pcapngBuilder writes blocks in either byte order, for reader tests.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

type pcapngBuilder struct {
	o byteOrder
	b []byte
}

func (p *pcapngBuilder) block(typ uint32, body []byte) {
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	n := uint32(12 + len(body))
	p.b = p.o.AppendUint32(p.b, typ)
	p.b = p.o.AppendUint32(p.b, n)
	p.b = append(p.b, body...)
	p.b = p.o.AppendUint32(p.b, n)
}

func (p *pcapngBuilder) shb() {
	body := p.o.AppendUint32(nil, byteOrderMagic)
	body = p.o.AppendUint16(body, 1)
	body = p.o.AppendUint16(body, 0)
	body = p.o.AppendUint64(body, ^uint64(0))
	p.block(blockSHB, body)
}

func (p *pcapngBuilder) idb(link uint16, tsresol byte) {
	body := p.o.AppendUint16(nil, link)
	body = p.o.AppendUint16(body, 0)
	body = p.o.AppendUint32(body, 0)
	if tsresol != 0 {
		body = p.o.AppendUint16(body, optIfTsresol)
		body = p.o.AppendUint16(body, 1)
		body = append(body, tsresol, 0, 0, 0)
	}
	p.block(blockIDB, body)
}

func (p *pcapngBuilder) epb(ifc uint32, ts uint64, data []byte) {
	body := p.o.AppendUint32(nil, ifc)
	body = p.o.AppendUint32(body, uint32(ts>>32))
	body = p.o.AppendUint32(body, uint32(ts))
	body = p.o.AppendUint32(body, uint32(len(data)))
	body = p.o.AppendUint32(body, uint32(len(data)))
	p.block(blockEPB, append(body, data...))
}

func ipudp(t *testing.T, src, dst string, payload []byte) []byte {
	t.Helper()
	b, err := appendIPUDP(nil, netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst), payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReaderForeignCaptures reads captures shaped like other tools' output:
// big-endian, Ethernet with VLAN tags and padding, Linux cooked capture,
// microsecond and power-of-two timestamps, several sections, and packets
// that are not UDP.
func TestReaderForeignCaptures(t *testing.T) {
	p4 := ipudp(t, "10.0.0.1:1000", "10.0.0.2:443", []byte("hello"))
	p6 := ipudp(t, "[fe80::1]:1000", "[fe80::2]:443", []byte("v6"))

	eth := append(make([]byte, 12), 0x81, 0x00, 0, 5, 0x08, 0x00) // VLAN 5, then IPv4
	eth = append(append(eth, p4...), make([]byte, 20)...)         // Ethernet padding after the IP packet
	sll := make([]byte, 16)
	binary.BigEndian.PutUint16(sll[14:], 0x86dd)
	sll = append(sll, p6...)
	tcp := bytes.Clone(p4)
	tcp[9] = 6
	frag := bytes.Clone(p4)
	frag[6] = 0x20 // more fragments
	hopByHop := bytes.Clone(p6[:40])
	hopByHop[6] = 0 // hop-by-hop options, then UDP
	binary.BigEndian.PutUint16(hopByHop[4:], uint16(len(p6)-40+8))
	hopByHop = append(append(hopByHop, protoUDP, 0, 1, 4, 0, 0, 0, 0), p6[40:]...)

	b := &pcapngBuilder{o: binary.BigEndian}
	b.shb()
	b.idb(linkEthernet, 0)       // default microseconds
	b.idb(linkLinuxSLL, 0x80|10) // 2^-10 seconds
	b.epb(0, 1_500_000, eth)
	b.epb(1, 3<<10|512, sll)
	b.epb(0, 1, append(make([]byte, 12), append([]byte{0x08, 0x00}, tcp...)...))
	b.epb(0, 2, append(make([]byte, 12), append([]byte{0x08, 0x00}, frag...)...))
	b.block(0x0BAD, []byte{1, 2, 3}) // unknown blocks are skipped
	// A second section, little-endian, renumbers interfaces.
	b2 := &pcapngBuilder{o: binary.LittleEndian}
	b2.shb()
	b2.idb(LinkTypeRaw, 9)
	b2.epb(0, 42, hopByHop)
	c, err := ReadAll(bytes.NewReader(append(b.b, b2.b...)))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Packets) != 3 || c.Skipped != 2 {
		t.Fatalf("read %d packets, skipped %d: %+v", len(c.Packets), c.Skipped, c.Packets)
	}
	want := []struct {
		t        time.Time
		src      string
		payload  string
		ifaceIdx int
	}{
		{time.Unix(1, 500_000_000), "10.0.0.1:1000", "hello", 0},
		{time.Unix(3, 500_000_000), "[fe80::1]:1000", "v6", 1},
		{time.Unix(0, 42), "[fe80::1]:1000", "v6", 0},
	}
	for i, w := range want {
		g := c.Packets[i]
		if !g.Time.Equal(w.t) || g.Src.String() != w.src || string(g.Payload) != w.payload || g.Interface != w.ifaceIdx {
			t.Errorf("packet %d = %v %v %q if%d, want %v %v %q if%d", i, g.Time, g.Src, g.Payload, g.Interface, w.t, w.src, w.payload, w.ifaceIdx)
		}
	}
}

func TestReaderClassicPcap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		o     byteOrder
		magic uint32
		frac  uint32
		want  time.Time
	}{
		{"little-endian microseconds", binary.LittleEndian, 0xa1b2c3d4, 250, time.Unix(7, 250_000)},
		{"big-endian nanoseconds", binary.BigEndian, 0xa1b23c4d, 250, time.Unix(7, 250)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkt := ipudp(t, "10.0.0.1:1000", "10.0.0.2:443", []byte("classic"))
			h := tc.o.AppendUint32(nil, tc.magic)
			h = tc.o.AppendUint16(h, 2)
			h = tc.o.AppendUint16(h, 4)
			h = append(h, make([]byte, 8)...)
			h = tc.o.AppendUint32(h, 65535)
			h = tc.o.AppendUint32(h, LinkTypeRaw)
			h = tc.o.AppendUint32(h, 7)
			h = tc.o.AppendUint32(h, tc.frac)
			h = tc.o.AppendUint32(h, uint32(len(pkt)))
			h = tc.o.AppendUint32(h, uint32(len(pkt)))
			c, err := ReadAll(bytes.NewReader(append(h, pkt...)))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Packets) != 1 || string(c.Packets[0].Payload) != "classic" || !c.Packets[0].Time.Equal(tc.want) {
				t.Errorf("packets = %+v", c.Packets)
			}
		})
	}
}

func TestReaderRejects(t *testing.T) {
	good := writeCapture(t, Options{}, []byte(keylogText), false)
	badTrailer := bytes.Clone(good)
	binary.LittleEndian.PutUint32(badTrailer[len(badTrailer)-4:], 12)
	badMagic := bytes.Clone(good)
	badMagic[8] ^= 0xff
	b := &pcapngBuilder{o: binary.LittleEndian}
	b.idb(LinkTypeRaw, 9)
	noSection := b.b
	for name, in := range map[string][]byte{
		"empty":            nil,
		"not a capture":    []byte("hello world, this is text"),
		"truncated":        good[:len(good)-3],
		"bad trailer":      badTrailer,
		"bad byte order":   badMagic,
		"no section first": noSection,
	} {
		if _, err := ReadAll(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestTimestampUnits(t *testing.T) {
	for _, tc := range []struct {
		ifc  iface
		ts   uint64
		want time.Time
	}{
		{iface{unitsLog: 6}, 1_000_001, time.Unix(1, 1000)},
		{iface{unitsLog: 9}, 2_000_000_003, time.Unix(2, 3)},
		{iface{unitsLog: 12}, 5_000_000_000_007_000, time.Unix(5000, 7)},
		{iface{unitsLog: 0, offset: 10}, 5, time.Unix(15, 0)},
		{iface{unitsLog: 20, unitsPow2: true}, 3<<20 | 1<<19, time.Unix(3, 500_000_000)},
	} {
		if got := tc.ifc.time(tc.ts); !got.Equal(tc.want) {
			t.Errorf("%+v %d: %v, want %v", tc.ifc, tc.ts, got, tc.want)
		}
	}
}

// TestSecretsFirstSpool: with a spool file the held-back packets wait on
// disk, and the capture is byte for byte the one held in memory.
func TestSecretsFirstSpool(t *testing.T) {
	mem := writeCapture(t, Options{SecretsFirst: true}, []byte(keylogText), true)
	f, err := os.CreateTemp(t.TempDir(), "spool")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("left there by someone else")) // the spool starts at the current offset
	spooled := writeCapture(t, Options{SecretsFirst: true, Spool: f}, []byte(keylogText), true)
	if !bytes.Equal(mem, spooled) {
		t.Fatalf("spooled capture differs: %d vs %d bytes", len(spooled), len(mem))
	}
	if st, _ := f.Stat(); st.Size() <= int64(len("left there by someone else")) {
		t.Fatal("nothing was spooled to the file")
	}
}
