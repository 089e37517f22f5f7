package conformance

import (
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family D: streams and flow control (catalogue §3.D). Stream IDs are
// chosen so that the tester's engine has not used them: the scenarios
// inject raw frames and never open streams through the engine first.

var reqStreamStateSTREAM = rfc9000("19.8", Must, "MUST terminate the connection with error STREAM_STATE_ERROR if it receives a STREAM frame for a locally initiated stream that has not yet been created, or for a send-only stream.")

// clientBidi and clientUni return the ID of the n-th client-initiated
// stream of each type (RFC 9000 §2.1).
func clientBidi(n uint64) uint64 { return 4 * n }
func clientUni(n uint64) uint64  { return 4*n + 2 }

func init() {
	stateErr := transportCodes(wire.StreamStateError)
	registerProvoked(provokedSpec{
		id: "stream-limit-exceeded-bidi", title: "Client opens one bidirectional stream too many", family: "D", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("4.6", Must, "An endpoint that receives a frame with a stream ID exceeding the limit it has sent MUST treat this as a connection error of type STREAM_LIMIT_ERROR")},
		codes:    transportCodes(wire.StreamLimitError),
		describe: "a STREAM frame on the first bidirectional stream beyond initial_max_streams_bidi",
		frames: func(t *T, c *Conn) []wire.Frame {
			tp := t.serverTP(c)
			return []wire.Frame{&wire.StreamFrame{StreamID: clientBidi(tp.InitialMaxStreamsBidi), Data: []byte("GET /\r\n")}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-limit-exceeded-uni", title: "Client opens one unidirectional stream too many", family: "D", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("19.11", Must, "An endpoint MUST terminate a connection with an error of type STREAM_LIMIT_ERROR if a peer opens more streams than was permitted.")},
		codes:    transportCodes(wire.StreamLimitError),
		describe: "a STREAM frame on the first unidirectional stream beyond initial_max_streams_uni",
		frames: func(t *T, c *Conn) []wire.Frame {
			tp := t.serverTP(c)
			return []wire.Frame{&wire.StreamFrame{StreamID: clientUni(tp.InitialMaxStreamsUni), Data: []byte{0x21}}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-stop-sending-receive-only", title: "STOP_SENDING for a client unidirectional stream", family: "D", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("19.5", Must, "An endpoint that receives a STOP_SENDING frame for a receive-only stream MUST terminate the connection with error STREAM_STATE_ERROR.")},
		codes:    stateErr,
		describe: "STOP_SENDING for client unidirectional stream 2, which is receive-only for the server",
		frames: func(t *T, c *Conn) []wire.Frame {
			if t.serverTP(c).InitialMaxStreamsUni == 0 {
				t.Unsupported("The server allows no client unidirectional stream (initial_max_streams_uni = 0).")
			}
			// 0x21 is a reserved HTTP/3 stream type, ignored by h3 servers.
			return []wire.Frame{&wire.StreamFrame{StreamID: clientUni(0), Data: []byte{0x21}}, &wire.StopSendingFrame{StreamID: clientUni(0), ErrorCode: 0x21}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-stop-sending-unopened-local", title: "STOP_SENDING for an unopened server stream", family: "D", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("19.5", Must, "Receiving a STOP_SENDING frame for a locally initiated stream that has not yet been created MUST be treated as a connection error of type STREAM_STATE_ERROR.")},
		codes:    stateErr,
		describe: "STOP_SENDING for server bidirectional stream 1, which the server never opened",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.StopSendingFrame{StreamID: 1, ErrorCode: 0}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-data-on-send-only", title: "STREAM frame on a server-initiated stream", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{reqStreamStateSTREAM}, codes: stateErr,
		describe: "a STREAM frame for a stream the server initiated",
		variants: []variant{
			injectVariant("unopened server bidi stream 1", func(t *T, c *Conn) []wire.Frame {
				return []wire.Frame{&wire.StreamFrame{StreamID: 1, Data: []byte("x")}}
			}),
			injectVariant("server unidirectional stream 3", func(t *T, c *Conn) []wire.Frame {
				return []wire.Frame{&wire.StreamFrame{StreamID: 3, Data: []byte("x")}}
			}),
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-max-stream-data-receive-only", title: "MAX_STREAM_DATA for a receive-only or unopened stream", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000("19.10", Must, "An endpoint that receives a MAX_STREAM_DATA frame for a receive-only stream MUST terminate the connection with error STREAM_STATE_ERROR."),
			rfc9000("19.10", Must, "Receiving a MAX_STREAM_DATA frame for a locally initiated stream that has not yet been created MUST be treated as a connection error of type STREAM_STATE_ERROR."),
		},
		codes: stateErr, describe: "MAX_STREAM_DATA for a stream the server cannot send on",
		variants: []variant{
			injectVariant("client uni stream 2", func(t *T, c *Conn) []wire.Frame {
				if t.serverTP(c).InitialMaxStreamsUni == 0 {
					t.Unsupported("The server allows no client unidirectional stream.")
				}
				return []wire.Frame{&wire.StreamFrame{StreamID: clientUni(0), Data: []byte{0x21}}, &wire.MaxStreamDataFrame{StreamID: clientUni(0), Maximum: 1 << 20}}
			}),
			injectVariant("unopened server bidi stream 1", func(t *T, c *Conn) []wire.Frame {
				return []wire.Frame{&wire.MaxStreamDataFrame{StreamID: 1, Maximum: 1 << 20}}
			}),
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-reset-send-only", title: "RESET_STREAM for the server's control stream", family: "D", needs: []string{NeedH3},
		reqs:     []Requirement{rfc9000("19.4", Must, "An endpoint that receives a RESET_STREAM frame for a send-only stream MUST terminate the connection with error STREAM_STATE_ERROR.")},
		codes:    stateErr,
		describe: "RESET_STREAM for server unidirectional stream 3 (its HTTP/3 control stream)",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.ResetStreamFrame{StreamID: 3, ErrorCode: 0x100, FinalSize: 0}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-data-blocked-send-only", title: "STREAM_DATA_BLOCKED for the server's control stream", family: "D", needs: []string{NeedH3},
		reqs:     []Requirement{rfc9000("19.13", Must, "An endpoint that receives a STREAM_DATA_BLOCKED frame for a send-only stream MUST terminate the connection with error STREAM_STATE_ERROR.")},
		codes:    stateErr,
		describe: "STREAM_DATA_BLOCKED for server unidirectional stream 3",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.StreamDataBlockedFrame{StreamID: 3, Limit: 0}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-offset-max", title: "STREAM frame ending beyond 2^62-1", family: "D", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("19.8", Must, "Receipt of a frame that exceeds this limit MUST be treated as a connection error of type FRAME_ENCODING_ERROR or FLOW_CONTROL_ERROR.")},
		codes:    transportCodes(wire.FrameEncodingError, wire.FlowControlError),
		describe: "a STREAM frame at offset 2^62-1 with one byte",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.StreamFrame{StreamID: 0, Offset: wire.MaxVarint, Data: []byte("x")}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-max-streams-over-limit", title: "MAX_STREAMS above 2^60", family: "D", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("19.11", Must, "Receipt of a frame that permits opening of a stream larger than this limit MUST be treated as a connection error of type FRAME_ENCODING_ERROR.")},
		codes:    transportCodes(wire.FrameEncodingError),
		describe: "a MAX_STREAMS (bidirectional) frame of 2^60+1",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.MaxStreamsFrame{Bidi: true, Maximum: wire.MaxStreams + 1}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-streams-blocked-over-limit", title: "STREAMS_BLOCKED above 2^60", family: "D", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("19.14", Must, "Receipt of a frame that encodes a larger stream ID MUST be treated as a connection error of type STREAM_LIMIT_ERROR or FRAME_ENCODING_ERROR.")},
		codes:    transportCodes(wire.StreamLimitError, wire.FrameEncodingError),
		describe: "a STREAMS_BLOCKED (bidirectional) frame of 2^60+1",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.StreamsBlockedFrame{Bidi: true, Limit: wire.MaxStreams + 1}}
		},
	})
	registerProvoked(provokedSpec{
		id: "fc-stream-violation", title: "One byte beyond the stream flow-control limit", family: "D", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("4.1", Must, "A receiver MUST close the connection with an error of type FLOW_CONTROL_ERROR if the sender violates the advertised connection or stream data limits")},
		codes:    transportCodes(wire.FlowControlError),
		describe: "a STREAM frame whose last byte lies at initial_max_stream_data_bidi_remote",
		frames: func(t *T, c *Conn) []wire.Frame {
			tp := t.serverTP(c)
			return []wire.Frame{&wire.StreamFrame{StreamID: 0, Offset: tp.InitialMaxStreamDataBidiRemote, Data: []byte("x")}}
		},
	})
	registerProvoked(provokedSpec{
		id: "fc-connection-violation", title: "One byte beyond the connection flow-control limit", family: "D", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("19.9", Must, "An endpoint MUST terminate a connection with an error of type FLOW_CONTROL_ERROR if it receives more data than the maximum data value that it has sent.")},
		codes:    transportCodes(wire.FlowControlError),
		describe: "STREAM frames on several streams, each within its limit, that together exceed initial_max_data by one byte",
		frames: func(t *T, c *Conn) []wire.Frame {
			tp := t.serverTP(c)
			per, total := tp.InitialMaxStreamDataBidiRemote, tp.InitialMaxData+1
			if per == 0 {
				t.Inconclusive("The server's stream limit is 0, so no data can be spread over streams.")
			}
			n := (total + per - 1) / per
			if n > tp.InitialMaxStreamsBidi || n > 64 {
				t.Inconclusive("The server's stream limits cannot add up to its connection limit within its stream count.")
			}
			var fs []wire.Frame
			for i := uint64(0); i < n; i++ {
				end := min(per, total-i*per)
				// Flow control counts the highest offset: one byte at
				// end-1 is enough to claim end bytes.
				fs = append(fs, &wire.StreamFrame{StreamID: clientBidi(i), Offset: end - 1, Data: []byte("x")})
			}
			return fs
		},
	})
	registerProvoked(provokedSpec{
		id: "fc-final-size-counted", title: "Reset final sizes count against the connection limit", family: "D", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("4.5", Must, "The receiver MUST use the final size of the stream to account for all bytes sent on the stream in its connection-level flow controller.")},
		codes:    transportCodes(wire.FlowControlError),
		describe: "RESET_STREAM final sizes close to initial_max_data, then data that exceeds the limit only if they are counted",
		frames: func(t *T, c *Conn) []wire.Frame {
			tp := t.serverTP(c)
			per, limit := tp.InitialMaxStreamDataBidiRemote, tp.InitialMaxData
			if per == 0 || limit < 20 {
				t.Inconclusive("The server's limits are too small for the construction.")
			}
			resetTotal := limit - 10
			n := (resetTotal + per - 1) / per
			if n+1 > tp.InitialMaxStreamsBidi || n > 64 {
				t.Inconclusive("The server's stream limits do not allow the construction.")
			}
			var fs []wire.Frame
			for i := uint64(0); i < n; i++ {
				size := min(per, resetTotal-i*per)
				fs = append(fs, &wire.StreamFrame{StreamID: clientBidi(i), Data: []byte("x")}, &wire.ResetStreamFrame{StreamID: clientBidi(i), ErrorCode: 0, FinalSize: size})
			}
			fs = append(fs, &wire.StreamFrame{StreamID: clientBidi(n), Offset: 19, Data: []byte("x")})
			return fs
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-final-size-change", title: "STREAM frame changes the final size", family: "D", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("4.5", Should, "If a RESET_STREAM or STREAM frame is received indicating a change in the final size for the stream, an endpoint SHOULD respond with an error of type FINAL_SIZE_ERROR")},
		codes:    transportCodes(wire.FinalSizeError),
		warnOnly: true,
		describe: "a STREAM frame with FIN at offset n+10 after a FIN at offset n",
		frames: func(t *T, c *Conn) []wire.Frame {
			req := []byte("GET " + t.profile.SmallPath + "\r\n")
			return []wire.Frame{&wire.StreamFrame{StreamID: 0, Data: req, Fin: true}, &wire.StreamFrame{StreamID: 0, Offset: uint64(len(req)), Data: make([]byte, 10), Fin: true}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-reset-final-size-lower", title: "RESET_STREAM below the data already sent", family: "D", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("4.5", Should, "A receiver SHOULD treat receipt of data at or beyond the final size as an error of type FINAL_SIZE_ERROR, even after a stream is closed.")},
		codes:    transportCodes(wire.FinalSizeError),
		warnOnly: true,
		describe: "100 bytes on a stream followed by RESET_STREAM with final size 50",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.StreamFrame{StreamID: 0, Data: make([]byte, 100)}, &wire.ResetStreamFrame{StreamID: 0, ErrorCode: 0, FinalSize: 50}}
		},
	})
}
