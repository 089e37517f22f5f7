package quic

import (
	"context"
	"errors"
	"time"

	"github.com/quiver-quic/quiver/quic/streams"
	"github.com/quiver-quic/quiver/quic/wire"
)

// streamBufferLimit bounds the bytes a stream holds written but not yet
// acknowledged.
const streamBufferLimit = 4 << 20

// streamsState is the connection's stream table, flow control and limits.
// Everything here is guarded by Conn.mu, because Stream methods running
// on application goroutines share the buffers with the loop.
type streamsState struct {
	c      *Conn
	flow   *streams.ConnFlow
	limits *streams.StreamLimits
	m      map[int64]*Stream
	// last is the stream the last lookup found: the frames an ACK
	// acknowledges, and those a packet carries, are mostly of one stream,
	// so most lookups on the hot path skip the map.
	last *Stream

	peerTP *wire.TransportParameters

	acceptBidi []*Stream
	acceptUni  []*Stream
	// openWait is closed and replaced when the peer raises a stream limit.
	openWait chan struct{}

	// sendQueue holds streams with STREAM data to send, in round-robin
	// order; ctlQueue streams with control frames (MAX_STREAM_DATA,
	// STOP_SENDING).
	sendQueue []*Stream
	ctlQueue  []*Stream
	// lazyReset holds streams whose only frame to send is a RESET_STREAM
	// in reply to STOP_SENDING (conn_lazyreset.go).
	lazyReset []*Stream
	readable  []*Stream // streams with new data since the last wakeReaders
	writable  []*Stream // streams with acknowledged data since the last wakeReaders
	rr        int

	maxWindow uint64
	closed    error
}

func (s *streamsState) init(c *Conn) {
	s.c = c
	cfg := c.config
	s.flow = streams.NewConnFlow(streams.ConnFlowConfig{Window: cfg.initialMaxData(), MaxWindow: max(cfg.initialMaxData(), 64<<20)})
	s.limits = streams.NewStreamLimits(streams.StreamLimitsConfig{
		Client:  c.isClient,
		MaxBidi: cfg.maxBidiStreams(),
		MaxUni:  cfg.maxUniStreams(),
	})
	s.m = make(map[int64]*Stream)
	s.openWait = make(chan struct{})
	s.maxWindow = max(cfg.initialMaxStreamData(), 16<<20)
}

// lookup returns the open stream id, or nil.
func (s *streamsState) lookup(id int64) *Stream {
	if st := s.last; st != nil && st.id == id {
		return st
	}
	st := s.m[id]
	if st != nil {
		s.last = st
	}
	return st
}

// setPeerParams applies the peer's flow-control and stream limits.
func (s *streamsState) setPeerParams(p *wire.TransportParameters) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	s.peerTP = p
	s.flow.OnMaxData(p.InitialMaxData)
	if err := s.limits.SetPeerLimits(p.InitialMaxStreamsBidi, p.InitialMaxStreamsUni); err != nil {
		return streamsErr(err, 0)
	}
	s.broadcastOpen()
	return nil
}

func (s *streamsState) broadcastOpen() {
	close(s.openWait)
	s.openWait = make(chan struct{})
}

// streamsErr converts a streams.Error into a TransportError.
func streamsErr(err error, ft wire.FrameType) error {
	var se *streams.Error
	if errors.As(err, &se) {
		return &TransportError{Code: wire.TransportErrorCode(se.Code), FrameType: uint64(ft), Reason: se.Reason}
	}
	return &TransportError{Code: wire.InternalError, FrameType: uint64(ft), Reason: err.Error()}
}

func (c *Conn) isLocal(id uint64) bool { return streams.IsClientInitiated(id) == c.isClient }

// newStreamLocked creates the state of stream id.
func (s *streamsState) newStreamLocked(id uint64) *Stream {
	c := s.c
	st := newStream(c, int64(id))
	bidi := streams.IsBidi(id)
	local := c.isLocal(id)
	st.canSend = bidi || local
	st.canRecv = bidi || !local
	if st.canSend {
		var peerMax uint64
		if s.peerTP != nil {
			switch {
			case !bidi:
				peerMax = s.peerTP.InitialMaxStreamDataUni
			case local:
				peerMax = s.peerTP.InitialMaxStreamDataBidiRemote
			default:
				peerMax = s.peerTP.InitialMaxStreamDataBidiLocal
			}
		}
		st.send.Init(streams.SendConfig{BufferLimit: streamBufferLimit, PeerMaxStreamData: peerMax}, s.flow)
	}
	if st.canRecv {
		st.recv.Init(streams.RecvConfig{Window: c.config.initialMaxStreamData(), MaxWindow: s.maxWindow}, s.flow)
	}
	s.m[int64(id)] = st
	return st
}

// openStream opens a locally initiated stream, waiting for the peer's
// limit to allow it.
func (c *Conn) openStream(ctx context.Context, bidi bool) (*Stream, error) {
	select {
	case <-c.ready:
	case <-c.loopDone:
		return nil, c.closeErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s := &c.streams
	for {
		c.mu.Lock()
		if err := s.closed; err != nil {
			// Read under the lock: the connection's goroutine records the
			// error again when it ends (closeAll).
			c.mu.Unlock()
			return nil, err
		}
		if id, ok := s.limits.OpenNext(bidi); ok {
			st := s.newStreamLocked(id)
			c.mu.Unlock()
			return st, nil
		}
		wait := s.openWait
		c.mu.Unlock()
		c.wake() // let the loop send STREAMS_BLOCKED
		select {
		case <-wait:
		case <-c.loopDone:
			return nil, c.closeErr
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// OpenStream opens a bidirectional stream. It waits while the peer's
// stream limit is reached. The peer learns of the stream with its first
// frame.
func (c *Conn) OpenStream(ctx context.Context) (*Stream, error) { return c.openStream(ctx, true) }

// OpenUniStream opens a unidirectional stream.
func (c *Conn) OpenUniStream(ctx context.Context) (*Stream, error) { return c.openStream(ctx, false) }

// AcceptStream waits for the peer to open a bidirectional stream.
func (c *Conn) AcceptStream(ctx context.Context) (*Stream, error) { return c.acceptStream(ctx, true) }

// AcceptUniStream waits for the peer to open a unidirectional stream.
func (c *Conn) AcceptUniStream(ctx context.Context) (*Stream, error) {
	return c.acceptStream(ctx, false)
}

func (c *Conn) acceptStream(ctx context.Context, bidi bool) (*Stream, error) {
	s := &c.streams
	for {
		c.mu.Lock()
		q, wake := &s.acceptUni, c.acceptWakeUni
		if bidi {
			q, wake = &s.acceptBidi, c.acceptWake
		}
		if len(*q) > 0 {
			st := (*q)[0]
			(*q)[0] = nil
			*q = (*q)[1:]
			more := len(*q) > 0
			c.mu.Unlock()
			if more {
				// Another acceptor may be waiting for what is left.
				signal(wake)
			}
			return st, nil
		}
		closed := s.closed
		c.mu.Unlock()
		if closed != nil {
			return nil, closed
		}
		select {
		case <-wake:
		case <-c.loopDone:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// queueSendLocked puts s on the send queue.
func (c *Conn) queueSendLocked(s *Stream) {
	if !s.queued {
		s.queued = true
		c.streams.sendQueue = append(c.streams.sendQueue, s)
	}
}

// queueControlLocked puts s on the control queue and wakes the loop.
func (c *Conn) queueControlLocked(s *Stream) {
	if !s.ctlQueued {
		s.ctlQueued = true
		c.streams.ctlQueue = append(c.streams.ctlQueue, s)
	}
	c.wake()
}

// streamForFrame finds or creates the stream a peer frame is about. It
// returns nil (and no error) for a stream that is already closed.
func (s *streamsState) streamForFrame(id uint64, part streams.Part, ft wire.FrameType) (*Stream, error) {
	if st := s.lookup(int64(id)); st != nil {
		return st, nil
	}
	r, err := s.limits.OnPeerStream(id, part)
	if err != nil {
		return nil, streamsErr(err, ft)
	}
	if s.c.isLocal(id) {
		return nil, nil // a closed local stream
	}
	var st *Stream
	for i := uint64(0); i < r.Count; i++ {
		ns := s.newStreamLocked(r.First + 4*i)
		if streams.IsBidi(id) {
			s.acceptBidi = append(s.acceptBidi, ns)
		} else {
			s.acceptUni = append(s.acceptUni, ns)
		}
		st = ns
	}
	if st != nil {
		if streams.IsBidi(id) {
			signal(s.c.acceptWake)
		} else {
			signal(s.c.acceptWakeUni)
		}
	}
	if st == nil {
		return nil, nil
	}
	return s.m[int64(id)], nil
}

func (s *streamsState) onStream(now time.Time, f *wire.StreamFrame) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := s.streamForFrame(f.StreamID, streams.PartRecv, f.Type())
	if err != nil || st == nil {
		return err
	}
	if !st.canRecv {
		// RFC 9000 §19.8: "An endpoint MUST terminate the connection with
		// error STREAM_STATE_ERROR if it receives a STREAM frame for a
		// locally initiated stream that has not yet been created, or for a
		// send-only stream."
		return localTransportError(wire.StreamStateError, uint64(f.Type()), "RFC 9000 §19.8: STREAM frame for send-only stream %d", f.StreamID)
	}
	if err := st.recv.OnStreamFrame(f.Offset, f.Data, f.Fin); err != nil {
		return streamsErr(err, f.Type())
	}
	// Wake the reader once per loop turn, not once per frame: a reader
	// woken for every packet costs a context switch each.
	if !st.readPending {
		st.readPending = true
		s.readable = append(s.readable, st)
	}
	return nil
}

func (s *streamsState) onResetStream(now time.Time, f *wire.ResetStreamFrame) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := s.streamForFrame(f.StreamID, streams.PartRecv, f.Type())
	if err != nil || st == nil {
		return err
	}
	if !st.canRecv {
		// RFC 9000 §19.4: "An endpoint that receives a RESET_STREAM frame
		// for a send-only stream MUST terminate the connection with error
		// STREAM_STATE_ERROR."
		return localTransportError(wire.StreamStateError, uint64(f.Type()), "RFC 9000 §19.4: RESET_STREAM for send-only stream %d", f.StreamID)
	}
	if err := st.recv.OnResetStream(f.ErrorCode, f.FinalSize); err != nil {
		return streamsErr(err, f.Type())
	}
	signal(st.readWake)
	s.maybeForgetLocked(st)
	return nil
}

func (s *streamsState) onStopSending(now time.Time, f *wire.StopSendingFrame) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := s.streamForFrame(f.StreamID, streams.PartSend, f.Type())
	if err != nil || st == nil {
		return err
	}
	if !st.canSend {
		// RFC 9000 §19.5: "An endpoint that receives a STOP_SENDING frame
		// for a receive-only stream MUST terminate the connection with
		// error STREAM_STATE_ERROR."
		return localTransportError(wire.StreamStateError, uint64(f.Type()), "RFC 9000 §19.5: STOP_SENDING for receive-only stream %d", f.StreamID)
	}
	// RFC 9000 §3.5: "An endpoint that receives a STOP_SENDING frame MUST
	// send a RESET_STREAM frame if the stream is in the "Ready" or "Send"
	// state."
	st.send.OnStopSending(f.ErrorCode)
	c.queueResetReplyLocked(st)
	signal(st.writeWake)
	return nil
}

func (s *streamsState) onMaxData(limit uint64) {
	c := s.c
	c.mu.Lock()
	if s.flow.OnMaxData(limit) {
		for _, st := range s.m {
			if st.canSend && st.send.HasFrame() {
				c.queueSendLocked(st)
			}
		}
	}
	c.mu.Unlock()
}

func (s *streamsState) onMaxStreamData(f *wire.MaxStreamDataFrame) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := s.streamForFrame(f.StreamID, streams.PartSend, f.Type())
	if err != nil || st == nil {
		return err
	}
	if !st.canSend {
		// RFC 9000 §19.10: "An endpoint that receives a MAX_STREAM_DATA
		// frame for a receive-only stream MUST terminate the connection
		// with error STREAM_STATE_ERROR."
		return localTransportError(wire.StreamStateError, uint64(f.Type()), "RFC 9000 §19.10: MAX_STREAM_DATA for receive-only stream %d", f.StreamID)
	}
	if st.send.OnMaxStreamData(f.Maximum) {
		c.queueSendLocked(st)
	}
	return nil
}

// onStreamDataBlocked checks a STREAM_DATA_BLOCKED frame. It carries no
// action: our credit policy does not depend on it. A frame for a stream
// the peer cannot send on is an error.
func (s *streamsState) onStreamDataBlocked(f *wire.StreamDataBlockedFrame) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := s.streamForFrame(f.StreamID, streams.PartRecv, f.Type())
	if err != nil || st == nil {
		return err
	}
	if !st.canRecv {
		// RFC 9000 §19.13: "An endpoint that receives a
		// STREAM_DATA_BLOCKED frame for a send-only stream MUST terminate
		// the connection with error STREAM_STATE_ERROR."
		return localTransportError(wire.StreamStateError, uint64(f.Type()), "RFC 9000 §19.13: STREAM_DATA_BLOCKED for send-only stream %d", f.StreamID)
	}
	return nil
}

func (s *streamsState) onMaxStreams(f *wire.MaxStreamsFrame) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	raised, err := s.limits.OnMaxStreams(f.Bidi, f.Maximum)
	if err != nil {
		return streamsErr(err, f.Type())
	}
	if raised {
		s.broadcastOpen()
	}
	return nil
}

// onStreamAcked handles the acknowledgment of a STREAM frame.
func (s *streamsState) onStreamAcked(f *sentFrame) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	st := s.lookup(int64(f.id))
	if st == nil {
		return
	}
	st.send.OnAcked(f.off, int(f.n), f.fin)
	if !st.writePending {
		st.writePending = true
		s.writable = append(s.writable, st)
	}
	s.maybeForgetLocked(st)
}

func (s *streamsState) onResetAcked(f *sentFrame) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := s.lookup(int64(f.id)); st != nil {
		st.send.OnResetAcked()
		s.maybeForgetLocked(st)
	}
}

// onFrameLost queues a lost stream-related frame for retransmission.
func (s *streamsState) onFrameLost(f *sentFrame) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	switch f.kind {
	case frMaxData:
		s.flow.OnMaxDataLost(f.off)
		return
	case frDataBlocked:
		s.flow.OnDataBlockedLost(f.off)
		return
	case frMaxStreams:
		s.limits.OnMaxStreamsLost(f.bidi, f.off)
		return
	case frStreamsBlocked:
		s.limits.OnStreamsBlockedLost(f.bidi, f.off)
		return
	}
	st := s.lookup(int64(f.id))
	if st == nil {
		return
	}
	switch f.kind {
	case frStream:
		st.send.OnLost(f.off, int(f.n), f.fin)
		c.queueSendLocked(st)
	case frResetStream:
		st.send.OnResetLost()
		c.queueSendLocked(st)
	case frStreamDataBlocked:
		st.send.OnBlockedLost(f.off)
		c.queueSendLocked(st)
	case frMaxStreamData:
		st.recv.OnMaxStreamDataLost(f.off)
		c.queueControlLocked(st)
	case frStopSending:
		st.recv.OnStopSendingLost()
		c.queueControlLocked(st)
	}
}

func (s *streamsState) maybeForget(st *Stream) {
	s.c.mu.Lock()
	s.maybeForgetLocked(st)
	s.c.mu.Unlock()
}

// maybeForgetLocked drops a stream whose both parts are done, and gives
// the peer a new stream credit for it.
func (s *streamsState) maybeForgetLocked(st *Stream) {
	if st.forgotten {
		return
	}
	if st.canSend && !st.send.Done() {
		return
	}
	if st.canRecv && !st.recv.Done() {
		return
	}
	st.forgotten = true
	delete(s.m, st.id)
	if s.last == st {
		s.last = nil
	}
	if !s.c.isLocal(uint64(st.id)) {
		// RFC 9000 §4.6: raise MAX_STREAMS as peer streams close.
		s.limits.OnPeerStreamClosed(streams.IsBidi(uint64(st.id)))
	}
}

// wakeReaders wakes the readers of streams that received data this turn.
func (s *streamsState) wakeReaders() {
	if len(s.readable) == 0 && len(s.writable) == 0 {
		return
	}
	s.c.mu.Lock()
	for i, st := range s.readable {
		st.readPending = false
		signal(st.readWake)
		s.readable[i] = nil
	}
	s.readable = s.readable[:0]
	for i, st := range s.writable {
		st.writePending = false
		signal(st.writeWake)
		s.writable[i] = nil
	}
	s.writable = s.writable[:0]
	s.c.mu.Unlock()
}

// closeAll fails every blocked stream operation with err.
func (s *streamsState) closeAll(err error) {
	c := s.c
	c.mu.Lock()
	s.closed = err
	for _, st := range s.m {
		signal(st.readWake)
		signal(st.writeWake)
	}
	c.mu.Unlock()
	signal(c.acceptWake)
	signal(c.acceptWakeUni)
}
