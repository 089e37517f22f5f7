package analyze

import (
	"encoding/binary"

	"github.com/quiver-quic/quiver/quic/wire"
)

// TLS handshake message types (RFC 8446 §4).
const (
	tlsClientHello         = 1
	tlsServerHello         = 2
	tlsEncryptedExtensions = 8
	tlsCertificate         = 11
	tlsCompressedCert      = 25 // RFC 8879
)

// TLS extension types (RFC 8446 §4.2, RFC 7301, RFC 9001 §8.2).
const (
	extALPN            = 0x10
	extPreSharedKey    = 0x29
	extEarlyData       = 0x2a
	extQUICTransport   = 0x39
	extQUICTransportV1 = 0xffa5 // draft-era codepoint, still sent by some stacks
)

// maxCryptoOffset bounds the CRYPTO stream the analyzer reassembles, so that
// a hostile capture cannot make it allocate without limit. Handshakes with
// a nine-certificate chain stay far below it.
const maxCryptoOffset = 1 << 20

// cryptoStream reassembles one direction's CRYPTO data at one encryption
// level and hands out complete TLS handshake messages.
type cryptoStream struct {
	data    []byte            // contiguous from offset 0
	pending map[uint64][]byte // out-of-order pieces by offset
	parsed  int               // offset of the next unparsed message
}

// add records CRYPTO data at off; duplicates and overlaps are fine.
func (s *cryptoStream) add(off uint64, b []byte) {
	if len(b) == 0 || off > maxCryptoOffset || off+uint64(len(b)) > maxCryptoOffset {
		return
	}
	end := off + uint64(len(b))
	if end <= uint64(len(s.data)) {
		return
	}
	if off > uint64(len(s.data)) {
		if s.pending == nil {
			s.pending = map[uint64][]byte{}
		}
		if old, ok := s.pending[off]; !ok || len(old) < len(b) {
			s.pending[off] = append([]byte(nil), b...)
		}
		return
	}
	s.data = append(s.data, b[uint64(len(s.data))-off:]...)
	for progress := true; progress && len(s.pending) > 0; {
		progress = false
		for o, p := range s.pending {
			e := o + uint64(len(p))
			if o > uint64(len(s.data)) {
				continue
			}
			delete(s.pending, o)
			if e > uint64(len(s.data)) {
				s.data = append(s.data, p[uint64(len(s.data))-o:]...)
			}
			progress = true
		}
	}
}

// next returns the next complete handshake message (type and body), or
// ok false when none is complete yet.
func (s *cryptoStream) next() (typ byte, body []byte, ok bool) {
	rest := s.data[s.parsed:]
	if len(rest) < 4 {
		return 0, nil, false
	}
	n := int(rest[1])<<16 | int(rest[2])<<8 | int(rest[3])
	if len(rest) < 4+n {
		return 0, nil, false
	}
	s.parsed += 4 + n
	return rest[0], rest[4 : 4+n], true
}

// reader is a tiny bounds-checked reader for TLS structures.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) bytes(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() int {
	v := r.bytes(1)
	if v == nil {
		return 0
	}
	return int(v[0])
}

func (r *reader) u16() int {
	v := r.bytes(2)
	if v == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(v))
}

// extensions walks a TLS extension block.
func extensions(b []byte, f func(typ int, data []byte)) bool {
	r := reader{b: b}
	for len(r.b) > 0 && !r.bad {
		typ := r.u16()
		data := r.bytes(r.u16())
		if r.bad {
			return false
		}
		f(typ, data)
	}
	return !r.bad
}

// parseClientHello reads a ClientHello body (RFC 8446 §4.1.2).
func parseClientHello(body []byte) (*ClientHello, bool) {
	r := reader{b: body}
	r.bytes(2) // legacy_version
	random := r.bytes(32)
	r.bytes(r.u8()) // legacy_session_id
	suites := r.bytes(r.u16())
	r.bytes(r.u8()) // legacy_compression_methods
	ext := r.bytes(r.u16())
	if r.bad || len(suites)%2 != 0 {
		return nil, false
	}
	ch := &ClientHello{Random: append(HexBytes(nil), random...)}
	for i := 0; i+1 < len(suites); i += 2 {
		ch.CipherSuites = append(ch.CipherSuites, binary.BigEndian.Uint16(suites[i:]))
	}
	extensions(ext, func(typ int, data []byte) {
		switch typ {
		case extALPN:
			ch.ALPN = parseALPN(data)
		case extEarlyData:
			ch.EarlyData = true
		case extPreSharedKey:
			ch.PreSharedKey = true
		case extQUICTransport, extQUICTransportV1:
			tp, err := wire.ParseTransportParameters(data, false)
			if err != nil {
				ch.TPError = err.Error()
			} else {
				ch.TransportParameters = copyTP(tp)
			}
		}
	})
	return ch, true
}

// parseServerHello reads a ServerHello body (RFC 8446 §4.1.3).
func parseServerHello(body []byte) (*ServerHello, bool) {
	r := reader{b: body}
	r.bytes(2)
	r.bytes(32)
	r.bytes(r.u8())
	suite := r.u16()
	r.u8()
	ext := r.bytes(r.u16())
	if r.bad {
		return nil, false
	}
	sh := &ServerHello{CipherSuite: uint16(suite)}
	extensions(ext, func(typ int, data []byte) {
		if typ == extPreSharedKey {
			sh.PreSharedKey = true
		}
	})
	return sh, true
}

// parseEncryptedExtensions reads an EncryptedExtensions body (RFC 8446 §4.3.1).
func parseEncryptedExtensions(body []byte) (*EncryptedExtensions, bool) {
	r := reader{b: body}
	ext := r.bytes(r.u16())
	if r.bad {
		return nil, false
	}
	ee := &EncryptedExtensions{}
	extensions(ext, func(typ int, data []byte) {
		switch typ {
		case extALPN:
			if a := parseALPN(data); len(a) > 0 {
				ee.ALPN = a[0]
			}
		case extEarlyData:
			ee.EarlyData = true
		case extQUICTransport, extQUICTransportV1:
			tp, err := wire.ParseTransportParameters(data, true)
			if err != nil {
				ee.TPError = err.Error()
			} else {
				ee.TransportParameters = copyTP(tp)
			}
		}
	})
	return ee, true
}

// parseALPN reads a ProtocolNameList (RFC 7301 §3.1).
func parseALPN(data []byte) []string {
	r := reader{b: data}
	list := reader{b: r.bytes(r.u16())}
	var out []string
	for len(list.b) > 0 && !list.bad {
		p := list.bytes(list.u8())
		if list.bad {
			break
		}
		out = append(out, string(p))
	}
	return out
}

// copyTP detaches parsed transport parameters from the packet buffer they
// point into, which the analyzer reuses.
func copyTP(tp *wire.TransportParameters) *wire.TransportParameters {
	c := *tp
	c.OriginalDestinationConnectionID = clone(tp.OriginalDestinationConnectionID)
	c.InitialSourceConnectionID = clone(tp.InitialSourceConnectionID)
	c.RetrySourceConnectionID = clone(tp.RetrySourceConnectionID)
	c.PreferredAddress.ConnectionID = clone(tp.PreferredAddress.ConnectionID)
	c.VersionInformation.Available = append([]wire.Version(nil), tp.VersionInformation.Available...)
	c.Unknown = nil
	c.Raw = nil
	return &c
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
