package conformance

import (
	"context"
	"fmt"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family M, HTTP/3 client rules (docs/scenarios.md, Client-facing, needs c-h3): the tester's
// HTTP/3 server breaks one rule on an established connection, either on
// its own control stream (bytes appended at the stream's end behind the
// server library's back) or on a stream it opens.

var (
	reqCliH3MaxPushID = rfc(
		"RFC 9114",
		"7.2.7",
		Must,
		"A client MUST treat the receipt of a MAX_PUSH_ID frame as a connection error of type H3_FRAME_UNEXPECTED.",
	)
	reqCliH3GoawayUp = rfc(
		"RFC 9114",
		"5.2",
		Must,
		"Receiving a GOAWAY containing a larger identifier than previously received MUST be treated as a connection error of type H3_ID_ERROR.",
	)
	reqCliH3GoawayType = rfc(
		"RFC 9114",
		"7.2.6",
		Must,
		"A client MUST treat receipt of a GOAWAY frame containing a stream ID of any other type as a connection error of type H3_ID_ERROR.",
	)
	reqCliH3PushNoMax = rfc(
		"RFC 9114",
		"4.6",
		Must,
		"A client MUST treat receipt of a push stream as a connection error of type H3_ID_ERROR when no MAX_PUSH_ID frame has been sent",
	)
	reqCliH3ServerBidi = rfc(
		"RFC 9114",
		"6.1",
		Must,
		"Clients MUST treat receipt of a server-initiated bidirectional stream as a connection error of type H3_STREAM_CREATION_ERROR unless such an extension has been negotiated.",
	)
	h3FrameMaxPushID    = uint64(0x0d)
	h3FrameGoaway       = uint64(0x07)
	h3FrameHeaders      = uint64(0x01)
	h3StreamTypeControl = byte(0x00)
	h3StreamTypePush    = byte(0x01)
)

// controlStreamEnd finds a unidirectional control stream in the frames of
// one direction of the connection (sent by the tester when sent is set):
// its stream ID, the end of the data seen, and that data from offset 0.
func controlStreamEnd(ps []*packet, conn int, sent bool) (id, end uint64, data []byte, ok bool) {
	var buf rawquic.CryptoBuffer
	for _, p := range ps {
		if p.sent != sent || p.conn != conn {
			continue
		}
		for _, f := range p.frames {
			sf, isStream := f.(*wire.StreamFrame)
			if !isStream || sf.StreamID%4 < 2 {
				continue
			}
			if !ok && sf.Offset == 0 && len(sf.Data) > 0 && sf.Data[0] == h3StreamTypeControl {
				id, ok = sf.StreamID, true
			}
			if ok && sf.StreamID == id {
				end = max(end, sf.Offset+uint64(len(sf.Data)))
				buf.Add(sf.Offset, sf.Data)
			}
		}
	}
	return id, end, buf.Contiguous(), ok
}

// h3FrameTypes lists the frame types of an HTTP/3 frame sequence, as far
// as it parses.
func h3FrameTypes(b []byte) []uint64 {
	var out []uint64
	for len(b) > 0 {
		typ, n, err := wire.ConsumeVarint(b)
		if err != nil {
			return out
		}
		l, m, err := wire.ConsumeVarint(b[n:])
		if err != nil || uint64(len(b)-n-m) < l {
			return out
		}
		out = append(out, typ)
		b = b[n+m+int(l):]
	}
	return out
}

// onServerControl appends frames to the tester's server control stream,
// once the server library has sent its start.
func onServerControl(ctx context.Context, t *T, s *testServer, c *Conn, frames ...[]byte) {
	found := func(ps []*packet) bool { _, _, _, ok := controlStreamEnd(ps, s.trace.id, true); return ok }
	if !t.rec.wait(ctx, t.Settle(), found) {
		t.Inconclusive("The tester's HTTP/3 server sent no control stream the tester could find.")
	}
	id, end, _, _ := controlStreamEnd(t.rec.snapshot(), s.trace.id, true)
	c.Inject(spaceApp, &wire.StreamFrame{StreamID: id, Offset: end, Data: cat(frames...)})
}

func registerClientH3() {
	h3Scenario := func(id, title string, reqs []Requirement, code h3.ErrCode, describe string, variants []struct {
		name    string
		trigger func(ctx context.Context, t *T, s *testServer, c *Conn)
	}) {
		registerClient(&Scenario{
			ID: id, Title: title, Requirements: reqs, Needs: []string{NeedCAny, NeedCH3},
			Run: func(ctx context.Context, t *T) {
				for _, v := range variants {
					s, c := t.holdOpen(ctx, serveOptions{Label: v.name})
					if c.ALPN() != h3.ALPNH3 {
						t.Unsupported(fmt.Sprintf("The client negotiated %s, not h3.", c.ALPN()))
					}
					check, desc := "close", describe
					if len(variants) > 1 {
						check, desc = v.name, fmt.Sprintf("%s (%s)", describe, v.name)
					}
					e := Expectation{Check: check, Req: reqs[0], Codes: h3Codes(code), Application: true, Describe: desc}
					t.Provoke(ctx, c, e, func() { v.trigger(ctx, t, s, c) })
				}
			},
		})
	}
	type variantT = struct {
		name    string
		trigger func(ctx context.Context, t *T, s *testServer, c *Conn)
	}
	goaway := func(ids ...uint64) func(ctx context.Context, t *T, s *testServer, c *Conn) {
		return func(ctx context.Context, t *T, s *testServer, c *Conn) {
			var frames [][]byte
			for _, id := range ids {
				frames = append(frames, rawquic.H3Frame(h3FrameGoaway, wire.AppendVarint(nil, id)))
			}
			onServerControl(ctx, t, s, c, frames...)
		}
	}
	h3Scenario("cli-h3-max-push-id-from-server", "MAX_PUSH_ID from the server", []Requirement{reqCliH3MaxPushID}, h3.ErrCodeFrameUnexpected,
		"a MAX_PUSH_ID frame on the server's control stream", []variantT{{"max-push-id", func(ctx context.Context, t *T, s *testServer, c *Conn) {
			onServerControl(ctx, t, s, c, rawquic.H3Frame(h3FrameMaxPushID, wire.AppendVarint(nil, 4)))
		}}})
	h3Scenario("cli-h3-goaway-id-increase", "A GOAWAY whose stream ID grows", []Requirement{reqCliH3GoawayUp}, h3.ErrCodeIDError,
		"GOAWAY with stream ID 8, then GOAWAY with stream ID 12", []variantT{{"goaway 8 then 12", goaway(8, 12)}})
	h3Scenario("cli-h3-goaway-bad-stream-type", "A GOAWAY that names no client bidirectional stream", []Requirement{reqCliH3GoawayType}, h3.ErrCodeIDError,
		"a GOAWAY frame from the server", []variantT{
			{"stream ID 2 (client unidirectional)", goaway(2)},
			{"stream ID 1 (server bidirectional)", goaway(1)},
		})
	h3Scenario(
		"cli-h3-push-without-max-push-id",
		"A push stream without MAX_PUSH_ID",
		[]Requirement{reqCliH3PushNoMax},
		h3.ErrCodeIDError,
		"a push stream (type 0x01, push ID 0) although the client sent no MAX_PUSH_ID",
		[]variantT{{"push", func(ctx context.Context, t *T, s *testServer, c *Conn) {
			if _, _, data, ok := controlStreamEnd(t.rec.snapshot(), s.trace.id, false); ok {
				for _, typ := range h3FrameTypes(data[1:]) {
					if typ == h3FrameMaxPushID {
						t.Inconclusive("The client sent MAX_PUSH_ID, so a push stream is allowed.")
					}
				}
			}
			uniStream(ctx, t, c, []byte{h3StreamTypePush, 0x00}, false)
		}}},
	)
	h3Scenario("cli-h3-server-bidi-stream", "A server-initiated bidirectional stream", []Requirement{reqCliH3ServerBidi}, h3.ErrCodeStreamCreationError,
		"a server-initiated bidirectional stream carrying a HEADERS frame", []variantT{{"server bidi", func(ctx context.Context, t *T, s *testServer, c *Conn) {
			if tp := t.clientTPOf(s); tp.InitialMaxStreamsBidi == 0 {
				t.Unsupported(
					"The client's initial_max_streams_bidi is 0, so the server cannot open a bidirectional stream (covered by cli-stream-limit-violation).",
				)
			}
			bidiStream(ctx, t, c, rawquic.H3Frame(h3FrameHeaders, []byte{0, 0}))
		}}})
}

func init() {
	registerClientH3()
}
