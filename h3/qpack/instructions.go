package qpack

// Encoder instructions (RFC 9204 §4.3) and decoder instructions (§4.4):
// parsers that take what a stream delivered so far (errIncomplete when an
// instruction is cut short) and appenders.

// Kinds of encoder instructions.
const (
	insSetCapacity = iota // §4.3.1: 001 Capacity(5+)
	insNameRef            // §4.3.2: 1 T Name Index(6+) H Value Length(7+) Value
	insLiteralName        // §4.3.3: 01 H Name Length(5+) Name H Value Length(7+) Value
	insDuplicate          // §4.3.4: 000 Index(5+)
)

type encoderInstruction struct {
	kind   int
	static bool   // insNameRef: T bit, the name is in the static table
	index  uint64 // insNameRef, insDuplicate: static index or relative index
	value  uint64 // insSetCapacity: the capacity
	name   string // insLiteralName
	val    string // insNameRef, insLiteralName
}

// parseEncoderInstruction reads one encoder instruction; strings longer
// than limit are refused.
func parseEncoderInstruction(b []byte, limit uint64) (encoderInstruction, []byte, error) {
	var in encoderInstruction
	var err error
	if len(b) == 0 {
		return in, nil, errIncomplete
	}
	switch c := b[0]; {
	case c&0x80 != 0:
		in.kind, in.static = insNameRef, c&0x40 != 0
		if in.index, b, err = readInt(b, 6); err != nil {
			return in, nil, err
		}
		in.val, b, err = readString(b, 7, limit)
	case c&0xc0 == 0x40:
		in.kind = insLiteralName
		if in.name, b, err = readString(b, 5, limit); err != nil {
			return in, nil, err
		}
		in.val, b, err = readString(b, 7, limit)
	case c&0xe0 == 0x20:
		in.kind = insSetCapacity
		in.value, b, err = readInt(b, 5)
	default:
		in.kind = insDuplicate
		in.index, b, err = readInt(b, 5)
	}
	return in, b, err
}

func appendSetCapacity(b []byte, c uint64) []byte { return appendInt(b, 5, 0x20, c) }

func appendInsertNameRef(b []byte, static bool, index uint64, value string) []byte {
	flags := byte(0x80)
	if static {
		flags |= 0x40
	}
	return appendString(appendInt(b, 6, flags, index), 7, 0, value)
}

func appendInsertLiteral(b []byte, name, value string) []byte {
	return appendString(appendString(b, 5, 0x40, name), 7, 0, value)
}

func appendDuplicate(b []byte, rel uint64) []byte { return appendInt(b, 5, 0, rel) }

// Kinds of decoder instructions.
const (
	insSectionAck     = iota // §4.4.1: 1 Stream ID(7+)
	insCancelStream          // §4.4.2: 01 Stream ID(6+)
	insCountIncrement        // §4.4.3: 00 Increment(6+)
)

type decoderInstruction struct {
	kind  int
	value uint64 // stream ID or increment
}

// parseDecoderInstruction reads one decoder instruction.
func parseDecoderInstruction(b []byte) (decoderInstruction, []byte, error) {
	var in decoderInstruction
	var err error
	if len(b) == 0 {
		return in, nil, errIncomplete
	}
	switch c := b[0]; {
	case c&0x80 != 0:
		in.kind = insSectionAck
		in.value, b, err = readInt(b, 7)
	case c&0x40 != 0:
		in.kind = insCancelStream
		in.value, b, err = readInt(b, 6)
	default:
		in.kind = insCountIncrement
		in.value, b, err = readInt(b, 6)
	}
	return in, b, err
}

func appendSectionAck(b []byte, stream uint64) []byte   { return appendInt(b, 7, 0x80, stream) }
func appendCancelStream(b []byte, stream uint64) []byte { return appendInt(b, 6, 0x40, stream) }
func appendCountIncrement(b []byte, inc uint64) []byte  { return appendInt(b, 6, 0x00, inc) }
