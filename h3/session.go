package h3

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/quiver-quic/quiver/h3/qpack"
)

// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2).
const (
	StreamTypeControl      uint64 = 0x00
	StreamTypePush         uint64 = 0x01
	StreamTypeQPACKEncoder uint64 = 0x02
	StreamTypeQPACKDecoder uint64 = 0x03
)

// DefaultMaxHeaderBytes is the default limit on a received field section,
// advertised as SETTINGS_MAX_FIELD_SECTION_SIZE.
const DefaultMaxHeaderBytes = 64 << 10

// maxControlFrame bounds frames buffered from the control stream.
const maxControlFrame = 16 << 10

// session is the connection-wide HTTP/3 state shared by client and server:
// the local control and QPACK streams, the peer's unidirectional streams,
// SETTINGS, GOAWAY and the connection's fate.
type session struct {
	conn            Conn
	isServer        bool
	maxFieldSection uint64
	local           *SettingsFrame

	// ctx is cancelled when the session ends for any reason.
	ctx    context.Context
	cancel context.CancelFunc

	ctrlMu sync.Mutex
	ctrl   Stream

	settingsReady chan struct{} // closed when the peer's SETTINGS arrive

	// onGoAway, if set, is called (without mu) for each valid GOAWAY
	// received from the peer.
	onGoAway func(id uint64)

	mu           sync.Mutex
	err          error // why the session ended; nil while it runs
	peerSettings *SettingsFrame
	peerStreams  [4]bool // control, push, QPACK encoder, QPACK decoder seen
	goAwayRecvd  bool
	goAwayID     uint64 // last GOAWAY ID received
	goAwaySent   bool
	goAwaySentID uint64
	maxPushID    uint64 // last MAX_PUSH_ID received (server)
	maxPushIDSet bool

	// QPACK (RFC 9204): our encoder writes the encoder stream, our
	// decoder the decoder stream, each through a queue drained by its
	// own goroutine so that neither ever blocks on flow control.
	enc    *qpack.Encoder
	dec    *qpack.Decoder
	encOut *instructionQueue
	decOut *instructionQueue
}

// QPACK defaults: the dynamic table capacity and the blocked streams a
// Server or ClientConn allows its peer (SETTINGS_QPACK_MAX_TABLE_CAPACITY
// and SETTINGS_QPACK_BLOCKED_STREAMS).
const (
	DefaultQPACKMaxTableCapacity = qpack.DefaultTableCapacity
	DefaultQPACKBlockedStreams   = 16
)

// qpackLimits are the QPACK settings a Server or ClientConn advertises:
// zero means the default, a negative value none.
type qpackLimits struct{ capacity, blocked int }

func (l qpackLimits) values() (capacity, blocked uint64) {
	pick := func(v, def int) uint64 {
		switch {
		case v < 0:
			return 0
		case v == 0:
			return uint64(def)
		}
		return uint64(v)
	}
	return pick(l.capacity, DefaultQPACKMaxTableCapacity), pick(l.blocked, DefaultQPACKBlockedStreams)
}

func newSession(conn Conn, isServer bool, maxHeaderBytes int, datagrams bool, ql qpackLimits) *session {
	if maxHeaderBytes <= 0 {
		maxHeaderBytes = DefaultMaxHeaderBytes
	}
	s := &session{
		conn:            conn,
		isServer:        isServer,
		maxFieldSection: uint64(maxHeaderBytes),
		settingsReady:   make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	capacity, blocked := ql.values()
	s.encOut = newInstructionQueue(s)
	s.decOut = newInstructionQueue(s)
	s.enc = qpack.NewEncoder(0, s.encOut.add)
	s.dec = qpack.NewDecoder(capacity, blocked, s.decOut.add)
	s.local = &SettingsFrame{Settings: []Setting{
		{SettingQPACKMaxTableCapacity, capacity},
		{SettingMaxFieldSectionSize, uint64(maxHeaderBytes)},
		{SettingQPACKBlockedStreams, blocked},
	}}
	if datagrams {
		s.local.Settings = append(s.local.Settings, Setting{SettingH3Datagram, 1})
	}
	// RFC 9114 §7.2.4.1: "Endpoints SHOULD include at least one such
	// setting in their SETTINGS frame."
	s.local.Settings = append(s.local.Settings, Setting{0x1f*rand.Uint64N(1<<16) + 0x21, rand.Uint64N(1 << 30)})
	return s
}

// start opens the control stream with SETTINGS and the QPACK streams, and
// starts accepting the peer's unidirectional streams.
func (s *session) start(ctx context.Context) error {
	// RFC 9114 §6.2.1: "Each side MUST initiate a single control stream at
	// the beginning of the connection and send its SETTINGS frame as the
	// first frame on this stream." §7.2.4.2: "settings MUST be sent as soon
	// as the transport is ready to send data."
	ctrl, err := s.conn.OpenUniStream(ctx)
	if err != nil {
		return fmt.Errorf("h3: open control stream: %w", err)
	}
	if _, err := ctrl.Write(s.local.Append(appendVarint(nil, StreamTypeControl))); err != nil {
		return fmt.Errorf("h3: write SETTINGS: %w", err)
	}
	s.ctrlMu.Lock()
	s.ctrl = ctrl
	s.ctrlMu.Unlock()
	// RFC 9204 §4.2: "Each endpoint MUST initiate, at most, one encoder
	// stream and, at most, one decoder stream." Both are opened at once,
	// as peers expect them.
	for _, q := range []struct {
		t   uint64
		out *instructionQueue
	}{{StreamTypeQPACKEncoder, s.encOut}, {StreamTypeQPACKDecoder, s.decOut}} {
		st, err := s.conn.OpenUniStream(ctx)
		if err != nil {
			return fmt.Errorf("h3: open QPACK stream: %w", err)
		}
		if _, err := st.Write(appendVarint(nil, q.t)); err != nil {
			return fmt.Errorf("h3: write QPACK stream type: %w", err)
		}
		go q.out.run(st)
	}
	go s.acceptUniStreams()
	return nil
}

// acceptUniStreams hands each peer unidirectional stream to handleUni until
// the connection ends.
func (s *session) acceptUniStreams() {
	for {
		st, err := s.conn.AcceptUniStream(s.ctx)
		if err != nil {
			s.end(fmt.Errorf("h3: connection ended: %w", err))
			return
		}
		go s.handleUni(st)
	}
}

// fail ends the session with a locally detected connection error, closing
// the QUIC connection with its code.
func (s *session) fail(e *Error) {
	s.mu.Lock()
	first := s.err == nil
	if first {
		s.err = e
	}
	s.mu.Unlock()
	if first {
		reason := e.Reason
		if len(reason) > 256 {
			// The reason phrase is UTF-8 (RFC 9000 §19.19); do not cut a
			// character in two.
			reason = strings.ToValidUTF8(reason[:256], "")
		}
		s.conn.Close(uint64(e.Code), reason)
		s.cancel()
	}
}

// end records why the session ended without closing the connection (it is
// already gone), unless an earlier cause was recorded.
func (s *session) end(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.cancel()
}

// closeNoError closes the connection gracefully with H3_NO_ERROR.
func (s *session) closeNoError() {
	s.mu.Lock()
	first := s.err == nil
	if first {
		s.err = errSessionClosed
	}
	s.mu.Unlock()
	if first {
		// RFC 9114 §5.2: "An endpoint that completes a graceful shutdown
		// SHOULD use the H3_NO_ERROR error code when closing the
		// connection."
		s.conn.Close(uint64(ErrCodeNoError), "")
		s.cancel()
	}
}

var errSessionClosed = errors.New("h3: connection closed")

// Err returns why the session ended, or nil while it runs.
func (s *session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// handleError reacts to an error from a request stream: connection errors
// close the connection; other errors are returned for the caller to handle.
func (s *session) handleError(err error) {
	if e, ok := asH3Error(err); ok && !e.Stream && !e.Remote {
		s.fail(e)
	}
}

// sendGoAway writes a GOAWAY frame with id on the control stream.
func (s *session) sendGoAway(id uint64) error {
	s.mu.Lock()
	if s.goAwaySent && id > s.goAwaySentID {
		// RFC 9114 §5.2: "the identifier in each frame MUST NOT be
		// greater than the identifier in any previous frame".
		id = s.goAwaySentID
	}
	s.goAwaySent, s.goAwaySentID = true, id
	s.mu.Unlock()
	s.ctrlMu.Lock()
	defer s.ctrlMu.Unlock()
	if s.ctrl == nil {
		return errors.New("h3: no control stream")
	}
	_, err := s.ctrl.Write((&GoAwayFrame{ID: id}).Append(nil))
	return err
}

// waitSettings waits for the peer's SETTINGS.
func (s *session) waitSettings(ctx context.Context) (*SettingsFrame, error) {
	select {
	case <-s.settingsReady:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.peerSettings, nil
	case <-s.ctx.Done():
		return nil, s.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// handleUni reads a peer unidirectional stream's type and serves it.
func (s *session) handleUni(st Stream) {
	br := bufio.NewReaderSize(st, 4096)
	t, err := readVarint(br)
	if err != nil {
		// RFC 9114 §6.2: "A receiver MUST tolerate unidirectional streams
		// being closed or reset prior to the reception of the
		// unidirectional stream header."
		return
	}
	var idx int
	switch t {
	case StreamTypeControl:
		idx = 0
	case StreamTypePush:
		if s.isServer {
			s.fail(connError(ErrCodeStreamCreationError, `client opened a push stream; RFC 9114 §6.2.2: "Only servers can push; if a server receives a client-initiated push stream, this MUST be treated as a connection error of type H3_STREAM_CREATION_ERROR"`))
		} else {
			s.fail(connError(ErrCodeIDError, `push stream received but no MAX_PUSH_ID was sent; RFC 9114 §4.6: "A client MUST treat receipt of a push stream as a connection error of type H3_ID_ERROR when no MAX_PUSH_ID frame has been sent"`))
		}
		return
	case StreamTypeQPACKEncoder:
		idx = 2
	case StreamTypeQPACKDecoder:
		idx = 3
	default:
		// RFC 9114 §6.2: "Recipients of unknown stream types MUST either
		// abort reading of the stream or discard incoming data without
		// further processing. If reading is aborted, the recipient SHOULD
		// use the H3_STREAM_CREATION_ERROR error code". Grease streams
		// (0x1f*N+0x21) land here too.
		st.StopSending(uint64(ErrCodeStreamCreationError))
		return
	}
	s.mu.Lock()
	dup := s.peerStreams[idx]
	s.peerStreams[idx] = true
	s.mu.Unlock()
	if dup {
		if idx == 0 {
			s.fail(connError(ErrCodeStreamCreationError, `second control stream; RFC 9114 §6.2.1: "Only one control stream per peer is permitted; receipt of a second stream claiming to be a control stream MUST be treated as a connection error of type H3_STREAM_CREATION_ERROR"`))
		} else {
			s.fail(connError(ErrCodeStreamCreationError, `second QPACK stream of type %#x; RFC 9204 §4.2: "Receipt of a second instance of either stream type MUST be treated as a connection error of type H3_STREAM_CREATION_ERROR"`, t))
		}
		return
	}
	var cerr error
	switch idx {
	case 0:
		cerr = s.readControl(br)
	case 2:
		cerr = readQPACKStream(br, s.dec.WriteEncoderStream)
	case 3:
		cerr = readQPACKStream(br, s.enc.WriteDecoderStream)
	}
	s.criticalStreamEnded(cerr, t)
}

// criticalStreamEnded handles the end of a control or QPACK stream.
func (s *session) criticalStreamEnded(err error, t uint64) {
	if e, ok := asH3Error(err); ok && !e.Remote {
		s.fail(e)
		return
	}
	_, isReset := asH3Error(err)
	if isEOF(err) || isReset {
		// RFC 9114 §6.2.1: "If either control stream is closed at any
		// point, this MUST be treated as a connection error of type
		// H3_CLOSED_CRITICAL_STREAM." RFC 9204 §4.2: "Closure of either
		// unidirectional stream type MUST be treated as a connection error
		// of type H3_CLOSED_CRITICAL_STREAM."
		s.fail(connError(ErrCodeClosedCriticalStream, "peer closed its critical stream of type %#x (%v); RFC 9114 §6.2.1: \"If either control stream is closed at any point, this MUST be treated as a connection error of type H3_CLOSED_CRITICAL_STREAM\"", t, err))
		return
	}
	// Any other read error means the connection itself went away.
	s.end(fmt.Errorf("h3: connection ended: %w", err))
}

// readQPACKStream feeds the peer's encoder or decoder stream to our
// decoder or encoder until the stream or the connection ends; a QPACK
// error is a connection error with its code (RFC 9204 §6).
func readQPACKStream(br *bufio.Reader, write func([]byte) error) error {
	buf := make([]byte, 4096)
	for {
		n, err := br.Read(buf)
		if n > 0 {
			if qerr := write(buf[:n]); qerr != nil {
				return qpackError(qerr)
			}
		}
		if err != nil {
			return peerReset(err)
		}
	}
}

// qpackError turns a QPACK error into a connection error of its code.
func qpackError(err error) error {
	var qe *qpack.Error
	if errors.As(err, &qe) {
		return connError(ErrCode(qe.Code), "%s", qe.Reason)
	}
	return err
}

// maxQueuedInstructions bounds the QPACK instructions waiting for a peer
// that does not read our encoder or decoder stream: past it, the peer is
// holding back its own flow control while it keeps making us write, and
// the connection ends with H3_EXCESSIVE_LOAD.
const maxQueuedInstructions = 64 << 10

// instructionQueue holds QPACK instructions for one stream; add never
// blocks, run writes them in order.
type instructionQueue struct {
	s    *session
	mu   sync.Mutex
	buf  []byte
	wake chan struct{}
}

func newInstructionQueue(s *session) *instructionQueue {
	return &instructionQueue{s: s, wake: make(chan struct{}, 1)}
}

func (q *instructionQueue) add(b []byte) {
	q.mu.Lock()
	q.buf = append(q.buf, b...)
	over := len(q.buf) > maxQueuedInstructions
	q.mu.Unlock()
	if over {
		go q.s.fail(connError(ErrCodeExcessiveLoad, "over %d bytes of QPACK instructions wait for a peer that does not read them", maxQueuedInstructions))
		return
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run writes queued instructions to st until the session ends.
func (q *instructionQueue) run(st Stream) {
	for {
		select {
		case <-q.wake:
		case <-q.s.ctx.Done():
			return
		}
		q.mu.Lock()
		b := q.buf
		q.buf = nil
		q.mu.Unlock()
		if len(b) == 0 {
			continue
		}
		if _, err := st.Write(b); err != nil {
			return
		}
	}
}

// encodeFields encodes a field section for stream with our encoder.
func (s *session) encodeFields(stream int64, fields []qpack.HeaderField) []byte {
	return s.enc.Encode(uint64(stream), fields)
}

// decodeFields decodes a field section received on stream. A section that
// waits for inserts blocks until they come, ctx ends or the session does.
func (s *session) decodeFields(ctx context.Context, stream int64, p []byte, limit uint64) ([]qpack.HeaderField, error) {
	if len(p) > 0 && p[0] == 0 {
		// An Encoded Required Insert Count of 0 (RFC 9204 §4.5.1.1: "the
		// Required Insert Count is zero" when the section refers to no
		// dynamic entry) never blocks, so it needs no context of its
		// own: two contexts per header section were a twentieth of an
		// HTTP/3 RPC's allocations (docs/highway.md).
		fields, err := s.dec.Decode(ctx, uint64(stream), p, limit)
		return s.decodeResult(context.Background(), fields, err)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	unlink := context.AfterFunc(s.ctx, stop)
	defer unlink()
	fields, err := s.dec.Decode(ctx, uint64(stream), p, limit)
	return s.decodeResult(ctx, fields, err)
}

// decodeResult maps the outcome of a Decode to decodeFields' errors.
func (s *session) decodeResult(ctx context.Context, fields []qpack.HeaderField, err error) ([]qpack.HeaderField, error) {
	var tl *qpack.TooLargeError
	switch {
	case err == nil:
		return fields, nil
	case errors.As(err, &tl):
		return nil, errFieldSectionTooLarge{tl.Size, tl.Limit}
	case ctx.Err() != nil:
		if serr := s.Err(); serr != nil {
			return nil, serr
		}
		return nil, ctx.Err()
	}
	return nil, qpackError(err)
}

// readControl reads the peer's control stream until it ends.
func (s *session) readControl(br *bufio.Reader) error {
	fr := newFrameReader(br, maxControlFrame)
	first := true
	for {
		t, length, err := fr.readHeader()
		if err != nil {
			return err
		}
		if first {
			first = false
			if t != FrameSettings {
				return connError(ErrCodeMissingSettings, "first frame on the control stream is %v; RFC 9114 §6.2.1: \"If the first frame of the control stream is any other frame type, this MUST be treated as a connection error of type H3_MISSING_SETTINGS\"", t)
			}
		} else if t == FrameSettings {
			return connError(ErrCodeFrameUnexpected, "second SETTINGS frame; RFC 9114 §7.2.4: \"If an endpoint receives a second SETTINGS frame on the control stream, the endpoint MUST respond with a connection error of type H3_FRAME_UNEXPECTED\"")
		}
		switch t {
		case FrameData, FrameHeaders:
			return connError(ErrCodeFrameUnexpected, "%v frame on the control stream; RFC 9114 §7.2.1/§7.2.2: \"If a %v frame is received on a control stream, the recipient MUST respond with a connection error of type H3_FRAME_UNEXPECTED\"", t, t)
		case FramePushPromise:
			return connError(ErrCodeFrameUnexpected, "PUSH_PROMISE on the control stream; RFC 9114 §7.2.5: \"If a PUSH_PROMISE frame is received on the control stream, the client MUST respond with a connection error of type H3_FRAME_UNEXPECTED\"")
		case FrameSettings, FrameGoAway, FrameMaxPushID, FrameCancelPush:
		default:
			if isHTTP2Frame(t) {
				_, err := parseFramePayload(t, nil)
				return err
			}
			// RFC 9114 §9: "Implementations MUST ignore unknown or
			// unsupported values in all extensible protocol elements."
			if err := fr.skip(t, length); err != nil {
				return err
			}
			continue
		}
		if t != FrameSettings && length > 8 {
			return connError(ErrCodeFrameError, "%v payload of %d bytes is longer than one varint; %s", t, length, ruleExactPayload)
		}
		p, err := fr.readPayload(t, length)
		if err != nil {
			return err
		}
		f, err := parseFramePayload(t, p)
		if err != nil {
			return err
		}
		if err := s.handleControlFrame(f); err != nil {
			return err
		}
	}
}

// handleControlFrame applies one frame from the peer's control stream.
func (s *session) handleControlFrame(f Frame) error {
	switch f := f.(type) {
	case *SettingsFrame:
		s.mu.Lock()
		s.peerSettings = &SettingsFrame{Settings: append([]Setting(nil), f.Settings...)}
		s.mu.Unlock()
		// RFC 9204 §3.2.3: "the maximum table capacity is 0 until the
		// encoder processes a SETTINGS frame with a non-zero value of
		// SETTINGS_QPACK_MAX_TABLE_CAPACITY."
		if capacity, ok := f.Get(SettingQPACKMaxTableCapacity); ok {
			s.enc.SetPeerSettings(capacity)
		}
		close(s.settingsReady)
	case *GoAwayFrame:
		return s.handleGoAway(f.ID)
	case *MaxPushIDFrame:
		if !s.isServer {
			return connError(ErrCodeFrameUnexpected, "MAX_PUSH_ID from the server; RFC 9114 §7.2.7: \"A client MUST treat the receipt of a MAX_PUSH_ID frame as a connection error of type H3_FRAME_UNEXPECTED\"")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.maxPushIDSet && f.PushID < s.maxPushID {
			return connError(ErrCodeIDError, "MAX_PUSH_ID went down from %d to %d; RFC 9114 §7.2.7: \"receipt of a MAX_PUSH_ID frame that contains a smaller value than previously received MUST be treated as a connection error of type H3_ID_ERROR\"", s.maxPushID, f.PushID)
		}
		s.maxPushID, s.maxPushIDSet = f.PushID, true
	case *CancelPushFrame:
		if s.isServer {
			return connError(ErrCodeIDError, "CANCEL_PUSH for push ID %d, never promised; RFC 9114 §7.2.3: \"If a server receives a CANCEL_PUSH frame for a push ID that has not yet been mentioned by a PUSH_PROMISE frame, this MUST be treated as a connection error of type H3_ID_ERROR\"", f.PushID)
		}
		return connError(ErrCodeIDError, "CANCEL_PUSH for push ID %d but no MAX_PUSH_ID was sent; RFC 9114 §7.2.3: \"If a CANCEL_PUSH frame is received that references a push ID greater than currently allowed on the connection, this MUST be treated as a connection error of type H3_ID_ERROR\"", f.PushID)
	}
	return nil
}

// handleGoAway applies a GOAWAY from the peer.
func (s *session) handleGoAway(id uint64) error {
	if !s.isServer && id%4 != 0 {
		return connError(ErrCodeIDError, "GOAWAY carries stream ID %d, not a client-initiated bidirectional stream; RFC 9114 §7.2.6: \"A client MUST treat receipt of a GOAWAY frame containing a stream ID of any other type as a connection error of type H3_ID_ERROR\"", id)
	}
	s.mu.Lock()
	if s.goAwayRecvd && id > s.goAwayID {
		prev := s.goAwayID
		s.mu.Unlock()
		return connError(ErrCodeIDError, "GOAWAY ID went up from %d to %d; RFC 9114 §5.2: \"Receiving a GOAWAY containing a larger identifier than previously received MUST be treated as a connection error of type H3_ID_ERROR\"", prev, id)
	}
	s.goAwayRecvd, s.goAwayID = true, id
	s.mu.Unlock()
	if s.onGoAway != nil {
		s.onGoAway(id)
	}
	return nil
}

// goingAway reports whether the peer sent GOAWAY, and its last ID.
func (s *session) goingAway() (bool, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.goAwayRecvd, s.goAwayID
}
