package rawquic

import (
	"encoding/binary"
	"errors"
)

// ClientHello is a TLS ClientHello handshake message (RFC 8446 §4.1.2),
// parsed far enough to edit it: the scenarios that probe how a server
// treats a malformed offer (no ALPN, no transport parameters, TLS 1.2
// only, a legacy_session_id) rewrite the tester's own ClientHello.
//
//	struct {
//	    ProtocolVersion legacy_version = 0x0303;
//	    Random random;
//	    opaque legacy_session_id<0..32>;
//	    CipherSuite cipher_suites<2..2^16-2>;
//	    opaque legacy_compression_methods<1..2^8-1>;
//	    Extension extensions<8..2^16-1>;
//	} ClientHello;
type ClientHello struct {
	version     uint16
	random      []byte // 32 bytes
	SessionID   []byte
	suites      []uint16
	compression []byte
	exts        []tlsExtension
}

// tlsExtension is one extension, in the order the ClientHello lists it.
type tlsExtension struct {
	typ  uint16
	data []byte
}

// TLS extension types (RFC 8446 §4.2, RFC 7301, RFC 9001 §8.2).
const (
	ExtALPN              = 16
	ExtSupportedVersions = 43
)

const tlsClientHello = 1

var errClientHello = errors.New("malformed ClientHello")

// ParseClientHello parses one complete ClientHello message (type, 3-byte
// length, body). Every length must agree and nothing may trail.
func ParseClientHello(msg []byte) (*ClientHello, error) {
	if len(msg) < 4 || msg[0] != tlsClientHello {
		return nil, errClientHello
	}
	n := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
	b := msg[4:]
	if len(b) != n {
		return nil, errClientHello
	}
	h := &ClientHello{}
	var ok bool
	if len(b) < 2+32 {
		return nil, errClientHello
	}
	h.version = binary.BigEndian.Uint16(b)
	h.random = append([]byte(nil), b[2:34]...)
	b = b[34:]
	if h.SessionID, b, ok = vector8(b); !ok || len(h.SessionID) > 32 {
		return nil, errClientHello
	}
	var suites []byte
	if suites, b, ok = vector16(b); !ok || len(suites)%2 != 0 {
		return nil, errClientHello
	}
	for i := 0; i < len(suites); i += 2 {
		h.suites = append(h.suites, binary.BigEndian.Uint16(suites[i:]))
	}
	if h.compression, b, ok = vector8(b); !ok {
		return nil, errClientHello
	}
	exts, b, ok := vector16(b)
	if !ok || len(b) != 0 {
		return nil, errClientHello
	}
	for len(exts) > 0 {
		if len(exts) < 2 {
			return nil, errClientHello
		}
		typ := binary.BigEndian.Uint16(exts)
		var data []byte
		if data, exts, ok = vector16(exts[2:]); !ok {
			return nil, errClientHello
		}
		h.exts = append(h.exts, tlsExtension{typ: typ, data: data})
	}
	return h, nil
}

// vector8 splits off an opaque vector with a 1-byte length.
func vector8(b []byte) (v, rest []byte, ok bool) {
	if len(b) < 1 || len(b) < 1+int(b[0]) {
		return nil, nil, false
	}
	return append([]byte(nil), b[1:1+int(b[0])]...), b[1+int(b[0]):], true
}

// vector16 splits off an opaque vector with a 2-byte length.
func vector16(b []byte) (v, rest []byte, ok bool) {
	if len(b) < 2 {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return nil, nil, false
	}
	return append([]byte(nil), b[2:2+n]...), b[2+n:], true
}

// Marshal encodes the message again, lengths recomputed.
func (h *ClientHello) Marshal() []byte {
	body := binary.BigEndian.AppendUint16(nil, h.version)
	body = append(body, h.random...)
	body = append(body, byte(len(h.SessionID)))
	body = append(body, h.SessionID...)
	body = binary.BigEndian.AppendUint16(body, uint16(2*len(h.suites)))
	for _, s := range h.suites {
		body = binary.BigEndian.AppendUint16(body, s)
	}
	body = append(body, byte(len(h.compression)))
	body = append(body, h.compression...)
	var exts []byte
	for _, e := range h.exts {
		exts = binary.BigEndian.AppendUint16(exts, e.typ)
		exts = binary.BigEndian.AppendUint16(exts, uint16(len(e.data)))
		exts = append(exts, e.data...)
	}
	body = binary.BigEndian.AppendUint16(body, uint16(len(exts)))
	body = append(body, exts...)
	msg := []byte{tlsClientHello, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}
	return append(msg, body...)
}

// Ext returns the data of extension typ.
func (h *ClientHello) Ext(typ uint16) ([]byte, bool) {
	for _, e := range h.exts {
		if e.typ == typ {
			return e.data, true
		}
	}
	return nil, false
}

// Remove drops extension typ and reports whether it was there.
func (h *ClientHello) Remove(typ uint16) bool {
	for i, e := range h.exts {
		if e.typ == typ {
			h.exts = append(h.exts[:i], h.exts[i+1:]...)
			return true
		}
	}
	return false
}

// Set replaces the data of extension typ, or appends the extension.
func (h *ClientHello) Set(typ uint16, data []byte) {
	for i, e := range h.exts {
		if e.typ == typ {
			h.exts[i].data = data
			return
		}
	}
	h.exts = append(h.exts, tlsExtension{typ: typ, data: data})
}

// EditClientHello returns a rewrite function for the raw client: it
// parses the ClientHello crypto/tls wrote, applies edit, and encodes it
// again. A ClientHello it cannot parse goes out unchanged and *failed is
// set, so that the scenario reports a tester error instead of a verdict.
func EditClientHello(edit func(h *ClientHello) error, failed *error) func([]byte) []byte {
	return func(msg []byte) []byte {
		h, err := ParseClientHello(msg)
		if err == nil {
			err = edit(h)
		}
		if err != nil {
			*failed = err
			return msg
		}
		return h.Marshal()
	}
}

// ServerHello is what the checks need of the server's ServerHello (RFC
// 8446 §4.1.3): the version it selected and the session ID it echoed.
type ServerHello struct {
	legacyVersion uint16
	// selected is the supported_versions extension's value, 0 when the
	// extension is absent (a TLS 1.2 or older ServerHello).
	selected  uint16
	SessionID []byte
	Suite     uint16
}

// Version is the TLS version the ServerHello negotiates.
func (s *ServerHello) Version() uint16 {
	if s.selected != 0 {
		return s.selected
	}
	return s.legacyVersion
}

// ParseServerHello reads a ServerHello message (type 2).
func ParseServerHello(msg []byte) (*ServerHello, error) {
	if len(msg) < 4 || msg[0] != 2 {
		return nil, errors.New("not a ServerHello")
	}
	b := msg[4:]
	if len(b) < 2+32 {
		return nil, errors.New("short ServerHello")
	}
	s := &ServerHello{legacyVersion: binary.BigEndian.Uint16(b)}
	b = b[34:]
	var ok bool
	if s.SessionID, b, ok = vector8(b); !ok || len(b) < 3 {
		return nil, errors.New("short ServerHello")
	}
	s.Suite = binary.BigEndian.Uint16(b)
	b = b[3:] // cipher_suite, legacy_compression_method
	if v, ok := Extensions(b)[ExtSupportedVersions]; ok && len(v) == 2 {
		s.selected = binary.BigEndian.Uint16(v)
	}
	return s, nil
}

// Extensions walks a TLS extension block (2-byte length, then type,
// length, data) and returns the data of each extension by type.
func Extensions(b []byte) map[uint16][]byte {
	out := map[uint16][]byte{}
	if len(b) < 2 {
		return out
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n < len(b) {
		b = b[:n]
	}
	for len(b) >= 4 {
		typ, l := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+l {
			break
		}
		out[typ] = b[4 : 4+l]
		b = b[4+l:]
	}
	return out
}
