package streams

import "time"

// RecvState is a state of the receiving part of a stream (RFC 9000 §3.2).
type RecvState uint8

// Receiving stream states, RFC 9000 §3.2 Figure 3.
const (
	RecvRecv       RecvState = iota // receiving data
	RecvSizeKnown                   // FIN received; final size known
	RecvDataRecvd                   // all data received, not all read
	RecvDataRead                    // all data read (terminal)
	RecvResetRecvd                  // RESET_STREAM received, not yet seen by the application
	RecvResetRead                   // the application saw the reset (terminal)
)

var recvStateNames = [...]string{"Recv", "Size Known", "Data Recvd", "Data Read", "Reset Recvd", "Reset Read"}

// String returns the state's name in RFC 9000 §3.2, e.g. "Size Known".
func (s RecvState) String() string { return stateName(recvStateNames[:], int(s), "RecvState") }

// RecvConfig sets up a RecvStream.
type RecvConfig struct {
	// Window is the initial MAX_STREAM_DATA we advertised for the stream
	// (our initial_max_stream_data_* transport parameter).
	Window uint64
	// MaxWindow caps auto-tuning; below Window it is raised to Window,
	// which disables auto-tuning.
	MaxWindow uint64
}

// RecvStream is the receiving part of a stream: reassembly of STREAM frames
// into the ordered byte stream, final-size and flow-control checks,
// RESET_STREAM, the application's STOP_SENDING, and MAX_STREAM_DATA credit.
//
// The engine drives it as follows:
//   - OnStreamFrame for each STREAM frame and OnResetStream for RESET_STREAM;
//     an error closes the connection with its code;
//   - Read from the application; ResetReceived to surface a reset;
//   - StopSending when the application abandons reading;
//   - when building a packet: NextMaxStreamData and NextStopSending, with
//     OnMaxStreamDataLost / OnStopSendingLost when those frames are lost;
//   - Done to decide when the receiving part can be forgotten.
//
// Buffered memory never exceeds the advertised window (plus one chunk of
// alignment), because data beyond it is a flow-control error, and chunks are
// returned to a shared pool as soon as the application has read them.
type RecvStream struct {
	conn   *ConnFlow
	state  RecvState
	credit creditWindow // credit.consumed is the read offset

	buf      chunkBuf
	got      rangeSet // received byte ranges not yet read past
	readOff  uint64   // next byte the application reads
	highest  uint64   // largest offset received (end of data), §4.1
	consumed uint64   // bytes counted as consumed at the connection level

	finalSize  uint64
	finalKnown bool

	resetCode uint64

	stopCode    uint64
	stopped     bool // the application called StopSending: discard data
	stopPending bool // STOP_SENDING must be sent (again)
}

// NewRecvStream returns a receiving part in the Recv state. If conn is not nil,
// received data is also checked against and counted in connection-level flow
// control, and reads free connection credit.
func NewRecvStream(cfg RecvConfig, conn *ConnFlow) *RecvStream {
	r := &RecvStream{}
	r.Init(cfg, conn)
	return r
}

// Init (re)initialises r in place, for engines that embed RecvStream in a
// larger stream value. It must not be called on a stream holding data.
func (r *RecvStream) Init(cfg RecvConfig, conn *ConnFlow) {
	*r = RecvStream{conn: conn}
	r.credit.init(cfg.Window, cfg.MaxWindow)
}

// State returns the RFC 9000 §3.2 state of the receiving part.
func (r *RecvStream) State() RecvState { return r.state }

// OnStreamFrame handles a STREAM frame's offset, data and FIN bit. It fails
// with FLOW_CONTROL_ERROR or FINAL_SIZE_ERROR when the frame breaks the
// rules; then nothing is changed. Duplicate and overlapping data is
// accepted; data is copied, so the caller may reuse its buffer.
func (r *RecvStream) OnStreamFrame(offset uint64, data []byte, fin bool) error {
	end := offset + uint64(len(data))
	if offset > maxVarint || end > maxVarint {
		return errorf(FlowControlError,
			"stream data ends at %d: RFC 9000 §19.8 \"The largest offset delivered on a stream -- the sum of the offset and data length -- cannot exceed 2^62-1\"", offset+uint64(len(data)))
	}
	if err := r.checkFinalSize(end, fin, "STREAM"); err != nil {
		return err
	}
	if end > r.credit.limit {
		return errorf(FlowControlError,
			"stream data ends at %d beyond MAX_STREAM_DATA %d: RFC 9000 §19.10 \"An endpoint MUST terminate a connection with an error of type FLOW_CONTROL_ERROR if it receives more data than the largest maximum stream data that it has sent for the affected stream\"",
			end, r.credit.limit)
	}
	if err := r.raiseHighest(end); err != nil {
		return err
	}
	if fin && !r.finalKnown {
		r.finalKnown, r.finalSize = true, end
		if r.state == RecvRecv {
			r.state = RecvSizeKnown
		}
	}
	if r.state != RecvRecv && r.state != RecvSizeKnown {
		// §3.2: "After all data has been received, any STREAM or
		// STREAM_DATA_BLOCKED frames for the stream can be discarded." After
		// a reset: "ignore further data arriving on that stream" (§4.4).
		return nil
	}
	// Data the application already read is discarded: §2.2 "Data that
	// has already been received can be discarded."
	if offset < r.readOff {
		if end <= r.readOff {
			data = nil
		} else {
			data = data[r.readOff-offset:]
		}
		offset = r.readOff
	}
	if len(data) > 0 {
		r.got.add(offset, end)
		if r.stopped {
			// §3.5: "STREAM frames received after sending a STOP_SENDING
			// frame are still counted toward connection and stream flow
			// control, even though these frames can be discarded upon
			// receipt." Skip past whatever is contiguous.
			r.readOff = r.got.prefix(r.readOff)
			r.countConsumed(r.highest)
		} else {
			r.buf.writeAt(offset, data)
		}
	}
	r.checkAllReceived()
	return nil
}

// checkFinalSize applies RFC 9000 §4.5 to a frame ending at end.
func (r *RecvStream) checkFinalSize(end uint64, fin bool, frame string) *Error {
	if r.finalKnown {
		if end > r.finalSize {
			return errorf(FinalSizeError,
				"%s data ends at %d beyond final size %d: RFC 9000 §4.5 \"A receiver SHOULD treat receipt of data at or beyond the final size as an error of type FINAL_SIZE_ERROR\"",
				frame, end, r.finalSize)
		}
		if fin && end != r.finalSize {
			return errorf(FinalSizeError,
				"%s final size %d differs from %d: RFC 9000 §4.5 \"Once a final size for a stream is known, it cannot change.\"",
				frame, end, r.finalSize)
		}
		return nil
	}
	if fin && end < r.highest {
		return errorf(FinalSizeError,
			"%s final size %d is below data received up to %d: RFC 9000 §4.5 \"the final size is the number of bytes sent\" and \"Once a final size for a stream is known, it cannot change.\"",
			frame, end, r.highest)
	}
	return nil
}

// raiseHighest moves the largest received offset to end, checking and
// charging connection-level flow control. RFC 9000 §4.1: "A receiver
// maintains a cumulative sum of bytes received on all streams, which is used
// to check for violations of the advertised connection or stream data
// limits."
func (r *RecvStream) raiseHighest(end uint64) error {
	if end <= r.highest {
		return nil
	}
	if r.conn != nil {
		if err := r.conn.OnReceived(end - r.highest); err != nil {
			return err
		}
	}
	r.highest = end
	return nil
}

// countConsumed raises the connection-level consumed count to v.
func (r *RecvStream) countConsumed(v uint64) {
	if v <= r.consumed {
		return
	}
	if r.conn != nil {
		r.conn.OnConsumed(v - r.consumed)
	}
	r.consumed = v
}

// checkAllReceived moves Size Known to Data Recvd: §3.2 "Once all data for
// the stream has been received, the receiving part enters the "Data Recvd"
// state."
func (r *RecvStream) checkAllReceived() {
	if r.state != RecvSizeKnown {
		return
	}
	if r.readOff == r.finalSize || r.got.prefix(r.readOff) == r.finalSize {
		r.state = RecvDataRecvd
		if r.stopped {
			r.buf.release(r.finalSize)
		}
	}
}

// Readable returns the number of contiguous bytes Read can return now.
func (r *RecvStream) Readable() int {
	if r.stopped || r.state >= RecvDataRead {
		return 0
	}
	return int(r.got.prefix(r.readOff) - r.readOff)
}

// Read copies contiguous received data into p. fin reports that the stream
// ended and all its data has been read ("Data Read", §3.2). After a reset
// Read returns 0, false; see ResetReceived.
func (r *RecvStream) Read(p []byte) (n int, fin bool) {
	if r.stopped || r.state >= RecvDataRead {
		return 0, r.state == RecvDataRead
	}
	avail := r.got.prefix(r.readOff) - r.readOff
	n = int(min(uint64(len(p)), avail))
	if n > 0 {
		r.buf.readAt(r.readOff, p[:n])
		r.readOff += uint64(n)
		r.buf.discardTo(r.readOff)
		r.credit.consumed = r.readOff
		r.countConsumed(r.readOff)
	}
	if r.finalKnown && r.readOff == r.finalSize && r.state == RecvDataRecvd {
		// §3.2: "Once stream data has been delivered, the stream enters
		// the "Data Read" state, which is a terminal state."
		r.state = RecvDataRead
		r.buf.release(r.readOff)
		r.got = r.got[:0]
		return n, true
	}
	return n, false
}

// ReadOffset returns the number of bytes the application has read.
func (r *RecvStream) ReadOffset() uint64 { return r.readOff }

// HighestOffset returns the largest offset received on the stream: the
// amount of flow-control credit the peer has used.
func (r *RecvStream) HighestOffset() uint64 { return r.highest }

// FinalSize returns the final size of the stream once known.
func (r *RecvStream) FinalSize() (size uint64, ok bool) { return r.finalSize, r.finalKnown }

// OnResetStream handles RESET_STREAM: buffered data is dropped and the
// application will see the reset. It fails with FINAL_SIZE_ERROR if the final
// size contradicts what was received and FLOW_CONTROL_ERROR if it exceeds
// the limits. A reset after all data arrived is suppressed, as §3.2 allows:
// "A RESET_STREAM signal might be suppressed or withheld if stream data is
// completely received and is buffered to be read by the application."
func (r *RecvStream) OnResetStream(code, finalSize uint64) error {
	if finalSize > maxVarint {
		return errorf(FlowControlError,
			"RESET_STREAM final size %d: RFC 9000 §19.8 the largest offset \"cannot exceed 2^62-1\"", finalSize)
	}
	if err := r.checkFinalSize(finalSize, true, "RESET_STREAM"); err != nil {
		return err
	}
	if finalSize > r.credit.limit {
		return errorf(FlowControlError,
			"RESET_STREAM final size %d beyond MAX_STREAM_DATA %d: RFC 9000 §4.5 \"The final size is the amount of flow control credit that is consumed by a stream.\"",
			finalSize, r.credit.limit)
	}
	// §4.5: "The receiver MUST use the final size of the stream to account
	// for all bytes sent on the stream in its connection-level flow
	// controller."
	if err := r.raiseHighest(finalSize); err != nil {
		return err
	}
	r.finalKnown, r.finalSize = true, finalSize
	switch r.state {
	case RecvRecv, RecvSizeKnown:
		// §3.2: "Receiving a RESET_STREAM frame in the "Recv" or "Size
		// Known" state causes the stream to enter the "Reset Recvd" state."
		r.state = RecvResetRecvd
		r.resetCode = code
		r.stopPending = false
		r.buf.release(finalSize)
		r.got = r.got[:0]
		// Bytes that will never be read no longer hold connection credit.
		r.countConsumed(finalSize)
	}
	return nil
}

// ResetReceived reports the peer's reset code once the stream was reset and
// moves the stream to "Reset Read": the application has seen the reset.
func (r *RecvStream) ResetReceived() (code uint64, ok bool) {
	switch r.state {
	case RecvResetRecvd:
		r.state = RecvResetRead
		return r.resetCode, true
	case RecvResetRead:
		return r.resetCode, true
	}
	return 0, false
}

// StopSending records that the application abandons reading with code:
// buffered and future data is discarded (but still counted for flow control)
// and a STOP_SENDING frame is queued. RFC 9000 §3.5: "If the stream is in the
// "Recv" or "Size Known" state, the transport SHOULD signal this by sending a
// STOP_SENDING frame to prompt closure of the stream in the opposite
// direction."
func (r *RecvStream) StopSending(code uint64) {
	if r.stopped {
		return
	}
	r.stopped = true
	r.stopCode = code
	r.stopPending = r.state == RecvRecv || r.state == RecvSizeKnown
	r.readOff = r.got.prefix(r.readOff)
	r.buf.release(r.readOff)
	r.countConsumed(r.highest)
	r.checkAllReceived()
}

// NextStopSending returns the code for a STOP_SENDING frame, if one is due.
// §3.5: "once either all stream data or a RESET_STREAM frame has been
// received for the stream -- that is, the stream is in any state other than
// "Recv" or "Size Known" -- sending a STOP_SENDING frame is unnecessary."
func (r *RecvStream) NextStopSending() (code uint64, ok bool) {
	if !r.stopPending || (r.state != RecvRecv && r.state != RecvSizeKnown) {
		r.stopPending = false
		return 0, false
	}
	r.stopPending = false
	return r.stopCode, true
}

// OnStopSendingLost queues STOP_SENDING again. §3.5: "An endpoint is
// expected to send another STOP_SENDING frame if a packet containing a
// previous STOP_SENDING is lost."
func (r *RecvStream) OnStopSendingLost() {
	if r.stopped && (r.state == RecvRecv || r.state == RecvSizeKnown) {
		r.stopPending = true
	}
}

// MaxStreamData returns the largest MAX_STREAM_DATA advertised (initially
// the configured window).
func (r *RecvStream) MaxStreamData() uint64 { return r.credit.limit }

// Window returns the current stream window, after auto-tuning.
func (r *RecvStream) Window() uint64 { return r.credit.window }

// WantsMaxStreamData reports whether NextMaxStreamData would return a frame.
func (r *RecvStream) WantsMaxStreamData() bool {
	// §3.2: "The receiver only sends MAX_STREAM_DATA frames in the "Recv"
	// state."
	return r.state == RecvRecv && !r.stopped && r.credit.due()
}

// NextMaxStreamData returns the limit for a MAX_STREAM_DATA frame and records
// it as advertised, once half the window has been read (or the previous
// frame was lost). rtt is the smoothed RTT; when a window's worth of data is
// read in under about two RTTs the window doubles, up to MaxWindow, and the
// connection window is raised to 1.5 times the stream window.
func (r *RecvStream) NextMaxStreamData(now time.Time, rtt time.Duration) (limit uint64, ok bool) {
	if !r.WantsMaxStreamData() {
		return 0, false
	}
	limit, ok = r.credit.next(now, rtt)
	if ok && r.conn != nil {
		r.conn.ensureWindow(r.credit.window + r.credit.window/2)
	}
	return limit, ok
}

// OnMaxStreamDataLost asks for MAX_STREAM_DATA to be sent again if limit is
// still the current one.
func (r *RecvStream) OnMaxStreamDataLost(limit uint64) { r.credit.lost(limit) }

// Done reports whether the receiving part needs no more attention: terminal
// ("Data Read", "Reset Read"), or abandoned by the application with all data
// or a reset received.
func (r *RecvStream) Done() bool {
	switch r.state {
	case RecvDataRead, RecvResetRead:
		return true
	case RecvDataRecvd, RecvResetRecvd:
		return r.stopped
	}
	return false
}

// Buffered returns the bytes of memory the stream holds in chunks.
func (r *RecvStream) Buffered() int { return r.buf.held() }
