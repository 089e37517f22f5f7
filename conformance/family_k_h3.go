package conformance

import (
	"context"
	"fmt"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family K: HTTP/3 and QPACK (catalogue §3.K). The tester writes its own
// unidirectional streams byte by byte, so it can break the rules.

// h3Frame encodes one HTTP/3 frame: type, length, payload.
func h3Frame(typ uint64, payload []byte) []byte {
	b := wire.AppendVarint(nil, typ)
	b = wire.AppendVarint(b, uint64(len(payload)))
	return append(b, payload...)
}

// settingsFrame is an empty SETTINGS frame plus the given pairs.
func settingsFrame(pairs ...uint64) []byte {
	var p []byte
	for _, v := range pairs {
		p = wire.AppendVarint(p, v)
	}
	return h3Frame(0x04, p)
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

// controlVariant sends the given bytes on the tester's control stream
// (type 0x00 is prepended).
func controlVariant(name string, b []byte) variant {
	return variant{name: name, trigger: func(ctx context.Context, t *T, c *Conn) {
		uniStream(ctx, t, c, cat([]byte{0x00}, b), false)
	}}
}

func h3Codes(cs ...h3.ErrCode) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = uint64(c)
	}
	return out
}

func registerH3(id, title string, req Requirement, code h3.ErrCode, describe string, vs ...variant) {
	registerProvoked(provokedSpec{id: id, title: title, family: "K", needs: []string{NeedH3}, reqs: []Requirement{req},
		codes: h3Codes(code), application: true, describe: describe, variants: vs})
}

func init() {
	goaway := h3Frame(0x07, wire.AppendVarint(nil, 0))
	registerH3("h3-missing-settings", "Control stream starts without SETTINGS",
		rfc9114("6.2.1", Must, "If the first frame of the control stream is any other frame type, this MUST be treated as a connection error of type H3_MISSING_SETTINGS."),
		h3.ErrCodeMissingSettings, "a control stream whose first frame is GOAWAY",
		controlVariant("goaway-first", goaway))
	registerH3("h3-second-settings", "Second SETTINGS frame",
		rfc9114("7.2.4", Must, "If an endpoint receives a second SETTINGS frame on the control stream, the endpoint MUST respond with a connection error of type H3_FRAME_UNEXPECTED."),
		h3.ErrCodeFrameUnexpected, "a second SETTINGS frame on the control stream",
		controlVariant("two-settings", cat(settingsFrame(), settingsFrame())))
	registerH3("h3-second-control-stream", "Second control stream",
		rfc9114("6.2.1", Must, "Only one control stream per peer is permitted; receipt of a second stream claiming to be a control stream MUST be treated as a connection error of type H3_STREAM_CREATION_ERROR."),
		h3.ErrCodeStreamCreationError, "a second control stream",
		variant{name: "two-control-streams", trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
		}})
	registerH3("h3-control-stream-closed", "Client control stream closed",
		rfc9114("6.2.1", Must, "If either control stream is closed at any point, this MUST be treated as a connection error of type H3_CLOSED_CRITICAL_STREAM."),
		h3.ErrCodeClosedCriticalStream, "the end of the client's control stream",
		variant{name: "fin", trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), true)
		}},
		variant{name: "reset", trigger: func(ctx context.Context, t *T, c *Conn) {
			s, err := c.OpenUniStream(ctx)
			if err != nil {
				t.Errorf("open: %v", err)
			}
			s.Write(cat([]byte{0x00}, settingsFrame()))
			// Reset only once the stream type has been acknowledged: a
			// receiver must tolerate a reset before the stream header
			// (RFC 9114 §6.2), which would prove nothing.
			t.waitStreamAcked(ctx, c, uint64(s.ID()))
			s.Reset(0x100)
		}})
	registerH3("h3-data-on-control-stream", "DATA frame on the control stream",
		rfc9114("7.2.1", Must, "If a DATA frame is received on a control stream, the recipient MUST respond with a connection error of type H3_FRAME_UNEXPECTED."),
		h3.ErrCodeFrameUnexpected, "a DATA frame on the control stream",
		controlVariant("data", cat(settingsFrame(), h3Frame(0x00, []byte("x")))))
	var settingsVariants, frameVariants []variant
	for _, id := range []uint64{0x02, 0x03, 0x04, 0x05} {
		settingsVariants = append(settingsVariants, controlVariant(fmt.Sprintf("setting 0x%02x", id), settingsFrame(id, 0)))
	}
	for _, ft := range []uint64{0x06, 0x02, 0x08, 0x09} {
		frameVariants = append(frameVariants, controlVariant(fmt.Sprintf("frame 0x%02x", ft), cat(settingsFrame(), h3Frame(ft, make([]byte, 8)))))
	}
	registerH3("h3-http2-settings-rejected", "HTTP/2-only setting identifiers",
		rfc9114("7.2.4.1", Must, "These reserved settings MUST NOT be sent, and their receipt MUST be treated as a connection error of type H3_SETTINGS_ERROR."),
		h3.ErrCodeSettingsError, "an HTTP/2-only setting in SETTINGS", settingsVariants...)
	registerH3("h3-http2-frame-rejected", "HTTP/2-only frame types",
		rfc9114("7.2.8", Must, "These frame types MUST NOT be sent, and their receipt MUST be treated as a connection error of type H3_FRAME_UNEXPECTED."),
		h3.ErrCodeFrameUnexpected, "an HTTP/2-only frame type on the control stream", frameVariants...)
	registerH3("h3-push-stream-from-client", "Push stream opened by a client",
		rfc9114("6.2.2", Must, "Only servers can push; if a server receives a client-initiated push stream, this MUST be treated as a connection error of type H3_STREAM_CREATION_ERROR."),
		h3.ErrCodeStreamCreationError, "a client-initiated push stream",
		variant{name: "push", trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
			uniStream(ctx, t, c, []byte{0x01, 0x00}, false)
		}})
	registerH3("h3-max-push-id-decrease", "MAX_PUSH_ID decreases",
		rfc9114("7.2.7", Must, "receipt of a MAX_PUSH_ID frame that contains a smaller value than previously received MUST be treated as a connection error of type H3_ID_ERROR."),
		h3.ErrCodeIDError, "MAX_PUSH_ID 10 followed by MAX_PUSH_ID 5",
		controlVariant("decrease", cat(settingsFrame(), h3Frame(0x0d, []byte{10}), h3Frame(0x0d, []byte{5}))))
	registerH3("h3-cancel-push-unknown", "CANCEL_PUSH for a push never promised",
		rfc9114("7.2.3", Must, "a CANCEL_PUSH frame for a push ID that has not yet been mentioned by a PUSH_PROMISE frame, this MUST be treated as a connection error of type H3_ID_ERROR."),
		h3.ErrCodeIDError, "CANCEL_PUSH for push ID 3 after MAX_PUSH_ID 10",
		controlVariant("cancel", cat(settingsFrame(), h3Frame(0x0d, []byte{10}), h3Frame(0x03, []byte{3}))))
	registerH3("h3-frame-extra-bytes", "Frame payload longer than its fields",
		rfc9114("7.1", Must, "A frame payload that contains additional bytes after the identified fields … MUST be treated as a connection error of type H3_FRAME_ERROR."),
		h3.ErrCodeFrameError, "a MAX_PUSH_ID frame with two bytes after its push ID",
		controlVariant("extra", cat(settingsFrame(), h3Frame(0x0d, []byte{1, 0, 0}))))
	withControl := func(name string, req []byte) variant {
		return variant{name: name, trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
			bidiStream(ctx, t, c, req)
		}}
	}
	registerH3("h3-settings-on-request-stream", "SETTINGS on a request stream",
		rfc9114("7.2.4", Must, "If an endpoint receives a SETTINGS frame on a different stream, the endpoint MUST respond with a connection error of type H3_FRAME_UNEXPECTED."),
		h3.ErrCodeFrameUnexpected, "a SETTINGS frame on a request stream", withControl("settings", settingsFrame()))
	registerH3("h3-frame-sequence-invalid", "DATA before HEADERS",
		rfc9114("4.1", Must, "Receipt of an invalid sequence of frames MUST be treated as a connection error of type H3_FRAME_UNEXPECTED."),
		h3.ErrCodeFrameUnexpected, "a DATA frame before any HEADERS on a request stream", withControl("data-first", h3Frame(0x00, []byte("hello"))))
	registerH3("h3-push-promise-from-client", "PUSH_PROMISE from a client",
		rfc9114("7.2.5", Must, "A server MUST treat the receipt of a PUSH_PROMISE frame as a connection error of type H3_FRAME_UNEXPECTED."),
		h3.ErrCodeFrameUnexpected, "a PUSH_PROMISE frame on a request stream", withControl("push-promise", h3Frame(0x05, []byte{0, 0, 0})))
	registerH3("h3-frame-truncated", "Truncated HEADERS frame",
		rfc9114("7.1", Must, "When a stream terminates cleanly, if the last frame on the stream was truncated, this MUST be treated as a connection error of type H3_FRAME_ERROR."),
		h3.ErrCodeFrameError, "a HEADERS frame declaring 50 bytes but ending after 20",
		withControl("truncated", cat([]byte{0x01, 50}, make([]byte, 20))))
	registerH3("qpack-second-encoder-stream", "Second QPACK encoder stream",
		rfc("RFC 9204", "4.2", Must, "Receipt of a second instance of either stream type MUST be treated as a connection error of type H3_STREAM_CREATION_ERROR."),
		h3.ErrCodeStreamCreationError, "two QPACK encoder streams",
		variant{name: "two-encoders", trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
			uniStream(ctx, t, c, []byte{0x02}, false)
			uniStream(ctx, t, c, []byte{0x02}, false)
		}})
	registerH3("qpack-encoder-stream-closed", "QPACK encoder stream closed",
		rfc("RFC 9204", "4.2", Must, "Closure of either unidirectional stream type MUST be treated as a connection error of type H3_CLOSED_CRITICAL_STREAM."),
		h3.ErrCodeClosedCriticalStream, "the end of the client's QPACK stream",
		variant{name: "encoder", trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
			uniStream(ctx, t, c, []byte{0x02}, true)
		}},
		variant{name: "decoder", trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
			uniStream(ctx, t, c, []byte{0x03}, true)
		}})
	registerH3("qpack-insert-count-increment-zero", "Insert Count Increment of zero",
		rfc("RFC 9204", "4.4.3", Must, "An encoder that receives an Increment field equal to zero … MUST treat this as a connection error of type QPACK_DECODER_STREAM_ERROR."),
		h3.ErrCodeQPACKDecoderStream, "an Insert Count Increment of 0 on the decoder stream",
		variant{name: "increment-zero", trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
			uniStream(ctx, t, c, []byte{0x03, 0x00}, false)
		}})
	registerH3("qpack-capacity-exceeded", "Dynamic table capacity above the server's maximum",
		rfc("RFC 9204", "4.3.1", Must, "The decoder MUST treat a new dynamic table capacity value that exceeds this limit as a connection error of type QPACK_ENCODER_STREAM_ERROR."),
		h3.ErrCodeQPACKEncoderStream, "Set Dynamic Table Capacity one above the server's SETTINGS_QPACK_MAX_TABLE_CAPACITY",
		variant{name: "capacity", trigger: func(ctx context.Context, t *T, c *Conn) {
			st := t.serverSettings(ctx, c)
			capacity, _ := st.Get(h3.SettingQPACKMaxTableCapacity)
			t.Fact("qpack.capacity", capacity)
			// Set Dynamic Table Capacity: 001 and a 5-bit prefix integer.
			uniStream(ctx, t, c, cat([]byte{0x02}, qpackInt(0x20, 5, capacity+1)), false)
		}})
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
		bufs := map[uint64]*cryptoBuffer{}
		for _, p := range received(ps, c.ID(), 0) {
			for _, f := range p.frames {
				sf, ok := f.(*wire.StreamFrame)
				if !ok || sf.StreamID%4 != 3 {
					continue
				}
				b := bufs[sf.StreamID]
				if b == nil {
					b = &cryptoBuffer{}
					bufs[sf.StreamID] = b
				}
				b.add(sf.Offset, sf.Data)
			}
		}
		for _, b := range bufs {
			d := b.contiguous()
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
