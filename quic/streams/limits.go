package streams

// Stream ID arithmetic, RFC 9000 §2.1: "The least significant bit (0x01) of
// the stream ID identifies the initiator of the stream. ... The second least
// significant bit (0x02) of the stream ID distinguishes between
// bidirectional streams (with the bit set to 0) and unidirectional streams".

// MaxStreams is the largest stream count a limit can carry. RFC 9000 §19.11:
// "This value cannot exceed 2^60, as it is not possible to encode stream IDs
// larger than 2^62-1."
const MaxStreams = 1 << 60

// IsBidi reports whether id is a bidirectional stream.
func IsBidi(id uint64) bool { return id&0x2 == 0 }

// IsClientInitiated reports whether id was opened by the client.
func IsClientInitiated(id uint64) bool { return id&0x1 == 0 }

// StreamNum returns the sequence number of id among streams of its type:
// 0 for the first stream of the type, 1 for the next, and so on.
func StreamNum(id uint64) uint64 { return id >> 2 }

// StreamID returns the ID of stream number num of the given type.
func StreamID(num uint64, bidi, client bool) uint64 {
	id := num << 2
	if !bidi {
		id |= 0x2
	}
	if !client {
		id |= 0x1
	}
	return id
}

// IDRange is the set of stream IDs First, First+4, ..., Last of one type. It
// is empty when Count is 0.
type IDRange struct {
	First, Last uint64
	Count       uint64
}

// Part names the half of a stream that a received frame concerns, for
// StreamLimits.OnPeerStream.
type Part uint8

const (
	// PartRecv is for frames about our receiving part (STREAM, RESET_STREAM,
	// STREAM_DATA_BLOCKED).
	PartRecv Part = iota
	// PartSend is for frames about our sending part (MAX_STREAM_DATA,
	// STOP_SENDING).
	PartSend
)

// StreamLimitsConfig sets up StreamLimits.
type StreamLimitsConfig struct {
	// Client is true for the client end of the connection.
	Client bool
	// MaxBidi and MaxUni are our initial_max_streams_bidi and _uni: how
	// many streams of each type the peer may have open at once. MAX_STREAMS
	// credit is issued as streams close to keep this concurrency.
	MaxBidi, MaxUni uint64
	// PeerMaxBidi and PeerMaxUni are the peer's initial_max_streams_bidi
	// and _uni, or 0 until known (then call SetPeerLimits).
	PeerMaxBidi, PeerMaxUni uint64
}

// localLimits is the bookkeeping for one type of stream that we open.
type localLimits struct {
	opened          uint64 // streams we opened
	limit           uint64 // peer's MAX_STREAMS
	blocked         bool   // OpenNext failed at limit
	blockedReported uint64 // 1 + limit of the last STREAMS_BLOCKED; 0 if none
}

// peerLimits is the bookkeeping for one type of stream that the peer opens.
type peerLimits struct {
	opened     uint64 // streams the peer opened (including implicitly)
	closed     uint64 // of those, streams that are done
	limit      uint64 // largest MAX_STREAMS advertised
	concurrent uint64 // configured concurrency: the initial limit
	resend     bool   // the MAX_STREAMS frame carrying limit was lost
}

// StreamLimits tracks stream IDs and stream-count limits in both directions
// (RFC 9000 §4.6): streams we open under the peer's MAX_STREAMS, and streams
// the peer opens under ours.
//
// The engine drives it as follows:
//   - SetPeerLimits with the peer's transport parameters, OnMaxStreams for
//     its MAX_STREAMS frames;
//   - OpenNext when the application opens a stream; NextStreamsBlocked when
//     that fails;
//   - OnPeerStream for every received frame that names a stream, before
//     looking the stream up: it creates the streams it returns and rejects
//     IDs the peer may not use;
//   - OnPeerStreamClosed when a peer-initiated stream is done, and
//     NextMaxStreams when building packets.
type StreamLimits struct {
	client bool
	local  [2]localLimits // indexed by typeIndex
	peer   [2]peerLimits
}

func typeIndex(bidi bool) int {
	if bidi {
		return 0
	}
	return 1
}

// NewStreamLimits returns stream bookkeeping for one end of a connection.
// Limits above 2^60 are capped.
func NewStreamLimits(cfg StreamLimitsConfig) *StreamLimits {
	l := &StreamLimits{client: cfg.Client}
	for i, n := range [2]uint64{min(cfg.MaxBidi, MaxStreams), min(cfg.MaxUni, MaxStreams)} {
		l.peer[i] = peerLimits{limit: n, concurrent: n}
	}
	l.local[0].limit = min(cfg.PeerMaxBidi, MaxStreams)
	l.local[1].limit = min(cfg.PeerMaxUni, MaxStreams)
	return l
}

// SetPeerLimits applies the peer's initial_max_streams_bidi and _uni
// transport parameters. RFC 9000 §4.6: "If a max_streams transport parameter
// ... is received with a value greater than 2^60 ... the connection MUST be
// closed immediately with a connection error of type
// TRANSPORT_PARAMETER_ERROR".
func (l *StreamLimits) SetPeerLimits(bidi, uni uint64) error {
	for _, v := range [2]uint64{bidi, uni} {
		if v > MaxStreams {
			return errorf(TransportParameterError,
				"initial_max_streams %d: RFC 9000 §4.6 \"If a max_streams transport parameter or a MAX_STREAMS frame is received with a value greater than 2^60 ... the connection MUST be closed immediately with a connection error of type TRANSPORT_PARAMETER_ERROR if the offending value was received in a transport parameter\"", v)
		}
	}
	l.raiseLocal(0, bidi)
	l.raiseLocal(1, uni)
	return nil
}

// OnMaxStreams applies a MAX_STREAMS frame and reports whether the limit
// increased. RFC 9000 §4.6: a value above 2^60 is a FRAME_ENCODING_ERROR, and
// "MAX_STREAMS frames that do not increase the stream limit MUST be ignored."
func (l *StreamLimits) OnMaxStreams(bidi bool, n uint64) (bool, error) {
	if n > MaxStreams {
		return false, errorf(FrameEncodingError,
			"MAX_STREAMS %d: RFC 9000 §19.11 \"Receipt of a frame that permits opening of a stream larger than this limit MUST be treated as a connection error of type FRAME_ENCODING_ERROR.\"", n)
	}
	return l.raiseLocal(typeIndex(bidi), n), nil
}

func (l *StreamLimits) raiseLocal(i int, n uint64) bool {
	if n <= l.local[i].limit {
		return false
	}
	l.local[i].limit = n
	l.local[i].blocked = false
	return true
}

// OpenNext allocates the ID of the next locally initiated stream of the type,
// or reports false when the peer's limit is reached. RFC 9000 §4.6:
// "Endpoints MUST NOT exceed the limit set by their peer."
func (l *StreamLimits) OpenNext(bidi bool) (id uint64, ok bool) {
	t := &l.local[typeIndex(bidi)]
	if t.opened >= t.limit {
		t.blocked = true
		return 0, false
	}
	id = StreamID(t.opened, bidi, l.client)
	t.opened++
	return id, true
}

// Opened returns how many streams of the type we have opened.
func (l *StreamLimits) Opened(bidi bool) uint64 { return l.local[typeIndex(bidi)].opened }

// PeerLimit returns the peer's current limit on streams of the type we open.
func (l *StreamLimits) PeerLimit(bidi bool) uint64 { return l.local[typeIndex(bidi)].limit }

// NextStreamsBlocked returns the limit for a STREAMS_BLOCKED frame of the
// type, once per limit, after OpenNext failed. RFC 9000 §4.6: "An endpoint
// that is unable to open a new stream due to the peer's limits SHOULD send a
// STREAMS_BLOCKED frame".
func (l *StreamLimits) NextStreamsBlocked(bidi bool) (limit uint64, ok bool) {
	t := &l.local[typeIndex(bidi)]
	if !t.blocked || t.opened < t.limit || t.blockedReported == t.limit+1 {
		return 0, false
	}
	t.blockedReported = t.limit + 1
	return t.limit, true
}

// OnStreamsBlockedLost asks for STREAMS_BLOCKED to be sent again if still
// blocked at limit.
func (l *StreamLimits) OnStreamsBlockedLost(bidi bool, limit uint64) {
	t := &l.local[typeIndex(bidi)]
	if t.blockedReported == limit+1 {
		t.blockedReported = 0
	}
}

// OnPeerStream validates a stream ID carried by a received frame that
// concerns part of the stream, and returns the peer-initiated streams it
// newly opens: id and every lower-numbered stream of its type not yet open,
// which the engine must create. RFC 9000 §3.2: "Before a stream is created,
// all streams of the same type with lower-numbered stream IDs MUST be
// created." The range is empty for streams already opened (which may since
// be closed: then the engine ignores the frame) and for our own streams.
//
// Errors: STREAM_LIMIT_ERROR for a peer stream beyond our limit;
// STREAM_STATE_ERROR for our own stream not yet opened, for data on our
// send-only streams and for flow control or STOP_SENDING on a receive-only
// stream.
func (l *StreamLimits) OnPeerStream(id uint64, part Part) (IDRange, error) {
	if id > maxVarint {
		return IDRange{}, errorf(FrameEncodingError, "stream ID %d exceeds 2^62-1: RFC 9000 §2.1 \"A stream ID is a 62-bit integer\"", id)
	}
	bidi := IsBidi(id)
	local := IsClientInitiated(id) == l.client
	num := StreamNum(id)
	if local {
		if num >= l.local[typeIndex(bidi)].opened {
			// §19.8: "An endpoint MUST terminate the connection with error
			// STREAM_STATE_ERROR if it receives a STREAM frame for a
			// locally initiated stream that has not yet been created";
			// the same holds for the other stream frames (§19.4, §19.5,
			// §19.10, §19.13).
			return IDRange{}, errorf(StreamStateError,
				"frame for locally initiated stream %d that has not been created: RFC 9000 §19.8 \"An endpoint MUST terminate the connection with error STREAM_STATE_ERROR if it receives a STREAM frame for a locally initiated stream that has not yet been created, or for a send-only stream.\"", id)
		}
		if !bidi && part == PartRecv {
			return IDRange{}, errorf(StreamStateError,
				"STREAM, RESET_STREAM or STREAM_DATA_BLOCKED for send-only stream %d: RFC 9000 §19.8 \"An endpoint MUST terminate the connection with error STREAM_STATE_ERROR if it receives a STREAM frame for ... a send-only stream.\"", id)
		}
		return IDRange{}, nil
	}
	if !bidi && part == PartSend {
		return IDRange{}, errorf(StreamStateError,
			"MAX_STREAM_DATA or STOP_SENDING for receive-only stream %d: RFC 9000 §19.5 \"An endpoint that receives a STOP_SENDING frame for a receive-only stream MUST terminate the connection with error STREAM_STATE_ERROR.\"", id)
	}
	p := &l.peer[typeIndex(bidi)]
	if num >= p.limit {
		// §4.6: "An endpoint that receives a frame with a stream ID
		// exceeding the limit it has sent MUST treat this as a connection
		// error of type STREAM_LIMIT_ERROR".
		return IDRange{}, errorf(StreamLimitError,
			"peer opened stream %d (number %d) beyond its limit of %d streams: RFC 9000 §4.6 \"An endpoint that receives a frame with a stream ID exceeding the limit it has sent MUST treat this as a connection error of type STREAM_LIMIT_ERROR\"", id, num, p.limit)
	}
	if num < p.opened {
		return IDRange{}, nil
	}
	r := IDRange{
		First: StreamID(p.opened, bidi, !l.client),
		Last:  id,
		Count: num - p.opened + 1,
	}
	p.opened = num + 1
	return r, nil
}

// PeerOpened returns how many streams of the type the peer has opened.
func (l *StreamLimits) PeerOpened(bidi bool) uint64 { return l.peer[typeIndex(bidi)].opened }

// OnPeerStreamClosed records that a peer-initiated stream of the type is done
// in both directions, so the peer may open another. RFC 9000 §4.6:
// "Implementations might choose to increase limits as streams are closed, to
// keep the number of streams available to peers roughly consistent."
func (l *StreamLimits) OnPeerStreamClosed(bidi bool) {
	p := &l.peer[typeIndex(bidi)]
	if p.closed < p.opened {
		p.closed++
	}
}

// MaxStreams returns the largest MAX_STREAMS we advertised for the type.
func (l *StreamLimits) MaxStreams(bidi bool) uint64 { return l.peer[typeIndex(bidi)].limit }

// WantsMaxStreams reports whether NextMaxStreams would return a frame.
func (l *StreamLimits) WantsMaxStreams(bidi bool) bool {
	p := &l.peer[typeIndex(bidi)]
	if p.resend {
		return true
	}
	target := min(p.closed+p.concurrent, MaxStreams)
	if target <= p.limit {
		return false
	}
	// Update once the peer has used half of its concurrency (or everything
	// if it is 1), like the half-window rule for data credit, so that
	// closing many streams costs few frames.
	return p.limit-p.opened <= p.concurrent/2
}

// NextMaxStreams returns the count for a MAX_STREAMS frame of the type, if
// one is due, and records it as advertised. The new limit keeps the peer
// able to have the configured number of streams open at once; it never
// exceeds 2^60.
func (l *StreamLimits) NextMaxStreams(bidi bool) (n uint64, ok bool) {
	if !l.WantsMaxStreams(bidi) {
		return 0, false
	}
	p := &l.peer[typeIndex(bidi)]
	p.resend = false
	p.limit = max(p.limit, min(p.closed+p.concurrent, MaxStreams))
	return p.limit, true
}

// OnMaxStreamsLost asks for MAX_STREAMS to be sent again if n is still the
// current limit.
func (l *StreamLimits) OnMaxStreamsLost(bidi bool, n uint64) {
	p := &l.peer[typeIndex(bidi)]
	if n == p.limit {
		p.resend = true
	}
}
