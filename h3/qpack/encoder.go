package qpack

import (
	"errors"
	"sync"
)

// DefaultTableCapacity is the dynamic table capacity an Encoder uses (at
// most what the peer allows) and the maximum a Decoder advertises by
// default.
const DefaultTableCapacity = 4096

// Encoder encodes field sections for the peer's decoder. Until the peer's
// SETTINGS allow a dynamic table it uses the static table and literals
// only. Once they do, it inserts the fields worth remembering and refers
// to an entry only after the peer has acknowledged its insertion, so that
// no stream of the peer ever blocks (RFC 9204 §2.1.2: "An encoder MUST
// limit the number of streams that could become blocked to the value of
// SETTINGS_QPACK_BLOCKED_STREAMS at all times": the limit holds for any
// value, 0 included).
type Encoder struct {
	emit func([]byte)

	mu          sync.Mutex
	t           table
	maxCapacity uint64 // the peer's SETTINGS_QPACK_MAX_TABLE_CAPACITY
	want        uint64 // the capacity this encoder chooses, at most maxCapacity
	known       uint64 // Known Received Count (§2.1.4)
	// sections holds, per stream, the field sections with a non-zero
	// Required Insert Count that the peer has not acknowledged, oldest
	// first: their references pin entries (§2.1.1).
	sections map[uint64][]sentSection
	pending  int // sections held in sections
	buf      []byte
	err      error
	acked    uint64 // Section Acknowledgments received
}

// maxPendingSections bounds the field sections kept for a peer that
// never acknowledges them: past it the encoder stops referring to the
// dynamic table (static table and literals only) until acknowledgments
// come, so that such a peer cannot make it hold state without end.
const maxPendingSections = 1024

type sentSection struct {
	ric    uint64 // Required Insert Count
	minRef uint64 // lowest absolute index referenced
}

// NewEncoder returns an encoder that writes encoder instructions with
// emit, which must not block. capacity is the table size it will use when
// the peer allows (0: DefaultTableCapacity).
func NewEncoder(capacity uint64, emit func([]byte)) *Encoder {
	if capacity == 0 {
		capacity = DefaultTableCapacity
	}
	return &Encoder{emit: emit, want: capacity, sections: make(map[uint64][]sentSection)}
}

// SetPeerSettings applies the peer's SETTINGS_QPACK_MAX_TABLE_CAPACITY.
// RFC 9204 §3.2.3: "The encoder MUST NOT set a dynamic table capacity that
// exceeds this maximum", and "When the maximum table capacity is zero, the
// encoder MUST NOT insert entries into the dynamic table and MUST NOT send
// any encoder instructions on the encoder stream."
func (e *Encoder) SetPeerSettings(maxCapacity uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.maxCapacity != 0 || maxCapacity == 0 {
		return
	}
	e.maxCapacity = maxCapacity
	e.t.capacity = min(e.want, maxCapacity)
	e.emit(appendSetCapacity(nil, e.t.capacity))
}

// volatile names change from one message to the next, or are secrets
// (RFC 9204 §7.1: fields an attacker could guess by their compression);
// they are never inserted.
var volatile = map[string]bool{
	":path": true, "content-length": true, "date": true, "last-modified": true, "etag": true, "age": true,
	"if-modified-since": true, "if-none-match": true, "range": true, "content-range": true, "expires": true,
	"authorization": true, "proxy-authorization": true, "cookie": true, "set-cookie": true,
}

// Encode encodes fields for stream. RFC 9204 §2.1.3: "An encoder MUST emit
// field representations in the order they appear in the input field
// section."
func (e *Encoder) Encode(stream uint64, fields []HeaderField) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ins []byte
	size := 2
	for _, f := range fields {
		size += len(f.Name) + len(f.Value) + 4
	}
	lines := make([]byte, 0, size)
	var ric uint64
	minRef := uint64(maxInt)
	ref := func(abs uint64) {
		ric = max(ric, abs+1)
		minRef = min(minRef, abs)
	}
	type line struct {
		kind int // 0 static indexed, 1 dynamic indexed, 2 static name, 3 dynamic name, 4 literal
		idx  uint64
		f    HeaderField
	}
	var outArr [16]line
	out := outArr[:0]
	for _, f := range fields {
		sExact, sName := staticMatch(f)
		if sExact >= 0 {
			out = append(out, line{0, uint64(sExact), f})
			continue
		}
		dExact, dName := -1, -1
		if len(e.t.entries) > 0 && e.pending < maxPendingSections {
			dExact, dName = e.dynamicMatch(f)
		}
		if dExact >= 0 {
			ref(uint64(dExact))
			out = append(out, line{1, uint64(dExact), f})
			continue
		}
		if e.t.capacity > 0 && !volatile[f.Name] && f.Size() <= e.t.capacity/4 && e.t.roomFor(f, min(e.evictable(), minRef)) {
			// Insert now, refer to it once the peer acknowledges it.
			switch {
			case sName >= 0:
				ins = appendInsertNameRef(ins, true, uint64(sName), f.Value)
			case dName >= 0:
				ins = appendInsertNameRef(ins, false, e.t.inserted()-1-uint64(dName), f.Value)
			default:
				ins = appendInsertLiteral(ins, f.Name, f.Value)
			}
			e.t.insert(f)
		}
		switch {
		case sName >= 0:
			out = append(out, line{2, uint64(sName), f})
		case dName >= 0:
			ref(uint64(dName))
			out = append(out, line{3, uint64(dName), f})
		default:
			out = append(out, line{4, 0, f})
		}
	}
	if len(ins) > 0 {
		e.emit(ins)
	}
	// Prefix (§4.5.1): Base = Required Insert Count, so Delta Base is 0
	// with Sign 0, and every reference is a relative index below Base.
	if ric == 0 {
		lines = append(lines, 0, 0)
	} else {
		lines = appendInt(lines, 8, 0, ric%(2*(e.maxCapacity/32))+1)
		lines = append(lines, 0)
		e.sections[stream] = append(e.sections[stream], sentSection{ric, minRef})
		e.pending++
	}
	base := ric
	for _, l := range out {
		switch l.kind {
		case 0: // §4.5.2: 1 T=1 Index(6+)
			lines = appendInt(lines, 6, 0xc0, l.idx)
		case 1: // §4.5.2: 1 T=0 relative Index(6+)
			lines = appendInt(lines, 6, 0x80, base-1-l.idx)
		case 2: // §4.5.4: 01 N=0 T=1 Name Index(4+)
			lines = appendString(appendInt(lines, 4, 0x50, l.idx), 7, 0, l.f.Value)
		case 3: // §4.5.4: 01 N=0 T=0 relative Name Index(4+)
			lines = appendString(appendInt(lines, 4, 0x40, base-1-l.idx), 7, 0, l.f.Value)
		default: // §4.5.6: 001 N=0 H Name Length(3+)
			lines = appendString(appendString(lines, 3, 0x20, l.f.Name), 7, 0, l.f.Value)
		}
	}
	return lines
}

// staticMatch returns the static index of f's exact field line and of its
// name, or -1.
func staticMatch(f HeaderField) (exact, name int) {
	if i, ok := staticExact[f]; ok {
		return int(i), int(staticName[f.Name])
	}
	if i, ok := staticName[f.Name]; ok {
		return -1, int(i)
	}
	return -1, -1
}

// staticExact and staticName index the static table by field line and by
// name (the lowest index of each name): a linear scan of its 99 entries
// per field was a tenth of an HTTP/3 RPC's CPU (docs/highway.md).
var staticExact, staticName = func() (map[HeaderField]uint8, map[string]uint8) {
	exact := make(map[HeaderField]uint8, len(staticTable))
	name := make(map[string]uint8, len(staticTable))
	for i, f := range staticTable {
		if _, ok := exact[f]; !ok {
			exact[f] = uint8(i)
		}
		if _, ok := name[f.Name]; !ok {
			name[f.Name] = uint8(i)
		}
	}
	return exact, name
}()

// dynamicMatch returns the absolute index of an acknowledged dynamic
// entry with f's name and value, and of one with its name, or -1: only
// entries the peer has (below the Known Received Count) are referred to.
func (e *Encoder) dynamicMatch(f HeaderField) (exact, name int) {
	exact, name = -1, -1
	for i := len(e.t.entries) - 1; i >= 0; i-- {
		abs := e.t.dropped + uint64(i)
		if abs >= e.known {
			continue
		}
		d := e.t.entries[i]
		if d.Name != f.Name {
			continue
		}
		if d.Value == f.Value {
			return int(abs), int(abs)
		}
		if name < 0 {
			name = int(abs)
		}
	}
	return exact, name
}

// evictable is the absolute index below which entries may be evicted:
// RFC 9204 §2.1.1: "Once the insertion of a dynamic table entry has been
// acknowledged and there are no outstanding references to the entry in
// unacknowledged representations, the entry becomes evictable", and the
// encoder "MUST NOT insert that entry" when it would have to evict others.
func (e *Encoder) evictable() uint64 {
	v := e.known
	for _, ss := range e.sections {
		for _, s := range ss {
			v = min(v, s.minRef)
		}
	}
	return v
}

// WriteDecoderStream processes bytes of the peer's decoder stream. An
// error is a connection error (QPACK_DECODER_STREAM_ERROR).
func (e *Encoder) WriteDecoderStream(p []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	e.buf = append(e.buf, p...)
	for len(e.buf) > 0 {
		in, rest, err := parseDecoderInstruction(e.buf)
		if errors.Is(err, errIncomplete) {
			break
		}
		if err == nil {
			err = e.apply(in)
		}
		if err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				qe = errorf(ErrDecoderStream, "%v", err)
			}
			e.err = qe
			return qe
		}
		e.buf = rest
	}
	e.buf = append([]byte(nil), e.buf...)
	return nil
}

func (e *Encoder) apply(in decoderInstruction) error {
	switch in.kind {
	case insSectionAck:
		ss := e.sections[in.value]
		// RFC 9204 §4.4.1: "If an encoder receives a Section
		// Acknowledgment instruction referring to a stream on which every
		// encoded field section with a non-zero Required Insert Count has
		// already been acknowledged, this MUST be treated as a connection
		// error of type QPACK_DECODER_STREAM_ERROR."
		if len(ss) == 0 {
			return errorf(ErrDecoderStream, "Section Acknowledgment for stream %d, which has no unacknowledged field section (RFC 9204 §4.4.1)", in.value)
		}
		e.known = max(e.known, ss[0].ric)
		e.acked++
		e.pending--
		if len(ss) == 1 {
			delete(e.sections, in.value)
		} else {
			e.sections[in.value] = ss[1:]
		}
	case insCancelStream:
		e.pending -= len(e.sections[in.value])
		delete(e.sections, in.value)
	default:
		// RFC 9204 §4.4.3: "An encoder that receives an Increment field
		// equal to zero, or one that increases the Known Received Count
		// beyond what the encoder has sent, MUST treat this as a
		// connection error of type QPACK_DECODER_STREAM_ERROR."
		if in.value == 0 || in.value > e.t.inserted()-e.known {
			return errorf(ErrDecoderStream, "Insert Count Increment of %d with Known Received Count %d and %d inserts sent (RFC 9204 §4.4.3)",
				in.value, e.known, e.t.inserted())
		}
		e.known += in.value
	}
	return nil
}

// KnownReceivedCount is how many inserts the peer has acknowledged.
func (e *Encoder) KnownReceivedCount() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.known
}

// AckedSections is how many of its field sections that refer to the
// dynamic table the peer has acknowledged.
func (e *Encoder) AckedSections() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.acked
}

// InsertCount is how many entries the encoder has inserted.
func (e *Encoder) InsertCount() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.t.inserted()
}
