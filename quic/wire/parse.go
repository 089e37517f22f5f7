package wire

// Parser parses frames without allocating. It holds one value of each
// frame type and a reusable buffer of ACK ranges: the Frame returned by
// Parse points into the Parser and stays valid only until the next call.
// Byte fields (data, tokens, connection IDs, reasons) are sub-slices of
// the parsed payload. A Parser is not safe for concurrent use; the zero
// value is ready to use.
type Parser struct {
	ackRanges []AckRange

	padding            PaddingFrame
	ping               PingFrame
	ack                AckFrame
	resetStream        ResetStreamFrame
	stopSending        StopSendingFrame
	crypto             CryptoFrame
	newToken           NewTokenFrame
	stream             StreamFrame
	maxData            MaxDataFrame
	maxStreamData      MaxStreamDataFrame
	maxStreams         MaxStreamsFrame
	dataBlocked        DataBlockedFrame
	streamDataBlocked  StreamDataBlockedFrame
	streamsBlocked     StreamsBlockedFrame
	newConnectionID    NewConnectionIDFrame
	retireConnectionID RetireConnectionIDFrame
	pathChallenge      PathChallengeFrame
	pathResponse       PathResponseFrame
	connectionClose    ConnectionCloseFrame
	handshakeDone      HandshakeDoneFrame
	datagram           DatagramFrame
	ackFrequency       AckFrequencyFrame
	immediateAck       ImmediateAckFrame
}

// ParseFrame parses one frame at the start of b with a fresh Parser. It
// allocates; the receive path should keep a Parser and call its Parse
// method.
func ParseFrame(b []byte) (Frame, int, error) {
	var p Parser
	return p.Parse(b)
}

// MaxStreams is the largest stream count a MAX_STREAMS or STREAMS_BLOCKED
// frame or an initial_max_streams transport parameter may carry, 2^60
// (RFC 9000 §4.6).
const MaxStreams = 1 << 60

// maxAckDelayLimitMicros is 2^14 ms in microseconds: RFC 9000 §18.2 "Values
// of 2^14 or greater are invalid" for max_ack_delay, which
// draft-ietf-quic-ack-frequency-14 §4 applies to Requested Max Ack Delay.
const maxAckDelayLimitMicros = (1 << 14) * 1000

// reader is a cursor over a frame's bytes; on a short read it records the
// failure so that call sites check once per frame.
type reader struct {
	b   []byte
	off int
	bad bool
}

// varint reads a variable-length integer. The one-byte case, the most
// common, is small enough to be inlined. Once a read has failed, later
// reads may still succeed, but the frame is rejected anyway.
func (r *reader) varint() uint64 {
	if r.off < len(r.b) && r.b[r.off] < 0x40 {
		v := uint64(r.b[r.off])
		r.off++
		return v
	}
	return r.varintSlow()
}

func (r *reader) varintSlow() uint64 {
	if r.bad {
		return 0
	}
	v, n, err := ConsumeVarint(r.b[r.off:])
	if err != nil {
		r.bad = true
		return 0
	}
	r.off += n
	return v
}

func (r *reader) bytes(n uint64) []byte {
	if r.bad || uint64(len(r.b)-r.off) < n {
		r.bad = true
		return nil
	}
	s := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *reader) byte() byte {
	if r.bad || r.off >= len(r.b) {
		r.bad = true
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// Parse parses the frame at the start of b, a packet payload, and returns
// it with the number of bytes it took. A run of PADDING bytes is returned
// as one PaddingFrame. Errors are *Error values naming the rule broken:
// FRAME_ENCODING_ERROR for unknown types, truncated frames and invalid
// field values, PROTOCOL_VIOLATION for a non-minimal frame type encoding.
//
// Parse does not check whether the frame may appear in the packet type
// that carried it; see FrameType.AllowedIn.
func (p *Parser) Parse(b []byte) (Frame, int, error) {
	if len(b) == 0 {
		return nil, 0, frameErr(FrameEncodingError, 0, "RFC 9000 §12.4: empty frame")
	}
	// Fast path for single-byte types, which all frames of RFC 9000 use.
	c := b[0]
	if c < 0x40 {
		t := FrameType(c)
		switch {
		case t.IsStream():
			return p.parseStream(b, t)
		case t == FrameTypePadding:
			n := 1
			for n < len(b) && b[n] == 0 {
				n++
			}
			p.padding.Length = n
			return &p.padding, n, nil
		case t == FrameTypePing:
			return &p.ping, 1, nil
		case t == FrameTypeAck || t == FrameTypeAckECN:
			return p.parseAck(b, t)
		case t == FrameTypeCrypto:
			return p.parseCrypto(b)
		}
		return p.parseOther(b, t, 1)
	}
	tv, tn, err := ConsumeVarint(b)
	if err != nil {
		return nil, 0, frameErr(FrameEncodingError, 0, "RFC 9000 §12.4: truncated frame type")
	}
	t := FrameType(tv)
	if VarintLen(tv) != tn {
		// RFC 9000 §12.4: "a frame type MUST use the shortest possible
		// encoding ... An endpoint MAY treat the receipt of a frame type
		// that uses a longer encoding than necessary as a connection
		// error of type PROTOCOL_VIOLATION."
		return nil, 0, frameErr(ProtocolViolation, t, "RFC 9000 §12.4: a frame type MUST use the shortest possible encoding")
	}
	return p.parseOther(b, t, tn)
}

func truncated(t FrameType) *Error {
	return frameErr(FrameEncodingError, t, "RFC 9000 §12.4: frame truncated by the end of the packet")
}

func (p *Parser) parseStream(b []byte, t FrameType) (Frame, int, error) {
	r := reader{b: b, off: 1}
	f := &p.stream
	f.StreamID = r.varint()
	f.Offset = 0
	f.HasOffset = t&StreamOffBit != 0
	if f.HasOffset {
		f.Offset = r.varint()
	}
	f.Fin = t&StreamFinBit != 0
	f.NoLength = t&StreamLenBit == 0
	if f.NoLength {
		if r.bad {
			return nil, 0, truncated(t)
		}
		f.Data = b[r.off:len(b):len(b)]
		r.off = len(b)
	} else {
		n := r.varint()
		f.Data = r.bytes(n)
	}
	if r.bad {
		return nil, 0, truncated(t)
	}
	if f.Offset+uint64(len(f.Data)) > MaxVarint {
		// RFC 9000 §19.8: "Receipt of a frame that exceeds this limit MUST
		// be treated as a connection error of type FRAME_ENCODING_ERROR or
		// FLOW_CONTROL_ERROR."
		return nil, 0, frameErr(FrameEncodingError, t, "RFC 9000 §19.8: the sum of the offset and data length cannot exceed 2^62-1")
	}
	return f, r.off, nil
}

func (p *Parser) parseCrypto(b []byte) (Frame, int, error) {
	r := reader{b: b, off: 1}
	f := &p.crypto
	f.Offset = r.varint()
	n := r.varint()
	f.Data = r.bytes(n)
	if r.bad {
		return nil, 0, truncated(FrameTypeCrypto)
	}
	if f.Offset+uint64(len(f.Data)) > MaxVarint {
		// RFC 9000 §19.6: "Receipt of a frame that exceeds this limit MUST
		// be treated as a connection error of type FRAME_ENCODING_ERROR or
		// CRYPTO_BUFFER_EXCEEDED."
		return nil, 0, frameErr(FrameEncodingError, FrameTypeCrypto, "RFC 9000 §19.6: the sum of the offset and data length cannot exceed 2^62-1")
	}
	return f, r.off, nil
}

func (p *Parser) parseAck(b []byte, t FrameType) (Frame, int, error) {
	r := reader{b: b, off: 1}
	f := &p.ack
	largest := r.varint()
	f.AckDelay = r.varint()
	count := r.varint()
	first := r.varint()
	if r.bad {
		return nil, 0, truncated(t)
	}
	if first > largest {
		// RFC 9000 §19.3.1: "If any computed packet number is negative, an
		// endpoint MUST generate a connection error of type
		// FRAME_ENCODING_ERROR."
		return nil, 0, frameErr(FrameEncodingError, t, "RFC 9000 §19.3.1: First ACK Range makes the smallest packet number negative")
	}
	// Each further range takes at least two bytes: a count beyond that is
	// "an ACK frame that has more acknowledgment ranges than the remainder
	// of the packet could carry" (RFC 9000 §20.1, FRAME_ENCODING_ERROR).
	if count > uint64(len(b)-r.off)/2 {
		return nil, 0, frameErr(FrameEncodingError, t, "RFC 9000 §20.1: ACK Range Count exceeds what the rest of the packet could carry")
	}
	ranges := append(p.ackRanges[:0], AckRange{Smallest: largest - first, Largest: largest})
	smallest := largest - first
	for range count {
		gap := r.varint()
		length := r.varint()
		if r.bad {
			p.ackRanges = ranges
			return nil, 0, truncated(t)
		}
		// largest = previous_smallest - gap - 2
		if smallest < 2 || gap > smallest-2 {
			p.ackRanges = ranges
			return nil, 0, frameErr(FrameEncodingError, t, "RFC 9000 §19.3.1: ACK Gap makes a packet number negative")
		}
		hi := smallest - gap - 2
		if length > hi {
			p.ackRanges = ranges
			return nil, 0, frameErr(FrameEncodingError, t, "RFC 9000 §19.3.1: ACK Range Length makes a packet number negative")
		}
		smallest = hi - length
		ranges = append(ranges, AckRange{Smallest: smallest, Largest: hi})
	}
	p.ackRanges = ranges
	f.Ranges = ranges
	f.ECN = t == FrameTypeAckECN
	f.ECT0, f.ECT1, f.ECNCE = 0, 0, 0
	if f.ECN {
		f.ECT0 = r.varint()
		f.ECT1 = r.varint()
		f.ECNCE = r.varint()
		if r.bad {
			return nil, 0, truncated(t)
		}
	}
	return f, r.off, nil
}

func (p *Parser) parseOther(b []byte, t FrameType, off int) (Frame, int, error) {
	r := reader{b: b, off: off}
	var f Frame
	switch t {
	case FrameTypeResetStream:
		g := &p.resetStream
		g.StreamID = r.varint()
		g.ErrorCode = r.varint()
		g.FinalSize = r.varint()
		f = g
	case FrameTypeStopSending:
		g := &p.stopSending
		g.StreamID = r.varint()
		g.ErrorCode = r.varint()
		f = g
	case FrameTypeNewToken:
		g := &p.newToken
		g.Token = r.bytes(r.varint())
		if !r.bad && len(g.Token) == 0 {
			// RFC 9000 §19.7: "A client MUST treat receipt of a NEW_TOKEN
			// frame with an empty Token field as a connection error of
			// type FRAME_ENCODING_ERROR."
			return nil, 0, frameErr(FrameEncodingError, t, "RFC 9000 §19.7: the token MUST NOT be empty")
		}
		f = g
	case FrameTypeMaxData:
		g := &p.maxData
		g.Maximum = r.varint()
		f = g
	case FrameTypeMaxStreamData:
		g := &p.maxStreamData
		g.StreamID = r.varint()
		g.Maximum = r.varint()
		f = g
	case FrameTypeMaxStreamsBidi, FrameTypeMaxStreamsUni:
		g := &p.maxStreams
		g.Bidi = t == FrameTypeMaxStreamsBidi
		g.Maximum = r.varint()
		if !r.bad && g.Maximum > MaxStreams {
			// RFC 9000 §19.11: "Receipt of a frame that permits opening of
			// a stream larger than this limit MUST be treated as a
			// connection error of type FRAME_ENCODING_ERROR."
			return nil, 0, frameErr(FrameEncodingError, t, "RFC 9000 §19.11: Maximum Streams cannot exceed 2^60")
		}
		f = g
	case FrameTypeDataBlocked:
		g := &p.dataBlocked
		g.Limit = r.varint()
		f = g
	case FrameTypeStreamDataBlocked:
		g := &p.streamDataBlocked
		g.StreamID = r.varint()
		g.Limit = r.varint()
		f = g
	case FrameTypeStreamsBlockedBidi, FrameTypeStreamsBlockedUni:
		g := &p.streamsBlocked
		g.Bidi = t == FrameTypeStreamsBlockedBidi
		g.Limit = r.varint()
		if !r.bad && g.Limit > MaxStreams {
			// RFC 9000 §19.14: "Receipt of a frame that encodes a larger
			// stream ID MUST be treated as a connection error of type
			// STREAM_LIMIT_ERROR or FRAME_ENCODING_ERROR."
			return nil, 0, frameErr(FrameEncodingError, t, "RFC 9000 §19.14: Maximum Streams cannot exceed 2^60")
		}
		f = g
	case FrameTypeNewConnectionID:
		g := &p.newConnectionID
		g.SequenceNumber = r.varint()
		g.RetirePriorTo = r.varint()
		l := r.byte()
		g.ConnectionID = r.bytes(uint64(l))
		tok := r.bytes(16)
		if r.bad {
			return nil, 0, truncated(t)
		}
		copy(g.StatelessResetToken[:], tok)
		if l < 1 || l > MaxCIDLen {
			// RFC 9000 §19.15: "Values less than 1 and greater than 20 are
			// invalid and MUST be treated as a connection error of type
			// FRAME_ENCODING_ERROR."
			return nil, 0, frameErr(FrameEncodingError, t, "RFC 9000 §19.15: connection ID length must be 1 to 20")
		}
		if g.RetirePriorTo > g.SequenceNumber {
			// RFC 9000 §19.15: "Receiving a value in the Retire Prior To
			// field that is greater than that in the Sequence Number field
			// MUST be treated as a connection error of type
			// FRAME_ENCODING_ERROR."
			return nil, 0, frameErr(FrameEncodingError, t, "RFC 9000 §19.15: Retire Prior To greater than Sequence Number")
		}
		f = g
	case FrameTypeRetireConnectionID:
		g := &p.retireConnectionID
		g.SequenceNumber = r.varint()
		f = g
	case FrameTypePathChallenge:
		g := &p.pathChallenge
		copy(g.Data[:], r.bytes(8))
		f = g
	case FrameTypePathResponse:
		g := &p.pathResponse
		copy(g.Data[:], r.bytes(8))
		f = g
	case FrameTypeConnectionClose, FrameTypeConnectionCloseApplication:
		g := &p.connectionClose
		g.Application = t == FrameTypeConnectionCloseApplication
		g.ErrorCode = r.varint()
		g.FrameType = 0
		if !g.Application {
			g.FrameType = FrameType(r.varint())
		}
		g.Reason = r.bytes(r.varint())
		f = g
	case FrameTypeHandshakeDone:
		f = &p.handshakeDone
	case FrameTypeImmediateAck:
		f = &p.immediateAck
	case FrameTypeDatagram, FrameTypeDatagramLen:
		g := &p.datagram
		g.NoLength = t == FrameTypeDatagram
		if g.NoLength {
			g.Data = b[r.off:len(b):len(b)]
			r.off = len(b)
		} else {
			g.Data = r.bytes(r.varint())
		}
		f = g
	case FrameTypeAckFrequency:
		g := &p.ackFrequency
		g.SequenceNumber = r.varint()
		g.AckElicitingThreshold = r.varint()
		g.RequestedMaxAckDelay = r.varint()
		g.ReorderingThreshold = r.varint()
		if !r.bad && g.RequestedMaxAckDelay >= maxAckDelayLimitMicros {
			// draft-ietf-quic-ack-frequency-14 §4: "values of 2^14
			// milliseconds or greater are invalid for max_ack_delay ...
			// Receipt of an invalid value MUST be treated as a connection
			// error of type PROTOCOL_VIOLATION." The lower bound,
			// min_ack_delay, is checked by the engine.
			return nil, 0, frameErr(ProtocolViolation, t, "draft-ietf-quic-ack-frequency-14 §4: Requested Max Ack Delay of 2^14 ms or more is invalid")
		}
		f = g
	case FrameTypePadding, FrameTypePing, FrameTypeAck, FrameTypeAckECN, FrameTypeCrypto:
		// Reached only through a non-minimal type encoding, rejected
		// before; kept for completeness.
		return nil, 0, frameErr(ProtocolViolation, t, "RFC 9000 §12.4: a frame type MUST use the shortest possible encoding")
	default:
		if t.IsStream() {
			return nil, 0, frameErr(ProtocolViolation, t, "RFC 9000 §12.4: a frame type MUST use the shortest possible encoding")
		}
		// RFC 9000 §12.4: "An endpoint MUST treat the receipt of a frame of
		// unknown type as a connection error of type
		// FRAME_ENCODING_ERROR."
		return nil, 0, frameErr(FrameEncodingError, t, "RFC 9000 §12.4: unknown frame type")
	}
	if r.bad {
		return nil, 0, truncated(t)
	}
	return f, r.off, nil
}
