package streams

// SendState is a state of the sending part of a stream (RFC 9000 §3.1).
type SendState uint8

// Sending stream states, RFC 9000 §3.1 Figure 2.
const (
	SendReady      SendState = iota // accepts data; nothing sent yet
	SendSend                        // sending data
	SendDataSent                    // FIN sent; only retransmitting
	SendDataRecvd                   // all data and the FIN acknowledged (terminal)
	SendResetSent                   // RESET_STREAM queued or sent
	SendResetRecvd                  // RESET_STREAM acknowledged (terminal)
)

var sendStateNames = [...]string{"Ready", "Send", "Data Sent", "Data Recvd", "Reset Sent", "Reset Recvd"}

// String returns the state's name in RFC 9000 §3.1, e.g. "Data Sent".
func (s SendState) String() string { return stateName(sendStateNames[:], int(s), "SendState") }

// SendConfig sets up a SendStream.
type SendConfig struct {
	// BufferLimit bounds the bytes held for the stream: written but not yet
	// acknowledged. Writable reports the room left.
	BufferLimit int
	// PeerMaxStreamData is the peer's initial limit for this stream
	// (initial_max_stream_data_bidi_local/remote or _uni).
	PeerMaxStreamData uint64
}

// SendStream is the sending part of a stream: the application's bytes from
// Write until they are acknowledged, retransmission of lost ranges, the FIN,
// RESET_STREAM and STREAM_DATA_BLOCKED, and the peer's MAX_STREAM_DATA.
//
// The engine drives it as follows:
//   - Write (application data, bounded by Writable) and CloseWrite (FIN);
//   - when building a packet: NextReset, NextBlocked, then NextFrame until it
//     returns !ok or the packet is full;
//   - OnAcked / OnLost for each STREAM frame, OnResetAcked / OnResetLost for
//     RESET_STREAM, OnBlockedLost for STREAM_DATA_BLOCKED, when the packet
//     carrying them is acknowledged or declared lost;
//   - OnMaxStreamData and OnStopSending for frames from the peer;
//   - Done to decide when the sending part can be forgotten.
type SendStream struct {
	conn  *ConnFlow
	state SendState

	buf      chunkBuf
	bufLimit int
	written  uint64 // end of data written by the application
	sent     uint64 // end of data sent at least once: the final size if reset
	acked    rangeSet
	lost     rangeSet // ranges to retransmit, all below sent
	scratch  []byte   // frame bytes that straddle two chunks

	finWritten bool
	finSent    bool
	finAcked   bool
	finLost    bool // FIN must be sent again

	maxData         uint64 // peer's MAX_STREAM_DATA
	blockedReported uint64 // 1 + limit of the last STREAM_DATA_BLOCKED; 0 if none

	resetCode    uint64
	resetPending bool // RESET_STREAM must be sent (again)
}

// NewSendStream returns a sending part in the Ready state. If conn is not nil,
// NextFrame also respects and charges connection-level credit.
func NewSendStream(cfg SendConfig, conn *ConnFlow) *SendStream {
	s := &SendStream{}
	s.Init(cfg, conn)
	return s
}

// Init (re)initialises s in place, for engines that embed SendStream in a
// larger stream value. It must not be called on a stream holding data.
func (s *SendStream) Init(cfg SendConfig, conn *ConnFlow) {
	*s = SendStream{conn: conn, bufLimit: cfg.BufferLimit, maxData: cfg.PeerMaxStreamData}
}

// State returns the RFC 9000 §3.1 state of the sending part.
func (s *SendStream) State() SendState { return s.state }

// Writable returns how many bytes Write accepts now: the buffer limit minus
// the bytes held (written but not yet acknowledged). It is 0 after CloseWrite
// or Reset. The engine blocks the application's Write while it is 0.
func (s *SendStream) Writable() int {
	if s.finWritten || s.state >= SendDataRecvd {
		return 0
	}
	held := s.written - s.ackedPrefix()
	if held >= uint64(s.bufLimit) {
		return 0
	}
	return s.bufLimit - int(held)
}

// Write appends up to Writable() bytes of p to the stream and returns how
// many it took.
func (s *SendStream) Write(p []byte) int {
	n := min(len(p), s.Writable())
	if n == 0 {
		return 0
	}
	s.buf.writeAt(s.written, p[:n])
	s.written += uint64(n)
	return n
}

// CloseWrite marks the end of the stream: a FIN follows the data written so
// far. It is a no-op after Reset.
func (s *SendStream) CloseWrite() {
	if s.state >= SendDataRecvd {
		return
	}
	s.finWritten = true
}

// Written returns the number of bytes the application has written.
func (s *SendStream) Written() uint64 { return s.written }

// SentOffset returns the end of the data sent at least once: the final size
// of the stream if it is reset now.
func (s *SendStream) SentOffset() uint64 { return s.sent }

// PeerMaxStreamData returns the peer's current limit for this stream.
func (s *SendStream) PeerMaxStreamData() uint64 { return s.maxData }

// ackedPrefix returns the end of the contiguously acknowledged data.
func (s *SendStream) ackedPrefix() uint64 {
	if len(s.acked) > 0 && s.acked[0].start == 0 {
		return s.acked[0].end
	}
	return 0
}

// HasFrame reports whether NextFrame, NextReset or NextBlocked would return
// something, ignoring connection-level credit. The engine uses it to keep
// the stream on its list of streams to send.
func (s *SendStream) HasFrame() bool {
	switch s.state {
	case SendResetSent:
		return s.resetPending
	case SendDataRecvd, SendResetRecvd:
		return false
	}
	if len(s.lost) > 0 || s.finLost {
		return true
	}
	if s.written > s.sent {
		return s.sent < s.maxData || s.blockedReported != s.maxData+1
	}
	return s.finWritten && !s.finSent
}

// NextFrame returns the next STREAM frame to send, of at most maxLen data
// bytes: lost ranges first, then new data. New data is limited by the peer's
// MAX_STREAM_DATA, by flowLimit (pass ^uint64(0) for none) and, when the
// stream is attached to a ConnFlow, by connection credit, which it charges.
// A frame with no data and fin set closes the stream at offset. The returned
// data is valid until the next call on s; the engine copies it into the packet.
//
// A retransmitted frame never carries new data, so SentOffset before and
// after the call tells how much new data went out.
func (s *SendStream) NextFrame(maxLen int, flowLimit uint64) (offset uint64, data []byte, fin bool, ok bool) {
	if s.state != SendReady && s.state != SendSend && s.state != SendDataSent {
		// RFC 9000 §3.5: "A sender MUST NOT send a STREAM or
		// STREAM_DATA_BLOCKED frame for a stream in the "Reset Sent" state
		// or any terminal state".
		return 0, nil, false, false
	}
	maxLen = max(maxLen, 0)

	// Retransmissions first: §3.1 "In the "Send" state, an endpoint
	// transmits -- and retransmits as necessary -- stream data".
	if len(s.lost) > 0 {
		sp := s.lost[0]
		n := int(min(sp.end-sp.start, uint64(maxLen)))
		if n == 0 {
			return 0, nil, false, false
		}
		end := sp.start + uint64(n)
		s.lost.remove(sp.start, end)
		fin = s.finLost && end == s.written
		if fin {
			s.finLost = false
		}
		return sp.start, s.frameData(sp.start, n), fin, true
	}
	if s.finLost {
		s.finLost = false
		return s.written, nil, true, true
	}

	// New data, within the peer's limits. RFC 9000 §4.1: "Senders MUST NOT
	// send data in excess of either limit."
	avail := s.written - s.sent
	n := min(avail, uint64(maxLen), flowLimit)
	streamRoom := uint64(0)
	if s.maxData > s.sent {
		streamRoom = s.maxData - s.sent
	}
	n = min(n, streamRoom)
	if s.conn != nil {
		connRoom := s.conn.SendWindow()
		if avail > 0 && connRoom == 0 {
			s.conn.noteBlocked()
		}
		n = min(n, connRoom)
	}
	if n == 0 {
		if avail == 0 && s.finWritten && !s.finSent {
			s.finSent = true
			s.state = SendDataSent
			return s.written, nil, true, true
		}
		return 0, nil, false, false
	}
	offset = s.sent
	data = s.frameData(offset, int(n))
	s.sent += n
	if s.conn != nil {
		s.conn.OnSent(n)
	}
	fin = s.finWritten && s.sent == s.written
	if fin {
		s.finSent = true
		s.state = SendDataSent
	} else {
		s.state = SendSend
	}
	return offset, data, fin, true
}

// frameData returns the n bytes at off, copying only when they straddle two
// chunks.
func (s *SendStream) frameData(off uint64, n int) []byte {
	v := s.buf.view(off, n)
	if len(v) == n {
		return v
	}
	if cap(s.scratch) < n {
		s.scratch = make([]byte, n)
	}
	p := s.scratch[:n]
	s.buf.readAt(off, p)
	return p
}

// OnAcked records that the STREAM frame [offset, offset+length) (with fin)
// was acknowledged, and frees the memory of the acknowledged prefix.
func (s *SendStream) OnAcked(offset uint64, length int, fin bool) {
	if s.state >= SendDataRecvd {
		// Acknowledgements after a reset change nothing.
		return
	}
	end := min(offset+uint64(length), s.sent)
	if offset < end {
		before := s.ackedPrefix()
		s.acked.add(offset, end)
		s.lost.remove(offset, end)
		if after := s.ackedPrefix(); after > before {
			s.buf.discardTo(after)
		}
	}
	if fin && s.finSent {
		s.finAcked = true
		s.finLost = false
	}
	// §3.1: "Once all stream data has been successfully acknowledged, the
	// sending part of the stream enters the "Data Recvd" state".
	if s.finAcked && s.ackedPrefix() == s.written {
		s.state = SendDataRecvd
		s.buf.release(s.written)
		s.acked = s.acked[:0]
		s.lost = s.lost[:0]
	}
}

// OnLost queues the STREAM frame [offset, offset+length) (with fin) for
// retransmission, minus any part acknowledged meanwhile. Ranges merge, so a
// range lost twice is resent once.
func (s *SendStream) OnLost(offset uint64, length int, fin bool) {
	if s.state >= SendDataRecvd {
		// RFC 9000 §19.4: "After sending a RESET_STREAM, an endpoint ceases
		// transmission and retransmission of STREAM frames".
		return
	}
	end := min(offset+uint64(length), s.sent)
	start := max(offset, s.ackedPrefix())
	// Add the gaps between acknowledged spans.
	for i := s.acked.search(start + 1); start < end; i++ {
		if i >= len(s.acked) || s.acked[i].start >= end {
			s.lost.add(start, end)
			break
		}
		s.lost.add(start, s.acked[i].start)
		start = max(start, s.acked[i].end)
	}
	if fin && s.finSent && !s.finAcked {
		s.finLost = true
	}
}

// AllAcked reports whether all data and the FIN have been acknowledged (the
// "Data Recvd" state).
func (s *SendStream) AllAcked() bool { return s.state == SendDataRecvd }

// Done reports whether the sending part reached a terminal state ("Data
// Recvd" or "Reset Recvd") and holds nothing more to send.
func (s *SendStream) Done() bool {
	return s.state == SendDataRecvd || s.state == SendResetRecvd
}

// OnMaxStreamData applies the peer's MAX_STREAM_DATA and reports whether the
// limit increased. RFC 9000 §4.1: "A sender MUST ignore any MAX_STREAM_DATA
// or MAX_DATA frames that do not increase flow control limits."
func (s *SendStream) OnMaxStreamData(limit uint64) bool {
	if limit <= s.maxData {
		return false
	}
	s.maxData = limit
	return true
}

// NextBlocked returns the limit for a STREAM_DATA_BLOCKED frame, once per
// limit, when the stream has data that the peer's MAX_STREAM_DATA holds back.
// RFC 9000 §4.1: "A sender SHOULD send a STREAM_DATA_BLOCKED or DATA_BLOCKED
// frame to indicate to the receiver that it has data to write but is blocked
// by flow control limits."
func (s *SendStream) NextBlocked() (limit uint64, ok bool) {
	if s.state != SendReady && s.state != SendSend {
		// §3.1: in "Data Sent" the endpoint "does not need to check flow
		// control limits or send STREAM_DATA_BLOCKED frames".
		return 0, false
	}
	if s.written <= s.sent || s.sent < s.maxData || s.blockedReported == s.maxData+1 {
		return 0, false
	}
	s.blockedReported = s.maxData + 1
	// §3.1: "Sending the first STREAM or STREAM_DATA_BLOCKED frame causes a
	// sending part of a stream to enter the "Send" state."
	s.state = SendSend
	return s.maxData, true
}

// OnBlockedLost asks for STREAM_DATA_BLOCKED to be sent again if the stream
// is still blocked at limit.
func (s *SendStream) OnBlockedLost(limit uint64) {
	if s.blockedReported == limit+1 {
		s.blockedReported = 0
	}
}

// Reset abandons the stream with an application error code: a RESET_STREAM
// frame carrying code and the final size (the bytes sent so far) is queued,
// and buffered data is dropped. RFC 9000 §3.1: "From any state that is one of
// "Ready", "Send", or "Data Sent", an application can signal that it wishes
// to abandon transmission of stream data." It is a no-op in other states.
func (s *SendStream) Reset(code uint64) {
	if s.state > SendDataSent {
		return
	}
	s.state = SendResetSent
	s.resetCode = code
	s.resetPending = true
	s.buf.release(s.sent)
	s.lost = s.lost[:0]
	s.acked = s.acked[:0]
	s.finLost = false
}

// OnStopSending handles the peer's STOP_SENDING by resetting the stream with
// the same code. RFC 9000 §3.5: "An endpoint that receives a STOP_SENDING
// frame MUST send a RESET_STREAM frame if the stream is in the "Ready" or
// "Send" state" and "SHOULD copy the error code from the STOP_SENDING frame".
// In "Data Sent" the RFC allows waiting for outstanding data; this resets
// at once unless everything is already acknowledged.
func (s *SendStream) OnStopSending(code uint64) { s.Reset(code) }

// NextReset returns the fields of a RESET_STREAM frame to send, if one is due.
// The final size is "the number of bytes sent" (RFC 9000 §4.5).
func (s *SendStream) NextReset() (code, finalSize uint64, ok bool) {
	if !s.resetPending {
		return 0, 0, false
	}
	s.resetPending = false
	return s.resetCode, s.sent, true
}

// ResetCode returns the code the stream was reset with, if it was.
func (s *SendStream) ResetCode() (code uint64, ok bool) {
	if s.state == SendResetSent || s.state == SendResetRecvd {
		return s.resetCode, true
	}
	return 0, false
}

// OnResetAcked records that RESET_STREAM was acknowledged. RFC 9000 §3.1:
// "Once a packet containing a RESET_STREAM has been acknowledged, the sending
// part of the stream enters the "Reset Recvd" state".
func (s *SendStream) OnResetAcked() {
	if s.state == SendResetSent {
		s.state = SendResetRecvd
		s.resetPending = false
	}
}

// OnResetLost queues RESET_STREAM again.
func (s *SendStream) OnResetLost() {
	if s.state == SendResetSent {
		s.resetPending = true
	}
}

// Buffered returns the bytes of memory the stream holds in chunks.
func (s *SendStream) Buffered() int { return s.buf.held() }
