package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic/wire"
)

// controlVariant sends the given bytes on the tester's control stream
// (type 0x00 is prepended).
func controlVariant(name string, b []byte) variant {
	return variant{name: name, trigger: func(ctx context.Context, t *T, c *Conn) {
		uniStream(ctx, t, c, cat([]byte{0x00}, b), false)
	}}
}

func registerH3(id, title string, req Requirement, code h3.ErrCode, describe string, vs ...variant) {
	registerProvoked(provokedSpec{id: id, title: title, family: "K", needs: []string{NeedH3}, reqs: []Requirement{req},
		codes: h3Codes(code), application: true, describe: describe, variants: vs})
}

// judgeMalformed judges the server's reaction to a malformed request on
// stream id: a stream error H3_MESSAGE_ERROR (or a connection close with
// it) passes, and so does a 4xx response that ends the stream; a 2xx
// fails (requirement 0); another error code warns.
func judgeMalformed(v *h3Seen, id uint64, what string) judged {
	msg := uint64(h3.ErrCodeMessageError)
	if fa, code, ok := v.streamError(id); ok && code == msg {
		return judged{Pass, fmt.Sprintf("The server answered %s with a stream error (%s).", what, frameString(fa.f)), []*packet{fa.p}, 0}
	}
	if cc := v.closeOf(); cc != nil && cc.Application && cc.ErrorCode == msg {
		return judged{Pass, fmt.Sprintf("The server closed the connection with H3_MESSAGE_ERROR after %s.", what), []*packet{v.close}, 0}
	}
	r := v.response(id)
	fa, code, streamErr := v.streamError(id)
	switch {
	case r.status >= 200 && r.status < 300:
		return judged{
			Fail,
			fmt.Sprintf("The server answered %s with status %d; it must treat the request as malformed (a stream error H3_MESSAGE_ERROR).", what, r.status),
			v.carried[id][:1],
			0,
		}
	case r.status >= 400 && r.status < 500 && (r.complete || streamErr):
		return judged{Pass, fmt.Sprintf("The server answered %s with status %d and ended the stream.", what, r.status), v.carried[id], 0}
	}
	if streamErr && code != uint64(h3.ErrCodeNoError) {
		return judged{
			Warn,
			fmt.Sprintf("The server aborted %s with %s instead of H3_MESSAGE_ERROR; use the specific code.", what, frameString(fa.f)),
			[]*packet{fa.p},
			reqCode,
		}
	}
	if cc := v.closeOf(); cc != nil {
		return judged{
			Warn,
			fmt.Sprintf("The server closed the connection after %s, but with %s instead of the stream error H3_MESSAGE_ERROR.", what, closeCode(cc)),
			[]*packet{v.close},
			reqCode,
		}
	}
	if r.status != 0 {
		return judged{
			Inconclusive,
			fmt.Sprintf("The server answered %s with status %d, neither 2xx nor a 4xx that ends the stream.", what, r.status),
			v.carried[id],
			0,
		}
	}
	return judged{Inconclusive, fmt.Sprintf("The server showed no reaction to %s: no response, no stream error, no close.", what), nil, 0}
}

// judgeContentLength judges a request whose Content-Length disagrees
// with its DATA frames. RFC 9114 §4.1.2 makes the stream error a MUST only
// for "Malformed requests or responses that are detected", and a server
// that never reads the content of a request it can answer without it
// never detects the mismatch. The catalogue fails a 2xx; this follows the
// RFC instead and records a 2xx as observed.
func judgeContentLength(v *h3Seen, id uint64, what string) judged {
	j := judgeMalformed(v, id, what)
	r := v.response(id)
	switch {
	case j.v == Fail:
		return judged{
			Observed,
			fmt.Sprintf(
				"The server answered %s with status %d: it did not detect the mismatch, which RFC 9114 §4.1.2 does not require (the stream error is a MUST only for malformed requests \"that are detected\").",
				what,
				r.status,
			),
			j.ps,
			0,
		}
	case j.v == Inconclusive && r.status >= 400 && r.status < 500:
		return judged{Pass, fmt.Sprintf("The server answered %s with status %d.", what, r.status), v.carried[id], 0}
	}
	return j
}

// judgeControlStream checks the server's control streams: exactly one,
// starting with SETTINGS, with no second SETTINGS (requirement 0).
func judgeControlStream(v *h3Seen) judged {
	ids := v.uniStreams()[0x00]
	switch len(ids) {
	case 0:
		return judged{
			Fail,
			"The server answered the request but opened no control stream; it must open one at the beginning of the connection and send SETTINGS first on it.",
			nil,
			0,
		}
	case 1:
	default:
		return judged{Fail, fmt.Sprintf("The server opened %d control streams (streams %v); only one is permitted.", len(ids), ids), v.carried[ids[1]][:1], 0}
	}
	fs, _ := h3Frames(v.uniPayload(ids[0]))
	ps := v.carried[ids[0]]
	if len(fs) == 0 {
		return judged{Inconclusive, "The server's control stream carried no complete frame yet.", ps, 0}
	}
	if fs[0].typ != 0x04 {
		return judged{Fail, fmt.Sprintf("The first frame on the server's control stream is %v, not SETTINGS.", h3.FrameType(fs[0].typ)), ps[:1], 0}
	}
	for _, f := range fs[1:] {
		if f.typ == 0x04 {
			return judged{Fail, "The server sent a second SETTINGS frame on its control stream.", ps, 0}
		}
	}
	return judged{Pass, "The server opened one control stream and sent SETTINGS first on it, once.", ps[:1], 0}
}

// judgeResponseEnds checks that the final response to stream id ends the
// stream (requirement 1).
func judgeResponseEnds(v *h3Seen, id uint64) judged {
	r := v.response(id)
	ps := v.carried[id]
	switch {
	case r.headers && r.complete:
		return judged{Pass, fmt.Sprintf("The server answered with HEADERS (status %d), %d bytes of DATA, and ended the stream.", r.status, r.dataBytes), ps, 1}
	case r.status >= 200 && v.close == nil:
		if _, _, reset := v.streamError(id); !reset {
			return judged{
				Fail,
				fmt.Sprintf(
					"The server sent a final response (status %d, %d bytes of DATA so far) but never ended the stream within the window.",
					r.status,
					r.dataBytes,
				),
				ps,
				1,
			}
		}
	}
	return judged{Inconclusive, "The server did not answer the request with a complete response.", ps, 1}
}

// reservedID returns a random reserved value 0x1f × N + 0x21 that fits in
// a four-byte varint.
func reservedID() uint64 { return 0x1f*rand.Uint64N(1<<24) + 0x21 }

// malformedDone is an h3Await condition for a malformed request: a
// stream error or a complete response.
func malformedDone(id uint64) func(v *h3Seen) bool {
	return func(v *h3Seen) bool {
		if _, _, ok := v.streamError(id); ok {
			return true
		}
		s := v.streams[id]
		return s != nil && s.Complete()
	}
}

type malformedVariant struct {
	name, what string
	edit       func([]hfield) []hfield
}

// registerMalformed registers a scenario that sends malformed GETs, one
// connection per variant.
func registerMalformed(id, title string, req Requirement, vs ...malformedVariant) {
	reqs := []Requirement{req}
	if req.Keyword == Descriptive {
		reqs = []Requirement{
			rfc9114("4.1.2", Must, "Malformed requests or responses that are detected MUST be treated as a stream error of type H3_MESSAGE_ERROR."),
			req,
		}
	} else {
		reqs = append(reqs, rfc9114("4.1.2", Must, "Malformed requests or responses that are detected MUST be treated as a stream error of type H3_MESSAGE_ERROR."))
	}
	Register(&Scenario{
		ID: id, Title: title, Family: "K", Needs: []string{NeedH3}, Requirements: reqs,
		Run: func(ctx context.Context, t *T) {
			for _, mv := range vs {
				c := t.h3Start(ctx, mv.name, nil, false)
				fs := mv.edit(requestFields(t.profile, "GET", t.profile.SmallPath))
				sid := uint64(t.openRequest(ctx, c, headersFrameOf(literalSection(fs)), true).ID())
				v := t.h3Await(ctx, c, t.Settle(), malformedDone(sid))
				name := "malformed"
				if len(vs) > 1 {
					name = mv.name
				}
				t.report(name, judgeMalformed(v, sid, mv.what))
			}
		},
	})
}

// judgeUniLimit checks the server's unidirectional stream limits.
func judgeUniLimit(streams, credit uint64) []namedJudgement {
	var out []namedJudgement
	if streams < 3 {
		out = append(
			out,
			namedJudgement{
				"streams",
				judged{
					Fail,
					fmt.Sprintf("The server's initial_max_streams_uni is %d: the client cannot open its control, QPACK encoder and decoder streams.", streams),
					nil,
					0,
				},
			},
		)
	} else {
		out = append(out, namedJudgement{"streams", judged{Pass, fmt.Sprintf("The server's initial_max_streams_uni is %d.", streams), nil, 0}})
	}
	if credit < 1024 {
		out = append(
			out,
			namedJudgement{"credit", judged{Warn, fmt.Sprintf("The server's initial_max_stream_data_uni is %d bytes, below 1,024.", credit), nil, 1}},
		)
	} else {
		out = append(out, namedJudgement{"credit", judged{Pass, fmt.Sprintf("The server's initial_max_stream_data_uni is %d bytes.", credit), nil, 1}})
	}
	return out
}

// greaseSetting returns the first reserved identifier among settings.
func greaseSetting(settings []h3.Setting) (uint64, bool) {
	for _, s := range settings {
		if isReservedH3(s.ID) {
			return s.ID, true
		}
	}
	return 0, false
}

// judgeNoPush checks that the server neither promised a push on the
// request streams ids nor opened a push stream (requirement 0; the
// tester never sent MAX_PUSH_ID).
func judgeNoPush(v *h3Seen, ids []uint64) judged {
	if push := v.uniStreams()[0x01]; len(push) > 0 {
		return judged{Fail, fmt.Sprintf("The server opened push stream %d although the tester never sent MAX_PUSH_ID.", push[0]), v.carried[push[0]][:1], 0}
	}
	answered := 0
	for _, id := range ids {
		r := v.response(id)
		if slices.Contains(r.frames, 0x05) {
			return judged{
				Fail,
				fmt.Sprintf("The server sent PUSH_PROMISE on request stream %d although the tester never sent MAX_PUSH_ID.", id),
				v.carried[id],
				0,
			}
		}
		if r.headers {
			answered++
		}
	}
	if answered == 0 {
		return judged{Inconclusive, "The server answered none of the requests, so there was nothing it could have pushed with.", nil, 0}
	}
	return judged{Pass, fmt.Sprintf("The server answered %d request(s) without PUSH_PROMISE or push streams.", answered), nil, 0}
}

// isReservedH3 reports the reserved values of HTTP/3's extensible
// spaces, 0x1f × N + 0x21 (RFC 9114 §6.2.3, §7.2.4.1, §7.2.8, §8.1).
func isReservedH3(v uint64) bool { return v >= 0x21 && (v-0x21)%0x1f == 0 }

func init() {
	goaway := rawquic.H3Frame(0x07, wire.AppendVarint(nil, 0))
	registerH3(
		"h3-missing-settings",
		"Control stream starts without SETTINGS",
		rfc9114(
			"6.2.1",
			Must,
			"If the first frame of the control stream is any other frame type, this MUST be treated as a connection error of type H3_MISSING_SETTINGS.",
		),
		h3.ErrCodeMissingSettings,
		"a control stream whose first frame is GOAWAY",
		controlVariant("goaway-first", goaway),
	)
	registerH3(
		"h3-second-settings",
		"Second SETTINGS frame",
		rfc9114(
			"7.2.4",
			Must,
			"If an endpoint receives a second SETTINGS frame on the control stream, the endpoint MUST respond with a connection error of type H3_FRAME_UNEXPECTED.",
		),
		h3.ErrCodeFrameUnexpected,
		"a second SETTINGS frame on the control stream",
		controlVariant("two-settings", cat(settingsFrame(), settingsFrame())),
	)
	registerH3(
		"h3-second-control-stream",
		"Second control stream",
		rfc9114(
			"6.2.1",
			Must,
			"Only one control stream per peer is permitted; receipt of a second stream claiming to be a control stream MUST be treated as a connection error of type H3_STREAM_CREATION_ERROR.",
		),
		h3.ErrCodeStreamCreationError,
		"a second control stream",
		variant{name: "two-control-streams", trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
		}},
	)
	registerH3(
		"h3-control-stream-closed",
		"Client control stream closed",
		rfc9114(
			"6.2.1",
			Must,
			"If either control stream is closed at any point, this MUST be treated as a connection error of type H3_CLOSED_CRITICAL_STREAM.",
		),
		h3.ErrCodeClosedCriticalStream,
		"the end of the client's control stream",
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
		}},
	)
	registerH3(
		"h3-data-on-control-stream",
		"DATA frame on the control stream",
		rfc9114(
			"7.2.1",
			Must,
			"If a DATA frame is received on a control stream, the recipient MUST respond with a connection error of type H3_FRAME_UNEXPECTED.",
		),
		h3.ErrCodeFrameUnexpected,
		"a DATA frame on the control stream",
		controlVariant("data", cat(settingsFrame(), rawquic.H3Frame(0x00, []byte("x")))),
	)
	var settingsVariants, frameVariants []variant
	for _, id := range []uint64{0x02, 0x03, 0x04, 0x05} {
		settingsVariants = append(settingsVariants, controlVariant(fmt.Sprintf("setting 0x%02x", id), settingsFrame(id, 0)))
	}
	for _, ft := range []uint64{0x06, 0x02, 0x08, 0x09} {
		frameVariants = append(frameVariants, controlVariant(fmt.Sprintf("frame 0x%02x", ft), cat(settingsFrame(), rawquic.H3Frame(ft, make([]byte, 8)))))
	}
	registerH3(
		"h3-http2-settings-rejected",
		"HTTP/2-only setting identifiers",
		rfc9114(
			"7.2.4.1",
			Must,
			"These reserved settings MUST NOT be sent, and their receipt MUST be treated as a connection error of type H3_SETTINGS_ERROR.",
		),
		h3.ErrCodeSettingsError,
		"an HTTP/2-only setting in SETTINGS",
		settingsVariants...)
	registerH3("h3-http2-frame-rejected", "HTTP/2-only frame types",
		rfc9114("7.2.8", Must, "These frame types MUST NOT be sent, and their receipt MUST be treated as a connection error of type H3_FRAME_UNEXPECTED."),
		h3.ErrCodeFrameUnexpected, "an HTTP/2-only frame type on the control stream", frameVariants...)
	registerH3(
		"h3-push-stream-from-client",
		"Push stream opened by a client",
		rfc9114(
			"6.2.2",
			Must,
			"Only servers can push; if a server receives a client-initiated push stream, this MUST be treated as a connection error of type H3_STREAM_CREATION_ERROR.",
		),
		h3.ErrCodeStreamCreationError,
		"a client-initiated push stream",
		variant{name: "push", trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
			uniStream(ctx, t, c, []byte{0x01, 0x00}, false)
		}},
	)
	registerH3(
		"h3-max-push-id-decrease",
		"MAX_PUSH_ID decreases",
		rfc9114(
			"7.2.7",
			Must,
			"receipt of a MAX_PUSH_ID frame that contains a smaller value than previously received MUST be treated as a connection error of type H3_ID_ERROR.",
		),
		h3.ErrCodeIDError,
		"MAX_PUSH_ID 10 followed by MAX_PUSH_ID 5",
		controlVariant("decrease", cat(settingsFrame(), rawquic.H3Frame(0x0d, []byte{10}), rawquic.H3Frame(0x0d, []byte{5}))),
	)
	registerH3(
		"h3-cancel-push-unknown",
		"CANCEL_PUSH for a push never promised",
		rfc9114(
			"7.2.3",
			Must,
			"a CANCEL_PUSH frame for a push ID that has not yet been mentioned by a PUSH_PROMISE frame, this MUST be treated as a connection error of type H3_ID_ERROR.",
		),
		h3.ErrCodeIDError,
		"CANCEL_PUSH for push ID 3 after MAX_PUSH_ID 10",
		controlVariant("cancel", cat(settingsFrame(), rawquic.H3Frame(0x0d, []byte{10}), rawquic.H3Frame(0x03, []byte{3}))),
	)
	registerH3(
		"h3-frame-extra-bytes",
		"Frame payload longer than its fields",
		rfc9114(
			"7.1",
			Must,
			"A frame payload that contains additional bytes after the identified fields … MUST be treated as a connection error of type H3_FRAME_ERROR.",
		),
		h3.ErrCodeFrameError,
		"a MAX_PUSH_ID frame with two bytes after its push ID",
		controlVariant("extra", cat(settingsFrame(), rawquic.H3Frame(0x0d, []byte{1, 0, 0}))),
	)
	withControl := func(name string, req []byte) variant {
		return variant{name: name, trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
			bidiStream(ctx, t, c, req)
		}}
	}
	registerH3(
		"h3-settings-on-request-stream",
		"SETTINGS on a request stream",
		rfc9114(
			"7.2.4",
			Must,
			"If an endpoint receives a SETTINGS frame on a different stream, the endpoint MUST respond with a connection error of type H3_FRAME_UNEXPECTED.",
		),
		h3.ErrCodeFrameUnexpected,
		"a SETTINGS frame on a request stream",
		withControl("settings", settingsFrame()),
	)
	registerH3("h3-frame-sequence-invalid", "DATA before HEADERS",
		rfc9114("4.1", Must, "Receipt of an invalid sequence of frames MUST be treated as a connection error of type H3_FRAME_UNEXPECTED."),
		h3.ErrCodeFrameUnexpected, "a DATA frame before any HEADERS on a request stream", withControl("data-first", rawquic.H3Frame(0x00, []byte("hello"))))
	registerH3("h3-push-promise-from-client", "PUSH_PROMISE from a client",
		rfc9114("7.2.5", Must, "A server MUST treat the receipt of a PUSH_PROMISE frame as a connection error of type H3_FRAME_UNEXPECTED."),
		h3.ErrCodeFrameUnexpected, "a PUSH_PROMISE frame on a request stream", withControl("push-promise", rawquic.H3Frame(0x05, []byte{0, 0, 0})))
	registerH3(
		"h3-frame-truncated",
		"Truncated HEADERS frame",
		rfc9114(
			"7.1",
			Must,
			"When a stream terminates cleanly, if the last frame on the stream was truncated, this MUST be treated as a connection error of type H3_FRAME_ERROR.",
		),
		h3.ErrCodeFrameError,
		"a HEADERS frame declaring 50 bytes but ending after 20",
		withControl("truncated", cat([]byte{0x01, 50}, make([]byte, 20))),
	)
	registerH3(
		"qpack-second-encoder-stream",
		"Second QPACK encoder stream",
		rfc(
			"RFC 9204",
			"4.2",
			Must,
			"Receipt of a second instance of either stream type MUST be treated as a connection error of type H3_STREAM_CREATION_ERROR.",
		),
		h3.ErrCodeStreamCreationError,
		"two QPACK encoder streams",
		variant{name: "two-encoders", trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
			uniStream(ctx, t, c, []byte{0x02}, false)
			uniStream(ctx, t, c, []byte{0x02}, false)
		}},
	)
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
	registerH3(
		"qpack-insert-count-increment-zero",
		"Insert Count Increment of zero",
		rfc(
			"RFC 9204",
			"4.4.3",
			Must,
			"An encoder that receives an Increment field equal to zero … MUST treat this as a connection error of type QPACK_DECODER_STREAM_ERROR.",
		),
		h3.ErrCodeQPACKDecoderStream,
		"an Insert Count Increment of 0 on the decoder stream",
		variant{name: "increment-zero", trigger: func(ctx context.Context, t *T, c *Conn) {
			uniStream(ctx, t, c, cat([]byte{0x00}, settingsFrame()), false)
			uniStream(ctx, t, c, []byte{0x03, 0x00}, false)
		}},
	)
	registerH3(
		"qpack-capacity-exceeded",
		"Dynamic table capacity above the server's maximum",
		rfc(
			"RFC 9204",
			"4.3.1",
			Must,
			"The decoder MUST treat a new dynamic table capacity value that exceeds this limit as a connection error of type QPACK_ENCODER_STREAM_ERROR.",
		),
		h3.ErrCodeQPACKEncoderStream,
		"Set Dynamic Table Capacity one above the server's SETTINGS_QPACK_MAX_TABLE_CAPACITY",
		variant{name: "capacity", trigger: func(ctx context.Context, t *T, c *Conn) {
			st := t.serverSettings(ctx, c)
			capacity, _ := st.Get(h3.SettingQPACKMaxTableCapacity)
			t.Fact("qpack.capacity", capacity)
			// Set Dynamic Table Capacity: 001 and a 5-bit prefix integer.
			uniStream(ctx, t, c, cat([]byte{0x02}, qpackInt(0x20, 5, capacity+1)), false)
		}},
	)

	Register(&Scenario{
		ID: "h3-request-basic", Title: "A plain HTTP/3 request", Family: "K", Needs: []string{NeedH3},
		Requirements: []Requirement{
			rfc9114(
				"6.2.1",
				Must,
				"Each side MUST initiate a single control stream at the beginning of the connection and send its SETTINGS frame as the first frame on this stream.",
			),
			rfc9114("4.1", Must, "After sending a final response, the server MUST close the stream for sending."),
		},
		Run: func(ctx context.Context, t *T) {
			c := t.h3Start(ctx, "request", nil, true)
			id := t.get(ctx, c, t.profile.SmallPath)
			v := t.h3Answers(ctx, c, t.Settle()+2*time.Second, completed(id))
			var types []string
			for typ, ids := range v.uniStreams() {
				types = append(types, fmt.Sprintf("0x%x×%d", typ, len(ids)))
			}
			slices.Sort(types)
			t.Fact("h3.server-uni-streams", types)
			if ctrl, _, ok := v.streamOfType(0x00); ok {
				if f, _, err := h3.ParseFrame(ctrl); err == nil {
					if st, ok := f.(*h3.SettingsFrame); ok {
						t.Fact("h3.settings", st.Settings)
					}
				}
			}
			if r := v.response(id); r.status != 0 {
				t.Fact("h3.status", r.status)
			}
			resp := judgeResponseEnds(v, id)
			if resp.v == Pass || resp.v == Fail {
				t.report("control-stream", judgeControlStream(v))
			} else if ids := v.uniStreams()[0x00]; len(ids) > 0 {
				t.report("control-stream", judgeControlStream(v))
			}
			t.report("response", resp)
		},
	})
	Register(&Scenario{
		ID: "h3-server-uni-limit", Title: "Room for the client's control and QPACK streams", Family: "K", Needs: []string{NeedH3}, Passive: true,
		Requirements: []Requirement{
			rfc9114(
				"6.2",
				Must,
				"the transport parameters sent by both clients and servers MUST allow the peer to create at least three unidirectional streams.",
			),
			rfc9114("6.2", Should, "These transport parameters SHOULD also provide at least 1,024 bytes of flow-control credit to each unidirectional stream."),
		},
		Run: func(ctx context.Context, t *T) {
			c := t.mustDial(ctx, DialOptions{Label: "h3"})
			tp := t.serverTP(c)
			t.Fact("tp.initial_max_streams_uni", tp.InitialMaxStreamsUni)
			t.Fact("tp.initial_max_stream_data_uni", tp.InitialMaxStreamDataUni)
			for _, j := range judgeUniLimit(tp.InitialMaxStreamsUni, tp.InitialMaxStreamDataUni) {
				t.report(j.name, j.judged)
			}
		},
	})
	Register(&Scenario{
		ID: "h3-server-greases-settings", Title: "Reserved setting in the server's SETTINGS", Family: "K", Needs: []string{NeedH3}, Passive: true,
		Requirements: []Requirement{
			rfc9114("7.2.4.1", Should, "Endpoints SHOULD include at least one such setting in their SETTINGS frame."),
		},
		Run: func(ctx context.Context, t *T) {
			for i := 1; i <= 3; i++ {
				c := t.mustDial(ctx, DialOptions{Label: fmt.Sprintf("connection %d", i)})
				st := t.serverSettings(ctx, c)
				if id, ok := greaseSetting(st.Settings); ok {
					t.Pass(
						"reserved-setting",
						t.sc.Requirements[0],
						fmt.Sprintf("The server's SETTINGS on connection %d carry the reserved identifier 0x%x.", i, id),
					)
					return
				}
				c.Close(0, "")
			}
			t.Warn(
				"reserved-setting",
				t.sc.Requirements[0],
				"None of the server's SETTINGS frames on three connections carried a reserved identifier (0x1f × N + 0x21).",
			)
		},
	})
	Register(&Scenario{
		ID: "h3-reserved-frames-ignored", Title: "Reserved frame types are ignored", Family: "K", Needs: []string{NeedH3},
		Requirements: []Requirement{
			rfc9114("7.2.8", MustNot, "Endpoints MUST NOT consider these frames to have any meaning upon receipt."),
			rfc9114("9", Must, "Implementations MUST ignore unknown or unsupported values in all extensible protocol elements."),
		},
		Run: func(ctx context.Context, t *T) {
			r13 := rawquic.H3Frame(0x21, []byte("quiver-grease"))
			r0 := rawquic.H3Frame(0x40, nil)
			c := t.mustDial(ctx, DialOptions{Label: "reserved-frames"})
			t.openUni(ctx, c, cat([]byte{0x00}, settingsFrame(), r13))
			req := cat(r13, r0, headersFrameOf(literalSection(requestFields(t.profile, "GET", t.profile.SmallPath))), r13, r0)
			id := uint64(t.openRequest(ctx, c, req, true).ID())
			t.goesOn(ctx, c, id, "reserved frames (types 0x21 and 0x40) on its control stream and around the request's HEADERS")
		},
	})
	Register(&Scenario{
		ID: "h3-reserved-stream-ignored", Title: "Reserved and reset unidirectional streams are ignored", Family: "K", Needs: []string{NeedH3},
		Requirements: []Requirement{
			rfc9114("6.2", MustNot, "The recipient MUST NOT consider unknown stream types to be a connection error of any kind."),
			rfc9114(
				"6.2",
				Must,
				"A receiver MUST tolerate unidirectional streams being closed or reset prior to the reception of the unidirectional stream header.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			c := t.mustDial(ctx, DialOptions{Label: "reserved-stream"})
			t.openUni(ctx, c, cat([]byte{0x00}, settingsFrame()))
			junk := make([]byte, 300)
			for i := range junk {
				junk[i] = byte(rand.Uint32())
			}
			t.openUni(ctx, c, cat(wire.AppendVarint(nil, 0x21), junk))
			reset := t.openUni(ctx, c, nil)
			reset.Reset(uint64(h3.ErrCodeRequestCancelled))
			id := t.get(ctx, c, t.profile.SmallPath)
			t.goesOn(ctx, c, id, "a unidirectional stream of reserved type 0x21 with 300 bytes of junk and a unidirectional stream reset before its type")
			// The second half of the probe is the reset itself: make sure
			// it went out before anything is concluded from it.
			for _, fa := range framesOf[*wire.ResetStreamFrame](t.rec.snapshot(), c.ID(), 0, true) {
				if fa.f.(*wire.ResetStreamFrame).StreamID == uint64(reset.ID()) {
					return
				}
			}
			t.Errorf("the RESET_STREAM for unidirectional stream %d, reset before its type, was never sent", reset.ID())
		},
	})
	Register(&Scenario{
		ID: "h3-reserved-settings-ignored", Title: "Reserved and unknown settings are ignored", Family: "K", Needs: []string{NeedH3},
		Requirements: []Requirement{
			rfc9114("7.2.4", Must, "An implementation MUST ignore any parameter with an identifier it does not understand."),
		},
		Run: func(ctx context.Context, t *T) {
			a, b := reservedID(), reservedID()
			for b == a {
				b = reservedID()
			}
			// 0x4242 is neither assigned nor reserved (0x4242 − 0x21 is
			// not a multiple of 0x1f).
			c := t.h3Start(ctx, "reserved-settings", []uint64{a, rand.Uint64N(1 << 30), b, 0, 0x4242, 7}, true)
			id := t.get(ctx, c, t.profile.SmallPath)
			t.goesOn(ctx, c, id, fmt.Sprintf("SETTINGS with the reserved identifiers 0x%x and 0x%x and the unassigned identifier 0x4242", a, b))
		},
	})
	registerMalformed("h3-malformed-uppercase-field", "Uppercase field name",
		rfc9114("4.2", Must, "A request or response containing uppercase characters in field names MUST be treated as malformed."),
		malformedVariant{"uppercase", "a request with the field name \"X-Quiver\"", func(fs []hfield) []hfield {
			return append(fs, hfield{"X-Quiver", "1"})
		}})
	registerMalformed(
		"h3-malformed-pseudo-after-regular",
		"Pseudo-header after a regular field",
		rfc9114(
			"4.3",
			Must,
			"Any request or response that contains a pseudo-header field that appears in a header section after a regular header field MUST be treated as malformed.",
		),
		malformedVariant{"pseudo-after-regular", "a request whose :path comes after a regular field", func(fs []hfield) []hfield {
			return append(fs[:3:3], hfield{"x-quiver", "1"}, fs[3])
		}},
	)
	registerMalformed("h3-malformed-connection-header", "Connection-specific field",
		rfc9114("4.2", Must, "any message containing connection-specific fields MUST be treated as malformed."),
		malformedVariant{"connection", "a request carrying \"connection: keep-alive\"", func(fs []hfield) []hfield {
			return append(fs, hfield{"connection", "keep-alive"})
		}},
		malformedVariant{"transfer-encoding", "a request carrying \"transfer-encoding: chunked\"", func(fs []hfield) []hfield {
			return append(fs, hfield{"transfer-encoding", "chunked"})
		}})
	registerMalformed(
		"h3-malformed-missing-path",
		"Request without :path",
		rfc9114(
			"4.3.1",
			Descriptive,
			"An HTTP request that omits mandatory pseudo-header fields or contains invalid values for those pseudo-header fields is malformed.",
		),
		malformedVariant{"missing-path", "a GET without :path", func(fs []hfield) []hfield {
			return fs[:3]
		}},
	)
	Register(&Scenario{
		ID: "h3-content-length-mismatch", Title: "Content-Length disagrees with the DATA frames", Family: "K", Needs: []string{NeedH3},
		Requirements: []Requirement{
			rfc9114("4.1.2", Must, "Malformed requests or responses that are detected MUST be treated as a stream error of type H3_MESSAGE_ERROR."),
			rfc9114(
				"4.1.2",
				Descriptive,
				"is malformed if the value of the Content-Length header field does not equal the sum of the DATA frame lengths received.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			c := t.h3Start(ctx, "content-length", nil, false)
			fs := append(requestFields(t.profile, "POST", t.profile.SmallPath), hfield{"content-length", "10"})
			s := t.openRequest(ctx, c, cat(headersFrameOf(literalSection(fs)), rawquic.H3Frame(0x00, []byte("12345"))), true)
			id := uint64(s.ID())
			v := t.h3Await(ctx, c, t.Settle(), malformedDone(id))
			t.report("content-length", judgeContentLength(v, id, "a POST with content-length 10 and 5 bytes of DATA"))
		},
	})
	Register(&Scenario{
		ID: "h3-no-push-without-max-push-id", Title: "No push without MAX_PUSH_ID", Family: "K", Needs: []string{NeedH3}, Passive: true,
		Requirements: []Requirement{
			rfc9114("7.2.5", MustNot, "A server MUST NOT use a push ID that is larger than the client has provided in a MAX_PUSH_ID frame"),
			rfc9114(
				"4.6",
				Must,
				"A client MUST treat receipt of a push stream as a connection error of type H3_ID_ERROR when no MAX_PUSH_ID frame has been sent",
			),
		},
		Run: func(ctx context.Context, t *T) {
			c := t.h3Start(ctx, "no-max-push-id", nil, true)
			ids := []uint64{t.get(ctx, c, t.profile.SmallPath), t.get(ctx, c, "/")}
			v := t.h3Answers(ctx, c, t.Settle()+time.Second, completed(ids...))
			t.report("no-push", judgeNoPush(v, ids))
		},
	})
	Register(&Scenario{
		ID: "h3-unknown-error-code", Title: "Unknown error code on a cancelled request", Family: "K", Needs: []string{NeedH3},
		Requirements: []Requirement{
			rfc9114(
				"8",
				Must,
				"use of an error code in an unexpected context or receipt of an unknown error code MUST be treated as equivalent to H3_NO_ERROR.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			c := t.h3Start(ctx, "unknown-error-code", nil, true)
			code := reservedID()
			s := t.openRequest(ctx, c, headersFrameOf(literalSection(requestFields(t.profile, "GET", t.profile.SmallPath))), false)
			s.Reset(code)
			s.StopSending(code)
			id := t.get(ctx, c, t.profile.SmallPath)
			t.goesOn(ctx, c, id, fmt.Sprintf("RESET_STREAM and STOP_SENDING with the reserved error code 0x%x on an earlier request", code))
			ps := t.rec.snapshot()
			if len(framesOf[*wire.ResetStreamFrame](ps, c.ID(), 0, true)) == 0 || len(framesOf[*wire.StopSendingFrame](ps, c.ID(), 0, true)) == 0 {
				t.Errorf("the RESET_STREAM and STOP_SENDING carrying code 0x%x were not both sent", code)
			}
		},
	})
}
