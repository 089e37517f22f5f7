package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family A: handshake and versions (catalogue §3.A).

var (
	reqHandshakeDone    = rfc9001("4.1.2", Must, "The server MUST send a HANDSHAKE_DONE frame as soon as the handshake is complete.")
	reqDiscardOtherSCID = rfc9000("7.2", Must, "Once a client has received a valid Initial packet from the server, it MUST discard any subsequent packet it receives on that connection with a different Source Connection ID.")
	reqDCIDFromFirst    = rfc9000("7.2", Must, "A server MUST set the Destination Connection ID it uses for sending packets based on the first received Initial packet.")
	reqTPInvalid        = rfc9000("7.4", Must, "An endpoint MUST treat receipt of a transport parameter with an invalid value as a connection error of type TRANSPORT_PARAMETER_ERROR.")
	reqVNSmallDrop      = rfc9000("5.2.2", Must, "Servers MUST drop smaller packets that specify unsupported versions.")
	reqVNShould         = rfc9000("5.2.2", Should, "Servers SHOULD respond with a Version Negotiation packet, provided that the datagram is sufficiently long.")
	reqVNOnce           = rfc9000("17.2.1", MustNot, "A server MUST NOT send more than one Version Negotiation packet in response to a single UDP datagram.")
	reqVNEchoSCID       = rfc9000("17.2.1", Must, "The server MUST include the value from the Source Connection ID field of the packet it receives in the Destination Connection ID field.")
	reqVNEchoDCID       = rfc9000("17.2.1", Must, "The value for Source Connection ID MUST be copied from the Destination Connection ID of the received packet")
	reqV2Implements     = rfc("RFC 9369", "3", Must, "Except for a few differences, QUIC version 2 endpoints MUST implement the QUIC version 1 specification")
	reqV2Negotiated     = rfc("RFC 9369", "4.1", Must, "Both endpoints MUST send Handshake and 1-RTT packets using the negotiated version.")
)

// reservedVersion is a version of the reserved 0x?a?a?a?a form (RFC 9000 §15).
const reservedVersion = 0x1a2a3a4a

func init() {
	Register(&Scenario{
		ID: "hs-v1-basic", Title: "Basic v1 handshake and small fetch", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{reqHandshakeDone, reqDiscardOtherSCID},
		Run:          runHSV1Basic,
	})
	Register(&Scenario{
		ID: "hs-initial-too-small", Title: "First Initial in a 1100-byte datagram", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("14.1", Must, "A server MUST discard an Initial packet that is carried in a UDP datagram with a payload that is smaller than the smallest allowed maximum datagram size of 1200 bytes."),
			rfc9000("14.1", May, "A server MAY also immediately close the connection by sending a CONNECTION_CLOSE frame with an error code of PROTOCOL_VIOLATION"),
		},
		Run: runHSInitialTooSmall,
	})
	Register(&Scenario{
		ID: "hs-dcid-too-long", Title: "v1 Initial with a 21-byte Destination Connection ID", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{rfc9000("17.2", Must, "Endpoints that receive a version 1 long header with a value larger than 20 MUST drop the packet.")},
		Run:          runHSDCIDTooLong,
	})
	Register(&Scenario{
		ID: "hs-max-length-cids", Title: "20-byte connection IDs in the first Initial", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{reqDCIDFromFirst},
		Run: func(ctx context.Context, t *T) {
			runCIDEcho(ctx, t, randomBytes(20), randomBytes(20), "a 20-byte Source Connection ID")
		},
	})
	Register(&Scenario{
		ID: "hs-zero-length-scid", Title: "Zero-length client Source Connection ID", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{reqDCIDFromFirst},
		Run: func(ctx context.Context, t *T) {
			runCIDEcho(ctx, t, randomBytes(8), []byte{}, "a zero-length Source Connection ID")
		},
	})
	Register(&Scenario{
		ID: "hs-short-initial-dcid", Title: "First Initial with a 4-byte Destination Connection ID", Family: "A",
		Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("7.2", Must, "This Destination Connection ID MUST be at least 8 bytes in length.")},
		Run:          runHSShortInitialDCID,
	})
	Register(&Scenario{
		ID: "hs-cid-authentication", Title: "Connection ID authentication transport parameters", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("7.3", Must, "The values provided by a peer for these transport parameters MUST match the values that an endpoint used in the Destination and Source Connection ID fields"),
			rfc9000("7.3", Must, "An endpoint MUST treat the absence of the initial_source_connection_id transport parameter from either endpoint or the absence of the original_destination_connection_id transport parameter from the server as a connection error"),
		},
		Run: runHSCIDAuthentication,
	})
	Register(&Scenario{
		ID: "hs-server-tp-valid", Title: "Server transport parameters well formed and in range", Family: "A",
		Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000("7.4", MustNot, "An endpoint MUST NOT send a parameter more than once in a given transport parameters extension."),
			rfc9000("18.2", Must, "The value of the active_connection_id_limit parameter MUST be at least 2."),
			rfc9000("18.2", MustNot, "A server that chooses a zero-length connection ID MUST NOT provide a preferred address."),
			reqTPInvalid,
		},
		Run: runHSServerTPValid,
	})
	Register(&Scenario{
		ID: "hs-client-tp-invalid", Title: "Client transport parameters with invalid values", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			reqTPInvalid,
			rfc9000("18.2", Must, "An endpoint that receives a value less than 2 MUST close the connection with an error of type TRANSPORT_PARAMETER_ERROR."),
		},
		Run: runHSClientTPInvalid,
	})
	Register(&Scenario{
		ID: "hs-client-tp-server-only", Title: "Client sends server-only transport parameters", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{rfc9000("18.2", Must, "A server MUST treat receipt of any of these transport parameters as a connection error of type TRANSPORT_PARAMETER_ERROR.")},
		Run:          runHSClientTPServerOnly,
	})
	Register(&Scenario{
		ID: "hs-client-tp-duplicate", Title: "Client sends initial_max_data twice", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{rfc9000("7.4", Should, "An endpoint SHOULD treat receipt of duplicate transport parameters as a connection error of type TRANSPORT_PARAMETER_ERROR.")},
		Run:          runHSClientTPDuplicate,
	})
	Register(&Scenario{
		ID: "hs-client-tp-streams-over-limit", Title: "initial_max_streams above 2^60", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{rfc9000("4.6", Must, "the connection MUST be closed immediately with a connection error of type TRANSPORT_PARAMETER_ERROR if the offending value was received in a transport parameter")},
		Run:          runHSClientTPStreamsOverLimit,
	})
	Register(&Scenario{
		ID: "hs-stray-handshake-packet", Title: "Handshake packet before any Initial", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("5.2.2", Should, "Clients are not able to send Handshake packets prior to receiving a server response, so servers SHOULD ignore any such packets."),
			rfc9000("10.3", May, "An endpoint MAY send a Stateless Reset in response to a packet with a long header."),
		},
		Run: runHSStrayHandshake,
	})
	Register(&Scenario{
		ID: "hs-padding-only-initial", Title: "Initial holding only PADDING", Family: "A",
		Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("19.1", Descriptive, "A PADDING frame (type=0x00) has no semantic value.")},
		Run:          runHSPaddingOnly,
	})
	Register(&Scenario{
		ID: "vn-unknown-version", Title: "Version Negotiation for a reserved version", Family: "A",
		Requirements: []Requirement{reqVNShould, reqVNOnce},
		Run:          runVNUnknownVersion,
	})
	Register(&Scenario{
		ID: "vn-cid-echo", Title: "Version Negotiation echoes the connection IDs", Family: "A",
		Requirements: []Requirement{reqVNEchoSCID, reqVNEchoDCID},
		Run: func(ctx context.Context, t *T) {
			runVNEcho(ctx, t, randomBytes(8), randomBytes(12), false)
		},
	})
	Register(&Scenario{
		ID: "vn-long-connection-ids", Title: "Version Negotiation with 40- and 32-byte connection IDs", Family: "A",
		Requirements: []Requirement{
			rfc("RFC 8999", "6", Must, "An endpoint MUST include the value from the Source Connection ID field of the packet it receives in the Destination Connection ID field."),
			rfc9000("17.2", Should, "In order to properly form a Version Negotiation packet, servers SHOULD be able to read longer connection IDs from other QUIC versions."),
		},
		Run: func(ctx context.Context, t *T) {
			runVNEcho(ctx, t, randomBytes(40), randomBytes(32), true)
		},
	})
	Register(&Scenario{
		ID: "vn-small-datagram", Title: "No Version Negotiation for a 600-byte datagram", Family: "A",
		Requirements: []Requirement{reqVNSmallDrop},
		Run:          runVNSmallDatagram,
	})
	Register(&Scenario{
		ID: "vn-no-reply-to-vn", Title: "No Version Negotiation in reply to Version Negotiation", Family: "A",
		Requirements: []Requirement{rfc9000("6.1", MustNot, "An endpoint MUST NOT send a Version Negotiation packet in response to receiving a Version Negotiation packet.")},
		Run:          runVNNoReplyToVN,
	})
	Register(&Scenario{
		ID: "v2-handshake", Title: "QUIC version 2 handshake", Family: "A",
		Needs:        []string{NeedV2},
		Requirements: []Requirement{reqV2Implements, reqV2Negotiated},
		Run:          runV2Handshake,
	})
	Register(&Scenario{
		ID: "v2-version-information", Title: "version_information sent by a v2 server", Family: "A",
		Needs:        []string{NeedV2},
		Requirements: []Requirement{rfc("RFC 9369", "4", Must, "Any QUIC endpoint that supports QUIC version 2 MUST send, process, and validate the version_information transport parameter")},
		Run:          runV2VersionInformation,
	})
}

// fetchSmall fetches the small resource and records whether it arrived.
// With no resource named in the profile, any complete answer counts.
func (t *T) fetchSmall(ctx context.Context, c *Conn) (answered bool, detail string) {
	fctx, cancel := context.WithTimeout(ctx, t.Settle()+2*time.Second)
	defer cancel()
	body, err := c.Fetch(fctx, t.profile.SmallPath)
	if err == nil {
		t.Fact("resource.small-bytes", len(body))
		return true, fmt.Sprintf("%d bytes of %s arrived", len(body), t.profile.SmallPath)
	}
	if t.profile.Target.SmallPath == "" && fctx.Err() == nil && c.Err() == nil {
		// No resource was named: an error response is still an answer.
		return true, fmt.Sprintf("the request for %s was answered (%v)", t.profile.SmallPath, err)
	}
	return false, fmt.Sprintf("the request for %s failed: %v", t.profile.SmallPath, err)
}

// dialFailure ends a scenario whose normal handshake failed, with the
// verdict the failure supports.
func (t *T) dialFailure(c *Conn, err error) {
	ps := received(t.rec.snapshot(), c.trace.id, 0)
	var vne *quic.VersionNegotiationError
	if errors.As(err, &vne) {
		t.Unsupported(fmt.Sprintf("The server answered with Version Negotiation listing %s, which lacks the version the tester offered.", versionList(vne.Theirs)), events(Response, lastN(ps, 1)...)...)
	}
	if len(ps) == 0 {
		t.Inconclusive(fmt.Sprintf("The server sent nothing in reply to the tester's Initial (%v).", err))
	}
	t.Inconclusive(fmt.Sprintf("The handshake failed: %v.", err), events(Response, lastN(ps, 3)...)...)
}

func versionList(vs []uint32) string {
	var b bytes.Buffer
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "0x%08x", v)
	}
	return "[" + b.String() + "]"
}

func runHSV1Basic(ctx context.Context, t *T) {
	c, err := t.Dial(ctx, DialOptions{})
	if err != nil {
		t.dialFailure(c, err)
	}
	st := c.ConnectionState()
	t.Fact("tls.cipher", tls.CipherSuiteName(st.CipherSuite))
	t.Fact("tls.group", st.CurveID.String())
	t.Fact("alpn", st.NegotiatedProtocol)
	t.Fact("retry.used", c.ConnectionInfo().Retried)
	answered, detail := t.fetchSmall(ctx, c)
	// HANDSHAKE_DONE, within the settle window of the handshake.
	hd := func(ps []*packet) bool {
		for _, p := range received(ps, c.ID(), 0) {
			if p.has(wire.FrameTypeHandshakeDone) {
				return true
			}
		}
		return false
	}
	t.rec.wait(ctx, t.Settle(), hd)
	ps := t.rec.snapshot()
	var hdPkt *packet
	scids := map[string]*packet{}
	firstFlight := 0
	var versions []uint32
	for _, p := range received(ps, c.ID(), 0) {
		if hdPkt == nil && p.has(wire.FrameTypeHandshakeDone) {
			hdPkt = p
		}
		if p.ev.PacketType == "initial" {
			if _, ok := scids[string(p.scid)]; !ok {
				scids[string(p.scid)] = p
			}
		}
		if p.space >= 0 && p.space < 2 && p.ev.Version != 0 {
			versions = append(versions, p.ev.Version)
		}
		if p.space == 0 || p.space == 1 {
			firstFlight += p.ev.Size
		}
		if len(p.scid) > 0 {
			t.Fact("cid.length", len(p.scid))
		}
	}
	t.Fact("handshake.server-bytes", firstFlight)
	if tp := c.TransportParameters(); tp != nil {
		t.Fact("tp.raw", tpFacts(tp))
	}
	if len(scids) > 1 {
		var evs []*packet
		for _, p := range scids {
			evs = append(evs, p)
		}
		t.Fail("single-scid", reqDiscardOtherSCID, fmt.Sprintf("The server's Initial packets carried %d different Source Connection IDs; a client must discard the later ones, so the server must keep one.", len(scids)), events(Response, evs...)...)
	} else {
		t.Pass("single-scid", reqDiscardOtherSCID, "Every server Initial packet carried the same Source Connection ID.")
	}
	for _, v := range versions {
		if v != quic.Version1 {
			t.Observe("versions", fmt.Sprintf("A server long-header packet carried version 0x%08x on a v1 connection.", v))
			break
		}
	}
	if hdPkt != nil {
		t.Pass("handshake-done", reqHandshakeDone, "The server sent HANDSHAKE_DONE after the handshake completed.", events(Response, hdPkt)...)
	} else if c.Err() == nil {
		t.Fail("handshake-done", reqHandshakeDone, fmt.Sprintf("The handshake completed but no HANDSHAKE_DONE arrived within the %v settle window.", t.Settle().Round(time.Millisecond)))
	} else {
		t.Check("handshake-done", Inconclusive, reqHandshakeDone, fmt.Sprintf("The connection ended (%v) before HANDSHAKE_DONE arrived.", c.Err()))
	}
	if answered {
		t.Pass("fetch", Requirement{}, "The small resource was fetched: "+detail+".")
	} else {
		t.Check("fetch", Inconclusive, Requirement{}, "The handshake worked but "+detail+".")
	}
}

// tpFacts renders transport parameters as facts: name → hex value.
func tpFacts(tp *wire.TransportParameters) map[string]string {
	m := map[string]string{}
	for _, p := range tp.Raw {
		m[wire.TransportParameterID(p.ID).String()] = hex.EncodeToString(p.Value)
	}
	return m
}

// serverAnswer classifies what came back on a raw connection.
type serverAnswer struct {
	vn        []*packet // Version Negotiation packets
	handshake []*packet // decrypted Initial or Handshake packets
	closes    []*packet
	other     []*packet // anything else (undecryptable, stateless reset, short)
}

func classify(ps []*packet, conn int) serverAnswer {
	var a serverAnswer
	for _, p := range received(ps, conn, 0) {
		switch {
		case p.ev.PacketType == "version_negotiation":
			a.vn = append(a.vn, p)
		case p.closeFrame() != nil:
			a.closes = append(a.closes, p)
		case p.space == 0 || p.space == 1:
			a.handshake = append(a.handshake, p)
		default:
			a.other = append(a.other, p)
		}
	}
	return a
}

func (t *T) datagramsReceived(conn int) int {
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	n := 0
	for _, d := range t.rec.datagrams {
		if !d.sent && d.local == t.rec.conns[conn].local {
			n++
		}
	}
	return n
}

func runHSInitialTooSmall(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "undersized"})
	rc.sendClientHello(ctx, 1100)
	trig := rc.lastSent()
	rc.Receive(ctx, t.Settle(), nil)
	req := t.sc.Requirements[0]
	a := classify(t.rec.snapshot(), rc.trace.id)
	if len(a.closes) > 0 {
		cc := a.closes[0].closeFrame()
		if !cc.Application && cc.ErrorCode == uint64(wire.ProtocolViolation) {
			t.Pass("discard", req, "The server closed the connection with PROTOCOL_VIOLATION, as §14.1 allows for an undersized Initial.", append(events(Trigger, trig), events(Response, a.closes[0])...)...)
			return
		}
		t.Observe("discard", fmt.Sprintf("The server closed the connection with %s rather than dropping the undersized Initial; §14.1 names PROTOCOL_VIOLATION.", closeCode(cc)), append(events(Trigger, trig), events(Response, a.closes[0])...)...)
		return
	}
	if len(a.handshake) > 0 {
		t.Fail("discard", req, fmt.Sprintf("The server processed an Initial carried in a %d-byte datagram: it answered with %d Initial/Handshake packet(s) instead of discarding it.", trig.ev.Size, len(a.handshake)), append(events(Trigger, trig), events(Response, lastN(a.handshake, 2)...)...)...)
		return
	}
	if t.datagramsReceived(rc.trace.id) > 0 {
		t.Check("discard", Inconclusive, req, "The server answered with datagrams the tester could not read.", events(Trigger, trig)...)
		return
	}
	t.requireControl(ctx, "The server stayed silent after the undersized Initial")
	t.Pass("discard", req, fmt.Sprintf("The server ignored an Initial in a 1100-byte datagram for %v, while a normal handshake succeeded.", t.Settle().Round(time.Millisecond)), events(Trigger, trig)...)
}

func runHSDCIDTooLong(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "dcid-21", DCID: randomBytes(21)})
	rc.sendClientHello(ctx, 1200)
	trig := rc.lastSent()
	rc.Receive(ctx, t.Settle(), nil)
	req := t.sc.Requirements[0]
	a := classify(t.rec.snapshot(), rc.trace.id)
	switch {
	case len(a.handshake) > 0 || len(a.closes) > 0:
		resp := append(a.handshake, a.closes...)
		t.Fail("drop", req, "The server answered a v1 Initial whose Destination Connection ID is 21 bytes long with Initial or Handshake packets instead of dropping it.", append(events(Trigger, trig), events(Response, lastN(resp, 2)...)...)...)
	case len(a.vn) > 0:
		t.Observe("drop", "The server answered the 21-byte Destination Connection ID with Version Negotiation.", append(events(Trigger, trig), events(Response, a.vn[0])...)...)
	case t.datagramsReceived(rc.trace.id) > 0:
		t.Check("drop", Inconclusive, req, "The server answered with datagrams the tester could not read.", events(Trigger, trig)...)
	default:
		t.requireControl(ctx, "The server stayed silent after the Initial with a 21-byte Destination Connection ID")
		t.Pass("drop", req, "The server dropped a v1 Initial with a 21-byte Destination Connection ID, while a normal handshake succeeded.", events(Trigger, trig)...)
	}
}

// runCIDEcho runs a raw handshake with the given connection IDs and checks
// that every server packet is addressed to the tester's Source
// Connection ID.
func runCIDEcho(ctx context.Context, t *T, dcid, scid []byte, what string) {
	tp := defaultClientTP(scid)
	rc := t.newRaw(ctx, rawOptions{Label: "cids", DCID: dcid, SCID: scid, TP: tp})
	err := rc.Handshake(ctx, t.Settle()+2*time.Second)
	req := t.sc.Requirements[0]
	var wrong, right []*packet
	for _, p := range received(t.rec.snapshot(), rc.trace.id, 0) {
		if p.space < 0 {
			continue
		}
		if !bytes.Equal(p.dcid, scid) {
			wrong = append(wrong, p)
		} else {
			right = append(right, p)
		}
	}
	switch {
	case len(wrong) > 0:
		t.Fail("dcid", req, fmt.Sprintf("The client used %s (%x), but the server sent %d packet(s) to Destination Connection ID %x instead.", what, scid, len(wrong), wrong[0].dcid), events(Response, lastN(wrong, 2)...)...)
	case len(right) == 0:
		if t.datagramsReceived(rc.trace.id) > 0 {
			t.Observe("dcid", fmt.Sprintf("The server answered the handshake with %s with nothing the tester could read (%v).", what, err))
			return
		}
		if bytes.Equal(scid, []byte{}) && len(scid) == 0 {
			t.Observe("dcid", fmt.Sprintf("The server refused or ignored a connection with %s: %v.", what, err))
			return
		}
		t.Inconclusive(fmt.Sprintf("The server did not answer the handshake with %s: %v.", what, err))
	case err != nil && len(scid) == 0:
		t.Pass("dcid", req, fmt.Sprintf("All %d server packets were addressed to the zero-length ID.", len(right)), events(Response, lastN(right, 2)...)...)
		t.Observe("handshake", fmt.Sprintf("The handshake with %s did not complete: %v.", what, err))
	case err != nil:
		t.Pass("dcid", req, fmt.Sprintf("All %d server packets carried the tester's %d-byte ID.", len(right), len(scid)), events(Response, lastN(right, 2)...)...)
		t.Check("handshake", Inconclusive, Requirement{}, fmt.Sprintf("The handshake with %s did not complete: %v.", what, err))
	default:
		t.Pass("dcid", req, fmt.Sprintf("The handshake completed and all %d server packets were addressed to the tester's %d-byte Source Connection ID.", len(right), len(scid)), events(Response, lastN(right, 2)...)...)
	}
}

func runHSShortInitialDCID(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "dcid-4", DCID: randomBytes(4)})
	err := rc.Handshake(ctx, t.Settle())
	a := classify(t.rec.snapshot(), rc.trace.id)
	switch {
	case err == nil:
		t.Observe("answer", "The server completed a handshake whose first Initial had a 4-byte Destination Connection ID.")
	case len(a.closes) > 0:
		t.Observe("answer", "The server closed the connection: "+closeCode(a.closes[0].closeFrame())+".", events(Response, a.closes[0])...)
	case len(a.handshake) > 0:
		t.Observe("answer", fmt.Sprintf("The server answered but the handshake did not complete: %v.", err))
	default:
		t.Observe("answer", "The server dropped the Initial with a 4-byte Destination Connection ID.")
	}
}

func runHSCIDAuthentication(ctx context.Context, t *T) {
	c, err := t.Dial(ctx, DialOptions{})
	tp := c.TransportParameters()
	if tp == nil {
		if err != nil {
			t.dialFailure(c, err)
		}
		t.Inconclusive("The server's transport parameters could not be read from its EncryptedExtensions.")
	}
	ps := t.rec.snapshot()
	var firstInitial, serverInitial, retry *packet
	for _, p := range ps {
		if p.conn != c.ID() {
			continue
		}
		if p.sent && firstInitial == nil && p.ev.PacketType == "initial" {
			firstInitial = p
		}
		if !p.sent && serverInitial == nil && p.ev.PacketType == "initial" {
			serverInitial = p
		}
		if !p.sent && retry == nil && p.ev.PacketType == "retry" {
			retry = p
		}
	}
	if firstInitial == nil || serverInitial == nil {
		t.Inconclusive("The tester did not see both its first Initial and a server Initial.")
	}
	reqMatch, reqAbsent := t.sc.Requirements[0], t.sc.Requirements[1]
	ev := append(events(Trigger, firstInitial), events(Response, serverInitial)...)
	ok := true
	if !tp.HasOriginalDestinationConnectionID {
		t.Fail("odcid", reqAbsent, "The server's transport parameters lack original_destination_connection_id.", ev...)
		ok = false
	} else if !bytes.Equal(tp.OriginalDestinationConnectionID, firstInitial.dcid) {
		t.Fail("odcid", reqMatch, fmt.Sprintf("original_destination_connection_id is %x but the tester's first Initial went to %x.", tp.OriginalDestinationConnectionID, firstInitial.dcid), ev...)
		ok = false
	}
	if !tp.HasInitialSourceConnectionID {
		t.Fail("iscid", reqAbsent, "The server's transport parameters lack initial_source_connection_id.", ev...)
		ok = false
	} else if !bytes.Equal(tp.InitialSourceConnectionID, serverInitial.scid) {
		t.Fail("iscid", reqMatch, fmt.Sprintf("initial_source_connection_id is %x but the server's Initial packets carry Source Connection ID %x.", tp.InitialSourceConnectionID, serverInitial.scid), ev...)
		ok = false
	}
	switch {
	case retry != nil && !tp.HasRetrySourceConnectionID:
		t.Fail("rscid", reqMatch, "The server sent a Retry but its transport parameters lack retry_source_connection_id.", events(Response, retry)...)
		ok = false
	case retry != nil && !bytes.Equal(tp.RetrySourceConnectionID, retry.scid):
		t.Fail("rscid", reqMatch, fmt.Sprintf("retry_source_connection_id is %x but the Retry came from %x.", tp.RetrySourceConnectionID, retry.scid), events(Response, retry)...)
		ok = false
	case retry == nil && tp.HasRetrySourceConnectionID:
		t.Fail("rscid", reqMatch, "The server sent retry_source_connection_id although it sent no Retry.", ev...)
		ok = false
	}
	t.Fact("retry.policy", map[bool]string{true: "retry on first contact", false: "no retry on first contact"}[retry != nil])
	if ok {
		t.Pass("cid-authentication", reqMatch, "original_destination_connection_id, initial_source_connection_id and retry_source_connection_id match the connection IDs on the wire.", ev...)
	}
}

func runHSServerTPValid(ctx context.Context, t *T) {
	c, err := t.Dial(ctx, DialOptions{})
	tp, tpErr := c.trace.transportParameters()
	if tp == nil {
		if err != nil {
			t.dialFailure(c, err)
		}
		t.Inconclusive("The server's transport parameters could not be read from its EncryptedExtensions.")
	}
	var ee *packet
	for _, p := range received(t.rec.snapshot(), c.ID(), 0) {
		if p.space == 1 && p.has(wire.FrameTypeCrypto) {
			ee = p
			break
		}
	}
	ev := events(Response, ee)
	t.Fact("tp", tpFacts(tp))
	var grease []string
	for _, p := range tp.Raw {
		if wire.IsGreaseTransportParameter(p.ID) {
			grease = append(grease, fmt.Sprintf("0x%x", p.ID))
		}
	}
	if len(grease) > 0 {
		t.Fact("grease.tp", grease)
	}
	seen := map[uint64]bool{}
	dup := false
	for _, p := range tp.Raw {
		if seen[p.ID] {
			t.Fail("no-duplicates", t.sc.Requirements[0], fmt.Sprintf("The server sent transport parameter %s more than once.", wire.TransportParameterID(p.ID)), ev...)
			dup = true
			break
		}
		seen[p.ID] = true
	}
	if !dup {
		t.Pass("no-duplicates", t.sc.Requirements[0], fmt.Sprintf("The server sent %d transport parameters, none twice.", len(tp.Raw)), ev...)
	}
	if tpErr != nil {
		var we *wire.Error
		if errors.As(tpErr, &we) && !dup {
			req := reqTPInvalid
			if bytes.Contains([]byte(we.Reason), []byte("active_connection_id_limit")) {
				req = t.sc.Requirements[1]
			} else if bytes.Contains([]byte(we.Reason), []byte("preferred_address")) {
				req = t.sc.Requirements[2]
			}
			t.Fail("values", req, fmt.Sprintf("The server's transport parameters break a rule: %s; a conforming client must close with TRANSPORT_PARAMETER_ERROR.", we.Reason), ev...)
		}
		return
	}
	t.Pass("values", reqTPInvalid, "Every server transport parameter is well formed and in range.", ev...)
}

// tpVariant is one connection of a transport-parameter scenario.
type tpVariant struct {
	name string
	edit func(*wire.TransportParameters)
}

func (t *T) runTPVariants(ctx context.Context, vs []tpVariant, req Requirement, warnOnly bool) {
	for _, v := range vs {
		e := Expectation{Check: v.name, Req: req, Codes: []uint64{uint64(wire.TransportParameterError)},
			Describe: "client transport parameters with " + v.name, GoesOnWarns: warnOnly}
		t.ProvokeHandshake(ctx, DialOptions{Label: v.name, Probe: quic.Probe{TransportParameters: v.edit}}, e)
	}
}

func runHSClientTPInvalid(ctx context.Context, t *T) {
	t.runTPVariants(ctx, []tpVariant{
		{"max_udp_payload_size=1199", func(p *wire.TransportParameters) { p.MaxUDPPayloadSize = 1199 }},
		{"ack_delay_exponent=21", func(p *wire.TransportParameters) { p.AckDelayExponent = 21 }},
		{"max_ack_delay=16384", func(p *wire.TransportParameters) { p.MaxAckDelay = 16384 }},
	}, t.sc.Requirements[0], false)
	t.runTPVariants(ctx, []tpVariant{
		{"active_connection_id_limit=1", func(p *wire.TransportParameters) { p.ActiveConnectionIDLimit = 1 }},
	}, t.sc.Requirements[1], false)
}

func runHSClientTPServerOnly(ctx context.Context, t *T) {
	t.runTPVariants(ctx, []tpVariant{
		{"original_destination_connection_id", func(p *wire.TransportParameters) {
			p.HasOriginalDestinationConnectionID, p.OriginalDestinationConnectionID = true, randomBytes(8)
		}},
		{"preferred_address", func(p *wire.TransportParameters) {
			p.HasPreferredAddress = true
			p.PreferredAddress = wire.PreferredAddress{IPv4: [4]byte{127, 0, 0, 1}, IPv4Port: 4433, ConnectionID: randomBytes(8)}
		}},
		{"retry_source_connection_id", func(p *wire.TransportParameters) {
			p.HasRetrySourceConnectionID, p.RetrySourceConnectionID = true, randomBytes(8)
		}},
		{"stateless_reset_token", func(p *wire.TransportParameters) {
			p.HasStatelessResetToken = true
			copy(p.StatelessResetToken[:], randomBytes(16))
		}},
	}, t.sc.Requirements[0], false)
}

func runHSClientTPDuplicate(ctx context.Context, t *T) {
	t.runTPVariants(ctx, []tpVariant{
		{"initial_max_data twice", func(p *wire.TransportParameters) {
			raw, err := wire.ParseTransportParameterList(p.Marshal())
			if err != nil {
				return
			}
			raw = append(raw, wire.TransportParameter{ID: uint64(wire.TPInitialMaxData), Value: wire.AppendVarint(nil, 1000)})
			p.Raw = raw
		}},
	}, t.sc.Requirements[0], true)
}

func runHSClientTPStreamsOverLimit(ctx context.Context, t *T) {
	t.runTPVariants(ctx, []tpVariant{
		{"initial_max_streams_bidi=2^60+1", func(p *wire.TransportParameters) { p.InitialMaxStreamsBidi = wire.MaxStreams + 1 }},
		{"initial_max_streams_uni=2^60+1", func(p *wire.TransportParameters) { p.InitialMaxStreamsUni = wire.MaxStreams + 1 }},
	}, t.sc.Requirements[0], false)
}

func runHSStrayHandshake(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "stray"})
	h := wire.LongHeader{Version: wire.Version1, Type: wire.PacketTypeHandshake, DCID: rc.dcid, SCID: rc.scid, LengthLen: 2, PNLen: 2}
	hdr, lengthOff, _ := h.Append(nil)
	body := randomBytes(200)
	wire.PutVarintLen(hdr[lengthOff:], uint64(2+len(body)-2), 2)
	pkt := append(hdr[:len(hdr)-2], body...)
	rc.send(pkt)
	p := rc.trace.recordHeaderOnly(time.Now(), pkt, len(pkt))
	p.sent, p.ev.Direction, p.ev.PacketType = true, "sent", "handshake"
	rc.Receive(ctx, t.Settle(), nil)
	reqIgnore := t.sc.Requirements[0]
	n := t.datagramsReceived(rc.trace.id)
	rcv := received(t.rec.snapshot(), rc.trace.id, 0)
	if n == 0 {
		t.requireControl(ctx, "The server stayed silent after the stray Handshake packet")
		t.Pass("ignore", reqIgnore, "The server ignored a Handshake packet that no Initial preceded, while a normal handshake succeeded.", events(Trigger, p)...)
		return
	}
	for _, q := range rcv {
		if q.ev.PacketType != "unparsed" || q == p {
			t.Warn("ignore", reqIgnore, fmt.Sprintf("The server answered a stray Handshake packet with a %s packet instead of ignoring it.", q.ev.PacketType), append(events(Trigger, p), events(Response, q)...)...)
			return
		}
	}
	t.Pass("ignore", reqIgnore, fmt.Sprintf("The server answered the stray Handshake packet only with %d short datagram(s), taken as stateless resets, which §10.3 allows.", n), events(Trigger, p)...)
}

func runHSPaddingOnly(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "padding-only"})
	pkt, _ := rc.longPacket(0, []wire.Frame{&wire.PaddingFrame{Length: 1}}, longOpts{PadTo: 1200})
	rc.send(pkt)
	trig := rc.lastSent()
	rc.Receive(ctx, t.Settle(), nil)
	a := classify(t.rec.snapshot(), rc.trace.id)
	switch {
	case len(a.closes) > 0:
		t.Observe("answer", "The server closed the connection: "+closeCode(a.closes[0].closeFrame())+".", append(events(Trigger, trig), events(Response, a.closes[0])...)...)
	case len(a.handshake) > 0:
		t.Observe("answer", "The server answered the padding-only Initial (acknowledged it or sent handshake packets).", append(events(Trigger, trig), events(Response, a.handshake[0])...)...)
	default:
		t.Observe("answer", "The server dropped the padding-only Initial.", events(Trigger, trig)...)
	}
}

// sendUnknownVersion sends one Initial of a reserved version in a datagram
// of size bytes and returns the sent packet.
func sendUnknownVersion(ctx context.Context, rc *rawClient, size int) *packet {
	pkt, _ := rc.longPacket(0, []wire.Frame{&wire.CryptoFrame{Data: rc.ClientHello(ctx)}}, longOpts{PadTo: size})
	rc.send(pkt)
	return rc.lastSent()
}

// vnProbe sends an unknown-version Initial and collects the Version
// Negotiation replies to that single datagram.
func vnProbe(ctx context.Context, t *T, label string, dcid, scid []byte, size int) (*packet, []*packet) {
	rc := t.newRaw(ctx, rawOptions{Label: label, Version: reservedVersion, DCID: dcid, SCID: scid})
	trig := sendUnknownVersion(ctx, rc, size)
	vns := func() []*packet { return classify(t.rec.snapshot(), rc.trace.id).vn }
	rc.Receive(ctx, t.Settle(), func() bool { return len(vns()) > 0 })
	if len(vns()) > 0 {
		// Listen a little longer for a second reply to the same datagram.
		rc.Receive(ctx, max(t.PTO(), 300*time.Millisecond), nil)
	}
	return trig, vns()
}

func vnFacts(t *T, vn *packet) {
	t.Fact("version.supported", vn.ev.Frames)
	var reserved int
	for _, f := range vn.ev.Frames {
		var v uint32
		fmt.Sscanf(f, "version 0x%x", &v)
		if wire.IsGrease(wire.Version(v)) {
			reserved++
		}
	}
	t.Fact("grease.vn-versions", reserved)
}

func runVNUnknownVersion(ctx context.Context, t *T) {
	trig, vns := vnProbe(ctx, t, "reserved-version", randomBytes(8), randomBytes(8), 1200)
	switch {
	case len(vns) > 1:
		t.Fail("one-vn", reqVNOnce, fmt.Sprintf("The server sent %d Version Negotiation packets in response to one datagram.", len(vns)), append(events(Trigger, trig), events(Response, vns...)...)...)
	case len(vns) == 1:
		vnFacts(t, vns[0])
		t.Pass("vn", reqVNShould, fmt.Sprintf("The server answered a reserved version with one Version Negotiation packet listing %d version(s).", len(vns[0].ev.Frames)), append(events(Trigger, trig), events(Response, vns[0])...)...)
	default:
		if ok, msg := t.Control(ctx); !ok {
			t.Inconclusive("No Version Negotiation came back, and " + msg + ".")
		}
		t.Warn("vn", reqVNShould, fmt.Sprintf("No Version Negotiation came back within %v for a 1200-byte Initial of version 0x%08x, although a normal handshake succeeded.", t.Settle().Round(time.Millisecond), uint32(reservedVersion)), events(Trigger, trig)...)
	}
}

func runVNEcho(ctx context.Context, t *T, dcid, scid []byte, long bool) {
	trig, vns := vnProbe(ctx, t, "echo", dcid, scid, 1200)
	if len(vns) == 0 {
		t.requireControl(ctx, "No Version Negotiation came back")
		if !long {
			t.Unsupported("The server sent no Version Negotiation packet for a reserved version.", events(Trigger, trig)...)
		}
		_, plain := vnProbe(ctx, t, "plain", randomBytes(8), randomBytes(8), 1200)
		if len(plain) == 0 {
			t.Unsupported("The server sends no Version Negotiation packets at all.", events(Trigger, trig)...)
		}
		t.Warn("read-long-cids", t.sc.Requirements[1], fmt.Sprintf("The server answered an unknown version with 8-byte IDs but not with a %d-byte Destination and %d-byte Source Connection ID.", len(dcid), len(scid)), append(events(Trigger, trig), events(Context, plain[0])...)...)
		return
	}
	vn := vns[0]
	ev := append(events(Trigger, trig), events(Response, vn)...)
	reqSCID, reqDCID := t.sc.Requirements[0], reqVNEchoDCID
	if !bytes.Equal(vn.dcid, scid) {
		t.Fail("dcid-echo", reqSCID, fmt.Sprintf("The Version Negotiation packet's Destination Connection ID is %x (%d bytes), not the tester's Source Connection ID %x (%d bytes).", vn.dcid, len(vn.dcid), scid, len(scid)), ev...)
	} else {
		t.Pass("dcid-echo", reqSCID, fmt.Sprintf("The Version Negotiation packet echoes the tester's %d-byte Source Connection ID as its Destination Connection ID.", len(scid)), ev...)
	}
	if long {
		reqDCID = rfc("RFC 8999", "6", Must, "An endpoint MUST include the value from the Source Connection ID field of the packet it receives in the Destination Connection ID field.")
	}
	if !bytes.Equal(vn.scid, dcid) {
		t.Fail("scid-echo", reqDCID, fmt.Sprintf("The Version Negotiation packet's Source Connection ID is %x (%d bytes), not the tester's Destination Connection ID %x (%d bytes).", vn.scid, len(vn.scid), dcid, len(dcid)), ev...)
	} else {
		t.Pass("scid-echo", reqDCID, fmt.Sprintf("The Version Negotiation packet echoes the tester's %d-byte Destination Connection ID as its Source Connection ID.", len(dcid)), ev...)
	}
}

func runVNSmallDatagram(ctx context.Context, t *T) {
	trig, vns := vnProbe(ctx, t, "small", randomBytes(8), randomBytes(8), 600)
	req := t.sc.Requirements[0]
	if len(vns) > 0 {
		t.Fail("drop", req, fmt.Sprintf("The server answered a %d-byte datagram of an unsupported version with Version Negotiation; it must drop datagrams under 1200 bytes.", trig.ev.Size), append(events(Trigger, trig), events(Response, vns[0])...)...)
		return
	}
	t.requireControl(ctx, "The server stayed silent after the 600-byte datagram")
	t.Pass("drop", req, "The server dropped a 600-byte datagram of an unsupported version, while a normal handshake succeeded.", events(Trigger, trig)...)
}

func runVNNoReplyToVN(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "vn-to-server"})
	var versions []wire.Version
	for i := 0; i < 300; i++ {
		versions = append(versions, wire.Version(0x0a0a0a0a+uint32(i)<<4))
	}
	pkt := wire.AppendVersionNegotiation(nil, 0xc0, rc.dcid, rc.scid, versions...)
	rc.send(pkt)
	trig := rc.trace.recordHeaderOnly(time.Now(), pkt, len(pkt))
	trig.sent, trig.ev.Direction = true, "sent"
	rc.Receive(ctx, t.Settle(), nil)
	req := t.sc.Requirements[0]
	for _, p := range received(t.rec.snapshot(), rc.trace.id, 0) {
		if p != trig && p.ev.PacketType == "version_negotiation" {
			t.Fail("no-vn", req, "The server answered a Version Negotiation packet with a Version Negotiation packet.", append(events(Trigger, trig), events(Response, p)...)...)
			return
		}
	}
	t.requireControl(ctx, "The server stayed silent after the Version Negotiation packet")
	t.Pass("no-vn", req, fmt.Sprintf("The server did not answer a %d-byte Version Negotiation packet, while a normal handshake succeeded.", len(pkt)), events(Trigger, trig)...)
}

func runV2Handshake(ctx context.Context, t *T) {
	c, err := t.Dial(ctx, DialOptions{Versions: []uint32{quic.Version2}})
	if err != nil {
		t.dialFailure(c, err)
	}
	if v := c.ConnectionInfo().Version; v != quic.Version2 {
		t.Unsupported(fmt.Sprintf("The server moved the connection to version 0x%08x instead of accepting v2.", v))
	}
	t.Fact("version.supported", []string{"0x00000001?", "0x6b3343cf"})
	answered, detail := t.fetchSmall(ctx, c)
	var wrong, v2 []*packet
	for _, p := range received(t.rec.snapshot(), c.ID(), 0) {
		if p.space == 0 || p.space == 1 {
			if p.ev.Version == quic.Version2 {
				v2 = append(v2, p)
			} else if len(v2) > 0 && p.space == 1 {
				wrong = append(wrong, p)
			}
		}
	}
	switch {
	case len(wrong) > 0:
		t.Fail("negotiated-version", reqV2Negotiated, fmt.Sprintf("After answering in v2 the server sent a Handshake packet of version 0x%08x.", wrong[0].ev.Version), events(Response, wrong[0])...)
	case len(v2) == 0:
		t.Check("negotiated-version", Inconclusive, reqV2Negotiated, "The tester saw no long-header packet from the server carrying v2.")
	default:
		t.Pass("negotiated-version", reqV2Negotiated, fmt.Sprintf("All %d server Initial and Handshake packets carried v2.", len(v2)), events(Response, lastN(v2, 2)...)...)
	}
	if answered {
		t.Pass("v2-transfer", reqV2Implements, "The small resource was fetched over v2: "+detail+".")
	} else {
		t.Check("v2-transfer", Inconclusive, reqV2Implements, "The v2 handshake worked but "+detail+".")
	}
}

func runV2VersionInformation(ctx context.Context, t *T) {
	req := t.sc.Requirements[0]
	c2, err := t.Dial(ctx, DialOptions{Label: "v2", Versions: []uint32{quic.Version2}})
	if err != nil {
		t.dialFailure(c2, err)
	}
	if c2.ConnectionInfo().Version != quic.Version2 {
		t.Unsupported("The server did not accept a v2 handshake.")
	}
	c1, err := t.Dial(ctx, DialOptions{Label: "v1"})
	if err != nil {
		t.dialFailure(c1, err)
	}
	for _, c := range []*Conn{c2, c1} {
		tp := c.TransportParameters()
		switch {
		case tp == nil:
			t.Check("version_information "+c.trace.label, Inconclusive, req, "The server's transport parameters could not be read.")
		case !tp.HasVersionInformation:
			t.Fail("version_information "+c.trace.label, req, fmt.Sprintf("The server accepts v2 but sent no version_information on its %s connection.", c.trace.label))
		default:
			var av []string
			for _, v := range tp.VersionInformation.Available {
				av = append(av, fmt.Sprintf("0x%08x", uint32(v)))
			}
			t.Fact("version.information."+c.trace.label, map[string]any{"chosen": fmt.Sprintf("0x%08x", uint32(tp.VersionInformation.Chosen)), "available": av})
			t.Pass("version_information "+c.trace.label, req, fmt.Sprintf("The server sent version_information on its %s connection.", c.trace.label))
		}
	}
}
