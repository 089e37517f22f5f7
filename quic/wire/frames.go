package wire

import "strconv"

// FrameType is a QUIC frame type (RFC 9000 §12.4, §19).
type FrameType uint64

// Frame types. STREAM frames use 0x08-0x0f: FrameTypeStream ORed with the
// OFF (0x04), LEN (0x02) and FIN (0x01) bits.
const (
	FrameTypePadding                    FrameType = 0x00
	FrameTypePing                       FrameType = 0x01
	FrameTypeAck                        FrameType = 0x02
	FrameTypeAckECN                     FrameType = 0x03
	FrameTypeResetStream                FrameType = 0x04
	FrameTypeStopSending                FrameType = 0x05
	FrameTypeCrypto                     FrameType = 0x06
	FrameTypeNewToken                   FrameType = 0x07
	FrameTypeStream                     FrameType = 0x08
	FrameTypeMaxData                    FrameType = 0x10
	FrameTypeMaxStreamData              FrameType = 0x11
	FrameTypeMaxStreamsBidi             FrameType = 0x12
	FrameTypeMaxStreamsUni              FrameType = 0x13
	FrameTypeDataBlocked                FrameType = 0x14
	FrameTypeStreamDataBlocked          FrameType = 0x15
	FrameTypeStreamsBlockedBidi         FrameType = 0x16
	FrameTypeStreamsBlockedUni          FrameType = 0x17
	FrameTypeNewConnectionID            FrameType = 0x18
	FrameTypeRetireConnectionID         FrameType = 0x19
	FrameTypePathChallenge              FrameType = 0x1a
	FrameTypePathResponse               FrameType = 0x1b
	FrameTypeConnectionClose            FrameType = 0x1c // transport error
	FrameTypeConnectionCloseApplication FrameType = 0x1d
	FrameTypeHandshakeDone              FrameType = 0x1e
	FrameTypeImmediateAck               FrameType = 0x1f // draft-ietf-quic-ack-frequency-14
	FrameTypeDatagram                   FrameType = 0x30 // RFC 9221, no Length field
	FrameTypeDatagramLen                FrameType = 0x31 // RFC 9221, with Length field
	FrameTypeAckFrequency               FrameType = 0xaf // draft-ietf-quic-ack-frequency-14
)

// STREAM frame type bits (RFC 9000 §19.8).
const (
	StreamOffBit = 0x04
	StreamLenBit = 0x02
	StreamFinBit = 0x01
)

// IsStream reports whether t is one of the eight STREAM frame types.
func (t FrameType) IsStream() bool { return t&^7 == FrameTypeStream }

// String returns the frame type's RFC name, such as "STREAM" or "ACK_ECN".
func (t FrameType) String() string {
	switch t {
	case FrameTypePadding:
		return "PADDING"
	case FrameTypePing:
		return "PING"
	case FrameTypeAck:
		return "ACK"
	case FrameTypeAckECN:
		return "ACK_ECN"
	case FrameTypeResetStream:
		return "RESET_STREAM"
	case FrameTypeStopSending:
		return "STOP_SENDING"
	case FrameTypeCrypto:
		return "CRYPTO"
	case FrameTypeNewToken:
		return "NEW_TOKEN"
	case FrameTypeMaxData:
		return "MAX_DATA"
	case FrameTypeMaxStreamData:
		return "MAX_STREAM_DATA"
	case FrameTypeMaxStreamsBidi:
		return "MAX_STREAMS_BIDI"
	case FrameTypeMaxStreamsUni:
		return "MAX_STREAMS_UNI"
	case FrameTypeDataBlocked:
		return "DATA_BLOCKED"
	case FrameTypeStreamDataBlocked:
		return "STREAM_DATA_BLOCKED"
	case FrameTypeStreamsBlockedBidi:
		return "STREAMS_BLOCKED_BIDI"
	case FrameTypeStreamsBlockedUni:
		return "STREAMS_BLOCKED_UNI"
	case FrameTypeNewConnectionID:
		return "NEW_CONNECTION_ID"
	case FrameTypeRetireConnectionID:
		return "RETIRE_CONNECTION_ID"
	case FrameTypePathChallenge:
		return "PATH_CHALLENGE"
	case FrameTypePathResponse:
		return "PATH_RESPONSE"
	case FrameTypeConnectionClose:
		return "CONNECTION_CLOSE"
	case FrameTypeConnectionCloseApplication:
		return "CONNECTION_CLOSE_APP"
	case FrameTypeHandshakeDone:
		return "HANDSHAKE_DONE"
	case FrameTypeImmediateAck:
		return "IMMEDIATE_ACK"
	case FrameTypeDatagram, FrameTypeDatagramLen:
		return "DATAGRAM"
	case FrameTypeAckFrequency:
		return "ACK_FREQUENCY"
	}
	if t.IsStream() {
		return "STREAM"
	}
	return "0x" + strconv.FormatUint(uint64(t), 16)
}

// Frame is implemented by pointers to the frame structs of this package.
// Append writes the frame, type included, without validating its fields;
// Len returns the number of bytes Append writes.
type Frame interface {
	Type() FrameType
	Append(b []byte) []byte
	Len() int
}

// PaddingFrame is a run of Length PADDING bytes (RFC 9000 §19.1). The
// parser returns a whole run of consecutive PADDING bytes as one frame.
type PaddingFrame struct{ Length int }

// Type returns FrameTypePadding.
func (f *PaddingFrame) Type() FrameType { return FrameTypePadding }

// Len returns Length.
func (f *PaddingFrame) Len() int { return max(f.Length, 0) }

// Append appends Length zero bytes.
func (f *PaddingFrame) Append(b []byte) []byte {
	for range f.Length {
		b = append(b, 0)
	}
	return b
}

// PingFrame is a PING frame (RFC 9000 §19.2).
type PingFrame struct{}

// Type returns FrameTypePing.
func (f *PingFrame) Type() FrameType { return FrameTypePing }

// Len returns 1.
func (f *PingFrame) Len() int { return 1 }

// Append appends the frame.
func (f *PingFrame) Append(b []byte) []byte { return append(b, byte(FrameTypePing)) }

// AckRange is a range of acknowledged packet numbers, both ends included.
type AckRange struct{ Smallest, Largest uint64 }

// AckFrame is an ACK frame (RFC 9000 §19.3). Ranges are in descending
// order: Ranges[0].Largest is the Largest Acknowledged field. The encoder
// derives the First ACK Range, Gap and ACK Range Length fields from
// consecutive ranges without checking them. An AckFrame with no range
// acknowledges nothing and has no encoding (every ACK frame of RFC 9000
// §19.3 acknowledges at least its Largest Acknowledged): Len is 0 and
// Append writes nothing, so a tester that filters every packet number out
// of an acknowledgment sends none instead of acknowledging packet 0. A parsed AckFrame's Ranges
// live in the Parser's buffer and are overwritten by the next ACK parsed.
type AckFrame struct {
	Ranges []AckRange
	// AckDelay is the raw encoded field; multiply by
	// 2^ack_delay_exponent microseconds to get the delay.
	AckDelay uint64
	// ECN selects type 0x03 with the three ECN counts.
	ECN               bool
	ECT0, ECT1, ECNCE uint64
}

// Type returns FrameTypeAck or FrameTypeAckECN.
func (f *AckFrame) Type() FrameType {
	if f.ECN {
		return FrameTypeAckECN
	}
	return FrameTypeAck
}

// LargestAcked returns Ranges[0].Largest, or 0 when there is no range.
func (f *AckFrame) LargestAcked() uint64 {
	if len(f.Ranges) == 0 {
		return 0
	}
	return f.Ranges[0].Largest
}

// Acks reports whether pn is in one of the ranges.
func (f *AckFrame) Acks(pn uint64) bool {
	for _, r := range f.Ranges {
		if pn > r.Largest {
			return false
		}
		if pn >= r.Smallest {
			return true
		}
	}
	return false
}

func (f *AckFrame) fieldsLen() int {
	if len(f.Ranges) == 0 {
		return 0
	}
	n := 1 + VarintLen(f.AckDelay) + VarintLen(uint64(len(f.Ranges)-1))
	r0 := f.Ranges[0]
	n += VarintLen(r0.Largest) + VarintLen(r0.Largest-r0.Smallest)
	prev := r0.Smallest
	for _, r := range f.Ranges[1:] {
		n += VarintLen(prev-r.Largest-2) + VarintLen(r.Largest-r.Smallest)
		prev = r.Smallest
	}
	if f.ECN {
		n += VarintLen(f.ECT0) + VarintLen(f.ECT1) + VarintLen(f.ECNCE)
	}
	return n
}

// Len returns the encoded length.
func (f *AckFrame) Len() int { return f.fieldsLen() }

// Append appends the frame.
func (f *AckFrame) Append(b []byte) []byte {
	if len(f.Ranges) == 0 {
		return b
	}
	b = append(b, byte(f.Type()))
	r0 := f.Ranges[0]
	b = AppendVarint(b, r0.Largest)
	b = AppendVarint(b, f.AckDelay)
	b = AppendVarint(b, uint64(len(f.Ranges)-1))
	b = AppendVarint(b, r0.Largest-r0.Smallest)
	prev := r0.Smallest
	for _, r := range f.Ranges[1:] {
		// RFC 9000 §19.3.1: largest = previous_smallest - gap - 2.
		b = AppendVarint(b, prev-r.Largest-2)
		b = AppendVarint(b, r.Largest-r.Smallest)
		prev = r.Smallest
	}
	if f.ECN {
		b = AppendVarint(b, f.ECT0)
		b = AppendVarint(b, f.ECT1)
		b = AppendVarint(b, f.ECNCE)
	}
	return b
}

// ResetStreamFrame is a RESET_STREAM frame (RFC 9000 §19.4).
type ResetStreamFrame struct {
	StreamID  uint64
	ErrorCode uint64
	FinalSize uint64
}

// Type returns FrameTypeResetStream.
func (f *ResetStreamFrame) Type() FrameType { return FrameTypeResetStream }

// Len returns the encoded length.
func (f *ResetStreamFrame) Len() int {
	return 1 + VarintLen(f.StreamID) + VarintLen(f.ErrorCode) + VarintLen(f.FinalSize)
}

// Append appends the frame.
func (f *ResetStreamFrame) Append(b []byte) []byte {
	b = append(b, byte(FrameTypeResetStream))
	b = AppendVarint(b, f.StreamID)
	b = AppendVarint(b, f.ErrorCode)
	return AppendVarint(b, f.FinalSize)
}

// StopSendingFrame is a STOP_SENDING frame (RFC 9000 §19.5).
type StopSendingFrame struct {
	StreamID  uint64
	ErrorCode uint64
}

// Type returns FrameTypeStopSending.
func (f *StopSendingFrame) Type() FrameType { return FrameTypeStopSending }

// Len returns the encoded length.
func (f *StopSendingFrame) Len() int { return 1 + VarintLen(f.StreamID) + VarintLen(f.ErrorCode) }

// Append appends the frame.
func (f *StopSendingFrame) Append(b []byte) []byte {
	b = append(b, byte(FrameTypeStopSending))
	b = AppendVarint(b, f.StreamID)
	return AppendVarint(b, f.ErrorCode)
}

// CryptoFrame is a CRYPTO frame (RFC 9000 §19.6). Parsed Data is a
// sub-slice of the packet payload.
type CryptoFrame struct {
	Offset uint64
	Data   []byte
}

// Type returns FrameTypeCrypto.
func (f *CryptoFrame) Type() FrameType { return FrameTypeCrypto }

// Len returns the encoded length.
func (f *CryptoFrame) Len() int {
	return 1 + VarintLen(f.Offset) + VarintLen(uint64(len(f.Data))) + len(f.Data)
}

// Append appends the frame.
func (f *CryptoFrame) Append(b []byte) []byte {
	b = append(b, byte(FrameTypeCrypto))
	b = AppendVarint(b, f.Offset)
	b = AppendVarint(b, uint64(len(f.Data)))
	return append(b, f.Data...)
}

// CryptoFrameOverhead returns the bytes a CRYPTO frame at offset with n
// bytes of data adds around the data.
func CryptoFrameOverhead(offset uint64, n int) int {
	return 1 + VarintLen(offset) + VarintLen(uint64(n))
}

// NewTokenFrame is a NEW_TOKEN frame (RFC 9000 §19.7).
type NewTokenFrame struct{ Token []byte }

// Type returns FrameTypeNewToken.
func (f *NewTokenFrame) Type() FrameType { return FrameTypeNewToken }

// Len returns the encoded length.
func (f *NewTokenFrame) Len() int { return 1 + VarintLen(uint64(len(f.Token))) + len(f.Token) }

// Append appends the frame.
func (f *NewTokenFrame) Append(b []byte) []byte {
	b = append(b, byte(FrameTypeNewToken))
	b = AppendVarint(b, uint64(len(f.Token)))
	return append(b, f.Token...)
}

// StreamFrame is a STREAM frame (RFC 9000 §19.8), any of the types
// 0x08-0x0f. Parsed Data is a sub-slice of the packet payload.
type StreamFrame struct {
	StreamID uint64
	Offset   uint64
	// HasOffset sets the OFF bit even when Offset is 0; the encoder sets
	// it whenever Offset is not 0. The parser reports the bit.
	HasOffset bool
	// NoLength clears the LEN bit: Data then runs to the end of the
	// packet, so the frame must be the last one.
	NoLength bool
	Fin      bool
	Data     []byte
}

// Type returns the STREAM type with its OFF, LEN and FIN bits.
func (f *StreamFrame) Type() FrameType {
	t := FrameTypeStream
	if f.HasOffset || f.Offset != 0 {
		t |= StreamOffBit
	}
	if !f.NoLength {
		t |= StreamLenBit
	}
	if f.Fin {
		t |= StreamFinBit
	}
	return t
}

// End returns Offset + len(Data), the offset after the frame's last byte.
func (f *StreamFrame) End() uint64 { return f.Offset + uint64(len(f.Data)) }

// Len returns the encoded length.
func (f *StreamFrame) Len() int {
	return StreamFrameOverhead(f.StreamID, f.Offset, len(f.Data), f.HasOffset, f.NoLength) + len(f.Data)
}

// StreamFrameOverhead returns the bytes a STREAM frame adds around n bytes
// of data: type, stream ID, offset (when offset != 0 or forceOffset) and
// length (unless noLength).
func StreamFrameOverhead(streamID, offset uint64, n int, forceOffset, noLength bool) int {
	l := 1 + VarintLen(streamID)
	if forceOffset || offset != 0 {
		l += VarintLen(offset)
	}
	if !noLength {
		l += VarintLen(uint64(n))
	}
	return l
}

// Append appends the frame.
func (f *StreamFrame) Append(b []byte) []byte {
	t := f.Type()
	b = append(b, byte(t))
	b = AppendVarint(b, f.StreamID)
	if t&StreamOffBit != 0 {
		b = AppendVarint(b, f.Offset)
	}
	if t&StreamLenBit != 0 {
		b = AppendVarint(b, uint64(len(f.Data)))
	}
	return append(b, f.Data...)
}

// MaxDataFrame is a MAX_DATA frame (RFC 9000 §19.9).
type MaxDataFrame struct{ Maximum uint64 }

// Type returns FrameTypeMaxData.
func (f *MaxDataFrame) Type() FrameType { return FrameTypeMaxData }

// Len returns the encoded length.
func (f *MaxDataFrame) Len() int { return 1 + VarintLen(f.Maximum) }

// Append appends the frame.
func (f *MaxDataFrame) Append(b []byte) []byte {
	return AppendVarint(append(b, byte(FrameTypeMaxData)), f.Maximum)
}

// MaxStreamDataFrame is a MAX_STREAM_DATA frame (RFC 9000 §19.10).
type MaxStreamDataFrame struct {
	StreamID uint64
	Maximum  uint64
}

// Type returns FrameTypeMaxStreamData.
func (f *MaxStreamDataFrame) Type() FrameType { return FrameTypeMaxStreamData }

// Len returns the encoded length.
func (f *MaxStreamDataFrame) Len() int { return 1 + VarintLen(f.StreamID) + VarintLen(f.Maximum) }

// Append appends the frame.
func (f *MaxStreamDataFrame) Append(b []byte) []byte {
	b = AppendVarint(append(b, byte(FrameTypeMaxStreamData)), f.StreamID)
	return AppendVarint(b, f.Maximum)
}

// MaxStreamsFrame is a MAX_STREAMS frame (RFC 9000 §19.11), type 0x12
// for bidirectional streams and 0x13 for unidirectional ones.
type MaxStreamsFrame struct {
	Bidi    bool
	Maximum uint64
}

// Type returns FrameTypeMaxStreamsBidi or FrameTypeMaxStreamsUni.
func (f *MaxStreamsFrame) Type() FrameType {
	if f.Bidi {
		return FrameTypeMaxStreamsBidi
	}
	return FrameTypeMaxStreamsUni
}

// Len returns the encoded length.
func (f *MaxStreamsFrame) Len() int { return 1 + VarintLen(f.Maximum) }

// Append appends the frame.
func (f *MaxStreamsFrame) Append(b []byte) []byte {
	return AppendVarint(append(b, byte(f.Type())), f.Maximum)
}

// DataBlockedFrame is a DATA_BLOCKED frame (RFC 9000 §19.12).
type DataBlockedFrame struct{ Limit uint64 }

// Type returns FrameTypeDataBlocked.
func (f *DataBlockedFrame) Type() FrameType { return FrameTypeDataBlocked }

// Len returns the encoded length.
func (f *DataBlockedFrame) Len() int { return 1 + VarintLen(f.Limit) }

// Append appends the frame.
func (f *DataBlockedFrame) Append(b []byte) []byte {
	return AppendVarint(append(b, byte(FrameTypeDataBlocked)), f.Limit)
}

// StreamDataBlockedFrame is a STREAM_DATA_BLOCKED frame (RFC 9000 §19.13).
type StreamDataBlockedFrame struct {
	StreamID uint64
	Limit    uint64
}

// Type returns FrameTypeStreamDataBlocked.
func (f *StreamDataBlockedFrame) Type() FrameType { return FrameTypeStreamDataBlocked }

// Len returns the encoded length.
func (f *StreamDataBlockedFrame) Len() int { return 1 + VarintLen(f.StreamID) + VarintLen(f.Limit) }

// Append appends the frame.
func (f *StreamDataBlockedFrame) Append(b []byte) []byte {
	b = AppendVarint(append(b, byte(FrameTypeStreamDataBlocked)), f.StreamID)
	return AppendVarint(b, f.Limit)
}

// StreamsBlockedFrame is a STREAMS_BLOCKED frame (RFC 9000 §19.14), type
// 0x16 for bidirectional streams and 0x17 for unidirectional ones.
type StreamsBlockedFrame struct {
	Bidi  bool
	Limit uint64
}

// Type returns FrameTypeStreamsBlockedBidi or FrameTypeStreamsBlockedUni.
func (f *StreamsBlockedFrame) Type() FrameType {
	if f.Bidi {
		return FrameTypeStreamsBlockedBidi
	}
	return FrameTypeStreamsBlockedUni
}

// Len returns the encoded length.
func (f *StreamsBlockedFrame) Len() int { return 1 + VarintLen(f.Limit) }

// Append appends the frame.
func (f *StreamsBlockedFrame) Append(b []byte) []byte {
	return AppendVarint(append(b, byte(f.Type())), f.Limit)
}

// NewConnectionIDFrame is a NEW_CONNECTION_ID frame (RFC 9000 §19.15).
type NewConnectionIDFrame struct {
	SequenceNumber      uint64
	RetirePriorTo       uint64
	ConnectionID        []byte // its length is written as one byte
	StatelessResetToken [16]byte
}

// Type returns FrameTypeNewConnectionID.
func (f *NewConnectionIDFrame) Type() FrameType { return FrameTypeNewConnectionID }

// Len returns the encoded length.
func (f *NewConnectionIDFrame) Len() int {
	return 1 + VarintLen(f.SequenceNumber) + VarintLen(f.RetirePriorTo) + 1 + len(f.ConnectionID) + 16
}

// Append appends the frame.
func (f *NewConnectionIDFrame) Append(b []byte) []byte {
	b = append(b, byte(FrameTypeNewConnectionID))
	b = AppendVarint(b, f.SequenceNumber)
	b = AppendVarint(b, f.RetirePriorTo)
	b = append(b, byte(len(f.ConnectionID)))
	b = append(b, f.ConnectionID...)
	return append(b, f.StatelessResetToken[:]...)
}

// RetireConnectionIDFrame is a RETIRE_CONNECTION_ID frame (RFC 9000 §19.16).
type RetireConnectionIDFrame struct{ SequenceNumber uint64 }

// Type returns FrameTypeRetireConnectionID.
func (f *RetireConnectionIDFrame) Type() FrameType { return FrameTypeRetireConnectionID }

// Len returns the encoded length.
func (f *RetireConnectionIDFrame) Len() int { return 1 + VarintLen(f.SequenceNumber) }

// Append appends the frame.
func (f *RetireConnectionIDFrame) Append(b []byte) []byte {
	return AppendVarint(append(b, byte(FrameTypeRetireConnectionID)), f.SequenceNumber)
}

// PathChallengeFrame is a PATH_CHALLENGE frame (RFC 9000 §19.17).
type PathChallengeFrame struct{ Data [8]byte }

// Type returns FrameTypePathChallenge.
func (f *PathChallengeFrame) Type() FrameType { return FrameTypePathChallenge }

// Len returns 9.
func (f *PathChallengeFrame) Len() int { return 9 }

// Append appends the frame.
func (f *PathChallengeFrame) Append(b []byte) []byte {
	return append(append(b, byte(FrameTypePathChallenge)), f.Data[:]...)
}

// PathResponseFrame is a PATH_RESPONSE frame (RFC 9000 §19.18).
type PathResponseFrame struct{ Data [8]byte }

// Type returns FrameTypePathResponse.
func (f *PathResponseFrame) Type() FrameType { return FrameTypePathResponse }

// Len returns 9.
func (f *PathResponseFrame) Len() int { return 9 }

// Append appends the frame.
func (f *PathResponseFrame) Append(b []byte) []byte {
	return append(append(b, byte(FrameTypePathResponse)), f.Data[:]...)
}

// ConnectionCloseFrame is a CONNECTION_CLOSE frame (RFC 9000 §19.19):
// type 0x1c carries a transport error code and the type of the frame that
// caused it; type 0x1d (Application) carries an application error code
// and no frame type.
type ConnectionCloseFrame struct {
	Application bool
	ErrorCode   uint64
	// FrameType is written only in type 0x1c.
	FrameType FrameType
	Reason    []byte
}

// Type returns FrameTypeConnectionClose or
// FrameTypeConnectionCloseApplication.
func (f *ConnectionCloseFrame) Type() FrameType {
	if f.Application {
		return FrameTypeConnectionCloseApplication
	}
	return FrameTypeConnectionClose
}

// Len returns the encoded length.
func (f *ConnectionCloseFrame) Len() int {
	n := 1 + VarintLen(f.ErrorCode) + VarintLen(uint64(len(f.Reason))) + len(f.Reason)
	if !f.Application {
		n += VarintLen(uint64(f.FrameType))
	}
	return n
}

// Append appends the frame.
func (f *ConnectionCloseFrame) Append(b []byte) []byte {
	b = AppendVarint(append(b, byte(f.Type())), f.ErrorCode)
	if !f.Application {
		b = AppendVarint(b, uint64(f.FrameType))
	}
	b = AppendVarint(b, uint64(len(f.Reason)))
	return append(b, f.Reason...)
}

// HandshakeDoneFrame is a HANDSHAKE_DONE frame (RFC 9000 §19.20).
type HandshakeDoneFrame struct{}

// Type returns FrameTypeHandshakeDone.
func (f *HandshakeDoneFrame) Type() FrameType { return FrameTypeHandshakeDone }

// Len returns 1.
func (f *HandshakeDoneFrame) Len() int { return 1 }

// Append appends the frame.
func (f *HandshakeDoneFrame) Append(b []byte) []byte { return append(b, byte(FrameTypeHandshakeDone)) }

// DatagramFrame is a DATAGRAM frame (RFC 9221 §4): type 0x31 with a
// Length field, or 0x30 without one when NoLength is set (Data then runs
// to the end of the packet). Parsed Data is a sub-slice of the payload.
type DatagramFrame struct {
	NoLength bool
	Data     []byte
}

// Type returns FrameTypeDatagramLen or FrameTypeDatagram.
func (f *DatagramFrame) Type() FrameType {
	if f.NoLength {
		return FrameTypeDatagram
	}
	return FrameTypeDatagramLen
}

// Len returns the encoded length.
func (f *DatagramFrame) Len() int {
	if f.NoLength {
		return 1 + len(f.Data)
	}
	return 1 + VarintLen(uint64(len(f.Data))) + len(f.Data)
}

// Append appends the frame.
func (f *DatagramFrame) Append(b []byte) []byte {
	b = append(b, byte(f.Type()))
	if !f.NoLength {
		b = AppendVarint(b, uint64(len(f.Data)))
	}
	return append(b, f.Data...)
}

// AckFrequencyFrame is an ACK_FREQUENCY frame (draft-ietf-quic-ack-frequency-14
// §4, type 0xaf).
type AckFrequencyFrame struct {
	SequenceNumber        uint64
	AckElicitingThreshold uint64
	// RequestedMaxAckDelay is in microseconds.
	RequestedMaxAckDelay uint64
	ReorderingThreshold  uint64
}

// Type returns FrameTypeAckFrequency.
func (f *AckFrequencyFrame) Type() FrameType { return FrameTypeAckFrequency }

// Len returns the encoded length.
func (f *AckFrequencyFrame) Len() int {
	return 2 + VarintLen(f.SequenceNumber) + VarintLen(f.AckElicitingThreshold) +
		VarintLen(f.RequestedMaxAckDelay) + VarintLen(f.ReorderingThreshold)
}

// Append appends the frame; its type takes two bytes (0x40 0xaf).
func (f *AckFrequencyFrame) Append(b []byte) []byte {
	b = AppendVarint(b, uint64(FrameTypeAckFrequency))
	b = AppendVarint(b, f.SequenceNumber)
	b = AppendVarint(b, f.AckElicitingThreshold)
	b = AppendVarint(b, f.RequestedMaxAckDelay)
	return AppendVarint(b, f.ReorderingThreshold)
}

// ImmediateAckFrame is an IMMEDIATE_ACK frame
// (draft-ietf-quic-ack-frequency-14 §5, type 0x1f).
type ImmediateAckFrame struct{}

// Type returns FrameTypeImmediateAck.
func (f *ImmediateAckFrame) Type() FrameType { return FrameTypeImmediateAck }

// Len returns 1.
func (f *ImmediateAckFrame) Len() int { return 1 }

// Append appends the frame.
func (f *ImmediateAckFrame) Append(b []byte) []byte { return append(b, byte(FrameTypeImmediateAck)) }

// RawFrame is arbitrary bytes written verbatim, for injecting unknown,
// malformed or non-minimally encoded frames. The parser never returns it.
type RawFrame struct{ Bytes []byte }

// Type returns the frame type the bytes start with, or 0 if they do not
// start with a complete varint.
func (f *RawFrame) Type() FrameType {
	t, _, _ := ConsumeVarint(f.Bytes)
	return FrameType(t)
}

// Len returns len(Bytes).
func (f *RawFrame) Len() int { return len(f.Bytes) }

// Append appends Bytes.
func (f *RawFrame) Append(b []byte) []byte { return append(b, f.Bytes...) }
