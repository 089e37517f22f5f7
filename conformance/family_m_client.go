package conformance

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family M: client-facing scenarios (catalogue §4). Quiver serves, the
// client under test fetches, and the verdict comes from the packets the
// client sent (decrypted with the server's own keys) and from the files it
// saved; its exit status is recorded but never trusted by itself.

// Timing of client runs.
const (
	clientHandshakeWait = 6 * time.Second // client start plus handshake
	clientRunWait       = 8 * time.Second // a small download to completion
)

func registerClient(s *Scenario) {
	s.Family = "M"
	s.Role = ClientRole
	// Client runs start a process and may wait for it: the long budget is
	// a deadline only, scenarios end as soon as they are decided.
	s.Long = true
	if s.Needs == nil {
		s.Needs = []string{NeedCAny}
	}
	Register(s)
}

// download serves normally (with o's deviation) and runs the client to the
// end of a small download; it reports whether the file arrived intact.
func (t *T) download(ctx context.Context, o serveOptions) (*testServer, *clientRun, bool) {
	s := t.serve(ctx, o)
	cr := t.launch(ctx, s, smallResource)
	cr.wait(ctx, clientRunWait)
	return s, cr, cr.downloaded(smallResource)
}

// clientConn wraps the server side of the client's connection as a tester
// Conn, so the provoked-error pattern applies with the roles swapped.
func (t *T) clientConn(s *testServer, qc *quic.Conn) *Conn {
	return &Conn{Conn: qc, t: t, trace: s.trace}
}

// holdOpen serves, launches the client on the held resource, and returns
// the connection once the client's request has arrived (the handshake is
// then complete on both sides).
func (t *T) holdOpen(ctx context.Context, o serveOptions) (*testServer, *Conn) {
	return t.holdOpenWith(ctx, o, func(s *testServer) { t.launch(ctx, s, holdResource) })
}

// holdOpenWith is holdOpen with the client started by start.
func (t *T) holdOpenWith(ctx context.Context, o serveOptions, start func(s *testServer)) (*testServer, *Conn) {
	s := t.serve(ctx, o)
	start(s)
	qc := s.accepted(ctx, clientHandshakeWait)
	if qc == nil {
		t.Inconclusive("The client never completed a handshake with the tester's server, so the deviation could not be provoked.", events(Context, lastN(received(t.rec.snapshot(), s.trace.id, 0), 3)...)...)
	}
	requested := func(ps []*packet) bool {
		for _, p := range received(ps, s.trace.id, 0) {
			for _, f := range p.frames {
				if sf, ok := f.(*wire.StreamFrame); ok && sf.StreamID%4 == 0 {
					return true
				}
			}
		}
		return false
	}
	if !t.rec.wait(ctx, clientHandshakeWait, requested) {
		t.Inconclusive("The client completed the handshake but sent no request.")
	}
	return s, t.clientConn(s, qc)
}

// requestStream is the stream ID of the client's first request.
func requestStream(t *T, s *testServer) uint64 {
	for _, p := range received(t.rec.snapshot(), s.trace.id, 0) {
		for _, f := range p.frames {
			if sf, ok := f.(*wire.StreamFrame); ok && sf.StreamID%4 == 0 {
				return sf.StreamID
			}
		}
	}
	return 0
}

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

// clientTPOf returns the client's transport parameters or ends the
// scenario.
func (t *T) clientTPOf(s *testServer) *wire.TransportParameters {
	tp := s.clientTP()
	if tp == nil {
		t.Inconclusive("The client's transport parameters could not be read from its ClientHello.")
	}
	return tp
}

// appCryptoEnd is the end of the CRYPTO stream the tester sent at the
// 1-RTT level (session tickets), where a new message has to start.
func appCryptoEnd(t *T, s *testServer) uint64 {
	// The session ticket goes out around handshake completion; wait for
	// it (at most one PTO) so the new message does not overlap it.
	t.rec.wait(context.Background(), t.PTO(), func(ps []*packet) bool {
		for _, p := range ps {
			if p.sent && p.conn == s.trace.id && p.space == spaceApp && p.has(wire.FrameTypeCrypto) {
				return true
			}
		}
		return false
	})
	var end uint64
	for _, p := range t.rec.snapshot() {
		if !p.sent || p.conn != s.trace.id || p.space != spaceApp {
			continue
		}
		for _, f := range p.frames {
			if cf, ok := f.(*wire.CryptoFrame); ok {
				end = max(end, cf.Offset+uint64(len(cf.Data)))
			}
		}
	}
	return end
}

// handshakeExpect is a scenario whose deviation is in the handshake (a
// transport parameter, the ALPN, the certificate): the client must close.
// "The connection goes on" here means the download completed or the
// client acknowledged the tester's 1-RTT packets.
func (t *T) judgeClientHandshake(ctx context.Context, check string, o serveOptions, e Expectation) {
	mark := len(t.rec.snapshot())
	s := t.serve(ctx, o)
	cr := t.launch(ctx, s, smallResource)
	closed := func(ps []*packet) bool {
		for _, p := range received(ps, s.trace.id, mark) {
			if p.closeFrame() != nil {
				return true
			}
		}
		return false
	}
	t.rec.wait(ctx, clientRunWait, func(ps []*packet) bool { return closed(ps) || cr.exited() })
	ps := t.rec.snapshot()
	rcv := received(ps, s.trace.id, mark)
	if cr.wait(ctx, 0) && cr.downloaded(smallResource) {
		t.Fail(check, e.Req, fmt.Sprintf("The client accepted %s: it downloaded the file (%s expected).", e.Describe, e.codeNames()), events(Context, lastN(rcv, 3)...)...)
		return
	}
	for _, p := range rcv {
		cc := p.closeFrame()
		if cc == nil {
			continue
		}
		if !cc.Application && containsCode(e.Codes, cc.ErrorCode) {
			t.Pass(check, e.Req, fmt.Sprintf("The client closed the connection with %s after %s.", closeCode(cc), e.Describe), events(Response, p)...)
			return
		}
		t.Warn(check, reqMostAppropriate, fmt.Sprintf("The client closed the connection after %s, but with %s instead of %s; use the specific code.", e.Describe, closeCode(cc), e.codeNames()), events(Response, p)...)
		return
	}
	if cr.downloaded(smallResource) {
		t.Fail(check, e.Req, fmt.Sprintf("The client accepted %s: it downloaded the file and never sent CONNECTION_CLOSE (%s expected).", e.Describe, e.codeNames()), events(Context, lastN(rcv, 3)...)...)
		return
	}
	var oneRTT []*packet
	for _, p := range rcv {
		if p.space == spaceApp && p.ev.PacketType == "1RTT" {
			oneRTT = append(oneRTT, p)
		}
	}
	if len(oneRTT) > 0 {
		t.Fail(check, e.Req, fmt.Sprintf("The client went on after %s: it sent %d 1-RTT packet(s) and no CONNECTION_CLOSE (%s expected).", e.Describe, len(oneRTT), e.codeNames()), events(Response, lastN(oneRTT, 3)...)...)
		return
	}
	if len(rcv) == 0 {
		t.Inconclusive(fmt.Sprintf("The client sent nothing the tester could read after %s.", e.Describe))
	}
	t.Inconclusive(fmt.Sprintf("The client stopped after %s without a CONNECTION_CLOSE the tester could read and without going on.", e.Describe), events(Context, lastN(rcv, 3)...)...)
}

func containsCode(codes []uint64, c uint64) bool {
	for _, x := range codes {
		if x == c {
			return true
		}
	}
	return false
}

// Requirements quoted from the catalogue, §4.
var (
	reqCliInitialSize   = rfc9000("14.1", Must, "A client MUST expand the payload of all UDP datagrams carrying Initial packets to at least the smallest allowed maximum datagram size of 1200 bytes")
	reqCliDCIDLen       = rfc9000("7.2", Must, "This Destination Connection ID MUST be at least 8 bytes in length.")
	reqCliDCIDSame      = rfc9000("7.2", Must, "Until a packet is received from the server, the client MUST use the same Destination Connection ID value on all packets in this connection.")
	reqCliPNReuse       = rfc9000("12.3", MustNot, "A QUIC endpoint MUST NOT reuse a packet number within the same packet number space in one connection.")
	reqCliAppSpace      = rfc9000("12.5", Must, "All other frame types MUST only be sent in the application data packet number space.")
	reqCliAckOnly       = rfc9000("13.1", MustNot, "A packet MUST NOT be acknowledged until packet protection has been successfully removed and all frames contained in the packet have been processed.")
	reqCliTPInvalid     = rfc9000("7.4", Must, "An endpoint MUST treat receipt of a transport parameter with an invalid value as a connection error of type TRANSPORT_PARAMETER_ERROR.")
	reqCliTPClient      = rfc9000("18.2", Must, "A client MUST treat a violation of these requirements as a connection error of type TRANSPORT_PARAMETER_ERROR.")
	reqCliTPMatch       = rfc9000("7.3", Must, "Endpoints MUST validate that received transport parameters match received connection ID values.")
	reqCliTPMatchErr    = rfc9000("7.3", Must, "An endpoint MUST treat the following as a connection error of type TRANSPORT_PARAMETER_ERROR or PROTOCOL_VIOLATION")
	reqCliTPAbsent      = rfc9000("7.3", Must, "An endpoint MUST treat the absence of the initial_source_connection_id transport parameter from either endpoint or the absence of the original_destination_connection_id transport parameter from the server as a connection error")
	reqCliTPIgnore      = rfc9000("7.4.2", Must, "An endpoint MUST ignore transport parameters that it does not support.")
	reqCliRetryTP       = rfc9000("7.3", Must, "An endpoint MUST treat the following as a connection error of type TRANSPORT_PARAMETER_ERROR or PROTOCOL_VIOLATION … absence of the retry_source_connection_id transport parameter from the server after receiving a Retry packet")
	reqCliVNAbandon     = rfc9000("6.2", Must, "A client that supports only this version of QUIC MUST abandon the current connection attempt if it receives a Version Negotiation packet, with the following two exceptions.")
	reqCliVNChosen      = rfc9000("6.2", Must, "A client MUST discard a Version Negotiation packet that lists the QUIC version selected by the client.")
	reqCliVNLate        = rfc9000("6.2", Must, "A client MUST discard any Version Negotiation packet if it has received and successfully processed any other packet, including an earlier Version Negotiation packet.")
	reqCliVNEmpty       = rfc("RFC 8999", "6", Must, "An endpoint MUST ignore a packet that contains no Supported Version fields or contains a truncated Supported Version value.")
	reqCliRetryDCID     = rfc9000("17.2.5.1", Must, "The client MUST use the value from the Source Connection ID field of the Retry packet in the Destination Connection ID field of subsequent packets that it sends.")
	reqCliRetryToken    = rfc9000("8.1.2", Must, "This token MUST be repeated by the client in all Initial packets it sends for that connection after it receives the Retry packet.")
	reqCliRetrySameCH   = rfc9000("17.2.5.3", Must, "A client MUST use the same cryptographic handshake message it included in this packet.")
	reqCliRetryPN       = rfc9000("17.2.5.3", MustNot, "A client MUST NOT reset the packet number for any packet number space after processing a Retry packet.")
	reqCliRetrySCID     = rfc9000("17.2.5.2", MustNot, "The client MUST NOT change the Source Connection ID because the server could include the connection ID as part of its token validation logic")
	reqCliRetryBadTag   = rfc9000("17.2.5.2", Must, "Clients MUST discard Retry packets that have a Retry Integrity Tag that cannot be validated")
	reqCliRetryEmptyTok = rfc9000("17.2.5.2", Must, "A client MUST discard a Retry packet with a zero-length Retry Token field.")
	reqCliRetrySCIDEq   = rfc9000("17.2.5.1", Must, "A client MUST discard a Retry packet that contains a Source Connection ID field that is identical to the Destination Connection ID field of its Initial packet.")
	reqCliRetryNotReuse = rfc9000("8.1.3", MustNot, "The client MUST NOT use the token provided in a Retry for future connections.")
	reqCliPTOPackets    = rfc9000("8.1", Must, "To prevent this deadlock, clients MUST send a packet on a Probe Timeout (PTO)")
	reqCliPTOProbe      = rfc("RFC 9002", "6.2.4", Must, "When a PTO timer expires, a sender MUST send at least one ack-eliciting packet in the packet number space as a probe.")
	reqCliInitialRTT    = rfc("RFC 9002", "6.2.2", Should, "When no previous RTT is available, the initial RTT SHOULD be set to 333 milliseconds.")
	reqCliKeyUpdateMsg  = rfc9001("6", Must, "Endpoints MUST treat the receipt of a TLS KeyUpdate message as a connection error of type 0x010a")
	reqCliCertReq       = rfc9001("4.4", Must, "clients MUST treat receipt of such messages as a connection error of type PROTOCOL_VIOLATION.")
	reqCliStreamLimit   = rfc9000("4.6", Must, "An endpoint that receives a frame with a stream ID exceeding the limit it has sent MUST treat this as a connection error of type STREAM_LIMIT_ERROR")
	reqCliStreamFlow    = rfc9000("4.1", Must, "A receiver MUST close the connection with an error of type FLOW_CONTROL_ERROR if the sender violates the advertised connection or stream data limits")
	reqCliConnFlow      = rfc9000("19.9", Must, "An endpoint MUST terminate a connection with an error of type FLOW_CONTROL_ERROR if it receives more data than the maximum data value that it has sent.")
	reqCliSendOnly      = rfc9000("19.8", Must, "MUST terminate the connection with error STREAM_STATE_ERROR if it receives a STREAM frame for a locally initiated stream that has not yet been created, or for a send-only stream.")
	reqCliNewTokenEmpty = rfc9000("19.7", Must, "A client MUST treat receipt of a NEW_TOKEN frame with an empty Token field as a connection error of type FRAME_ENCODING_ERROR.")
	reqCliPathResponse  = rfc9000("8.2.2", Must, "On receiving a PATH_CHALLENGE frame, an endpoint MUST respond by echoing the data contained in the PATH_CHALLENGE frame in a PATH_RESPONSE frame.")
	reqCliPathRespSize  = rfc9000("8.2.2", Must, "An endpoint MUST expand datagrams that contain a PATH_RESPONSE frame to at least the smallest allowed maximum datagram size of 1200 bytes.")
	reqCliPathRespOnce  = rfc9000("8.2.2", MustNot, "An endpoint MUST NOT send more than one PATH_RESPONSE frame in response to one PATH_CHALLENGE frame")
	reqCliDgramUnneg    = rfc("RFC 9221", "3", Must, "An endpoint that receives a DATAGRAM frame when it has not indicated support via the transport parameter MUST terminate the connection with an error of type PROTOCOL_VIOLATION.")
	reqCliDgramTooLarge = rfc("RFC 9221", "3", Must, "an endpoint that receives a DATAGRAM frame that is larger than the value it sent in its max_datagram_frame_size transport parameter MUST terminate the connection with an error of type PROTOCOL_VIOLATION.")
	reqCliNoALPN        = rfc9001("8.1", Must, "QUIC clients MUST use error 0x0178 to terminate a connection when ALPN negotiation fails.")
	reqCliAuth          = rfc9001("4.4", Must, "A client MUST authenticate the identity of the server.")
)

func init() {
	registerPassiveClient()
	registerClientTP()
	registerClientVN()
	registerClientRetry()
	registerClientTimers()
	registerClientFrames()
}

// registerPassiveClient registers the passive checks; each judges the
// client connection of one plain download.
func registerPassiveClient() {
	registerClient(&Scenario{
		ID: "cli-initial-datagram-size", Title: "Client Initial datagrams are at least 1200 bytes", Passive: true,
		Requirements: []Requirement{reqCliInitialSize},
		Run: func(ctx context.Context, t *T) {
			s, _, _ := t.download(ctx, serveOptions{Label: "download"})
			n, small := 0, 0
			var ev []*packet
			for _, d := range s.rawIn() {
				if d.err != nil || d.header.Type != wire.PacketTypeInitial {
					continue
				}
				n++
				if d.size < 1200 {
					small++
					if ci, ok := openClientInitial(d.b); ok {
						ev = append(ev, &packet{ev: PacketEvent{Direction: "received", PacketType: "initial", Number: int64(ci.pn), Size: d.size}})
					}
				}
			}
			switch {
			case n == 0:
				t.Inconclusive("The client sent no Initial packet to the tester's server.")
			case small > 0:
				t.Fail("size", reqCliInitialSize, fmt.Sprintf("%d of the client's %d datagrams carrying Initial packets were smaller than 1200 bytes.", small, n), events(Response, ev...)...)
			default:
				t.Pass("size", reqCliInitialSize, fmt.Sprintf("All %d datagrams carrying client Initial packets had at least 1200 bytes.", n))
			}
		},
	})
	registerClient(&Scenario{
		ID: "cli-initial-dcid", Title: "The client's first Destination Connection ID is long enough and stable", Passive: true,
		Requirements: []Requirement{reqCliDCIDLen, reqCliDCIDSame},
		Run: func(ctx context.Context, t *T) {
			s, _, _ := t.download(ctx, serveOptions{Label: "download"})
			var firstServer time.Time
			t.rec.mu.Lock()
			for _, d := range t.rec.datagrams {
				if d.sent {
					firstServer = d.at
					break
				}
			}
			t.rec.mu.Unlock()
			var first []byte
			changed := 0
			for _, d := range s.rawIn() {
				if d.err != nil || !d.header.Long || (!firstServer.IsZero() && d.at.After(firstServer)) {
					continue
				}
				if first == nil {
					first = append([]byte(nil), d.header.DCID...)
					continue
				}
				if !bytes.Equal(first, d.header.DCID) {
					changed++
				}
			}
			if first == nil {
				t.Inconclusive("The client sent no long-header packet to the tester's server.")
			}
			t.Fact("cid.client-initial-dcid-length", len(first))
			if len(first) < 8 {
				t.Fail("length", reqCliDCIDLen, fmt.Sprintf("The client's first Destination Connection ID is %d bytes long.", len(first)))
			} else {
				t.Pass("length", reqCliDCIDLen, fmt.Sprintf("The client's first Destination Connection ID is %d bytes long.", len(first)))
			}
			if changed > 0 {
				t.Fail("stable", reqCliDCIDSame, fmt.Sprintf("The client changed its Destination Connection ID on %d packet(s) before any server packet.", changed))
			} else {
				t.Pass("stable", reqCliDCIDSame, "The client kept its first Destination Connection ID until the server answered.")
			}
		},
	})
	registerClient(&Scenario{
		ID: "cli-inv-packet-rules", Title: "Client packet numbers, frame placement and acknowledgments", Passive: true,
		Requirements: []Requirement{reqCliPNReuse, reqCliAppSpace, reqCliAckOnly},
		Run: func(ctx context.Context, t *T) {
			s, _, _ := t.download(ctx, serveOptions{Label: "download"})
			ps := t.rec.snapshot()
			seen := map[[2]uint64]*packet{}
			sent := map[[2]uint64]bool{}
			var reuse, placement, bogusAck []*packet
			for _, p := range ps {
				if p.conn != s.trace.id || p.space < 0 {
					continue
				}
				key := [2]uint64{uint64(p.space), p.pn}
				if p.sent {
					sent[key] = true
					continue
				}
				if q := seen[key]; q != nil && p.closeFrame() == nil && q.closeFrame() == nil {
					reuse = append(reuse, q, p)
				}
				seen[key] = p
				if p.space != spaceApp {
					for _, f := range p.frames {
						switch f.Type() {
						case wire.FrameTypePadding, wire.FrameTypePing, wire.FrameTypeAck, wire.FrameTypeAckECN, wire.FrameTypeCrypto, wire.FrameTypeConnectionClose:
						default:
							placement = append(placement, p)
						}
					}
				}
			}
			for _, p := range ps {
				if p.sent || p.conn != s.trace.id {
					continue
				}
				for _, f := range p.frames {
					a, ok := f.(*wire.AckFrame)
					if !ok {
						continue
					}
					for _, r := range a.Ranges {
						for pn := r.Smallest; pn <= r.Largest && pn < r.Smallest+10000; pn++ {
							if !sent[[2]uint64{uint64(p.space), pn}] {
								bogusAck = append(bogusAck, p)
								break
							}
						}
					}
				}
			}
			if len(seen) == 0 {
				t.Inconclusive("The tester decrypted no packet from the client.")
			}
			check := func(name string, req Requirement, bad []*packet, failMsg, passMsg string) {
				if len(bad) > 0 {
					t.Fail(name, req, failMsg, events(Response, lastN(bad, 4)...)...)
				} else {
					t.Pass(name, req, passMsg)
				}
			}
			check("pn-reuse", reqCliPNReuse, reuse, fmt.Sprintf("The client used %d packet number(s) twice in one space.", len(reuse)/2), fmt.Sprintf("The client never reused a packet number over %d packets.", len(seen)))
			check("frame-placement", reqCliAppSpace, placement, fmt.Sprintf("The client sent application-only frames in %d Initial or Handshake packet(s).", len(placement)), "Every frame in the client's Initial and Handshake packets is allowed there.")
			check("acks", reqCliAckOnly, bogusAck, fmt.Sprintf("The client acknowledged packet numbers the tester never sent, in %d ACK frame(s).", len(bogusAck)), "The client acknowledged only packets the tester sent.")
		},
	})
}

// registerClientTP registers the transport parameter scenarios.
func registerClientTP() {
	type tpCase struct {
		name string
		edit func(p *wire.TransportParameters)
	}
	run := func(id string, e Expectation, cases []tpCase) func(ctx context.Context, t *T) {
		return func(ctx context.Context, t *T) {
			for _, c := range cases {
				ee := e
				ee.Check = c.name
				ee.Describe = fmt.Sprintf("%s (%s)", e.Describe, c.name)
				edit := c.edit
				t.judgeClientHandshake(ctx, c.name, serveOptions{Label: c.name, Probe: quic.Probe{TransportParameters: edit}}, ee)
			}
		}
	}
	tpErr := transportCodes(wire.TransportParameterError)
	tpOrPV := transportCodes(wire.TransportParameterError, wire.ProtocolViolation)
	registerClient(&Scenario{
		ID: "cli-tp-invalid-value", Title: "Server transport parameters with invalid values", Requirements: []Requirement{reqCliTPInvalid, reqCliTPClient},
		Run: run("cli-tp-invalid-value", Expectation{Req: reqCliTPInvalid, Codes: tpErr, Describe: "an invalid server transport parameter"}, []tpCase{
			{"max_udp_payload_size=1199", func(p *wire.TransportParameters) { p.MaxUDPPayloadSize = 1199 }},
			{"ack_delay_exponent=21", func(p *wire.TransportParameters) { p.AckDelayExponent = 21 }},
			{"max_ack_delay=16384", func(p *wire.TransportParameters) { p.MaxAckDelay = 16384 }},
			{"active_connection_id_limit=1", func(p *wire.TransportParameters) { p.ActiveConnectionIDLimit = 1 }},
		}),
	})
	registerClient(&Scenario{
		ID: "cli-tp-cid-mismatch", Title: "Server connection ID transport parameters that do not match", Requirements: []Requirement{reqCliTPMatch, reqCliTPMatchErr},
		Run: run("cli-tp-cid-mismatch", Expectation{Req: reqCliTPMatch, Codes: tpOrPV, Describe: "a server connection ID transport parameter that does not match"}, []tpCase{
			{"original_destination_connection_id wrong", func(p *wire.TransportParameters) {
				p.OriginalDestinationConnectionID = bytes.Repeat([]byte{0xee}, 8)
			}},
			{"initial_source_connection_id wrong", func(p *wire.TransportParameters) {
				p.InitialSourceConnectionID = bytes.Repeat([]byte{0xdd}, 8)
			}},
			{"retry_source_connection_id without Retry", func(p *wire.TransportParameters) {
				p.HasRetrySourceConnectionID = true
				p.RetrySourceConnectionID = bytes.Repeat([]byte{0xcc}, 8)
			}},
		}),
	})
	registerClient(&Scenario{
		ID: "cli-tp-missing-odcid", Title: "Server transport parameters without original_destination_connection_id", Requirements: []Requirement{reqCliTPAbsent},
		Run: run("cli-tp-missing-odcid", Expectation{Req: reqCliTPAbsent, Codes: tpErr, Describe: "server transport parameters without original_destination_connection_id"}, []tpCase{
			{"close", func(p *wire.TransportParameters) {
				p.HasOriginalDestinationConnectionID = false
				p.OriginalDestinationConnectionID = nil
			}},
		}),
	})
	registerClient(&Scenario{
		ID: "cli-retry-tp-missing", Title: "Retry without retry_source_connection_id in the transport parameters", Requirements: []Requirement{reqCliRetryTP},
		Run: func(ctx context.Context, t *T) {
			t.judgeClientHandshake(ctx, "close", serveOptions{Label: "retry",
				Config: func(c *quic.Config) { c.RequireRetry = true },
				Probe: quic.Probe{TransportParameters: func(p *wire.TransportParameters) {
					p.HasRetrySourceConnectionID = false
					p.RetrySourceConnectionID = nil
				}}},
				Expectation{Req: reqCliRetryTP, Codes: tpOrPV, Describe: "a Retry followed by transport parameters without retry_source_connection_id"})
		},
	})
	registerClient(&Scenario{
		ID: "cli-tp-reserved", Title: "Reserved and unknown server transport parameters are ignored", Requirements: []Requirement{reqCliTPIgnore},
		Run: func(ctx context.Context, t *T) {
			edit := func(p *wire.TransportParameters) {
				for i, n := range []uint64{1, 7, 1000, 31337} {
					p.Unknown = append(p.Unknown, wire.TransportParameter{ID: 31*n + 27, Value: bytes.Repeat([]byte{byte(i)}, i*3)})
				}
				p.Unknown = append(p.Unknown, wire.TransportParameter{ID: 0x3f3f3f, Value: bytes.Repeat([]byte{0x5a}, 500)})
			}
			s, cr, ok := t.download(ctx, serveOptions{Label: "reserved", Probe: quic.Probe{TransportParameters: edit}})
			if ok {
				t.Pass("ignored", reqCliTPIgnore, "The client downloaded the file although the server sent four reserved and one unknown 500-byte transport parameter.")
				return
			}
			rcv := received(t.rec.snapshot(), s.trace.id, 0)
			if p := firstClose(rcv); p != nil {
				t.Fail("ignored", reqCliTPIgnore, fmt.Sprintf("The client closed with %s when the server sent reserved and unknown transport parameters.", closeCode(p.closeFrame())), events(Response, p)...)
				return
			}
			t.judgeControlDownload(ctx, cr, "The client did not complete the download with reserved transport parameters")
		},
	})
}

// judgeControlDownload ends a scenario whose client did not download:
// with a control run that downloads, the deviation is to blame (still
// inconclusive, since no close says so); without one, the client cannot
// download at all.
func (t *T) judgeControlDownload(ctx context.Context, cr *clientRun, what string) {
	_, _, ok := t.download(ctx, serveOptions{Label: "control"})
	if !ok {
		t.Inconclusive(fmt.Sprintf("%s, and a control run without the deviation did not download either (%v).", what, cr.err))
	}
	t.Inconclusive(fmt.Sprintf("%s and sent no CONNECTION_CLOSE, while a control run downloaded.", what))
}

// clientWentOn judges a "must discard" scenario: the deviation came first,
// and the client must act as if it never arrived.
func registerClientVN() {
	vn := func(versions ...wire.Version) func(d []byte, reply func([]byte)) []byte {
		return func(d []byte, reply func([]byte)) []byte {
			h, err := wire.ParseHeader(d, 0)
			if err != nil {
				return nil
			}
			return wire.AppendVersionNegotiation(nil, 0x80|0x40, h.SCID, h.DCID, versions...)
		}
	}
	// answerFirst answers the first client Initial with b(d) instead of
	// passing it on; later ones go to the engine unless dropAll.
	answerFirst := func(build func(d []byte, reply func([]byte)) []byte, dropAll bool) func(d []byte, reply func([]byte)) bool {
		var done bool
		return func(d []byte, reply func([]byte)) bool {
			h, err := wire.ParseHeader(d, 0)
			if err != nil || h.Type != wire.PacketTypeInitial {
				return dropAll
			}
			if !done {
				done = true
				if b := build(d, reply); b != nil {
					reply(b)
				}
				return true
			}
			return dropAll
		}
	}
	registerClient(&Scenario{
		ID: "cli-vn-no-common-version", Title: "Version Negotiation with no common version ends the attempt", Requirements: []Requirement{reqCliVNAbandon},
		Run: func(ctx context.Context, t *T) {
			s := t.serve(ctx, serveOptions{Label: "vn", In: answerFirst(vn(0x1a2a3a4a, 0x5a6a7a8a), true)})
			t.launch(ctx, s, smallResource)
			if !t.rec.wait(ctx, clientHandshakeWait, func([]*packet) bool { return len(s.rawIn()) > 0 }) {
				t.Inconclusive("The client sent nothing to the tester's server.")
			}
			first := s.rawIn()[0]
			t.rec.wait(ctx, t.Settle()+time.Second, nil)
			later := 0
			for _, d := range s.rawIn()[1:] {
				if d.err == nil && d.header.Type == wire.PacketTypeInitial && bytes.Equal(d.header.DCID, first.header.DCID) && d.at.Sub(first.at) > t.PTO() {
					later++
				}
			}
			if later > 0 {
				t.Fail("abandon", reqCliVNAbandon, fmt.Sprintf("The client sent %d more Initial packet(s) to the same connection ID more than one PTO after a Version Negotiation packet listing only reserved versions.", later))
				return
			}
			t.Pass("abandon", reqCliVNAbandon, "The client abandoned the attempt after a Version Negotiation packet listing only reserved versions.")
		},
	})
	discard := func(id, title string, req Requirement, what string, in func() func(d []byte, reply func([]byte)) bool, out func() func(d []byte) [][]byte) {
		registerClient(&Scenario{
			ID: id, Title: title, Requirements: []Requirement{req},
			Run: func(ctx context.Context, t *T) {
				o := serveOptions{Label: id}
				if in != nil {
					o.In = in()
				}
				if out != nil {
					o.Out = out()
				}
				_, cr, ok := t.download(ctx, o)
				if ok {
					t.Pass("discarded", req, fmt.Sprintf("The client ignored %s and downloaded the file.", what))
					return
				}
				_, _, control := t.download(ctx, serveOptions{Label: "control"})
				if control {
					t.Fail("discarded", req, fmt.Sprintf("The client did not download the file after %s, while a control run without it did (%v).", what, cr.err))
					return
				}
				t.Inconclusive(fmt.Sprintf("The client did not download the file, with or without %s.", what))
			},
		})
	}
	discard("cli-vn-lists-chosen-version", "Version Negotiation listing the client's version is discarded", reqCliVNChosen,
		"a Version Negotiation packet that lists its own version (v1)",
		func() func(d []byte, reply func([]byte)) bool {
			return answerFirst(vn(0x0a0a0a0a, wire.Version(quic.Version1)), false)
		}, nil)
	discard("cli-vn-empty", "Version Negotiation without any version is ignored", reqCliVNEmpty,
		"a Version Negotiation packet with no version",
		func() func(d []byte, reply func([]byte)) bool {
			return answerFirst(vn(), false)
		}, nil)
	discard("cli-vn-after-initial", "Version Negotiation after the server's Initial is discarded", reqCliVNLate,
		"a Version Negotiation packet sent right after the server's first Initial",
		nil, func() func(d []byte) [][]byte {
			var done bool
			return func(d []byte) [][]byte {
				h, err := wire.ParseHeader(d, 0)
				if done || err != nil || h.Type != wire.PacketTypeInitial {
					return [][]byte{d}
				}
				done = true
				return [][]byte{d, wire.AppendVersionNegotiation(nil, 0xc0, h.DCID, h.SCID, 0x0a0a0a0a)}
			}
		})
}

// joinInitials merges the client Initials sent to dcid into one: the
// CRYPTO frames of all, the smallest packet number, the first's header.
func joinInitials(inits []*clientInitial, dcid []byte) *clientInitial {
	var out *clientInitial
	for _, ci := range inits {
		if !bytes.Equal(ci.dcid, dcid) {
			continue
		}
		if out == nil {
			c := *ci
			c.frames = nil
			out = &c
		}
		out.pn = min(out.pn, ci.pn)
		out.frames = append(out.frames, ci.frames...)
	}
	return out
}

// retryPacket builds a Retry answering the client Initial d.
func retryPacket(d []byte, scid, token []byte, badTag bool) []byte {
	h, err := wire.ParseHeader(d, 0)
	if err != nil {
		return nil
	}
	r := wire.Retry{Version: h.Version, DCID: h.SCID, SCID: scid, Token: token}
	b := r.AppendWithoutTag(nil)
	out, err := protect.AppendRetryIntegrityTag(uint32(h.Version), h.DCID, b)
	if err != nil {
		return nil
	}
	if badTag {
		out[len(out)-1] ^= 0xff
	}
	return out
}

func registerClientRetry() {
	registerClient(&Scenario{
		ID: "cli-retry-handling", Revision: 2, Title: "The client follows a Retry correctly",
		Requirements: []Requirement{reqCliRetryDCID, reqCliRetryToken, reqCliRetrySameCH, reqCliRetryPN, reqCliRetrySCID},
		Run: func(ctx context.Context, t *T) {
			s, cr, ok := t.download(ctx, serveOptions{Label: "retry", Config: func(c *quic.Config) { c.RequireRetry = true }})
			var inits []*clientInitial
			var retry []byte
			t.rec.mu.Lock()
			for _, d := range t.rec.datagrams {
				if d.sent && retry == nil && wire.IsLongHeader(d.b) {
					if h, err := wire.ParseHeader(d.b, 0); err == nil && h.Type == wire.PacketTypeRetry {
						retry = d.b
					}
				}
			}
			t.rec.mu.Unlock()
			for _, d := range s.rawIn() {
				if ci, ok := openClientInitial(d.b); ok {
					inits = append(inits, ci)
				}
			}
			if retry == nil || len(inits) < 2 {
				t.Inconclusive(fmt.Sprintf("The exchange did not get past the Retry: %d client Initial(s) decrypted, Retry sent: %v (client: %v).", len(inits), retry != nil, cr.err))
			}
			rh, _ := wire.ParseHeader(retry, 0)
			// The ClientHello may span several Initial packets: group them
			// by attempt (original Destination Connection ID, then the
			// Retry's Source Connection ID).
			a, b := joinInitials(inits, inits[0].dcid), joinInitials(inits, rh.SCID)
			if b == nil {
				b = joinInitials(inits[1:], inits[len(inits)-1].dcid)
			}
			check := func(name string, req Requirement, good bool, passMsg, failMsg string) {
				if good {
					t.Pass(name, req, passMsg)
				} else {
					t.Fail(name, req, failMsg)
				}
			}
			check("dcid", reqCliRetryDCID, bytes.Equal(b.dcid, rh.SCID), "The client's next Initial used the Retry's Source Connection ID as Destination.", fmt.Sprintf("The client's next Initial went to %x, not to the Retry's Source Connection ID %x.", b.dcid, rh.SCID))
			check("token", reqCliRetryToken, bytes.Equal(b.token, rh.Token), fmt.Sprintf("The client repeated the %d-byte Retry token.", len(rh.Token)), fmt.Sprintf("The client's Initial after the Retry carried a %d-byte token instead of the %d-byte Retry token.", len(b.token), len(rh.Token)))
			check("same-clienthello", reqCliRetrySameCH, bytes.Equal(a.cryptoData(), b.cryptoData()) && len(a.cryptoData()) > 0, "The client sent the same ClientHello after the Retry.", "The client's ClientHello after the Retry differs from the first one.")
			check("pn", reqCliRetryPN, b.pn > a.pn, fmt.Sprintf("The client's packet numbers went on (%d, then %d).", a.pn, b.pn), fmt.Sprintf("The client reset its packet numbers after the Retry (%d, then %d).", a.pn, b.pn))
			check("scid", reqCliRetrySCID, bytes.Equal(a.scid, b.scid), "The client kept its Source Connection ID.", fmt.Sprintf("The client changed its Source Connection ID from %x to %x after the Retry.", a.scid, b.scid))
			t.Fact("retry.download", ok)
		},
	})
	// discardRetry answers the first Initial with a Retry the client must
	// discard, then serves the client's retransmitted original Initial.
	discardRetry := func(id, title string, req Requirement, what string, build func(d []byte) []byte) {
		registerClient(&Scenario{
			ID: id, Title: title, Requirements: []Requirement{req},
			Run: func(ctx context.Context, t *T) {
				var retry []byte
				var once bool
				in := func(d []byte, reply func([]byte)) bool {
					h, err := wire.ParseHeader(d, 0)
					if err != nil || h.Type != wire.PacketTypeInitial || once {
						return false
					}
					once = true
					retry = build(d)
					reply(retry)
					return true
				}
				s := t.serve(ctx, serveOptions{Label: id, In: in})
				cr := t.launch(ctx, s, smallResource)
				cr.wait(ctx, clientRunWait)
				rh, err := wire.ParseHeader(retry, 0)
				if retry == nil || err != nil {
					t.Inconclusive("The client sent no Initial to answer with a Retry.")
				}
				var later []*clientInitial
				var first *clientInitial
				for _, d := range s.rawIn() {
					ci, ok := openClientInitial(d.b)
					if !ok {
						if d.err == nil && d.header.Type == wire.PacketTypeInitial && bytes.Equal(d.header.DCID, rh.SCID) && !bytes.Equal(rh.SCID, s.originalDCID()) {
							t.Fail("discarded", req, fmt.Sprintf("The client acted on %s: it sent an Initial to the Retry's connection ID %x.", what, rh.SCID))
							return
						}
						continue
					}
					if first == nil {
						first = ci
						continue
					}
					later = append(later, ci)
				}
				for _, ci := range later {
					sameCID := bytes.Equal(ci.dcid, rh.SCID) && !bytes.Equal(rh.SCID, s.originalDCID())
					if sameCID || (len(rh.Token) > 0 && bytes.Equal(ci.token, rh.Token)) {
						t.Fail("discarded", req, fmt.Sprintf("The client acted on %s: its Initial went to %x with a %d-byte token.", what, ci.dcid, len(ci.token)))
						return
					}
				}
				if len(later) == 0 {
					t.Inconclusive(fmt.Sprintf("The client sent no further Initial after %s (client: %v).", what, cr.err))
				}
				t.Pass("discarded", req, fmt.Sprintf("The client discarded %s: its next Initial kept the original connection ID and carried no Retry token.", what))
			},
		})
	}
	discardRetry("cli-retry-bad-tag", "A Retry with a bad integrity tag is discarded", reqCliRetryBadTag, "a Retry with a wrong integrity tag",
		func(d []byte) []byte { return retryPacket(d, randomBytes(8), randomBytes(40), true) })
	discardRetry("cli-retry-empty-token", "A Retry with an empty token is discarded", reqCliRetryEmptyTok, "a Retry with a zero-length token",
		func(d []byte) []byte { return retryPacket(d, randomBytes(8), nil, false) })
	discardRetry("cli-retry-scid-equals-dcid", "A Retry whose Source Connection ID is the client's Destination is discarded", reqCliRetrySCIDEq, "a Retry whose Source Connection ID equals the client's original Destination Connection ID",
		func(d []byte) []byte {
			h, _ := wire.ParseHeader(d, 0)
			return retryPacket(d, append([]byte(nil), h.DCID...), randomBytes(40), false)
		})
	registerClient(&Scenario{
		ID: "cli-retry-token-not-reused", Title: "A Retry token is not used for a later connection", Requirements: []Requirement{reqCliRetryNotReuse},
		Run: func(ctx context.Context, t *T) {
			t.download(ctx, serveOptions{Label: "run 1 (Retry)", Config: func(c *quic.Config) { c.RequireRetry = true }})
			var tokens [][]byte
			t.rec.mu.Lock()
			for _, d := range t.rec.datagrams {
				if h, err := wire.ParseHeader(d.b, 0); d.sent && err == nil && h.Type == wire.PacketTypeRetry {
					tokens = append(tokens, append([]byte(nil), h.Token...))
				}
			}
			t.rec.mu.Unlock()
			if len(tokens) == 0 {
				t.Inconclusive("The first run never reached the Retry.")
			}
			s2, _, _ := t.download(ctx, serveOptions{Label: "run 2"})
			in := s2.rawIn()
			if len(in) == 0 || in[0].err != nil || in[0].header.Type != wire.PacketTypeInitial {
				t.Inconclusive("The second run sent no Initial.")
			}
			for _, tok := range tokens {
				if bytes.Equal(in[0].header.Token, tok) {
					t.Fail("token", reqCliRetryNotReuse, "The client's first Initial of a new connection carried the Retry token of the previous one.")
					return
				}
			}
			t.Pass("token", reqCliRetryNotReuse, fmt.Sprintf("The client's first Initial of the next connection carried a %d-byte token, not the earlier Retry token.", len(in[0].header.Token)))
		},
	})
}

func registerClientTimers() {
	registerClient(&Scenario{
		ID: "cli-initial-retransmit", Title: "The client retransmits its first Initial on PTO",
		Requirements: []Requirement{reqCliPTOPackets, reqCliPTOProbe, reqCliInitialRTT}, Long: true,
		Run: func(ctx context.Context, t *T) {
			// The first flight may take several datagrams (a large
			// ClientHello): drop every datagram of it, i.e. all that come
			// within 200 ms of the first.
			var first time.Time
			var mu sync.Mutex
			in := func(d []byte, reply func([]byte)) bool {
				mu.Lock()
				defer mu.Unlock()
				if first.IsZero() {
					first = time.Now()
				}
				return time.Since(first) < 200*time.Millisecond
			}
			s := t.serve(ctx, serveOptions{Label: "drop first flight", In: in})
			cr := t.launch(ctx, s, smallResource)
			retransmit := func() (rawDatagram, *clientInitial, bool) {
				ds := s.rawIn()
				for _, d := range ds {
					if d.at.Sub(ds[0].at) < 200*time.Millisecond {
						continue
					}
					if ci, ok := openClientInitial(d.b); ok {
						for _, f := range ci.frames {
							if cf, ok := f.(*wire.CryptoFrame); ok && cf.Offset == 0 {
								return d, ci, true
							}
						}
					}
				}
				return rawDatagram{}, nil, false
			}
			if !t.rec.wait(ctx, 10*time.Second, func([]*packet) bool { _, _, ok := retransmit(); return ok }) {
				if len(s.rawIn()) == 0 {
					t.Inconclusive("The client sent nothing to the tester's server.")
				}
				t.Fail("retransmit", reqCliPTOPackets, "The client did not send its ClientHello again within 10 s after its first flight went unanswered.")
				return
			}
			cr.wait(ctx, clientRunWait)
			ds := s.rawIn()
			d, b, _ := retransmit()
			a, _ := openClientInitial(ds[0].b)
			gap := d.at.Sub(ds[0].at)
			t.Fact("pto.first-retransmit-ms", gap.Milliseconds())
			if a != nil && b.pn <= a.pn {
				t.Fail("probe", reqCliPTOProbe, fmt.Sprintf("The client's retransmission reused packet number %d.", b.pn))
			} else {
				t.Pass("probe", reqCliPTOProbe, fmt.Sprintf("The client sent its ClientHello again in a new Initial %v after the first (datagram of %d bytes).", gap.Round(time.Millisecond), d.size))
			}
			if gap > 3*time.Second {
				t.Warn("initial-rtt", reqCliInitialRTT, fmt.Sprintf("The first retransmission came %v after the first Initial; with an initial RTT of 333 ms it comes about 1 s later.", gap.Round(time.Millisecond)))
			} else {
				t.Pass("initial-rtt", reqCliInitialRTT, fmt.Sprintf("The first retransmission came %v after the first Initial.", gap.Round(time.Millisecond)))
			}
			t.Fact("download-after-retransmit", cr.downloaded(smallResource))
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

// datagramSummary lists the client's datagrams as "time:types" for a
// sentence.
func datagramSummary(ds []rawDatagram) string {
	if len(ds) == 0 {
		return "nothing"
	}
	var parts []string
	for i, d := range ds {
		if i == 12 {
			parts = append(parts, fmt.Sprintf("… %d more", len(ds)-i))
			break
		}
		var types []string
		for rest := d.b; len(rest) > 0; {
			h, err := wire.ParseHeader(rest, 8)
			if err != nil {
				break
			}
			types = append(types, packetTypeName(h.Type))
			rest = rest[h.PacketLen:]
		}
		parts = append(parts, fmt.Sprintf("%dms:%s", d.at.Sub(ds[0].at).Milliseconds(), strings.Join(types, "+")))
	}
	return strings.Join(parts, ", ")
}
