package conformance

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// clientProvokedSpec is a client-facing scenario on the provoked-error
// pattern: the offence goes out on an established connection.
type clientProvokedSpec struct {
	id, title string
	reqs      []Requirement
	codes     []uint64
	describe  string
	// frames builds the offence; it may end the scenario (unsupported,
	// inconclusive) from the client's transport parameters.
	frames func(t *T, s *testServer, c *Conn) []wire.Frame
}

func registerClientProvoked(sp clientProvokedSpec) {
	registerClient(&Scenario{
		ID: sp.id, Title: sp.title, Requirements: sp.reqs,
		Run: func(ctx context.Context, t *T) {
			s, c := t.holdOpen(ctx, serveOptions{Label: sp.id})
			frames := sp.frames(t, s, c)
			e := Expectation{Check: "close", Req: sp.reqs[0], Codes: sp.codes, Describe: sp.describe}
			t.Provoke(ctx, c, e, func() { c.Inject(spaceApp, frames...) })
		},
	})
}

func registerClientFrames() {
	registerClientProvoked(clientProvokedSpec{
		id: "cli-tls-keyupdate-message", title: "A TLS KeyUpdate message from the server", reqs: []Requirement{reqCliKeyUpdateMsg},
		codes: []uint64{0x10a}, describe: "a TLS KeyUpdate message in a 1-RTT CRYPTO frame",
		frames: func(t *T, s *testServer, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.CryptoFrame{Offset: appCryptoEnd(t, s), Data: []byte{tlsKeyUpdate, 0, 0, 1, 0}}}
		},
	})
	registerClientProvoked(clientProvokedSpec{
		id: "cli-post-handshake-certreq", title: "A post-handshake CertificateRequest from the server", reqs: []Requirement{reqCliCertReq},
		codes: transportCodes(wire.ProtocolViolation), describe: "a TLS CertificateRequest in a 1-RTT CRYPTO frame",
		frames: func(t *T, s *testServer, c *Conn) []wire.Frame {
			msg := []byte{tlsCertificateRequest, 0, 0, 12, 1, 0xaa, 0, 8, 0, 0x0d, 0, 4, 0, 2, 4, 3}
			return []wire.Frame{&wire.CryptoFrame{Offset: appCryptoEnd(t, s), Data: msg}}
		},
	})
	registerClientProvoked(clientProvokedSpec{
		id: "cli-stream-limit-violation", title: "A server-initiated stream beyond the client's limit", reqs: []Requirement{reqCliStreamLimit},
		codes: transportCodes(wire.StreamLimitError), describe: "a STREAM frame on a server-initiated bidirectional stream beyond the client's limit",
		frames: func(t *T, s *testServer, c *Conn) []wire.Frame {
			tp := t.clientTPOf(s)
			t.Fact("tp.client.initial_max_streams_bidi", tp.InitialMaxStreamsBidi)
			return []wire.Frame{&wire.StreamFrame{StreamID: 4*tp.InitialMaxStreamsBidi + 1, Data: []byte("x")}}
		},
	})
	registerClientProvoked(clientProvokedSpec{
		id: "cli-stream-flow-violation", title: "Response data beyond the client's stream limit", reqs: []Requirement{reqCliStreamFlow},
		codes: transportCodes(wire.FlowControlError), describe: "response data one byte beyond initial_max_stream_data_bidi_local",
		frames: func(t *T, s *testServer, c *Conn) []wire.Frame {
			tp := t.clientTPOf(s)
			return []wire.Frame{&wire.StreamFrame{StreamID: requestStream(t, s), Offset: tp.InitialMaxStreamDataBidiLocal, Data: []byte("x")}}
		},
	})
	registerClientProvoked(clientProvokedSpec{
		id: "cli-connection-flow-violation", title: "Response data beyond the client's connection limit", reqs: []Requirement{reqCliConnFlow},
		codes: transportCodes(wire.FlowControlError), describe: "response data one byte beyond initial_max_data (within the stream limit)",
		frames: func(t *T, s *testServer, c *Conn) []wire.Frame {
			tp := t.clientTPOf(s)
			if tp.InitialMaxData >= tp.InitialMaxStreamDataBidiLocal {
				t.Inconclusive(fmt.Sprintf("The client asks for one resource and its stream limit (%d) is not above its connection limit (%d), so the connection limit cannot be exceeded alone.", tp.InitialMaxStreamDataBidiLocal, tp.InitialMaxData))
			}
			return []wire.Frame{&wire.StreamFrame{StreamID: requestStream(t, s), Offset: tp.InitialMaxData, Data: []byte("x")}}
		},
	})
	registerClient(&Scenario{
		ID: "cli-stream-data-on-send-only", Title: "STREAM frames on streams the client may only send on or has not opened", Requirements: []Requirement{reqCliSendOnly},
		Run: func(ctx context.Context, t *T) {
			for _, v := range []struct {
				name string
				id   uint64
			}{{"client unidirectional stream 2", 2}, {"unopened client bidirectional stream 200", 200}} {
				_, c := t.holdOpen(ctx, serveOptions{Label: v.name})
				e := Expectation{Check: v.name, Req: reqCliSendOnly, Codes: transportCodes(wire.StreamStateError), Describe: "a STREAM frame on " + v.name}
				t.Provoke(ctx, c, e, func() { c.Inject(spaceApp, &wire.StreamFrame{StreamID: v.id, Data: []byte("x")}) })
			}
		},
	})
	registerClientProvoked(clientProvokedSpec{
		id: "cli-new-token-empty", title: "A NEW_TOKEN frame with an empty token", reqs: []Requirement{reqCliNewTokenEmpty},
		codes: transportCodes(wire.FrameEncodingError), describe: "a NEW_TOKEN frame with an empty token",
		frames: func(t *T, s *testServer, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.NewTokenFrame{Token: nil}}
		},
	})
	registerClientProvoked(clientProvokedSpec{
		id: "cli-datagram-unnegotiated", title: "A DATAGRAM frame the client did not negotiate", reqs: []Requirement{reqCliDgramUnneg},
		codes: transportCodes(wire.ProtocolViolation, wire.FrameEncodingError), describe: "a DATAGRAM frame without max_datagram_frame_size from the client",
		frames: func(t *T, s *testServer, c *Conn) []wire.Frame {
			if tp := t.clientTPOf(s); tp.HasMaxDatagramFrameSize {
				t.Unsupported(fmt.Sprintf("The client advertises max_datagram_frame_size = %d, so DATAGRAM is negotiated.", tp.MaxDatagramFrameSize))
			}
			return []wire.Frame{&wire.DatagramFrame{Data: []byte("quiver")}}
		},
	})
	registerClientProvoked(clientProvokedSpec{
		id: "cli-datagram-too-large", title: "A DATAGRAM frame larger than the client's max_datagram_frame_size", reqs: []Requirement{reqCliDgramTooLarge},
		codes: transportCodes(wire.ProtocolViolation), describe: "a DATAGRAM frame one byte larger than the client's max_datagram_frame_size",
		frames: func(t *T, s *testServer, c *Conn) []wire.Frame {
			tp := t.clientTPOf(s)
			if !tp.HasMaxDatagramFrameSize || tp.MaxDatagramFrameSize == 0 {
				t.Unsupported("The client does not advertise max_datagram_frame_size.")
			}
			if tp.MaxDatagramFrameSize > 1000 {
				t.Inconclusive(fmt.Sprintf("The client's max_datagram_frame_size (%d) is larger than a 1200-byte datagram can exceed.", tp.MaxDatagramFrameSize))
			}
			return []wire.Frame{&wire.DatagramFrame{NoLength: true, Data: make([]byte, tp.MaxDatagramFrameSize)}}
		},
	})
	registerClient(&Scenario{
		ID: "cli-path-challenge", Title: "The client answers PATH_CHALLENGE once, padded", Requirements: []Requirement{reqCliPathResponse, reqCliPathRespSize, reqCliPathRespOnce},
		Run: func(ctx context.Context, t *T) {
			s, c := t.holdOpen(ctx, serveOptions{Label: "path-challenge"})
			var data [8]byte
			copy(data[:], randomBytes(8))
			mark := len(t.rec.snapshot())
			// The tester pads its own challenge to 1200 bytes (RFC 9000
			// §8.2.1), so the client has no reason to answer smaller.
			c.Inject(spaceApp, &wire.PathChallengeFrame{Data: data}, &wire.PaddingFrame{Length: 1100})
			responses := func(ps []*packet) []*packet {
				var out []*packet
				for _, p := range received(ps, s.trace.id, mark) {
					if p.has(wire.FrameTypePathResponse) {
						out = append(out, p)
					}
				}
				return out
			}
			t.rec.wait(ctx, t.Settle(), func(ps []*packet) bool { return len(responses(ps)) > 0 })
			t.rec.wait(ctx, t.PTO(), nil) // room for a second, wrong response
			rs := responses(t.rec.snapshot())
			if len(rs) == 0 {
				t.Fail("echo", reqCliPathResponse, fmt.Sprintf("The client sent no PATH_RESPONSE within %v of a PATH_CHALLENGE.", t.Settle().Round(time.Millisecond)))
				return
			}
			var match, count int
			for _, p := range rs {
				for _, f := range p.frames {
					if pr, ok := f.(*wire.PathResponseFrame); ok {
						count++
						if pr.Data == data {
							match++
						}
					}
				}
			}
			if match == 0 {
				t.Fail("echo", reqCliPathResponse, "The client's PATH_RESPONSE did not echo the PATH_CHALLENGE data.", events(Response, rs...)...)
			} else {
				t.Pass("echo", reqCliPathResponse, "The client echoed the PATH_CHALLENGE data.", events(Response, rs[0])...)
			}
			if count > 1 {
				t.Fail("once", reqCliPathRespOnce, fmt.Sprintf("The client sent %d PATH_RESPONSE frames for one PATH_CHALLENGE.", count), events(Response, rs...)...)
			} else {
				t.Pass("once", reqCliPathRespOnce, "The client sent one PATH_RESPONSE.")
			}
			if rs[0].datagram < 1200 {
				t.Fail("padded", reqCliPathRespSize, fmt.Sprintf("The client's PATH_RESPONSE came in a %d-byte datagram.", rs[0].datagram), events(Response, rs[0])...)
			} else {
				t.Pass("padded", reqCliPathRespSize, fmt.Sprintf("The client's PATH_RESPONSE came in a %d-byte datagram.", rs[0].datagram))
			}
		},
	})
	registerClient(&Scenario{
		ID: "cli-no-alpn-selected", Title: "A handshake that selects no ALPN", Requirements: []Requirement{reqCliNoALPN},
		Run: func(ctx context.Context, t *T) {
			t.judgeClientHandshake(ctx, "close", serveOptions{Label: "no-alpn", NoALPN: true},
				Expectation{Req: reqCliNoALPN, Codes: []uint64{0x178}, Describe: "a handshake without an ALPN extension in EncryptedExtensions"})
		},
	})
	registerClient(&Scenario{
		ID: "cli-cert-invalid", Title: "A certificate for another host name", Requirements: []Requirement{reqCliAuth},
		Run: func(ctx context.Context, t *T) {
			if ct := t.profile.Client; ct.Launch == nil && !bytes.Contains([]byte(ct.Command), []byte("{ca}")) {
				t.Unsupported("The client command gets no trust anchor ({ca}), so it runs without certificate verification.")
			}
			e := Expectation{Req: reqCliAuth, Describe: "a certificate for not-this-host.invalid"}
			for c := uint64(0x100); c < 0x200; c++ {
				e.Codes = append(e.Codes, c)
			}
			t.judgeClientHandshake(ctx, "close", serveOptions{Label: "wrong-name", WrongName: true}, e)
		},
	})
}

func init() {
	registerClientFrames()
}
