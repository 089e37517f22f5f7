package conformance

import (
	"errors"
	"io"
	"slices"
	"strconv"

	"github.com/quic-go/qpack"
	"github.com/quiver-quic/quiver/quic/wire"
)

// The tester's own HTTP/3 and QPACK wire for family K. It writes field
// sections itself, literals only, so that it can send what a real encoder
// never would (an uppercase name, a pseudo-header after a regular field,
// an impossible Required Insert Count), and it reads what the server sent
// from the recorded STREAM frames, so that every judgement rests on the
// packets kept as evidence.

// hfield is one field line the tester sends.
type hfield struct{ name, value string }

// qpackString encodes a string literal without Huffman coding: the H bit
// (the bit above the length prefix) stays 0.
func qpackString(first byte, bits int, s string) []byte {
	return append(qpackInt(first, bits, uint64(len(s))), s...)
}

// literalLine is a Literal Field Line with Literal Name (RFC 9204
// §4.5.6): 001, N = 0, H = 0, a 3-bit name length, the name, then H = 0
// and a 7-bit value length.
func literalLine(f hfield) []byte {
	return append(qpackString(0x20, 3, f.name), qpackString(0x00, 7, f.value)...)
}

// literalSection is a field section that needs no dynamic table: a prefix
// of Required Insert Count 0 and Base 0 (RFC 9204 §4.5.1), then every line
// a literal with a literal name.
func literalSection(fs []hfield) []byte {
	b := []byte{0x00, 0x00}
	for _, f := range fs {
		b = append(b, literalLine(f)...)
	}
	return b
}

// requestFields are a request's pseudo-header fields for path, in the
// usual order.
func requestFields(p *Profile, method, path string) []hfield {
	host := p.sni()
	if host == "" {
		host = "localhost"
	}
	return []hfield{{":method", method}, {":scheme", "https"}, {":authority", host}, {":path", path}}
}

// headersFrame is an HTTP/3 HEADERS frame around a field section.
func headersFrameOf(section []byte) []byte { return h3Frame(0x01, section) }

// setCapacity is Set Dynamic Table Capacity (RFC 9204 §4.3.1): 001 and
// a 5-bit prefix integer.
func setCapacity(c uint64) []byte { return qpackInt(0x20, 5, c) }

// insertLiteral is Insert with Literal Name (RFC 9204 §4.3.3): 01, H = 0,
// a 5-bit name length, the name, then H = 0 and a 7-bit value length.
func insertLiteral(name, value string) []byte {
	return append(qpackString(0x40, 5, name), qpackString(0x00, 7, value)...)
}

// insertStaticNameRef is Insert with Name Reference (RFC 9204 §4.3.2) to
// static table entry index: 1, T = 1, a 6-bit index, then the value.
func insertStaticNameRef(index uint64, value string) []byte {
	return append(qpackInt(0xc0, 6, index), qpackString(0x00, 7, value)...)
}

// isReservedH3 reports the reserved values of HTTP/3's extensible
// spaces, 0x1f × N + 0x21 (RFC 9114 §6.2.3, §7.2.4.1, §7.2.8, §8.1).
func isReservedH3(v uint64) bool { return v >= 0x21 && (v-0x21)%0x1f == 0 }

// encodedInsertCount encodes a Required Insert Count for a decoder whose
// SETTINGS_QPACK_MAX_TABLE_CAPACITY is maxCapacity (RFC 9204 §4.5.1.1).
func encodedInsertCount(ric, maxCapacity uint64) uint64 {
	if ric == 0 {
		return 0
	}
	maxEntries := maxCapacity / 32
	if maxEntries == 0 {
		return ric // no conformant encoding exists; the caller wants an invalid one
	}
	return ric%(2*maxEntries) + 1
}

// qpackReadInt decodes a prefix integer whose prefix has bits bits (RFC
// 9204 §4.1.1). n is 0 when b ends first or the value would not fit in 62
// bits.
func qpackReadInt(b []byte, bits int) (v uint64, n int) {
	if len(b) == 0 {
		return 0, 0
	}
	max := uint64(1)<<bits - 1
	v = uint64(b[0]) & max
	if v < max {
		return v, 1
	}
	for i := 1; i < len(b) && i <= 9; i++ {
		v += uint64(b[i]&0x7f) << (7 * (i - 1))
		if b[i]&0x80 == 0 {
			if v >= 1<<62 {
				return 0, 0
			}
			return v, i + 1
		}
	}
	return 0, 0
}

// qpackSkipString returns the length in bytes of a string literal whose
// length prefix has bits bits, or 0 when b ends first.
func qpackSkipString(b []byte, bits int) int {
	l, n := qpackReadInt(b, bits)
	if n == 0 || uint64(len(b)-n) < l {
		return 0
	}
	return n + int(l)
}

// h3RawFrame is one HTTP/3 frame as it was on the wire.
type h3RawFrame struct {
	typ     uint64
	payload []byte
}

// h3Frames splits b into complete frames; rest is an incomplete tail.
func h3Frames(b []byte) (fs []h3RawFrame, rest []byte) {
	for len(b) > 0 {
		typ, n, err := wire.ConsumeVarint(b)
		if err != nil {
			break
		}
		l, m, err := wire.ConsumeVarint(b[n:])
		if err != nil || uint64(len(b)-n-m) < l {
			break
		}
		fs = append(fs, h3RawFrame{typ: typ, payload: b[n+m : n+m+int(l)]})
		b = b[n+m+int(l):]
	}
	return fs, b
}

// Encoder instructions (RFC 9204 §4.3).
const (
	qpackSetCapacity = iota
	qpackInsertNameRef
	qpackInsertLiteral
	qpackDuplicate
)

// qpackInstr is one QPACK encoder or decoder instruction: its kind and its
// integer (the capacity, name index, duplicated index, stream ID or
// increment).
type qpackInstr struct {
	kind   int
	value  uint64
	static bool // Insert with Name Reference to the static table
}

// parseEncoderStream splits the payload of an encoder stream (after its
// type) into instructions; rest is an incomplete tail.
func parseEncoderStream(b []byte) (ins []qpackInstr, rest []byte) {
	for len(b) > 0 {
		var in qpackInstr
		var n int
		switch c := b[0]; {
		case c&0x80 != 0: // 1 T index(6+) value
			in.kind, in.static = qpackInsertNameRef, c&0x40 != 0
			if in.value, n = qpackReadInt(b, 6); n > 0 {
				if m := qpackSkipString(b[n:], 7); m > 0 {
					n += m
				} else {
					n = 0
				}
			}
		case c&0x40 != 0: // 01 H name(5+) value
			in.kind = qpackInsertLiteral
			if n = qpackSkipString(b, 5); n > 0 {
				if m := qpackSkipString(b[n:], 7); m > 0 {
					n += m
				} else {
					n = 0
				}
			}
		case c&0x20 != 0: // 001 capacity(5+)
			in.kind = qpackSetCapacity
			in.value, n = qpackReadInt(b, 5)
		default: // 000 index(5+)
			in.kind = qpackDuplicate
			in.value, n = qpackReadInt(b, 5)
		}
		if n == 0 {
			break
		}
		ins = append(ins, in)
		b = b[n:]
	}
	return ins, b
}

// Decoder instructions (RFC 9204 §4.4).
const (
	qpackSectionAck = iota
	qpackStreamCancel
	qpackInsertCountIncrement
)

// parseDecoderStream splits the payload of a decoder stream (after its
// type) into instructions; rest is an incomplete tail.
func parseDecoderStream(b []byte) (ins []qpackInstr, rest []byte) {
	for len(b) > 0 {
		var in qpackInstr
		var n int
		switch c := b[0]; {
		case c&0x80 != 0:
			in.kind = qpackSectionAck
			in.value, n = qpackReadInt(b, 7)
		case c&0x40 != 0:
			in.kind = qpackStreamCancel
			in.value, n = qpackReadInt(b, 6)
		default:
			in.kind = qpackInsertCountIncrement
			in.value, n = qpackReadInt(b, 6)
		}
		if n == 0 {
			break
		}
		ins = append(ins, in)
		b = b[n:]
	}
	return ins, b
}

// sectionInsertCount returns the encoded Required Insert Count of a field
// section (RFC 9204 §4.5.1.1); ok is false when the prefix is incomplete.
func sectionInsertCount(section []byte) (enc uint64, ok bool) {
	v, n := qpackReadInt(section, 8)
	return v, n > 0
}

var errDynamicSection = errors.New("the field section references the dynamic table")

// decodeStaticSection decodes a field section that uses no dynamic table.
func decodeStaticSection(section []byte) ([]qpack.HeaderField, error) {
	if enc, ok := sectionInsertCount(section); !ok || enc != 0 {
		return nil, errDynamicSection
	}
	next := qpack.NewDecoder().Decode(section)
	var fs []qpack.HeaderField
	for {
		f, err := next()
		if errors.Is(err, io.EOF) {
			return fs, nil
		}
		if err != nil {
			return fs, err
		}
		fs = append(fs, f)
	}
}

// h3Seen is what the server sent on one connection, reassembled from the
// recorded packets: the data of each stream, the packets that carried it,
// the stream errors and the close.
type h3Seen struct {
	streams map[uint64]*rawStream
	carried map[uint64][]*packet
	resets  map[uint64]frameAt // RESET_STREAM by stream
	stops   map[uint64]frameAt // STOP_SENDING by stream
	close   *packet
}

// h3Observe reassembles what the server sent on connection conn from
// packet index from.
func h3Observe(ps []*packet, conn, from int) *h3Seen {
	v := &h3Seen{streams: map[uint64]*rawStream{}, carried: map[uint64][]*packet{},
		resets: map[uint64]frameAt{}, stops: map[uint64]frameAt{}}
	for _, p := range received(ps, conn, from) {
		for _, f := range p.frames {
			switch f := f.(type) {
			case *wire.StreamFrame:
				s := v.streams[f.StreamID]
				if s == nil {
					s = &rawStream{}
					v.streams[f.StreamID] = s
				}
				s.add(f.Offset, f.Data, f.Fin)
				if c := v.carried[f.StreamID]; len(c) == 0 || c[len(c)-1] != p {
					v.carried[f.StreamID] = append(c, p)
				}
			case *wire.ResetStreamFrame:
				if _, ok := v.resets[f.StreamID]; !ok {
					v.resets[f.StreamID] = frameAt{p, f}
				}
			case *wire.StopSendingFrame:
				if _, ok := v.stops[f.StreamID]; !ok {
					v.stops[f.StreamID] = frameAt{p, f}
				}
			case *wire.ConnectionCloseFrame:
				if v.close == nil {
					v.close = p
				}
			}
		}
	}
	return v
}

// uniStreams returns the server's unidirectional streams whose type has
// arrived, by type, in stream order.
func (v *h3Seen) uniStreams() map[uint64][]uint64 {
	out := map[uint64][]uint64{}
	var ids []uint64
	for id := range v.streams {
		if id%4 == 3 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		if typ, _, err := wire.ConsumeVarint(v.streams[id].data); err == nil {
			out[typ] = append(out[typ], id)
		}
	}
	return out
}

// uniPayload returns what follows the type of unidirectional stream id.
func (v *h3Seen) uniPayload(id uint64) []byte {
	s := v.streams[id]
	if s == nil {
		return nil
	}
	_, n, err := wire.ConsumeVarint(s.data)
	if err != nil {
		return nil
	}
	return s.data[n:]
}

// streamOfType returns the payload of the server's first unidirectional
// stream of type typ and the packets that carried it.
func (v *h3Seen) streamOfType(typ uint64) ([]byte, []*packet, bool) {
	ids := v.uniStreams()[typ]
	if len(ids) == 0 {
		return nil, nil, false
	}
	return v.uniPayload(ids[0]), v.carried[ids[0]], true
}

// h3Response is the server's answer on one request stream.
type h3Response struct {
	status    int    // 0 when no final response header could be decoded
	headers   bool   // a HEADERS frame arrived
	insertCnt uint64 // encoded Required Insert Count of the first HEADERS
	frames    []uint64
	dataBytes int
	complete  bool // the stream ended with FIN and every byte arrived
	decodeErr error
}

// response reads the server's answer on request stream id.
func (v *h3Seen) response(id uint64) h3Response {
	var r h3Response
	s := v.streams[id]
	if s == nil {
		return r
	}
	r.complete = s.complete()
	fs, _ := h3Frames(s.data)
	for _, f := range fs {
		r.frames = append(r.frames, f.typ)
		switch f.typ {
		case 0x00:
			r.dataBytes += len(f.payload)
		case 0x01:
			if r.headers && r.status >= 200 {
				continue // trailers
			}
			r.headers = true
			r.insertCnt, _ = sectionInsertCount(f.payload)
			fields, err := decodeStaticSection(f.payload)
			if err != nil {
				r.decodeErr = err
				continue
			}
			for _, hf := range fields {
				if hf.Name == ":status" {
					r.status, _ = strconv.Atoi(hf.Value)
				}
			}
		}
	}
	return r
}

// streamError returns the server's RESET_STREAM or STOP_SENDING on stream
// id, if any.
func (v *h3Seen) streamError(id uint64) (frameAt, uint64, bool) {
	if fa, ok := v.resets[id]; ok {
		return fa, fa.f.(*wire.ResetStreamFrame).ErrorCode, true
	}
	if fa, ok := v.stops[id]; ok {
		return fa, fa.f.(*wire.StopSendingFrame).ErrorCode, true
	}
	return frameAt{}, 0, false
}
