package qpack

import (
	"context"
	"errors"
	"sync"
)

// Decoder decodes the peer's field sections with the dynamic table the
// peer's encoder stream builds, and tells the peer's encoder what it has
// processed through its own decoder stream.
type Decoder struct {
	maxCapacity uint64 // our SETTINGS_QPACK_MAX_TABLE_CAPACITY
	maxBlocked  uint64 // our SETTINGS_QPACK_BLOCKED_STREAMS
	emit        func([]byte)

	mu      sync.Mutex
	t       table
	blocked uint64        // streams waiting for inserts
	changed chan struct{} // closed (and replaced) at each insert
	known   uint64        // the Insert Count the encoder knows we reached
	buf     []byte        // an encoder instruction not complete yet
	err     error         // sticky encoder stream error
	refs    uint64        // field sections decoded with dynamic references
}

// DynamicSections is how many field sections that refer to the dynamic
// table the decoder has decoded.
func (d *Decoder) DynamicSections() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.refs
}

// NewDecoder returns a decoder that allows the peer a table of at most
// maxCapacity bytes and maxBlocked blocked streams (its SETTINGS), and
// writes decoder instructions with emit, which must not block.
func NewDecoder(maxCapacity, maxBlocked uint64, emit func([]byte)) *Decoder {
	return &Decoder{maxCapacity: maxCapacity, maxBlocked: maxBlocked, emit: emit, changed: make(chan struct{})}
}

// stringLimit bounds an encoder-stream string: no entry can be larger
// than the table, and Huffman codes are at least 5 bits long.
func (d *Decoder) stringLimit() uint64 { return d.maxCapacity * 2 }

// WriteEncoderStream processes bytes of the peer's encoder stream. An
// error is a connection error (QPACK_ENCODER_STREAM_ERROR).
func (d *Decoder) WriteEncoderStream(p []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.err
	}
	d.buf = append(d.buf, p...)
	before := d.t.inserted()
	for len(d.buf) > 0 {
		in, rest, err := parseEncoderInstruction(d.buf, d.stringLimit())
		if errors.Is(err, errIncomplete) {
			break
		}
		if err == nil {
			err = d.apply(in)
		}
		if err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				qe = errorf(ErrEncoderStream, "%v", err)
			}
			d.err = qe
			return qe
		}
		d.buf = rest
	}
	d.buf = append([]byte(nil), d.buf...) // do not pin what was parsed
	if n := d.t.inserted(); n > before {
		close(d.changed)
		d.changed = make(chan struct{})
		// RFC 9204 §4.4.3: "the decoder sends an Insert Count Increment
		// instruction ... after receiving new dynamic table entries" so
		// that the encoder may reference them without blocking.
		if n > d.known {
			d.emit(appendCountIncrement(nil, n-d.known))
			d.known = n
		}
	}
	return nil
}

// apply carries out one encoder instruction.
func (d *Decoder) apply(in encoderInstruction) error {
	switch in.kind {
	case insSetCapacity:
		// RFC 9204 §4.3.1: "The decoder MUST treat a new dynamic table
		// capacity value that exceeds this limit as a connection error
		// of type QPACK_ENCODER_STREAM_ERROR."
		if in.value > d.maxCapacity {
			return errorf(ErrEncoderStream, "Set Dynamic Table Capacity %d above SETTINGS_QPACK_MAX_TABLE_CAPACITY %d (RFC 9204 §4.3.1)", in.value, d.maxCapacity)
		}
		d.t.capacity = in.value
		d.t.evictTo(in.value)
		return nil
	case insNameRef:
		var name string
		if in.static {
			// RFC 9204 §3.1: "If this index is received on the encoder
			// stream, this MUST be treated as a connection error of
			// type QPACK_ENCODER_STREAM_ERROR."
			if in.index >= uint64(len(staticTable)) {
				return errorf(ErrEncoderStream, "Insert with Name Reference to static index %d, beyond the table's %d entries (RFC 9204 §3.1)", in.index, len(staticTable))
			}
			name = staticTable[in.index].Name
		} else {
			e, err := d.relative(in.index)
			if err != nil {
				return err
			}
			name = e.Name
		}
		return d.insert(HeaderField{name, in.val})
	case insLiteralName:
		return d.insert(HeaderField{in.name, in.val})
	default: // insDuplicate
		e, err := d.relative(in.index)
		if err != nil {
			return err
		}
		return d.insert(e)
	}
}

// relative resolves an encoder-stream relative index (RFC 9204 §3.2.5:
// relative index 0 is the most recently inserted entry).
func (d *Decoder) relative(rel uint64) (HeaderField, error) {
	n := d.t.inserted()
	if rel >= n {
		return HeaderField{}, errorf(ErrEncoderStream, "relative index %d beyond the %d entries inserted (RFC 9204 §3.2.5)", rel, n)
	}
	e, ok := d.t.get(n - 1 - rel)
	if !ok {
		// RFC 9204 §2.2.3: "If the decoder encounters a reference in an
		// encoder instruction to a dynamic table entry that has already
		// been evicted, it MUST treat this as a connection error of type
		// QPACK_ENCODER_STREAM_ERROR."
		return HeaderField{}, errorf(ErrEncoderStream, "relative index %d names absolute index %d, already evicted (RFC 9204 §2.2.3)", rel, n-1-rel)
	}
	return e, nil
}

func (d *Decoder) insert(f HeaderField) error {
	// RFC 9204 §3.2.2: "It is an error if the encoder attempts to add an
	// entry that is larger than the dynamic table capacity; the decoder
	// MUST treat this as a connection error of type
	// QPACK_ENCODER_STREAM_ERROR."
	if f.Size() > d.t.capacity {
		return errorf(ErrEncoderStream, "insert of a %d-byte entry into a table of capacity %d (RFC 9204 §3.2.2)", f.Size(), d.t.capacity)
	}
	d.t.insert(f)
	return nil
}

// Decode decodes the field section p received on stream. When p needs
// entries not inserted yet, the stream is blocked until they arrive or
// ctx ends. limit bounds the decoded size, counted as RFC 9114 §4.2.2
// does; above it Decode returns a *TooLargeError. Other errors are
// connection errors (*Error, QPACK_DECOMPRESSION_FAILED) or ctx's.
func (d *Decoder) Decode(ctx context.Context, stream uint64, p []byte, limit uint64) ([]HeaderField, error) {
	enc, rest, err := readInt(p, 8)
	if err != nil {
		return nil, errorf(ErrDecompressionFailed, "field section prefix: %v", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ric, err := d.requiredInsertCount(enc)
	if err != nil {
		return nil, err
	}
	if ric > d.t.inserted() {
		if err := d.block(ctx, stream, ric); err != nil {
			return nil, err
		}
	}
	fields, err := d.decodeLines(ric, rest, limit)
	if err != nil {
		var tl *TooLargeError
		if errors.As(err, &tl) && ric > 0 {
			// The section is abandoned: RFC 9204 §4.4.2, the
			// decoder "abandons reading of a stream".
			d.emit(appendCancelStream(nil, stream))
		}
		return nil, err
	}
	if ric > 0 {
		// RFC 9204 §2.2.2.1: "After the decoder finishes decoding a field
		// section encoded using representations containing dynamic table
		// references, it MUST emit a Section Acknowledgment instruction".
		d.emit(appendSectionAck(nil, stream))
		d.known = max(d.known, ric)
		d.refs++
	}
	return fields, nil
}

// block waits, d.mu held, until the Insert Count reaches ric.
func (d *Decoder) block(ctx context.Context, stream, ric uint64) error {
	// RFC 9204 §2.1.2: "If a decoder encounters more blocked streams than
	// it promised to support, it MUST treat this as a connection error of
	// type QPACK_DECOMPRESSION_FAILED."
	if d.blocked >= d.maxBlocked {
		return errorf(ErrDecompressionFailed, "stream %d would be blocked stream number %d; SETTINGS_QPACK_BLOCKED_STREAMS is %d (RFC 9204 §2.1.2)",
			stream, d.blocked+1, d.maxBlocked)
	}
	d.blocked++
	defer func() { d.blocked-- }()
	for ric > d.t.inserted() {
		if d.err != nil {
			return d.err
		}
		ch := d.changed
		d.mu.Unlock()
		select {
		case <-ch:
			d.mu.Lock()
		case <-ctx.Done():
			d.mu.Lock()
			// RFC 9204 §4.4.2: a decoder that abandons reading of a
			// stream tells the encoder with a Stream Cancellation.
			d.emit(appendCancelStream(nil, stream))
			return ctx.Err()
		}
	}
	return nil
}

// requiredInsertCount decodes the Encoded Required Insert Count (RFC 9204
// §4.5.1.1).
func (d *Decoder) requiredInsertCount(enc uint64) (uint64, error) {
	if enc == 0 {
		return 0, nil
	}
	maxEntries := d.maxCapacity / 32
	fullRange := 2 * maxEntries
	// "If the decoder encounters a value of EncodedInsertCount that could
	// not have been produced by a conformant encoder, it MUST treat this
	// as a connection error of type QPACK_DECOMPRESSION_FAILED."
	bad := func() (uint64, error) {
		return 0, errorf(ErrDecompressionFailed,
			"Encoded Required Insert Count %d cannot come from a conformant encoder (table capacity %d, %d inserts; RFC 9204 §4.5.1.1)",
			enc, d.maxCapacity, d.t.inserted())
	}
	if enc > fullRange {
		return bad()
	}
	maxValue := d.t.inserted() + maxEntries
	maxWrapped := maxValue / fullRange * fullRange
	ric := maxWrapped + enc - 1
	if ric > maxValue {
		if ric <= fullRange {
			return bad()
		}
		ric -= fullRange
	}
	if ric == 0 {
		return bad()
	}
	return ric, nil
}

// decodeLines decodes the Base and the field lines (RFC 9204 §4.5).
func (d *Decoder) decodeLines(ric uint64, b []byte, limit uint64) ([]HeaderField, error) {
	fail := func(format string, args ...any) ([]HeaderField, error) {
		return nil, errorf(ErrDecompressionFailed, format, args...)
	}
	if len(b) == 0 {
		return fail("field section ends in its prefix")
	}
	sign := b[0]&0x80 != 0
	delta, b, err := readInt(b, 7)
	if err != nil {
		return fail("Delta Base: %v", err)
	}
	base := ric + delta
	if sign {
		// RFC 9204 §4.5.1.2: "An endpoint MUST treat a field block with a
		// Sign bit of 1 as invalid if the value of Required Insert Count
		// is less than or equal to the value of Delta Base."
		if ric <= delta {
			return fail("Sign bit 1 with Delta Base %d and Required Insert Count %d (RFC 9204 §4.5.1.2)", delta, ric)
		}
		base = ric - delta - 1
	} else if base < ric {
		return fail("Delta Base %d overflows", delta)
	}
	// dynamic resolves an absolute index: RFC 9204 §2.2.3: "If the
	// decoder encounters a reference in a field line representation to a
	// dynamic table entry that has already been evicted or that has an
	// absolute index greater than or equal to the declared Required Insert
	// Count (Section 4.5.1), it MUST treat this as a connection error of
	// type QPACK_DECOMPRESSION_FAILED."
	dynamic := func(abs uint64, ok bool) (HeaderField, error) {
		if !ok || abs >= ric {
			return HeaderField{}, errorf(ErrDecompressionFailed, "reference to absolute index %d with Required Insert Count %d (RFC 9204 §2.2.3)", abs, ric)
		}
		e, present := d.t.get(abs)
		if !present {
			return HeaderField{}, errorf(ErrDecompressionFailed, "reference to absolute index %d, evicted (RFC 9204 §2.2.3)", abs)
		}
		return e, nil
	}
	static := func(i uint64) (HeaderField, error) {
		// RFC 9204 §3.1: "When the decoder encounters an invalid static
		// table index in a field line representation, it MUST treat this
		// as a connection error of type QPACK_DECOMPRESSION_FAILED."
		if i >= uint64(len(staticTable)) {
			return HeaderField{}, errorf(ErrDecompressionFailed, "static table index %d beyond the table's %d entries (RFC 9204 §3.1)", i, len(staticTable))
		}
		return staticTable[i], nil
	}
	var fields []HeaderField
	var size uint64
	for len(b) > 0 {
		var f HeaderField
		var idx uint64
		c := b[0]
		switch {
		case c&0x80 != 0: // Indexed Field Line, §4.5.2: 1 T Index(6+)
			if idx, b, err = readInt(b, 6); err != nil {
				break
			}
			if c&0x40 != 0 {
				f, err = static(idx)
			} else {
				f, err = dynamic(base-1-idx, idx < base)
			}
		case c&0xc0 == 0x40: // Literal with Name Reference, §4.5.4: 01 N T Name Index(4+)
			if idx, b, err = readInt(b, 4); err != nil {
				break
			}
			if c&0x10 != 0 {
				f, err = static(idx)
			} else {
				f, err = dynamic(base-1-idx, idx < base)
			}
			if err == nil {
				f.Value, b, err = readString(b, 7, limit)
			}
		case c&0xe0 == 0x20: // Literal with Literal Name, §4.5.6: 001 N H Name Length(3+)
			if f.Name, b, err = readString(b, 3, limit); err == nil {
				f.Value, b, err = readString(b, 7, limit)
			}
		case c&0xf0 == 0x10: // Indexed Field Line with Post-Base Index, §4.5.3: 0001 Index(4+)
			if idx, b, err = readInt(b, 4); err == nil {
				f, err = dynamic(base+idx, base+idx >= base)
			}
		default: // Literal with Post-Base Name Reference, §4.5.5: 0000 N Name Index(3+)
			if idx, b, err = readInt(b, 3); err != nil {
				break
			}
			if f, err = dynamic(base+idx, base+idx >= base); err == nil {
				f.Value, b, err = readString(b, 7, limit)
			}
		}
		if errors.Is(err, errStringTooLarge) {
			return nil, &TooLargeError{Size: size + limit + 1, Limit: limit}
		}
		if err != nil {
			var qe *Error
			if errors.As(err, &qe) {
				return nil, qe
			}
			return fail("field line: %v", err)
		}
		if size += f.Size(); size > limit {
			return nil, &TooLargeError{Size: size, Limit: limit}
		}
		fields = append(fields, f)
	}
	return fields, nil
}
