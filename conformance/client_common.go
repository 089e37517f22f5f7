package conformance

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family M: client-facing scenarios (docs/scenarios.md, Client-facing). Quiver serves, the
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

// Family M, second set: Retry and server Initial handling, key update,
// stateless reset, draining, acknowledgment rules and the anti-deadlock
// probe, judged on the client under test (docs/scenarios.md, Client-facing).

var (
	reqCliRetryOnce     = rfc9000("17.2.5.2", Must, "A client MUST accept and process at most one Retry packet for each connection attempt.")
	reqCliRetryLate     = rfc9000("17.2.5.2", Must, "After the client has received and processed an Initial or Retry packet from the server, it MUST discard any subsequent Retry packets that it receives.")
	reqCliInitialToken  = rfc9000("17.2.2", Must, "clients that receive an Initial packet with a non-zero Token Length field MUST either discard the packet or generate a connection error of type PROTOCOL_VIOLATION.")
	reqCliSCIDChange    = rfc9000("7.2", Must, "Once a client has received a valid Initial packet from the server, it MUST discard any subsequent packet it receives on that connection with a different Source Connection ID.")
	reqCliKUFollow      = rfc9001("6.2", Must, "The endpoint MUST update its send keys to the corresponding key phase in response")
	reqCliKUAckNew      = rfc9001("6.2", Must, "Sending keys MUST be updated before sending an acknowledgment for the packet that was received with updated keys.")
	reqCliResetDrain    = rfc9000("10.3.1", Must, "If the last 16 bytes of the datagram are identical in value to a stateless reset token, the endpoint MUST enter the draining period and not send any further packets on this connection.")
	reqCliDraining      = rfc9000("10.2.2", MustNot, "While otherwise identical to the closing state, an endpoint in the draining state MUST NOT send any packets.")
	reqCliDrainingOnce  = rfc9000("10.2.2", MustNot, "An endpoint that receives a CONNECTION_CLOSE frame MAY send a single packet containing a CONNECTION_CLOSE frame before entering the draining state … An endpoint MUST NOT send further packets.")
	reqCliNoAckOfAck    = rfc9000("13.2.1", MustNot, "An endpoint MUST NOT send a non-ack-eliciting packet in response to a non-ack-eliciting packet, even if there are packet gaps that precede the received packet.")
	reqCliAntiDeadlock  = rfc("RFC 9002", "6.2.2.1", Must, "the client MUST set the PTO timer if the client has not received an acknowledgment for any of its Handshake packets and the handshake is not confirmed")
	reqCliAntiDeadlockH = rfc("RFC 9002", "6.2.2.1", Must, "When the PTO fires, the client MUST send a Handshake packet if it has Handshake keys")
)

// kuPhaseLog keeps the Key Phase bit of every 1-RTT packet the tester's
// server sent and received, by packet number.
type kuPhaseLog struct {
	mu         sync.Mutex
	sent, rcvd map[uint64]bool
}

func (l *kuPhaseLog) probe() quic.Probe {
	l.sent, l.rcvd = map[uint64]bool{}, map[uint64]bool{}
	note := func(m map[uint64]bool) func(quic.PacketInfo) {
		return func(pi quic.PacketInfo) {
			if pi.Type != wire.PacketType1RTT {
				return
			}
			l.mu.Lock()
			m[pi.PacketNumber] = pi.KeyPhase
			l.mu.Unlock()
		}
	}
	return quic.Probe{OnPacketSent: note(l.sent), OnPacketReceived: note(l.rcvd)}
}

func (l *kuPhaseLog) phase(sent bool, pn uint64) (bool, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.rcvd
	if sent {
		m = l.sent
	}
	v, ok := m[pn]
	return v, ok
}

// prefDatagram is a client datagram that reached the preferred address,
// with whether its packets carried only probing frames (RFC 9000 §9.1:
// PATH_CHALLENGE, PATH_RESPONSE, NEW_CONNECTION_ID, PADDING).
type prefDatagram struct {
	d       rawDatagram
	probing bool
	frames  []string
}

// prefRun is what the client did with the tester's preferred address.
type prefRun struct {
	s         *testServer
	datagrams []prefDatagram
	// firstAnswer is when the tester's server first sent from the
	// preferred address (its PATH_RESPONSE): before that the client cannot
	// have validated the address.
	firstAnswer time.Time
}

func (r *prefRun) moved() *prefDatagram {
	for i := range r.datagrams {
		if !r.datagrams[i].probing {
			return &r.datagrams[i]
		}
	}
	return nil
}

// Family M, extensions and paths: grease_quic_bit, ACK frequency and a
// packet from an unknown server address (docs/scenarios.md, Client-facing).

var (
	reqCliAFInvalid   = rfc("ACK-FREQ", "4", Must, "Receipt of an invalid value MUST be treated as a connection error of type PROTOCOL_VIOLATION.")
	reqCliAFThreshold = rfc("ACK-FREQ", "4", Should, "A receiving endpoint SHOULD send at least one ACK frame after receiving more than this many ack-eliciting packets.")
	reqCliAFImmediate = rfc("ACK-FREQ", "5", Should, "An endpoint SHOULD send a packet containing an ACK frame immediately upon receiving an IMMEDIATE_ACK frame.")
	reqCliUnknownAddr = rfc9000("9", Must, "If a client receives packets from an unknown server address, the client MUST discard these packets.")
)
