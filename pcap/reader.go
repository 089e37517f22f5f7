package pcap

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/netip"
	"os"
	"slices"
	"time"
)

// Link types the reader understands.
const (
	linkNull     = 0
	linkEthernet = 1
	linkRawAlt   = 12 // DLT_RAW as some systems number it
	linkLinuxSLL = 113
	linkIPv4     = 228
	linkIPv6     = 229
	linkSLL2     = 276
)

// Packet is a UDP datagram read from a capture.
type Packet struct {
	Time     time.Time
	Src, Dst netip.AddrPort
	// Payload is the UDP payload as captured; it is shorter than Length
	// when the capture kept only the start of each packet.
	Payload []byte
	// Length is the UDP payload length on the wire.
	Length int
	// Interface is the capture interface index within its section.
	Interface int
}

// Truncated reports whether the capture kept only part of the payload.
func (p *Packet) Truncated() bool { return len(p.Payload) < p.Length }

type iface struct {
	linkType  uint16
	unitsLog  uint8 // resolution exponent
	unitsPow2 bool  // resolution is 2^-unitsLog rather than 10^-unitsLog
	offset    int64 // seconds added to every timestamp
}

// Reader reads UDP datagrams from a pcapng or classic pcap capture.
// Packets that are not whole UDP datagrams over IP (other protocols, IP
// fragments, unknown link types) are skipped and counted in Skipped.
type Reader struct {
	r       *bufio.Reader
	order   binary.ByteOrder
	classic bool
	ifaces  []iface
	secrets []byte
	hdr     [12]byte

	// Skipped counts packets that were not UDP datagrams over IP.
	Skipped int
}

// NewReader reads the file header of a pcapng or classic pcap capture.
func NewReader(r io.Reader) (*Reader, error) {
	pr := &Reader{r: bufio.NewReaderSize(r, 64<<10)}
	magic, err := pr.r.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("pcap: reading the file header: %w", noEOF(err))
	}
	if binary.LittleEndian.Uint32(magic) == blockSHB {
		return pr, nil // sections are read by Next
	}
	if err := pr.readClassicHeader(); err != nil {
		return nil, err
	}
	return pr, nil
}

// noEOF turns a premature end of file into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (r *Reader) readClassicHeader() error {
	var h [24]byte
	if _, err := io.ReadFull(r.r, h[:]); err != nil {
		return fmt.Errorf("pcap: reading the file header: %w", noEOF(err))
	}
	var ifc iface
	switch {
	case binary.LittleEndian.Uint32(h[:]) == 0xa1b2c3d4:
		r.order, ifc.unitsLog = binary.LittleEndian, 6
	case binary.BigEndian.Uint32(h[:]) == 0xa1b2c3d4:
		r.order, ifc.unitsLog = binary.BigEndian, 6
	case binary.LittleEndian.Uint32(h[:]) == 0xa1b23c4d:
		r.order, ifc.unitsLog = binary.LittleEndian, 9
	case binary.BigEndian.Uint32(h[:]) == 0xa1b23c4d:
		r.order, ifc.unitsLog = binary.BigEndian, 9
	default:
		return errors.New("pcap: not a pcapng or pcap file")
	}
	ifc.linkType = uint16(r.order.Uint32(h[20:]))
	r.classic = true
	r.ifaces = []iface{ifc}
	return nil
}

// Secrets returns the TLS key log text of the Decryption Secrets Blocks
// read so far, concatenated. Read to the end to have them all.
func (r *Reader) Secrets() []byte { return r.secrets }

// Next returns the next UDP datagram, or io.EOF at the end of the capture.
// Its payload is freshly allocated and may be kept.
func (r *Reader) Next() (Packet, error) {
	for {
		var (
			p   Packet
			ok  bool
			err error
		)
		if r.classic {
			p, ok, err = r.nextClassic()
		} else {
			p, ok, err = r.nextBlock()
		}
		if err != nil || ok {
			return p, err
		}
	}
}

func (r *Reader) nextClassic() (Packet, bool, error) {
	h := r.hdr[:]
	if _, err := io.ReadFull(r.r, h[:4]); err != nil {
		return Packet{}, false, err // a clean io.EOF ends the capture
	}
	var rec [16]byte
	copy(rec[:], h[:4])
	if _, err := io.ReadFull(r.r, rec[4:]); err != nil {
		return Packet{}, false, fmt.Errorf("pcap: record header: %w", noEOF(err))
	}
	sec, frac := r.order.Uint32(rec[0:]), r.order.Uint32(rec[4:])
	capLen := r.order.Uint32(rec[8:])
	if capLen > maxBlockLen {
		return Packet{}, false, fmt.Errorf("pcap: record of %d bytes is too large", capLen)
	}
	data, err := readLen(r.r, int(capLen))
	if err != nil {
		return Packet{}, false, fmt.Errorf("pcap: record: %w", noEOF(err))
	}
	ifc := &r.ifaces[0]
	t := time.Unix(int64(sec), int64(uint64(frac)*pow10(9-uint(ifc.unitsLog))))
	return r.packet(ifc, 0, t, data)
}

func pow10(n uint) uint64 {
	v := uint64(1)
	for ; n > 0; n-- {
		v *= 10
	}
	return v
}

// nextBlock reads one pcapng block and reports whether it gave a packet.
func (r *Reader) nextBlock() (Packet, bool, error) {
	h := r.hdr[:8]
	if _, err := io.ReadFull(r.r, h); err != nil {
		return Packet{}, false, err // a clean io.EOF ends the capture
	}
	typ := binary.LittleEndian.Uint32(h) // SHB's type reads the same both ways
	if typ == blockSHB {
		bom := r.hdr[8:12]
		if _, err := io.ReadFull(r.r, bom); err != nil {
			return Packet{}, false, fmt.Errorf("pcap: section header: %w", noEOF(err))
		}
		switch binary.LittleEndian.Uint32(bom) {
		case byteOrderMagic:
			r.order = binary.LittleEndian
		case bits.ReverseBytes32(byteOrderMagic):
			r.order = binary.BigEndian
		default:
			return Packet{}, false, errors.New("pcap: section header with a bad byte-order magic")
		}
	} else if r.order == nil {
		return Packet{}, false, errors.New("pcap: the file does not start with a section header")
	} else {
		typ = r.order.Uint32(h)
	}
	n := r.order.Uint32(h[4:])
	if n < 12 || n%4 != 0 || n > maxBlockLen || typ == blockSHB && n < 28 {
		return Packet{}, false, fmt.Errorf("pcap: block type %#x has a bad length %d", typ, n)
	}
	done := 0
	if typ == blockSHB {
		done = 4 // the byte-order magic, already read
	}
	rest, err := readLen(r.r, int(n)-8-done)
	if err != nil {
		return Packet{}, false, fmt.Errorf("pcap: block type %#x: %w", typ, noEOF(err))
	}
	body := rest
	if done > 0 {
		body = append(bytes.Clone(r.hdr[8:12]), rest...)
	}
	if trailer := r.order.Uint32(body[len(body)-4:]); trailer != n {
		return Packet{}, false, fmt.Errorf("pcap: block type %#x: trailing length %d differs from %d", typ, trailer, n)
	}
	body = body[:len(body)-4]
	switch typ {
	case blockSHB:
		if major := r.order.Uint16(body[4:]); major != 1 {
			return Packet{}, false, fmt.Errorf("pcap: pcapng version %d is not supported", major)
		}
		r.ifaces = r.ifaces[:0] // interfaces are numbered per section
	case blockIDB:
		if len(body) < 8 {
			return Packet{}, false, errors.New("pcap: short interface description")
		}
		ifc := iface{linkType: r.order.Uint16(body), unitsLog: 6}
		r.readIDBOptions(&ifc, body[8:])
		r.ifaces = append(r.ifaces, ifc)
	case blockEPB:
		if len(body) < 20 {
			return Packet{}, false, errors.New("pcap: short enhanced packet block")
		}
		id := r.order.Uint32(body)
		ts := uint64(r.order.Uint32(body[4:]))<<32 | uint64(r.order.Uint32(body[8:]))
		capLen := r.order.Uint32(body[12:])
		if id >= uint32(len(r.ifaces)) {
			return Packet{}, false, fmt.Errorf("pcap: packet on undeclared interface %d", id)
		}
		if uint64(capLen) > uint64(len(body)-20) {
			return Packet{}, false, fmt.Errorf("pcap: packet of %d bytes in a block of %d", capLen, len(body))
		}
		ifc := &r.ifaces[id]
		return r.packet(ifc, int(id), ifc.time(ts), body[20:20+capLen])
	case blockSPB:
		if len(body) < 4 || len(r.ifaces) == 0 {
			return Packet{}, false, errors.New("pcap: simple packet block without an interface")
		}
		return r.packet(&r.ifaces[0], 0, time.Time{}, body[4:])
	case blockDSB:
		if len(body) < 8 {
			return Packet{}, false, errors.New("pcap: short decryption secrets block")
		}
		kind, sl := r.order.Uint32(body), r.order.Uint32(body[4:])
		if uint64(sl) > uint64(len(body)-8) {
			return Packet{}, false, fmt.Errorf("pcap: %d bytes of secrets in a block of %d", sl, len(body))
		}
		if kind == SecretsTypeTLS {
			s := body[8 : 8+sl]
			r.secrets = append(r.secrets, s...)
			if len(s) > 0 && s[len(s)-1] != '\n' {
				r.secrets = append(r.secrets, '\n')
			}
		}
	}
	return Packet{}, false, nil
}

func (r *Reader) readIDBOptions(ifc *iface, opts []byte) {
	for len(opts) >= 4 {
		code, l := r.order.Uint16(opts), int(r.order.Uint16(opts[2:]))
		opts = opts[4:]
		if code == optEndOfOpt || l > len(opts) {
			return
		}
		v := opts[:l]
		switch {
		case code == optIfTsresol && l >= 1:
			ifc.unitsPow2 = v[0]&0x80 != 0
			ifc.unitsLog = v[0] & 0x7f
		case code == optIfTsoffset && l >= 8:
			ifc.offset = int64(r.order.Uint64(v))
		}
		padded := (l + 3) &^ 3
		if padded > len(opts) {
			return
		}
		opts = opts[padded:]
	}
}

// time converts a pcapng timestamp in the interface's units.
func (ifc *iface) time(ts uint64) time.Time {
	var sec, nsec uint64
	n := uint(ifc.unitsLog)
	if ifc.unitsPow2 {
		if n > 63 {
			n = 63
		}
		sec = ts >> n
		frac := ts & (1<<n - 1)
		hi, lo := bits.Mul64(frac, 1e9)
		if n > 0 {
			nsec = hi<<(64-n) | lo>>n
		}
	} else {
		n = min(n, 19) // 10^19 is the largest power of ten a uint64 holds
		perSec := pow10(n)
		sec, nsec = ts/perSec, ts%perSec
		if n <= 9 {
			nsec *= pow10(9 - n)
		} else {
			nsec /= pow10(n - 9)
		}
	}
	return time.Unix(int64(sec)+ifc.offset, int64(nsec))
}

// packet turns link-layer data into a Packet, reporting false for anything
// that is not a whole UDP datagram.
func (r *Reader) packet(ifc *iface, id int, t time.Time, data []byte) (Packet, bool, error) {
	ip, ok := linkPayload(ifc.linkType, data)
	if !ok {
		r.Skipped++
		return Packet{}, false, nil
	}
	src, dst, payload, origLen, ok := parseIPUDP(ip)
	if !ok {
		r.Skipped++
		return Packet{}, false, nil
	}
	return Packet{Time: t, Src: src, Dst: dst, Payload: bytes.Clone(payload), Length: origLen, Interface: id}, true, nil
}

// linkPayload strips the link-layer header, returning the IP packet.
func linkPayload(linkType uint16, p []byte) ([]byte, bool) {
	isIP := func(ethertype uint16) bool { return ethertype == 0x0800 || ethertype == 0x86dd }
	switch linkType {
	case LinkTypeRaw, linkRawAlt, linkIPv4, linkIPv6:
		return p, true
	case linkEthernet:
		if len(p) < 14 {
			return nil, false
		}
		et, rest := binary.BigEndian.Uint16(p[12:]), p[14:]
		for et == 0x8100 || et == 0x88a8 { // VLAN tags
			if len(rest) < 4 {
				return nil, false
			}
			et, rest = binary.BigEndian.Uint16(rest[2:]), rest[4:]
		}
		return rest, isIP(et)
	case linkLinuxSLL:
		if len(p) < 16 {
			return nil, false
		}
		return p[16:], isIP(binary.BigEndian.Uint16(p[14:]))
	case linkSLL2:
		if len(p) < 20 {
			return nil, false
		}
		return p[20:], isIP(binary.BigEndian.Uint16(p))
	case linkNull:
		// The address family is in the capturing host's byte order.
		if len(p) < 4 {
			return nil, false
		}
		fam := binary.LittleEndian.Uint32(p)
		if fam > 0xffff {
			fam = binary.BigEndian.Uint32(p)
		}
		switch fam {
		case 2, 24, 28, 30: // AF_INET; AF_INET6 on the BSDs and macOS
			return p[4:], true
		}
	}
	return nil, false
}

// Capture is a whole capture read into memory.
type Capture struct {
	Packets []Packet
	// Secrets is the TLS key log text embedded in the capture.
	Secrets []byte
	// Skipped counts packets that were not UDP datagrams over IP.
	Skipped int
}

// ReadAll reads a whole capture.
func ReadAll(r io.Reader) (*Capture, error) {
	pr, err := NewReader(r)
	if err != nil {
		return nil, err
	}
	c := &Capture{}
	for {
		p, err := pr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		c.Packets = append(c.Packets, p)
	}
	c.Secrets, c.Skipped = pr.Secrets(), pr.Skipped
	return c, nil
}

// ReadFile reads the capture at path.
func ReadFile(path string) (*Capture, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pcap: %w", err)
	}
	defer f.Close()
	c, err := ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// readChunk is what readLen allocates up front; beyond it the buffer grows
// with the bytes that actually arrive.
const readChunk = 64 << 10

// readLen reads exactly n bytes. A malformed length in a short or hostile
// file costs at most about twice the bytes the file really holds, not the
// length it claims (up to maxBlockLen).
func readLen(r io.Reader, n int) ([]byte, error) {
	if n <= readChunk {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	b := make([]byte, 0, readChunk)
	for len(b) < n {
		k := min(n-len(b), max(readChunk, len(b)))
		b = slices.Grow(b, k)
		m, err := io.ReadFull(r, b[len(b):len(b)+k])
		b = b[:len(b)+m]
		if err != nil {
			if len(b) > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return b, nil
}
