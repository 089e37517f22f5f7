package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family K: HTTP/3 and QPACK (docs/scenarios.md). The tester writes its own
// unidirectional streams byte by byte, so it can break the rules.

// settingsFrame is an empty SETTINGS frame plus the given pairs.
func settingsFrame(pairs ...uint64) []byte {
	var p []byte
	for _, v := range pairs {
		p = wire.AppendVarint(p, v)
	}
	return rawquic.H3Frame(0x04, p)
}

// uniStream opens a client unidirectional stream with the given bytes and,
// when fin, ends it.
func uniStream(ctx context.Context, t *T, c *Conn, b []byte, fin bool) {
	s, err := c.OpenUniStream(ctx)
	if err != nil {
		t.Errorf("open unidirectional stream: %v", err)
	}
	if _, err := s.Write(b); err != nil {
		t.Errorf("write unidirectional stream: %v", err)
	}
	if fin {
		s.CloseWrite()
	}
}

// bidiStream opens a request stream with the given bytes and FIN.
func bidiStream(ctx context.Context, t *T, c *Conn, b []byte) {
	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Errorf("open stream: %v", err)
	}
	if _, err := s.Write(b); err != nil {
		t.Errorf("write stream: %v", err)
	}
	s.CloseWrite()
}

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func h3Codes(cs ...h3.ErrCode) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = uint64(c)
	}
	return out
}

// qpackInt encodes a prefix integer (RFC 7541 §5.1) with the high bits of
// the first byte given by first.
func qpackInt(first byte, bits int, v uint64) []byte {
	max := uint64(1)<<bits - 1
	if v < max {
		return []byte{first | byte(v)}
	}
	b := []byte{first | byte(max)}
	v -= max
	for v >= 128 {
		b = append(b, byte(v%128)|0x80)
		v /= 128
	}
	return append(b, byte(v))
}

// serverSettings waits for the server's SETTINGS frame, read from the
// STREAM frames the recorder saw on server unidirectional streams.
func (t *T) serverSettings(ctx context.Context, c *Conn) *h3.SettingsFrame {
	var st *h3.SettingsFrame
	find := func(ps []*packet) bool {
		bufs := map[uint64]*rawquic.CryptoBuffer{}
		for _, p := range received(ps, c.ID(), 0) {
			for _, f := range p.frames {
				sf, ok := f.(*wire.StreamFrame)
				if !ok || sf.StreamID%4 != 3 {
					continue
				}
				b := bufs[sf.StreamID]
				if b == nil {
					b = &rawquic.CryptoBuffer{}
					bufs[sf.StreamID] = b
				}
				b.Add(sf.Offset, sf.Data)
			}
		}
		for _, b := range bufs {
			d := b.Contiguous()
			if len(d) < 2 || d[0] != 0x00 {
				continue
			}
			if f, _, err := h3.ParseFrame(d[1:]); err == nil {
				if s, ok := f.(*h3.SettingsFrame); ok {
					st = s
					return true
				}
			}
		}
		return false
	}
	if !t.rec.wait(ctx, t.Settle(), find) {
		t.Inconclusive("The server's SETTINGS frame did not arrive on its control stream.")
	}
	t.Fact("h3.settings", st.Settings)
	return st
}

// waitStreamAcked waits up to one settle window until a packet carrying
// data of stream id has been acknowledged by the server.
func (t *T) waitStreamAcked(ctx context.Context, c *Conn, id uint64) {
	t.rec.wait(ctx, t.Settle(), func(ps []*packet) bool {
		for _, p := range ps {
			if !p.sent || p.conn != c.ID() || p.space != spaceApp {
				continue
			}
			for _, f := range p.frames {
				if sf, ok := f.(*wire.StreamFrame); ok && sf.StreamID == id && ackedBy(ps, c.ID(), spaceApp, p.pn) != nil {
					return true
				}
			}
		}
		return false
	})
}

// The tester's own HTTP/3 and QPACK wire for family K. It writes field
// sections itself, literals only, so that it can send what a real encoder
// never would (an uppercase name, a pseudo-header after a regular field,
// an impossible Required Insert Count), and it reads what the server sent
// from the recorded STREAM frames, so that every judgement rests on the
// packets kept as evidence.

// hfield is one field line the tester sends.
type hfield struct{ name, value string }

// qpackString encodes a string literal without Huffman coding: the H bit
// (the bit above the length prefix) stays 0.
func qpackString(first byte, bits int, s string) []byte {
	return append(qpackInt(first, bits, uint64(len(s))), s...)
}

// literalLine is a Literal Field Line with Literal Name (RFC 9204
// §4.5.6): 001, N = 0, H = 0, a 3-bit name length, the name, then H = 0
// and a 7-bit value length.
func literalLine(f hfield) []byte {
	return append(qpackString(0x20, 3, f.name), qpackString(0x00, 7, f.value)...)
}

// literalSection is a field section that needs no dynamic table: a prefix
// of Required Insert Count 0 and Base 0 (RFC 9204 §4.5.1), then every line
// a literal with a literal name.
func literalSection(fs []hfield) []byte {
	b := []byte{0x00, 0x00}
	for _, f := range fs {
		b = append(b, literalLine(f)...)
	}
	return b
}

// requestFields are a request's pseudo-header fields for path, in the
// usual order.
func requestFields(p *Profile, method, path string) []hfield {
	host := p.sni()
	if host == "" {
		host = "localhost"
	}
	return []hfield{{":method", method}, {":scheme", "https"}, {":authority", host}, {":path", path}}
}

// headersFrame is an HTTP/3 HEADERS frame around a field section.
func headersFrameOf(section []byte) []byte { return rawquic.H3Frame(0x01, section) }

// qpackReadInt decodes a prefix integer whose prefix has bits bits (RFC
// 9204 §4.1.1). n is 0 when b ends first or the value would not fit in 62
// bits.
func qpackReadInt(b []byte, bits int) (v uint64, n int) {
	if len(b) == 0 {
		return 0, 0
	}
	max := uint64(1)<<bits - 1
	v = uint64(b[0]) & max
	if v < max {
		return v, 1
	}
	for i := 1; i < len(b) && i <= 9; i++ {
		v += uint64(b[i]&0x7f) << (7 * (i - 1))
		if b[i]&0x80 == 0 {
			if v >= 1<<62 {
				return 0, 0
			}
			return v, i + 1
		}
	}
	return 0, 0
}

// h3RawFrame is one HTTP/3 frame as it was on the wire.
type h3RawFrame struct {
	typ     uint64
	payload []byte
}

// h3Frames splits b into complete frames; rest is an incomplete tail.
func h3Frames(b []byte) (fs []h3RawFrame, rest []byte) {
	for len(b) > 0 {
		typ, n, err := wire.ConsumeVarint(b)
		if err != nil {
			break
		}
		l, m, err := wire.ConsumeVarint(b[n:])
		if err != nil || uint64(len(b)-n-m) < l {
			break
		}
		fs = append(fs, h3RawFrame{typ: typ, payload: b[n+m : n+m+int(l)]})
		b = b[n+m+int(l):]
	}
	return fs, b
}

// sectionInsertCount returns the encoded Required Insert Count of a field
// section (RFC 9204 §4.5.1.1); ok is false when the prefix is incomplete.
func sectionInsertCount(section []byte) (enc uint64, ok bool) {
	v, n := qpackReadInt(section, 8)
	return v, n > 0
}

var errDynamicSection = errors.New("the field section references the dynamic table")

// decodeStaticSection decodes a field section that uses no dynamic table.
func decodeStaticSection(section []byte) ([]qpack.HeaderField, error) {
	if enc, ok := sectionInsertCount(section); !ok || enc != 0 {
		return nil, errDynamicSection
	}
	next := qpack.NewDecoder().Decode(section)
	var fs []qpack.HeaderField
	for {
		f, err := next()
		if errors.Is(err, io.EOF) {
			return fs, nil
		}
		if err != nil {
			return fs, err
		}
		fs = append(fs, f)
	}
}

// h3Seen is what the server sent on one connection, reassembled from the
// recorded packets: the data of each stream, the packets that carried it,
// the stream errors and the close.
type h3Seen struct {
	streams map[uint64]*rawquic.Stream
	carried map[uint64][]*packet
	resets  map[uint64]frameAt // RESET_STREAM by stream
	stops   map[uint64]frameAt // STOP_SENDING by stream
	close   *packet
}

// h3Observe reassembles what the server sent on connection conn from
// packet index from.
func h3Observe(ps []*packet, conn, from int) *h3Seen {
	v := &h3Seen{streams: map[uint64]*rawquic.Stream{}, carried: map[uint64][]*packet{},
		resets: map[uint64]frameAt{}, stops: map[uint64]frameAt{}}
	for _, p := range received(ps, conn, from) {
		for _, f := range p.frames {
			switch f := f.(type) {
			case *wire.StreamFrame:
				s := v.streams[f.StreamID]
				if s == nil {
					s = &rawquic.Stream{}
					v.streams[f.StreamID] = s
				}
				s.Add(f.Offset, f.Data, f.Fin)
				if c := v.carried[f.StreamID]; len(c) == 0 || c[len(c)-1] != p {
					v.carried[f.StreamID] = append(c, p)
				}
			case *wire.ResetStreamFrame:
				if _, ok := v.resets[f.StreamID]; !ok {
					v.resets[f.StreamID] = frameAt{p, f}
				}
			case *wire.StopSendingFrame:
				if _, ok := v.stops[f.StreamID]; !ok {
					v.stops[f.StreamID] = frameAt{p, f}
				}
			case *wire.ConnectionCloseFrame:
				if v.close == nil {
					v.close = p
				}
			}
		}
	}
	return v
}

// uniStreams returns the server's unidirectional streams whose type has
// arrived, by type, in stream order.
func (v *h3Seen) uniStreams() map[uint64][]uint64 {
	out := map[uint64][]uint64{}
	var ids []uint64
	for id := range v.streams {
		if id%4 == 3 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		if typ, _, err := wire.ConsumeVarint(v.streams[id].Data()); err == nil {
			out[typ] = append(out[typ], id)
		}
	}
	return out
}

// uniPayload returns what follows the type of unidirectional stream id.
func (v *h3Seen) uniPayload(id uint64) []byte {
	s := v.streams[id]
	if s == nil {
		return nil
	}
	_, n, err := wire.ConsumeVarint(s.Data())
	if err != nil {
		return nil
	}
	return s.Data()[n:]
}

// streamOfType returns the payload of the server's first unidirectional
// stream of type typ and the packets that carried it.
func (v *h3Seen) streamOfType(typ uint64) ([]byte, []*packet, bool) {
	ids := v.uniStreams()[typ]
	if len(ids) == 0 {
		return nil, nil, false
	}
	return v.uniPayload(ids[0]), v.carried[ids[0]], true
}

// h3Response is the server's answer on one request stream.
type h3Response struct {
	status    int    // 0 when no final response header could be decoded
	headers   bool   // a HEADERS frame arrived
	insertCnt uint64 // encoded Required Insert Count of the first HEADERS
	frames    []uint64
	dataBytes int
	complete  bool // the stream ended with FIN and every byte arrived
	decodeErr error
}

// response reads the server's answer on request stream id.
func (v *h3Seen) response(id uint64) h3Response {
	var r h3Response
	s := v.streams[id]
	if s == nil {
		return r
	}
	r.complete = s.Complete()
	fs, _ := h3Frames(s.Data())
	for _, f := range fs {
		r.frames = append(r.frames, f.typ)
		switch f.typ {
		case 0x00:
			r.dataBytes += len(f.payload)
		case 0x01:
			if r.headers && r.status >= 200 {
				continue // trailers
			}
			r.headers = true
			r.insertCnt, _ = sectionInsertCount(f.payload)
			fields, err := decodeStaticSection(f.payload)
			if err != nil {
				r.decodeErr = err
				continue
			}
			for _, hf := range fields {
				if hf.Name == ":status" {
					r.status, _ = strconv.Atoi(hf.Value)
				}
			}
		}
	}
	return r
}

// streamError returns the server's RESET_STREAM or STOP_SENDING on stream
// id, if any.
func (v *h3Seen) streamError(id uint64) (frameAt, uint64, bool) {
	if fa, ok := v.resets[id]; ok {
		return fa, fa.f.(*wire.ResetStreamFrame).ErrorCode, true
	}
	if fa, ok := v.stops[id]; ok {
		return fa, fa.f.(*wire.StopSendingFrame).ErrorCode, true
	}
	return frameAt{}, 0, false
}

// Family K, second part: a complete request, the reserved values HTTP/3
// must ignore, malformed messages, push and error-code rules, and QPACK's
// dynamic table. The tester speaks HTTP/3 by hand on the engine's
// streams (h3wire.go) and judges from the recorded packets.

// judged is a judging function's outcome, before it becomes a check.
type judged struct {
	v        Verdict
	sentence string
	ps       []*packet
	// req indexes the scenario's requirements; reqCode means RFC 9000
	// §11's "most appropriate error code" SHOULD (a warn on a wrong code).
	req int
}

const reqCode = -1

// report records j as check name.
func (t *T) report(name string, j judged) {
	var req Requirement
	switch {
	case j.v != Pass && j.v != Fail && j.v != Warn:
	case j.req == reqCode:
		req = reqMostAppropriate
	case j.req < len(t.sc.Requirements):
		req = t.sc.Requirements[j.req]
	}
	t.Check(name, j.v, req, j.sentence, events(Response, j.ps...)...)
}

// h3Start dials an HTTP/3 connection and opens the tester's control
// stream with SETTINGS holding the given identifier/value pairs and,
// when qpackStreams, an encoder and a decoder stream carrying only their
// type.
func (t *T) h3Start(ctx context.Context, label string, settings []uint64, qpackStreams bool) *Conn {
	c := t.mustDial(ctx, DialOptions{Label: label})
	t.openUni(ctx, c, cat([]byte{0x00}, settingsFrame(settings...)))
	if qpackStreams {
		t.openUni(ctx, c, []byte{0x02})
		t.openUni(ctx, c, []byte{0x03})
	}
	return c
}

// openUni opens a unidirectional stream and writes b. The scenario ends
// inconclusive when the server's stream limit does not allow the stream
// within a settle window.
func (t *T) openUni(ctx context.Context, c *Conn, b []byte) *quic.Stream {
	octx, cancel := context.WithTimeout(ctx, t.Settle())
	defer cancel()
	s, err := c.OpenUniStream(octx)
	if err != nil {
		t.Inconclusive(
			fmt.Sprintf(
				"The tester could not open a unidirectional stream (%v); the server's initial_max_streams_uni is %d.",
				err,
				t.serverTP(c).InitialMaxStreamsUni,
			),
		)
	}
	if len(b) > 0 {
		if _, err := s.Write(b); err != nil {
			t.Inconclusive(fmt.Sprintf("The tester could not write its unidirectional stream: %v.", err))
		}
	}
	return s
}

// openRequest opens a request stream, writes b and, when fin, ends it.
func (t *T) openRequest(ctx context.Context, c *Conn, b []byte, fin bool) *quic.Stream {
	octx, cancel := context.WithTimeout(ctx, t.Settle())
	defer cancel()
	s, err := c.OpenStream(octx)
	if err != nil {
		t.Inconclusive(
			fmt.Sprintf(
				"The tester could not open a request stream (%v); the server's initial_max_streams_bidi is %d.",
				err,
				t.serverTP(c).InitialMaxStreamsBidi,
			),
		)
	}
	if _, err := s.Write(b); err != nil {
		t.Inconclusive(fmt.Sprintf("The tester could not write its request: %v.", err))
	}
	if fin {
		s.CloseWrite()
	}
	return s
}

// get sends a GET for path, built from literals, on a new request stream
// and returns its ID.
func (t *T) get(ctx context.Context, c *Conn, path string) uint64 {
	s := t.openRequest(ctx, c, headersFrameOf(literalSection(requestFields(t.profile, "GET", path))), true)
	return uint64(s.ID())
}

// h3Await waits up to d until cond holds for what the server sent on c,
// or the server closed the connection, and returns what it sent.
func (t *T) h3Await(ctx context.Context, c *Conn, d time.Duration, cond func(v *h3Seen) bool) *h3Seen {
	deadline := time.Now().Add(d)
	check := func(ps []*packet) bool {
		v := h3Observe(ps, c.ID(), 0)
		return v.close != nil || (cond != nil && cond(v))
	}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if t.rec.wait(ctx, min(t.PTO(), time.Until(deadline)), check) {
			break
		}
		if err := c.Err(); err != nil {
			c.trace.noteRemoteClose(err)
			break
		}
	}
	if c.Conn != nil {
		if err := c.Err(); err != nil {
			c.trace.noteRemoteClose(err)
		}
	}
	return h3Observe(t.rec.snapshot(), c.ID(), 0)
}

// h3Answers waits up to d for the answers cond describes, then one PTO
// more unless the server closed: a second control stream, a push stream
// or a close that follows the answers soon after still counts.
func (t *T) h3Answers(ctx context.Context, c *Conn, d time.Duration, cond func(v *h3Seen) bool) *h3Seen {
	v := t.h3Await(ctx, c, d, cond)
	if v.close == nil {
		v = t.h3Await(ctx, c, t.PTO(), func(*h3Seen) bool { return false })
	}
	return v
}

// completed is an h3Await condition: every request stream of ids has its
// whole response.
func completed(ids ...uint64) func(v *h3Seen) bool {
	return func(v *h3Seen) bool {
		for _, id := range ids {
			if s := v.streams[id]; s == nil || !s.Complete() {
				if _, _, reset := v.streamError(id); !reset {
					return false
				}
			}
		}
		return true
	}
}

// closeOf returns the server's CONNECTION_CLOSE frame seen in v.
func (v *h3Seen) closeOf() *wire.ConnectionCloseFrame {
	if v.close == nil {
		return nil
	}
	return v.close.closeFrame()
}

// describeCode names an HTTP/3 or QPACK error code.
func describeCode(code uint64) string {
	return fmt.Sprintf("%s (0x%x)", h3.ErrCode(code), code)
}

// judgeGoesOn judges a request sent after something the server must
// ignore: a close with an error code, or a reset of the request, fails
// (requirement 0); a complete answer passes.
func judgeGoesOn(v *h3Seen, id uint64, what string) judged {
	if cc := v.closeOf(); cc != nil && !(cc.Application && cc.ErrorCode == uint64(h3.ErrCodeNoError)) {
		code := closeCode(cc)
		if cc.Application {
			code = describeCode(cc.ErrorCode)
		}
		return judged{Fail, fmt.Sprintf("The server closed the connection with %s after %s; it must ignore them.", code, what), []*packet{v.close}, 0}
	}
	if fa, code, ok := v.streamError(id); ok && code != uint64(h3.ErrCodeNoError) {
		if _, isReset := fa.f.(*wire.ResetStreamFrame); isReset || !v.streams[id].Complete() {
			return judged{
				Fail,
				fmt.Sprintf("The server aborted the request sent after %s with %s (%s); it must ignore them.", what, describeCode(code), frameString(fa.f)),
				[]*packet{fa.p},
				0,
			}
		}
	}
	r := v.response(id)
	if r.headers && r.complete {
		return judged{
			Pass,
			fmt.Sprintf("The server answered the request sent after %s (status %d, %d bytes of content).", what, r.status, r.dataBytes),
			v.carried[id][:1],
			0,
		}
	}
	if v.close != nil {
		return judged{
			Inconclusive,
			fmt.Sprintf("The server closed the connection with H3_NO_ERROR after %s, before answering the request.", what),
			[]*packet{v.close},
			0,
		}
	}
	return judged{
		Inconclusive,
		fmt.Sprintf("The request sent after %s got no complete answer, and the server did not close the connection either.", what),
		nil,
		0,
	}
}

// goesOn waits for the answer to request id and judges it with
// judgeGoesOn; a close that comes right after the answer still counts.
func (t *T) goesOn(ctx context.Context, c *Conn, id uint64, what string) {
	v := t.h3Answers(ctx, c, t.Settle()+2*time.Second, completed(id))
	t.report("goes-on", judgeGoesOn(v, id, what))
}

// namedJudgement is a judgement with its check name.
type namedJudgement struct {
	name string
	judged
}
