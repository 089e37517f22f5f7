package streams

import "time"

// ConnFlowConfig sets up connection-level flow control.
type ConnFlowConfig struct {
	// Window is our initial_max_data: the credit first offered to the peer.
	Window uint64
	// MaxWindow caps auto-tuning of the receive window; below Window it
	// is raised to Window, which disables auto-tuning.
	MaxWindow uint64
	// PeerMaxData is the peer's initial_max_data, or 0 until it is known
	// (then call OnMaxData).
	PeerMaxData uint64
}

// ConnFlow is connection-level flow control in both directions (RFC 9000
// §4.1): "Connection flow control, which prevents senders from exceeding a
// receiver's buffer capacity for the connection by limiting the total bytes
// of stream data sent in STREAM frames on all streams."
//
// Streams created with a *ConnFlow charge it themselves: SendStream.NextFrame
// spends send credit and RecvStream checks and counts received and consumed
// bytes. The engine only feeds peer MAX_DATA frames to OnMaxData and asks
// NextMaxData and NextDataBlocked for frames to send.
type ConnFlow struct {
	// Send side.
	sendMax         uint64 // peer's largest MAX_DATA
	sent            uint64 // new stream bytes sent on all streams
	sendBlocked     bool   // a stream had data but no connection credit
	blockedReported uint64 // 1 + limit of the last DATA_BLOCKED sent; 0 if none

	// Receive side.
	recv     creditWindow
	received uint64 // sum over streams of the largest offset received (or final size)
}

// NewConnFlow returns connection flow-control state for cfg.
func NewConnFlow(cfg ConnFlowConfig) *ConnFlow {
	c := &ConnFlow{sendMax: cfg.PeerMaxData}
	c.recv.init(cfg.Window, cfg.MaxWindow)
	return c
}

// --- send side ---

// SendWindow returns how many new stream bytes the peer's MAX_DATA still
// allows. RFC 9000 §4.1: "Senders MUST NOT send data in excess of either
// limit."
func (c *ConnFlow) SendWindow() uint64 {
	if c.sent >= c.sendMax {
		return 0
	}
	return c.sendMax - c.sent
}

// Sent returns the number of new stream bytes sent so far on all streams.
func (c *ConnFlow) Sent() uint64 { return c.sent }

// OnSent charges n new stream bytes (not retransmissions) to the connection.
// Streams attached to c call it themselves.
func (c *ConnFlow) OnSent(n uint64) { c.sent += n }

// OnMaxData applies a MAX_DATA frame or the initial_max_data transport
// parameter and reports whether the limit increased. RFC 9000 §4.1: "A sender
// MUST ignore any MAX_STREAM_DATA or MAX_DATA frames that do not increase
// flow control limits."
func (c *ConnFlow) OnMaxData(limit uint64) bool {
	if limit <= c.sendMax {
		return false
	}
	c.sendMax = limit
	c.sendBlocked = false
	return true
}

// PeerMaxData returns the peer's current connection limit.
func (c *ConnFlow) PeerMaxData() uint64 { return c.sendMax }

// noteBlocked records that a stream had data to send but no connection credit.
func (c *ConnFlow) noteBlocked() { c.sendBlocked = true }

// NextDataBlocked returns the limit to put in a DATA_BLOCKED frame, once per
// limit, when a stream was held back by connection credit. RFC 9000 §4.1: "A
// sender SHOULD send a STREAM_DATA_BLOCKED or DATA_BLOCKED frame to indicate
// to the receiver that it has data to write but is blocked by flow control
// limits."
func (c *ConnFlow) NextDataBlocked() (limit uint64, ok bool) {
	if !c.sendBlocked || c.sent < c.sendMax || c.blockedReported == c.sendMax+1 {
		return 0, false
	}
	c.blockedReported = c.sendMax + 1
	return c.sendMax, true
}

// OnDataBlockedLost asks for DATA_BLOCKED to be sent again if the connection
// is still blocked at limit.
func (c *ConnFlow) OnDataBlockedLost(limit uint64) {
	if c.blockedReported == limit+1 {
		c.blockedReported = 0
	}
}

// --- receive side ---

// MaxData returns the largest MAX_DATA advertised to the peer (initially
// our initial_max_data).
func (c *ConnFlow) MaxData() uint64 { return c.recv.limit }

// Received returns the sum of the largest offsets received on all streams,
// the quantity checked against MaxData.
func (c *ConnFlow) Received() uint64 { return c.received }

// Window returns the current receive window, after auto-tuning.
func (c *ConnFlow) Window() uint64 { return c.recv.window }

// checkReceive reports whether n more bytes of largest-offset growth fit
// within the advertised limit.
func (c *ConnFlow) checkReceive(n uint64) *Error {
	if n > c.recv.limit-c.received {
		// RFC 9000 §19.9: "An endpoint MUST terminate a connection with an
		// error of type FLOW_CONTROL_ERROR if it receives more data than the
		// maximum data value that it has sent."
		return errorf(FlowControlError,
			"connection data %d exceeds MAX_DATA %d: RFC 9000 §19.9 \"An endpoint MUST terminate a connection with an error of type FLOW_CONTROL_ERROR if it receives more data than the maximum data value that it has sent\"",
			c.received+n, c.recv.limit)
	}
	return nil
}

// OnReceived counts n more bytes of largest-offset growth on some stream and
// fails with FLOW_CONTROL_ERROR if that exceeds MaxData; on error nothing is
// counted. Streams attached to c call it themselves.
func (c *ConnFlow) OnReceived(n uint64) error {
	if err := c.checkReceive(n); err != nil {
		return err
	}
	c.received += n
	return nil
}

// OnConsumed records that n received bytes were read by the application or
// discarded (reset, STOP_SENDING), freeing connection credit. Streams
// attached to c call it themselves.
func (c *ConnFlow) OnConsumed(n uint64) { c.recv.consumed += n }

// WantsMaxData reports whether NextMaxData would return a frame.
func (c *ConnFlow) WantsMaxData() bool { return c.recv.due() }

// NextMaxData returns the limit for a MAX_DATA frame and records it as
// advertised, once at least half the window has been consumed (or a previous
// one was lost). rtt is the smoothed RTT, used for auto-tuning. RFC 9000
// §4.2: "a receiver MUST NOT wait for a STREAM_DATA_BLOCKED or DATA_BLOCKED
// frame before sending a MAX_STREAM_DATA or MAX_DATA frame".
func (c *ConnFlow) NextMaxData(now time.Time, rtt time.Duration) (limit uint64, ok bool) {
	return c.recv.next(now, rtt)
}

// OnMaxDataLost asks for MAX_DATA to be sent again if limit is still current.
func (c *ConnFlow) OnMaxDataLost(limit uint64) { c.recv.lost(limit) }

// ensureWindow grows the receive window to at least n (within its maximum),
// so that a stream whose window grew is not held back by the connection.
func (c *ConnFlow) ensureWindow(n uint64) { c.recv.grow(n) }
