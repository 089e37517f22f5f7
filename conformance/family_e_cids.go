package conformance

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family E: connection IDs, path validation and migration (catalogue §3.E).
// Connection ID management uses the engine (IssueConnectionID); paths use
// the raw client, which can send from several sockets.

var (
	reqCIDLimit          = rfc9000("5.1.1", MustNot, "An endpoint MUST NOT provide more connection IDs than the peer's limit.")
	reqCIDAccept         = rfc9000("5.1.1", Must, "When an endpoint issues a connection ID, it MUST accept packets that carry this connection ID for the duration of the connection or until its peer invalidates the connection ID")
	reqPathResponseEcho  = rfc9000("8.2.2", Must, "On receiving a PATH_CHALLENGE frame, an endpoint MUST respond by echoing the data contained in the PATH_CHALLENGE frame in a PATH_RESPONSE frame.")
	reqPathResponseNoDly = rfc9000("8.2.2", MustNot, "An endpoint MUST NOT delay transmission of a packet containing a PATH_RESPONSE frame unless constrained by congestion control.")
	reqPathResponseSize  = rfc9000("8.2.2", Must, "An endpoint MUST expand datagrams that contain a PATH_RESPONSE frame to at least the smallest allowed maximum datagram size of 1200 bytes.")
	reqPathResponsePath  = rfc9000("8.2.2", Must, "A PATH_RESPONSE frame MUST be sent on the network path where the PATH_CHALLENGE frame was received.")
	reqMigrateFollow     = rfc9000("9.3", Must, "If the recipient permits the migration, it MUST send subsequent packets to the new peer address and MUST initiate path validation")
	reqMigrateDropNoSR   = rfc9000("9", Must, "the endpoint MUST either drop the incoming packets on that path without generating a Stateless Reset or proceed with path validation and allow the peer to migrate.")
	reqCIDNotReused      = rfc9000("9.5", MustNot, "Similarly, an endpoint MUST NOT reuse a connection ID when sending to more than one destination address.")
	reqPathChallengeSize = rfc9000("8.2.1", Must, "MUST expand datagrams that contain a PATH_CHALLENGE frame to at least … 1200 bytes, unless the anti-amplification limit for the path does not permit")
	reqAmpUnvalidated    = rfc9000("8", Must, "an endpoint MUST limit the amount of data it sends to the unvalidated address to three times the amount of data received from that address.")
	reqOldPathValidated  = rfc9000("9.3.3", Must, "In response to an apparent migration, endpoints MUST validate the previously active path using a PATH_CHALLENGE frame.")
	reqCIDLengthInvalid  = rfc9000("19.15", Must, "Values less than 1 and greater than 20 are invalid and MUST be treated as a connection error of type FRAME_ENCODING_ERROR.")
)

func init() {
	Register(&Scenario{
		ID: "cid-issue-within-limit", Title: "Server connection IDs within the tester's limit", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{reqCIDLimit,
			rfc9000("5.1.1", May, "An endpoint MAY send connection IDs that temporarily exceed a peer's limit if the NEW_CONNECTION_ID frame also requires the retirement of any excess")},
		Run: runCIDIssueWithinLimit,
	})
	Register(&Scenario{
		ID: "cid-issue-format", Title: "Server connection IDs: sequence, uniqueness, length, tokens", Family: "E", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000("5.1.1", Must, "The sequence number on each newly issued connection ID MUST increase by 1."),
			rfc9000("5.1", MustNot, "the same connection ID MUST NOT be issued more than once on the same connection."),
			reqCIDLengthInvalid,
			rfc9000("10.3.2", MustNot, "The same stateless reset token MUST NOT be used for multiple connection IDs."),
		},
		Run: runCIDIssueFormat,
	})
	Register(&Scenario{
		ID: "cid-supply", Title: "Server supplies spare connection IDs", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("5.1.1", Should, "An endpoint SHOULD ensure that its peer has a sufficient number of available and unused connection IDs.")},
		Run:          runCIDSupply,
	})
	Register(&Scenario{
		ID: "cid-new-server-cid-accepted", Title: "Server accepts its sequence-1 connection ID", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{reqCIDAccept},
		Run:          runCIDNewServerCIDAccepted,
	})
	Register(&Scenario{
		ID: "cid-retire-replacement", Title: "Server replaces a retired connection ID", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("5.1.1", Should, "An endpoint SHOULD supply a new connection ID when the peer retires a connection ID.")},
		Run:          runCIDRetireReplacement,
	})
	registerProvoked(provokedSpec{
		id: "cid-retire-unissued", title: "RETIRE_CONNECTION_ID for a sequence number never issued", family: "E", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("19.16", Must, "Receipt of a RETIRE_CONNECTION_ID frame containing a sequence number greater than any previously sent to the peer MUST be treated as a connection error of type PROTOCOL_VIOLATION.")},
		codes:    transportCodes(wire.ProtocolViolation),
		describe: "a RETIRE_CONNECTION_ID frame for sequence number 1000, which the server never issued",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.RetireConnectionIDFrame{SequenceNumber: 1000}}
		},
	})
	Register(&Scenario{
		ID: "cid-retire-current", Title: "RETIRE_CONNECTION_ID naming the packet's own connection ID", Family: "E", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("19.16", May, "The peer MAY treat this as a connection error of type PROTOCOL_VIOLATION.")},
		Run:          runCIDRetireCurrent,
	})
	Register(&Scenario{
		ID: "cid-client-exceeds-limit", Title: "Tester issues more connection IDs than the server's limit", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("5.1.1", Must, "if the number of active connection IDs exceeds the value advertised in its active_connection_id_limit transport parameter, an endpoint MUST close the connection with an error of type CONNECTION_ID_LIMIT_ERROR.")},
		Run:          runCIDClientExceedsLimit,
	})
	Register(&Scenario{
		ID: "cid-retire-prior-to-honoured", Title: "Server honours Retire Prior To", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("5.1.2", Must, "the peer MUST stop using the corresponding connection IDs and retire them with RETIRE_CONNECTION_ID frames")},
		Run:          runCIDRetirePriorToHonoured,
	})
	registerProvoked(provokedSpec{
		id: "cid-retire-prior-to-invalid", title: "Retire Prior To above the sequence number", family: "E", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("19.15", Must, "Receiving a value in the Retire Prior To field that is greater than that in the Sequence Number field MUST be treated as a connection error of type FRAME_ENCODING_ERROR.")},
		codes:    transportCodes(wire.FrameEncodingError),
		describe: "a NEW_CONNECTION_ID frame whose Retire Prior To is one above its Sequence Number",
		frames: func(t *T, c *Conn) []wire.Frame {
			seq := nextTesterSeq(t, c)
			return []wire.Frame{&wire.NewConnectionIDFrame{SequenceNumber: seq, RetirePriorTo: seq + 1, ConnectionID: randomBytes(8), StatelessResetToken: [16]byte(randomBytes(16))}}
		},
	})
	registerProvoked(provokedSpec{
		id: "cid-length-invalid", title: "NEW_CONNECTION_ID with length 0 or 21", family: "E", needs: []string{NeedApp},
		reqs:     []Requirement{reqCIDLengthInvalid},
		codes:    transportCodes(wire.FrameEncodingError),
		describe: "a NEW_CONNECTION_ID frame with an invalid Length",
		variants: []variant{
			injectVariant("length-0", func(t *T, c *Conn) []wire.Frame {
				return []wire.Frame{&wire.NewConnectionIDFrame{SequenceNumber: nextTesterSeq(t, c), ConnectionID: []byte{}, StatelessResetToken: [16]byte(randomBytes(16))}}
			}),
			injectVariant("length-21", func(t *T, c *Conn) []wire.Frame {
				return []wire.Frame{&wire.NewConnectionIDFrame{SequenceNumber: nextTesterSeq(t, c), ConnectionID: randomBytes(21), StatelessResetToken: [16]byte(randomBytes(16))}}
			}),
		},
	})
	Register(&Scenario{
		ID: "cid-duplicate-frame-tolerated", Title: "The same NEW_CONNECTION_ID three times", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("19.15", MustNot, "Receipt of the same frame multiple times MUST NOT be treated as a connection error.")},
		Run:          runCIDDuplicateFrame,
	})
	Register(&Scenario{
		ID: "cid-new-cid-to-zero-length-user", Title: "NEW_CONNECTION_ID from a client with a zero-length ID", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("19.15", Must, "An endpoint that is sending packets with a zero-length Destination Connection ID MUST treat receipt of a NEW_CONNECTION_ID frame as a connection error of type PROTOCOL_VIOLATION.")},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawEstablished(ctx, rawOptions{Label: "zero-length-scid", SCID: []byte{}}, nil)
			t.rawProvoke(ctx, rc, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation),
				Describe: "a NEW_CONNECTION_ID frame from a client whose Source Connection ID is zero-length"}, true, func() {
				rc.Send1RTT([]wire.Frame{&wire.NewConnectionIDFrame{SequenceNumber: 1, ConnectionID: randomBytes(8), StatelessResetToken: [16]byte(randomBytes(16))}}, shortOpts{})
			})
		},
	})
	Register(&Scenario{
		ID: "cid-retire-to-zero-length-issuer", Title: "RETIRE_CONNECTION_ID to a server with zero-length IDs", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("19.16", Must, "An endpoint that provides a zero-length connection ID MUST treat receipt of a RETIRE_CONNECTION_ID frame as a connection error of type PROTOCOL_VIOLATION.")},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
			if len(rc.serverSCID) > 0 {
				t.Unsupported(fmt.Sprintf("The server uses %d-byte connection IDs, not zero-length ones.", len(rc.serverSCID)))
			}
			t.rawProvoke(ctx, rc, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation),
				Describe: "a RETIRE_CONNECTION_ID frame to a server with a zero-length connection ID"}, true, func() {
				rc.Send1RTT([]wire.Frame{&wire.RetireConnectionIDFrame{SequenceNumber: 0}}, shortOpts{})
			})
		},
	})
	Register(&Scenario{
		ID: "path-challenge-echo", Title: "PATH_CHALLENGE on the current path", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{reqPathResponseEcho, reqPathResponseNoDly, reqPathResponseSize,
			rfc9000("9.3.3", Should, "An endpoint that receives a PATH_CHALLENGE on an active path SHOULD send a non-probing packet in response."),
			rfc9000("8.2.2", MustNot, "An endpoint MUST NOT send more than one PATH_RESPONSE frame in response to one PATH_CHALLENGE frame")},
		Run: runPathChallengeEcho,
	})
	Register(&Scenario{
		ID: "path-challenge-small-datagram", Title: "PATH_CHALLENGE in a 60-byte datagram", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("8.2.1", MustNot, "endpoints MUST NOT discard datagrams that appear to be too small when they contain PATH_CHALLENGE or PATH_RESPONSE.")},
		Run:          runPathChallengeSmall,
	})
	Register(&Scenario{
		ID: "path-probe-new-port", Title: "Probing packet from a new port", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{reqPathResponsePath, reqPathResponseSize},
		Run:          runPathProbeNewPort,
	})
	Register(&Scenario{
		ID: "path-nat-rebinding", Title: "NAT rebinding in the middle of a download", Family: "E", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqMigrateFollow, reqMigrateDropNoSR},
		Run:          runPathNATRebinding,
	})
	Register(&Scenario{
		ID: "path-challenge-datagram-size", Title: "Server PATH_CHALLENGE datagrams are 1200 bytes", Family: "E", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqPathChallengeSize},
		Run:          runPathChallengeDatagramSize,
	})
	Register(&Scenario{
		ID: "path-rebinding-amplification", Title: "3× limit towards an unvalidated new port", Family: "E", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqAmpUnvalidated},
		Run:          runPathRebindingAmplification,
	})
	Register(&Scenario{
		ID: "path-old-path-validated", Title: "Server validates the previous path after a migration", Family: "E", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqOldPathValidated},
		Run:          runPathOldPathValidated,
	})
	Register(&Scenario{
		ID: "path-migration-disabled", Title: "Migration when the server disabled it", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{reqMigrateDropNoSR},
		Run:          runPathMigrationDisabled,
	})
	Register(&Scenario{
		ID: "path-migration-new-cid", Title: "Server uses a new connection ID on the new path", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{reqCIDNotReused},
		Run: func(ctx context.Context, t *T) {
			runPathActiveMigration(ctx, t, false)
		},
	})
	Register(&Scenario{
		ID: "path-migration-address-change", Title: "Migration to another local IP address", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{reqMigrateFollow, reqCIDNotReused},
		Run: func(ctx context.Context, t *T) {
			runPathActiveMigration(ctx, t, true)
		},
	})
	Register(&Scenario{
		ID: "path-response-unsolicited", Title: "PATH_RESPONSE matching no challenge", Family: "E", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("19.18", May, "does not match the content of a PATH_CHALLENGE frame previously sent by the endpoint, the endpoint MAY generate a connection error of type PROTOCOL_VIOLATION.")},
		Run:          runPathResponseUnsolicited,
	})
	Register(&Scenario{
		ID: "path-new-token-after-validation", Title: "NEW_TOKEN after a new client address is validated", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("9.3", Should, "After verifying a new client address, the server SHOULD send new address validation tokens … to the client.")},
		Run:          runPathNewTokenAfterValidation,
	})
	Register(&Scenario{
		ID: "prefaddr-format", Title: "preferred_address carries a connection ID and token", Family: "E", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000("18.2", MustNot, "Similarly, a server MUST NOT include a zero-length connection ID in this transport parameter."),
			rfc9000("18.2", MustNot, "A server that chooses a zero-length connection ID MUST NOT provide a preferred address."),
		},
		Run: runPrefAddrFormat,
	})
}

// serverCIDs lists the connection IDs the server issued on conn: the
// handshake one (sequence 0), preferred_address (sequence 1) and every
// NEW_CONNECTION_ID, with the packets that carried them.
func serverNCIDs(t *T, conn int) []frameAt {
	return framesOf[*wire.NewConnectionIDFrame](t.rec.snapshot(), conn, 0, false)
}

// nextTesterSeq is one above the highest sequence number the tester has
// issued on c (the engine issues some on its own).
func nextTesterSeq(t *T, c *Conn) uint64 {
	next := uint64(1)
	for _, fa := range framesOf[*wire.NewConnectionIDFrame](t.rec.snapshot(), c.ID(), 0, true) {
		if s := fa.f.(*wire.NewConnectionIDFrame).SequenceNumber; s+1 > next {
			next = s + 1
		}
	}
	return next
}

func runCIDIssueWithinLimit(ctx context.Context, t *T) {
	req := t.sc.Requirements[0]
	issued := map[string]int{}
	for _, limit := range []uint64{3, 2} {
		c := t.mustDial(ctx, DialOptions{Label: fmt.Sprintf("limit-%d", limit), Config: func(cfg *quic.Config) { cfg.ActiveConnectionIDLimit = limit }})
		t.rec.wait(ctx, t.Settle(), nil)
		tp := t.serverTP(c)
		active := map[uint64]bool{0: true}
		if tp.HasPreferredAddress {
			active[1] = true
		}
		fs := serverNCIDs(t, c.ID())
		for _, fa := range fs {
			f := fa.f.(*wire.NewConnectionIDFrame)
			active[f.SequenceNumber] = true
			for s := range active {
				if s < f.RetirePriorTo {
					delete(active, s)
				}
			}
			if uint64(len(active)) > limit {
				t.Fail("limit", req, fmt.Sprintf("With active_connection_id_limit = %d the server had %d active connection IDs after NEW_CONNECTION_ID sequence %d (Retire Prior To %d).", limit, len(active), f.SequenceNumber, f.RetirePriorTo),
					events(Response, packetsOf(fs)...)...)
				return
			}
		}
		issued[fmt.Sprintf("limit-%d", limit)] = len(fs)
	}
	t.Fact("cid.issued", issued)
	t.Pass("limit", req, fmt.Sprintf("The server stayed within the tester's active_connection_id_limit of 3 and of 2 (NEW_CONNECTION_ID frames: %v).", issued))
}

func runCIDIssueFormat(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "engine"})
	t.fetchSmall(ctx, c)
	t.rec.wait(ctx, t.PTO(), nil)
	tp := t.serverTP(c)
	reqs := t.sc.Requirements
	fs := serverNCIDs(t, c.ID())
	bySeq := map[uint64]*wire.NewConnectionIDFrame{}
	tokens := map[[16]byte]string{}
	if tp.HasStatelessResetToken {
		tokens[tp.StatelessResetToken] = "the handshake connection ID"
	}
	if tp.HasPreferredAddress {
		bySeq[1] = &wire.NewConnectionIDFrame{SequenceNumber: 1, ConnectionID: tp.PreferredAddress.ConnectionID, StatelessResetToken: tp.PreferredAddress.StatelessResetToken}
		tokens[tp.PreferredAddress.StatelessResetToken] = "preferred_address"
	}
	ids := map[string]uint64{}
	if scid := c.trace.serverHandshakeSCID(); scid != nil {
		ids[string(scid)] = 0
	}
	for _, fa := range fs {
		f := fa.f.(*wire.NewConnectionIDFrame)
		if len(f.ConnectionID) < 1 || len(f.ConnectionID) > 20 {
			t.Fail("length", reqs[2], fmt.Sprintf("The server issued a %d-byte connection ID (sequence %d); the tester would be bound to close with FRAME_ENCODING_ERROR.", len(f.ConnectionID), f.SequenceNumber), events(Response, fa.p)...)
			return
		}
		if prev, ok := bySeq[f.SequenceNumber]; ok {
			if !bytes.Equal(prev.ConnectionID, f.ConnectionID) || prev.StatelessResetToken != f.StatelessResetToken {
				t.Fail("sequence", reqs[0], fmt.Sprintf("The server sent sequence number %d twice with different connection IDs or tokens.", f.SequenceNumber), events(Response, fa.p)...)
				return
			}
			continue // a repeat repairing a loss
		}
		if s, ok := ids[string(f.ConnectionID)]; ok {
			t.Fail("unique", reqs[1], fmt.Sprintf("The server issued connection ID %x twice (sequence %d and %d).", f.ConnectionID, s, f.SequenceNumber), events(Response, fa.p)...)
			return
		}
		if where, ok := tokens[f.StatelessResetToken]; ok {
			t.Fail("tokens", reqs[3], fmt.Sprintf("The server gave sequence %d the same stateless reset token as %s.", f.SequenceNumber, where), events(Response, fa.p)...)
			return
		}
		bySeq[f.SequenceNumber] = f
		ids[string(f.ConnectionID)] = f.SequenceNumber
		tokens[f.StatelessResetToken] = fmt.Sprintf("sequence %d", f.SequenceNumber)
	}
	seqs := make([]uint64, 0, len(bySeq))
	for s := range bySeq {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fail("sequence", reqs[0], fmt.Sprintf("The server's connection ID sequence numbers are %v: they do not go up by one from 1.", seqs), events(Response, packetsOf(fs)...)...)
			return
		}
	}
	t.Fact("cid.issued", len(seqs))
	if len(seqs) == 0 {
		t.Pass("format", reqs[0], "The server issued no connection ID beyond the handshake one; nothing breaks the rules.")
		return
	}
	t.Pass("format", reqs[0], fmt.Sprintf("The server's %d extra connection IDs have sequence numbers 1…%d, distinct values of valid length and distinct reset tokens.", len(seqs), len(seqs)), events(Response, packetsOf(fs)...)...)
}

// serverHandshakeSCID is the Source Connection ID of the server's first
// Initial or Handshake packet on the connection.
func (c *connTrace) serverHandshakeSCID() []byte {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	for _, p := range c.r.packets {
		if p.conn == c.id && !p.sent && (p.space == 0 || p.space == 1) && p.ev.PacketType != "retry" {
			return p.scid
		}
	}
	return nil
}

func runCIDSupply(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "engine"})
	tp := t.serverTP(c)
	if scid := c.trace.serverHandshakeSCID(); len(scid) == 0 {
		t.Unsupported("The server uses a zero-length connection ID, so it has no spare IDs to give.")
	}
	t.rec.wait(ctx, t.Settle(), func(ps []*packet) bool { return len(framesOf[*wire.NewConnectionIDFrame](ps, c.ID(), 0, false)) > 0 })
	fs := serverNCIDs(t, c.ID())
	t.Fact("cid.issued", len(fs))
	req := t.sc.Requirements[0]
	switch {
	case len(fs) > 0:
		t.Pass("supply", req, fmt.Sprintf("The server gave the tester %d spare connection ID(s) after the handshake.", len(fs)), events(Response, packetsOf(fs)...)...)
	case tp.DisableActiveMigration:
		t.Observe("supply", "The server issued no spare connection ID and sent disable_active_migration, so the tester has no use for one.")
	default:
		t.Warn("supply", req, fmt.Sprintf("The server issued no spare connection ID within %v although it allows migration; issue NEW_CONNECTION_ID frames after the handshake.", t.Settle().Round(time.Millisecond)))
	}
}

// rawSpareCID waits for the server's first spare connection ID on the raw
// client and returns its frame, or ends the scenario as unsupported.
func (t *T) rawSpareCID(ctx context.Context, rc *rawClient) *wire.NewConnectionIDFrame {
	rc.receiveUntil(ctx, t.Settle(), 0, hasFrame[*wire.NewConnectionIDFrame]())
	fs := framesOf[*wire.NewConnectionIDFrame](t.rec.snapshot(), rc.trace.id, 0, false)
	for _, fa := range fs {
		if f := fa.f.(*wire.NewConnectionIDFrame); f.SequenceNumber >= 1 && len(f.ConnectionID) > 0 {
			return f
		}
	}
	t.Unsupported(fmt.Sprintf("The server issued no spare connection ID within %v, so there is none to switch to.", t.Settle().Round(time.Millisecond)))
	return nil
}

func runCIDNewServerCIDAccepted(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	spare := t.rawSpareCID(ctx, rc)
	old := rc.dcid
	rc.dcid = append([]byte(nil), spare.ConnectionID...)
	mark := t.mark()
	req := t.sc.Requirements[0]
	body, err := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	trig := framesOf[*wire.StreamFrame](t.rec.snapshot(), rc.trace.id, mark, true)
	if err == nil || len(body) > 0 {
		t.Pass("accepted", req, fmt.Sprintf("Addressed with its sequence-%d connection ID %x, the server answered the request (%d bytes).", spare.SequenceNumber, spare.ConnectionID, len(body)), events(Trigger, packetsOf(trig)...)...)
		return
	}
	for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
		if p.ev.PacketType == "stateless_reset" {
			t.Fail("accepted", req, fmt.Sprintf("The server answered packets addressed to its sequence-%d connection ID with a stateless reset.", spare.SequenceNumber), append(events(Trigger, packetsOf(trig)...), events(Response, p)...)...)
			return
		}
	}
	// Does the old ID still work?
	rc.dcid = old
	m2 := t.mark()
	pg := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	if a := rc.receiveUntil(ctx, t.PTO()*2, m2, func(p *packet) bool { return ackedBy([]*packet{p}, rc.trace.id, 2, pg.pn) != nil }); a != nil {
		t.Fail("accepted", req, fmt.Sprintf("The server ignored packets addressed to its sequence-%d connection ID (%v) while it still acknowledges its sequence-0 ID.", spare.SequenceNumber, err), append(events(Trigger, packetsOf(trig)...), events(Response, a)...)...)
		return
	}
	t.Inconclusive(fmt.Sprintf("The server answered neither on its new connection ID (%v) nor on the old one afterwards.", err), events(Trigger, packetsOf(trig)...)...)
}

func runCIDRetireReplacement(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	spare := t.rawSpareCID(ctx, rc)
	rc.Receive(ctx, t.PTO(), nil) // let the rest of the server's first batch arrive
	var maxSeq uint64
	for _, fa := range framesOf[*wire.NewConnectionIDFrame](t.rec.snapshot(), rc.trace.id, 0, false) {
		maxSeq = max(maxSeq, fa.f.(*wire.NewConnectionIDFrame).SequenceNumber)
	}
	rc.dcid = append([]byte(nil), spare.ConnectionID...)
	mark := t.mark()
	trig := rc.Send1RTT([]wire.Frame{&wire.RetireConnectionIDFrame{SequenceNumber: 0}}, shortOpts{})
	req := t.sc.Requirements[0]
	p := rc.receiveUntil(ctx, t.Settle(), mark, func(p *packet) bool {
		for _, f := range p.frames {
			if n, ok := f.(*wire.NewConnectionIDFrame); ok && n.SequenceNumber > maxSeq {
				return true
			}
		}
		return false
	})
	if p != nil {
		t.Pass("replacement", req, fmt.Sprintf("After the tester retired sequence 0, the server issued a new connection ID above sequence %d.", maxSeq), append(events(Trigger, trig), events(Response, p)...)...)
		return
	}
	if rc.peerClosed {
		t.Inconclusive("The server closed the connection after the tester retired sequence 0.", events(Trigger, trig)...)
	}
	t.Warn("replacement", req, fmt.Sprintf("The server issued no new connection ID within %v after the tester retired sequence 0; supply a replacement when the peer retires one.", t.Settle().Round(time.Millisecond)), events(Trigger, trig)...)
}

func runCIDRetireCurrent(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	spare := t.rawSpareCID(ctx, rc)
	rc.dcid = append([]byte(nil), spare.ConnectionID...)
	mark := t.mark()
	trig := rc.Send1RTT([]wire.Frame{&wire.RetireConnectionIDFrame{SequenceNumber: spare.SequenceNumber}}, shortOpts{})
	rc.Receive(ctx, t.PTO(), nil)
	pg := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	rc.Receive(ctx, t.Settle(), func() bool { return rc.peerClosed })
	ps := t.rec.snapshot()
	if cl := firstClose(received(ps, rc.trace.id, mark)); cl != nil {
		t.Fact("cid.retire-current", "close "+closeCode(cl.closeFrame()))
		t.Observe("reaction", fmt.Sprintf("The server closed with %s when a packet retired its own connection ID (allowed).", closeCode(cl.closeFrame())), append(events(Trigger, trig), events(Response, cl)...)...)
		return
	}
	if a := ackedBy(ps, rc.trace.id, 2, pg.pn); a != nil {
		t.Fact("cid.retire-current", "ignored")
		t.Observe("reaction", "The server went on after a packet retired its own connection ID.", append(events(Trigger, trig), events(Response, a)...)...)
		return
	}
	t.Inconclusive("After the tester retired the connection ID of the very packet, the server neither closed nor acknowledged a later PING.", events(Trigger, trig, pg)...)
}

func runCIDClientExceedsLimit(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "engine"})
	tp := t.serverTP(c)
	limit := tp.ActiveConnectionIDLimit
	if limit == 0 {
		limit = 2
	}
	if limit > 16 {
		t.Inconclusive(fmt.Sprintf("The server's active_connection_id_limit is %d; the tester does not issue that many IDs.", limit))
	}
	t.rec.wait(ctx, t.PTO(), nil) // the engine issues its own spare IDs first
	e := Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ConnectionIDLimitError),
		Describe: fmt.Sprintf("NEW_CONNECTION_ID frames that give the server %d active tester IDs (its limit is %d)", limit+1, limit)}
	t.Provoke(ctx, c, e, func() {
		active := map[uint64]bool{0: true}
		for _, fa := range framesOf[*wire.NewConnectionIDFrame](t.rec.snapshot(), c.ID(), 0, true) {
			active[fa.f.(*wire.NewConnectionIDFrame).SequenceNumber] = true
		}
		for _, fa := range framesOf[*wire.RetireConnectionIDFrame](t.rec.snapshot(), c.ID(), 0, false) {
			delete(active, fa.f.(*wire.RetireConnectionIDFrame).SequenceNumber)
		}
		seq := nextTesterSeq(t, c)
		for n := uint64(len(active)); n <= limit; n++ {
			if _, err := c.IssueConnectionID(seq, 0); err != nil {
				t.Errorf("IssueConnectionID: %v", err)
			}
			seq++
		}
	})
}

func runCIDRetirePriorToHonoured(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	if len(rc.scid) == 0 {
		t.Errorf("the raw client has a zero-length connection ID")
	}
	rc.Receive(ctx, t.PTO(), nil)
	old := rc.scid
	cid := randomBytes(len(rc.scid))
	mark := t.mark()
	trig := rc.Send1RTT([]wire.Frame{&wire.NewConnectionIDFrame{SequenceNumber: 1, RetirePriorTo: 1, ConnectionID: cid, StatelessResetToken: [16]byte(randomBytes(16))}}, shortOpts{})
	sent := time.Now()
	for waited := time.Duration(0); waited < t.Settle() && !rc.peerClosed; waited += t.PTO() {
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
		rc.Receive(ctx, t.PTO(), nil)
	}
	req := t.sc.Requirements[0]
	ps := t.rec.snapshot()
	var retire *packet
	for _, fa := range framesOf[*wire.RetireConnectionIDFrame](ps, rc.trace.id, mark, false) {
		if fa.f.(*wire.RetireConnectionIDFrame).SequenceNumber == 0 {
			retire = fa.p
		}
	}
	if retire == nil {
		t.Fail("retired", req, fmt.Sprintf("After NEW_CONNECTION_ID sequence 1 with Retire Prior To 1 the server never retired sequence 0 within %v.", t.Settle().Round(time.Millisecond)), events(Trigger, trig)...)
		return
	}
	late := sent.Add(t.PTO() + t.RTT())
	for _, p := range received(ps, rc.trace.id, mark) {
		if p.space == 2 && p.at.After(late) && bytes.Equal(p.dcid, old) {
			t.Fail("stopped", req, fmt.Sprintf("The server retired sequence 0 but still addressed packets to it (%x) %v after the tester's Retire Prior To.", old, p.at.Sub(sent).Round(time.Millisecond)), append(events(Trigger, trig), events(Response, retire, p)...)...)
			return
		}
	}
	t.Pass("retired", req, fmt.Sprintf("The server retired sequence 0 and moved its packets to %x.", cid), append(events(Trigger, trig), events(Response, retire)...)...)
}

func runCIDDuplicateFrame(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	rc.Receive(ctx, t.PTO(), nil)
	f := &wire.NewConnectionIDFrame{SequenceNumber: 1, ConnectionID: randomBytes(len(rc.scid)), StatelessResetToken: [16]byte(randomBytes(16))}
	if len(rc.scid) == 0 {
		t.Errorf("the raw client has a zero-length connection ID")
	}
	mark := t.mark()
	var trig []*packet
	for i := 0; i < 3; i++ {
		trig = append(trig, rc.Send1RTT([]wire.Frame{f}, shortOpts{}))
		rc.Receive(ctx, 10*time.Millisecond, nil)
	}
	var pings []*packet
	for waited := time.Duration(0); waited < t.Settle() && !rc.peerClosed; waited += t.PTO() {
		pings = append(pings, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{}))
		rc.Receive(ctx, t.PTO(), nil)
	}
	ps := t.rec.snapshot()
	req := t.sc.Requirements[0]
	if cl := firstClose(received(ps, rc.trace.id, mark)); cl != nil {
		t.Fail("tolerated", req, fmt.Sprintf("The server closed with %s after receiving the same NEW_CONNECTION_ID frame three times.", closeCode(cl.closeFrame())), append(events(Trigger, trig...), events(Response, cl)...)...)
		return
	}
	for _, pg := range pings {
		if a := ackedBy(ps, rc.trace.id, 2, pg.pn); a != nil {
			t.Pass("tolerated", req, "The server kept the connection open and acknowledged later PINGs after the same NEW_CONNECTION_ID frame arrived three times.", append(events(Trigger, trig...), events(Response, a)...)...)
			return
		}
	}
	t.Inconclusive("After the repeated NEW_CONNECTION_ID frames the server neither closed nor acknowledged later PINGs.", events(Trigger, trig...)...)
}

func runPathChallengeEcho(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	rc.Receive(ctx, t.PTO(), nil)
	data := [8]byte(randomBytes(8))
	mark := t.mark()
	trig := rc.Send1RTT([]wire.Frame{&wire.PathChallengeFrame{Data: data}}, shortOpts{PadTo: 1200})
	sent := trig.at
	resp := rc.receiveUntil(ctx, t.Settle(), mark, hasFrame[*wire.PathResponseFrame]())
	if resp == nil {
		// An acknowledgment proves the challenge was processed (RFC
		// 9000 §13.1), so its missing answer is a violation, not silence.
		if a := ackedBy(t.rec.snapshot(), rc.trace.id, 2, trig.pn); a != nil {
			t.Fail("echo", t.sc.Requirements[0], fmt.Sprintf("The server acknowledged the packet carrying the PATH_CHALLENGE but sent no PATH_RESPONSE within %v.", t.Settle().Round(time.Millisecond)), append(events(Trigger, trig), events(Response, a)...)...)
			return
		}
		t.Inconclusive(fmt.Sprintf("No PATH_RESPONSE arrived within %v of the PATH_CHALLENGE.", t.Settle().Round(time.Millisecond)), events(Trigger, trig)...)
	}
	rc.Receive(ctx, t.PTO(), nil) // room for a second response or a non-probing packet
	reqs := t.sc.Requirements
	ps := t.rec.snapshot()
	rs := framesOf[*wire.PathResponseFrame](ps, rc.trace.id, mark, false)
	delay := resp.at.Sub(sent)
	t.Fact("path.response-delay-ms", float64(delay.Microseconds())/1000)
	for _, fa := range rs {
		if fa.f.(*wire.PathResponseFrame).Data != data {
			t.Fail("echo", reqs[0], fmt.Sprintf("The server's PATH_RESPONSE carries %x, not the challenge's %x.", fa.f.(*wire.PathResponseFrame).Data, data), append(events(Trigger, trig), events(Response, fa.p)...)...)
			return
		}
	}
	t.Pass("echo", reqs[0], fmt.Sprintf("The server echoed the challenge data after %v.", delay.Round(time.Microsecond)), append(events(Trigger, trig), events(Response, resp)...)...)
	if len(rs) > 1 {
		t.Fail("once", reqs[4], fmt.Sprintf("The server sent %d PATH_RESPONSE frames for one PATH_CHALLENGE.", len(rs)), append(events(Trigger, trig), events(Response, packetsOf(rs)...)...)...)
	}
	if resp.datagram > 0 && resp.datagram < 1200 {
		t.Fail("size", reqs[2], fmt.Sprintf("The server's PATH_RESPONSE came in a %d-byte datagram on the already validated path; expand it to 1200 bytes.", resp.datagram), append(events(Trigger, trig), events(Response, resp)...)...)
	} else {
		t.Pass("size", reqs[2], fmt.Sprintf("The PATH_RESPONSE datagram was %d bytes.", resp.datagram), events(Response, resp)...)
	}
	if delay > 2*t.PTO() {
		t.Fail("no-delay", reqs[1], fmt.Sprintf("The PATH_RESPONSE came %v after the challenge, more than 2 PTO (%v) with nothing else in flight.", delay.Round(time.Millisecond), (2*t.PTO()).Round(time.Millisecond)), append(events(Trigger, trig), events(Response, resp)...)...)
	}
	for _, p := range received(ps, rc.trace.id, mark) {
		if !isProbingOnly(p) && p.space == 2 {
			t.Pass("non-probing", reqs[3], fmt.Sprintf("A non-probing packet followed %v after the challenge.", p.at.Sub(sent).Round(time.Microsecond)), events(Response, p)...)
			return
		}
	}
	t.Warn("non-probing", reqs[3], fmt.Sprintf("No non-probing packet (such as one carrying an ACK) followed the challenge within %v; answer a challenge on the active path with a non-probing packet.", (t.PTO()+t.Settle()).Round(time.Millisecond)), events(Trigger, trig)...)
}

func runPathChallengeSmall(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	rc.Receive(ctx, t.PTO(), nil)
	data := [8]byte(randomBytes(8))
	mark := t.mark()
	trig := rc.Send1RTT([]wire.Frame{&wire.PathChallengeFrame{Data: data}}, shortOpts{PadTo: 60})
	req := t.sc.Requirements[0]
	if resp := rc.receiveUntil(ctx, t.Settle(), mark, hasFrame[*wire.PathResponseFrame]()); resp != nil {
		t.Pass("answered", req, fmt.Sprintf("The server answered a PATH_CHALLENGE in a %d-byte datagram.", len(trig.ev.Frames)+trig.ev.Size), append(events(Trigger, trig), events(Response, resp)...)...)
		return
	}
	// Control: the same challenge in a full-size datagram.
	m2 := t.mark()
	ctl := rc.Send1RTT([]wire.Frame{&wire.PathChallengeFrame{Data: [8]byte(randomBytes(8))}}, shortOpts{PadTo: 1200})
	if resp := rc.receiveUntil(ctx, t.Settle(), m2, hasFrame[*wire.PathResponseFrame]()); resp != nil {
		t.Fail("answered", req, fmt.Sprintf("The server ignored a PATH_CHALLENGE in a %d-byte packet but answered the same challenge in a 1200-byte datagram.", trig.ev.Size), append(events(Trigger, trig, ctl), events(Response, resp)...)...)
		return
	}
	t.Inconclusive("The server answered neither the small PATH_CHALLENGE nor a 1200-byte control challenge.", events(Trigger, trig, ctl)...)
}

func runPathProbeNewPort(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	if tp := rc.ServerTP(); tp != nil && tp.DisableActiveMigration {
		// RFC 9000 §9: the tester must not send probing packets from
		// another local address then.
		t.Unsupported("The server sent disable_active_migration, so the tester may not probe from another address.")
	}
	rc.giveSpareCIDs()
	dcid := rc.dcid
	rc.receiveUntil(ctx, t.PTO(), 0, hasFrame[*wire.NewConnectionIDFrame]())
	for _, fa := range framesOf[*wire.NewConnectionIDFrame](t.rec.snapshot(), rc.trace.id, 0, false) {
		if f := fa.f.(*wire.NewConnectionIDFrame); f.SequenceNumber >= 1 && len(f.ConnectionID) > 0 {
			dcid = f.ConnectionID // RFC 9000 §9.5: a new path takes a new connection ID
			break
		}
	}
	np, err := rc.newPath(netip.Addr{})
	if err != nil {
		t.Inconclusive(err.Error())
	}
	data := [8]byte(randomBytes(8))
	mark := t.mark()
	trig := rc.Send1RTTOn(np, []wire.Frame{&wire.PathChallengeFrame{Data: data}}, shortOpts{PadTo: 1200, DCID: dcid})
	rc.Request(t.profile.SmallPath) // application data goes on over the old path
	resp := rc.receiveUntil(ctx, t.Settle(), mark, func(p *packet) bool {
		for _, f := range p.frames {
			if r, ok := f.(*wire.PathResponseFrame); ok && r.Data == data {
				return true
			}
		}
		return false
	})
	reqs := t.sc.Requirements
	if resp == nil {
		t.Inconclusive(fmt.Sprintf("No PATH_RESPONSE to the probe from the new port arrived within %v.", t.Settle().Round(time.Millisecond)), events(Trigger, trig)...)
	}
	rc.Receive(ctx, t.PTO(), nil)
	ps := received(t.rec.snapshot(), rc.trace.id, mark)
	var challenged, moved bool
	for _, p := range ps {
		if p.path == np && p.has(wire.FrameTypePathChallenge) {
			challenged = true
		}
		if p.path == np && !isProbingOnly(p) {
			moved = true
		}
	}
	t.Fact("path.probe-new-port", map[string]bool{"server-probed-new-path": challenged, "non-probing-on-new-path": moved})
	if resp.path != np {
		t.Fail("path", reqs[0], fmt.Sprintf("The PATH_RESPONSE to a challenge from port %d went to port %d instead.", rc.paths[np].local.Port(), rc.paths[resp.path].local.Port()), append(events(Trigger, trig), events(Response, resp)...)...)
		return
	}
	t.Pass("path", reqs[0], "The PATH_RESPONSE went back to the new port the challenge came from.", append(events(Trigger, trig), events(Response, resp)...)...)
	if resp.datagram < 1200 {
		// 1200 bytes received from the new path allow 3600 back.
		t.Fail("size", reqs[1], fmt.Sprintf("The PATH_RESPONSE on the new path came in a %d-byte datagram although 1200 bytes from that path allow 3600 back.", resp.datagram), events(Response, resp)...)
		return
	}
	t.Pass("size", reqs[1], fmt.Sprintf("The PATH_RESPONSE datagram was %d bytes.", resp.datagram), events(Response, resp)...)
}

// giveSpareCIDs issues the server spare tester connection IDs, up to its
// active_connection_id_limit (at most 4 in all), as a client that may
// migrate does.
func (rc *rawClient) giveSpareCIDs() {
	if len(rc.scid) == 0 || rc.sparesGiven {
		return
	}
	rc.sparesGiven = true
	limit := uint64(2)
	if tp := rc.ServerTP(); tp != nil && tp.ActiveConnectionIDLimit > 0 {
		limit = min(tp.ActiveConnectionIDLimit, 4)
	}
	var frames []wire.Frame
	for s := uint64(1); s < limit; s++ {
		frames = append(frames, &wire.NewConnectionIDFrame{SequenceNumber: s, ConnectionID: randomBytes(len(rc.scid)), StatelessResetToken: [16]byte(randomBytes(16))})
	}
	if len(frames) > 0 {
		rc.Send1RTT(frames, shortOpts{})
	}
}

// rebinding is what a mid-download move to a new port showed.
type rebinding struct {
	rc       *rawClient
	np       int
	at       time.Time
	mark     int
	trig     *packet
	complete bool
	tp       *wire.TransportParameters
}

// rebind starts the large download on path 0, moves to a new port (same
// Destination Connection ID) after about a quarter of it, and lets the
// download go on from there. silent makes the tester stop everything
// after one packet from the new port (no PATH_RESPONSE, no ACKs).
func (t *T) rebind(ctx context.Context, silent bool) *rebinding {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	rb := &rebinding{rc: rc, tp: rc.ServerTP()}
	rc.giveSpareCIDs()
	req := rc.Request(t.profile.Target.LargePath)
	rc.Receive(ctx, t.Settle(), func() bool {
		b, done := rc.Body(req)
		return len(b) >= 256<<10 || done || rc.peerClosed
	})
	if b, _ := rc.Body(req); len(b) == 0 {
		t.Inconclusive("The download of the large resource did not start, so there was nothing to rebind in the middle of.")
	}
	np, err := rc.newPath(netip.Addr{})
	if err != nil {
		t.Inconclusive(err.Error())
	}
	rb.np, rb.at, rb.mark = np, time.Now(), t.mark()
	if silent {
		rc.NoPathResponse = map[int]bool{np: true}
		rb.trig = rc.Send1RTTOn(np, []wire.Frame{rc.ackFrame(2), &wire.PingFrame{}}, shortOpts{PadTo: 100})
		rc.Silent = true
		rc.Receive(ctx, t.Settle(), nil)
		return rb
	}
	rc.migrate(np)
	rb.trig = rc.Send1RTT([]wire.Frame{rc.ackFrame(2), &wire.PingFrame{}}, shortOpts{})
	deadline := time.Now().Add(max(t.Settle(), 3*time.Second))
	for time.Now().Before(deadline) && ctx.Err() == nil && !rc.peerClosed {
		rc.Receive(ctx, t.PTO(), func() bool { _, done := rc.Body(req); return done })
		if _, done := rc.Body(req); done {
			rb.complete = true
			break
		}
		// Keep the new path alive even when the server sends nothing.
		rc.Send1RTT([]wire.Frame{rc.ackFrame(2), &wire.PingFrame{}}, shortOpts{})
	}
	rc.Receive(ctx, t.PTO(), nil)
	return rb
}

func runPathNATRebinding(ctx context.Context, t *T) {
	rb := t.rebind(ctx, false)
	reqs := t.sc.Requirements
	var onNew, challenges []*packet
	for _, p := range received(t.rec.snapshot(), rb.rc.trace.id, rb.mark) {
		if p.ev.PacketType == "stateless_reset" {
			t.Fail("no-reset", reqs[1], "The server answered packets from the tester's new port with a stateless reset.", append(events(Trigger, rb.trig), events(Response, p)...)...)
			return
		}
		if p.path == rb.np {
			onNew = append(onNew, p)
			if p.has(wire.FrameTypePathChallenge) {
				challenges = append(challenges, p)
			}
		}
	}
	switch {
	case len(onNew) == 0 && rb.tp != nil && rb.tp.DisableActiveMigration:
		t.Fact("path.rebinding", "dropped (disable_active_migration)")
		t.Pass("follow", reqs[1], "The server, which disabled active migration, dropped the packets from the new port without a stateless reset.", events(Trigger, rb.trig)...)
	case len(onNew) == 0:
		t.Fact("path.rebinding", "not followed")
		_, n := t.datagramBytes(rb.rc.onPath(rb.np), false, time.Time{})
		t.Inconclusive(fmt.Sprintf("The server sent no packet the tester could open to its new port after the rebinding (%d datagram(s) arrived there).", n), events(Trigger, rb.trig)...)
	case len(challenges) == 0:
		t.Fact("path.rebinding", "followed without validation")
		t.Fail("follow", reqs[0], fmt.Sprintf("The server sent %d packet(s) to the tester's new port but never a PATH_CHALLENGE there.", len(onNew)), append(events(Trigger, rb.trig), events(Response, lastN(onNew, 3)...)...)...)
	default:
		t.Fact("path.rebinding", fmt.Sprintf("followed and validated; download complete: %v", rb.complete))
		t.Pass("follow", reqs[0], fmt.Sprintf("The server moved to the tester's new port (%d packets) and validated it with a PATH_CHALLENGE.", len(onNew)), append(events(Trigger, rb.trig), events(Response, challenges[0])...)...)
	}
}

func runPathChallengeDatagramSize(ctx context.Context, t *T) {
	rb := t.rebind(ctx, false)
	if rb.tp != nil && rb.tp.DisableActiveMigration {
		t.Unsupported("The server sent disable_active_migration.")
	}
	req := t.sc.Requirements[0]
	ps := received(t.rec.snapshot(), rb.rc.trace.id, rb.mark)
	var seen []*packet
	for _, p := range ps {
		if p.path != rb.np || !p.has(wire.FrameTypePathChallenge) {
			continue
		}
		seen = append(seen, p)
		if p.datagram >= 1200 {
			continue
		}
		// What the server had received from the new path when it built
		// this datagram: the tester's datagrams sent at least two RTT
		// before it arrived, and never less than the first one (a later
		// datagram may still have been in flight).
		in, _ := t.datagramBytes(rb.rc.onPath(rb.np), true, p.at.Add(-2*t.RTT()-time.Millisecond))
		first, _ := t.datagramBytes(rb.rc.onPath(rb.np), true, rb.trig.at)
		in = max(in, first)
		out, _ := t.datagramBytes(rb.rc.onPath(rb.np), false, p.at.Add(-time.Nanosecond))
		if out+1200 <= 3*in {
			t.Fail("size", req, fmt.Sprintf("The server's PATH_CHALLENGE to the new port came in a %d-byte datagram although it had received %d bytes there and sent %d (the 3× allowance had room for 1200).", p.datagram, in, out), append(events(Trigger, rb.trig), events(Response, p)...)...)
			return
		}
	}
	if len(seen) == 0 {
		t.Unsupported("The server never validated the tester's new port.", events(Trigger, rb.trig)...)
	}
	t.Pass("size", req, fmt.Sprintf("The server's %d PATH_CHALLENGE datagram(s) on the new path were at least 1200 bytes or within the 3× allowance.", len(seen)), events(Response, seen...)...)
}

func runPathRebindingAmplification(ctx context.Context, t *T) {
	rb := t.rebind(ctx, true)
	if rb.tp != nil && rb.tp.DisableActiveMigration {
		t.Unsupported("The server sent disable_active_migration.")
	}
	req := t.sc.Requirements[0]
	in, _ := t.datagramBytes(rb.rc.onPath(rb.np), true, time.Time{})
	out, n := t.datagramBytes(rb.rc.onPath(rb.np), false, time.Time{})
	t.Fact("amplification.new-path", map[string]int{"received": in, "sent": out})
	var onNew []*packet
	for _, p := range received(t.rec.snapshot(), rb.rc.trace.id, rb.mark) {
		if p.path == rb.np {
			onNew = append(onNew, p)
		}
	}
	switch {
	case n == 0:
		t.Inconclusive("The server sent nothing to the new port.", events(Trigger, rb.trig)...)
	case out > 3*in:
		t.Fail("limit", req, fmt.Sprintf("The server sent %d bytes in %d datagrams to the tester's unvalidated new port after receiving %d bytes from it (%.2f×); the limit is 3×.", out, n, in, float64(out)/float64(in)), append(events(Trigger, rb.trig), events(Response, lastN(onNew, 4)...)...)...)
	default:
		t.Pass("limit", req, fmt.Sprintf("The server sent %d bytes to the unvalidated new port after receiving %d (%.2f×).", out, in, float64(out)/float64(in)), append(events(Trigger, rb.trig), events(Response, lastN(onNew, 4)...)...)...)
	}
}

func runPathOldPathValidated(ctx context.Context, t *T) {
	rb := t.rebind(ctx, false)
	if rb.tp != nil && rb.tp.DisableActiveMigration {
		t.Unsupported("The server sent disable_active_migration.")
	}
	req := t.sc.Requirements[0]
	var followed bool
	for _, p := range received(t.rec.snapshot(), rb.rc.trace.id, rb.mark) {
		if p.path == rb.np {
			followed = true
		}
		if p.path == 0 && p.has(wire.FrameTypePathChallenge) {
			t.Pass("old-path", req, "After the migration the server sent a PATH_CHALLENGE on the previously active path.", append(events(Trigger, rb.trig), events(Response, p)...)...)
			return
		}
	}
	if !followed {
		t.Inconclusive("The server did not follow the tester to its new port, so there was no migration to answer.", events(Trigger, rb.trig)...)
	}
	t.Fail("old-path", req, fmt.Sprintf("The server followed the tester to its new port but sent no PATH_CHALLENGE on the previously active path (still listening) within %v.", max(t.Settle(), 3*time.Second).Round(time.Millisecond)), events(Trigger, rb.trig)...)
}

func runPathMigrationDisabled(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	if tp := rc.ServerTP(); tp == nil || !tp.DisableActiveMigration {
		t.Unsupported("The server did not send disable_active_migration.")
	}
	np, err := rc.newPath(netip.Addr{})
	if err != nil {
		t.Inconclusive(err.Error())
	}
	mark := t.mark()
	rc.migrate(np)
	var trig []*packet
	for i := 0; i < 3; i++ {
		trig = append(trig, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{}))
		rc.Receive(ctx, t.PTO(), nil)
	}
	rc.Receive(ctx, t.Settle(), nil)
	req := t.sc.Requirements[0]
	for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
		if p.ev.PacketType == "stateless_reset" {
			t.Fail("no-reset", req, "The server answered packets from a new port with a stateless reset although it still holds the connection.", append(events(Trigger, trig...), events(Response, p)...)...)
			return
		}
	}
	t.Pass("no-reset", req, "The server answered the migration it had disabled without a stateless reset.", events(Trigger, trig...)...)
}

// runPathActiveMigration gives the server spare tester IDs, then moves to
// a new port (or, with newAddr, another local IP address) with a new
// server connection ID, and fetches the small resource there.
func runPathActiveMigration(ctx context.Context, t *T, newAddr bool) {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	tp := rc.ServerTP()
	if tp != nil && tp.DisableActiveMigration {
		t.Unsupported("The server sent disable_active_migration.")
	}
	var ip netip.Addr
	if newAddr {
		var ok bool
		if ip, ok = rc.secondLocalAddr(); !ok {
			t.Inconclusive("The tester has no second local IP address from which it can reach the target.")
		}
	}
	rc.giveSpareCIDs()
	spare := t.rawSpareCID(ctx, rc)
	oldDCID := rc.scid // what the server sent to on the old path
	np, err := rc.newPath(ip)
	if err != nil {
		t.Inconclusive(fmt.Sprintf("The tester cannot send from a second local address: %v.", err))
	}
	mark := t.mark()
	rc.migrate(np)
	rc.dcid = append([]byte(nil), spare.ConnectionID...)
	_, ferr := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	rc.Receive(ctx, t.PTO(), nil)
	trig := rc.paths[np].local
	var onNew []*packet
	var challenge *packet
	for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
		if p.path != np {
			continue
		}
		onNew = append(onNew, p)
		if challenge == nil && p.has(wire.FrameTypePathChallenge) {
			challenge = p
		}
	}
	reqs := t.sc.Requirements
	if len(onNew) == 0 {
		t.Inconclusive(fmt.Sprintf("The server never answered on the new path from %v (%v).", trig, ferr))
	}
	cidReq := reqCIDNotReused
	for _, p := range onNew {
		if len(oldDCID) > 0 && bytes.Equal(p.dcid, oldDCID) {
			t.Fail("new-cid", cidReq, fmt.Sprintf("On the new path from %v the server still addressed the tester with %x, the connection ID it used on the old path.", trig, oldDCID), events(Response, p)...)
			return
		}
	}
	t.Pass("new-cid", cidReq, fmt.Sprintf("On the new path from %v the server used connection ID %x, not the old path's %x.", trig, onNew[0].dcid, oldDCID), events(Response, onNew[0])...)
	if newAddr {
		if challenge == nil {
			t.Fail("validated", reqs[0], fmt.Sprintf("The server sent %d packet(s) to the new address %v but never a PATH_CHALLENGE there.", len(onNew), trig), events(Response, lastN(onNew, 3)...)...)
			return
		}
		t.Pass("validated", reqs[0], fmt.Sprintf("The server followed the tester to %v and validated it with a PATH_CHALLENGE.", trig), events(Response, challenge)...)
	}
}

func runPathResponseUnsolicited(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "engine"})
	mark := t.mark()
	c.Inject(spaceApp, &wire.PathResponseFrame{Data: [8]byte(randomBytes(8))})
	var pings []*packet
	for waited := time.Duration(0); waited < t.Settle() && c.Err() == nil; waited += t.PTO() {
		c.Ping()
		t.rec.wait(ctx, t.PTO(), nil)
	}
	ps := t.rec.snapshot()
	for _, fa := range framesOf[*wire.PingFrame](ps, c.ID(), mark, true) {
		pings = append(pings, fa.p)
	}
	if c.Err() != nil {
		c.trace.noteRemoteClose(c.Err())
		ps = t.rec.snapshot()
	}
	if cl := firstClose(received(ps, c.ID(), mark)); cl != nil {
		t.Fact("path.unsolicited-response", "close "+closeCode(cl.closeFrame()))
		t.Observe("reaction", fmt.Sprintf("The server closed with %s on an unsolicited PATH_RESPONSE (allowed).", closeCode(cl.closeFrame())), events(Response, cl)...)
		return
	}
	for _, pg := range pings {
		if a := ackedBy(ps, c.ID(), 2, pg.pn); a != nil {
			t.Fact("path.unsolicited-response", "ignored")
			t.Observe("reaction", "The server ignored an unsolicited PATH_RESPONSE and went on.", events(Response, a)...)
			return
		}
	}
	t.Inconclusive("After an unsolicited PATH_RESPONSE the server neither closed nor acknowledged later PINGs.")
}

func runPathNewTokenAfterValidation(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	rc.receiveUntil(ctx, t.Settle(), 0, hasFrame[*wire.NewTokenFrame]())
	if len(framesOf[*wire.NewTokenFrame](t.rec.snapshot(), rc.trace.id, 0, false)) == 0 {
		t.Unsupported(fmt.Sprintf("The server sent no NEW_TOKEN within %v of the handshake.", t.Settle().Round(time.Millisecond)))
	}
	if tp := rc.ServerTP(); tp != nil && tp.DisableActiveMigration {
		t.Unsupported("The server sent disable_active_migration.")
	}
	np, err := rc.newPath(netip.Addr{})
	if err != nil {
		t.Inconclusive(err.Error())
	}
	mark := t.mark()
	rc.migrate(np)
	trig := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	req := t.sc.Requirements[0]
	resp := rc.receiveUntil(ctx, t.Settle(), mark, func(p *packet) bool { return p.path == np && p.has(wire.FrameTypePathChallenge) })
	if resp == nil {
		t.Unsupported("The server did not validate the tester's new port.", events(Trigger, trig)...)
	}
	m2 := t.mark()
	if tok := rc.receiveUntil(ctx, t.Settle(), m2, hasFrame[*wire.NewTokenFrame]()); tok != nil {
		t.Pass("new-token", req, "After validating the tester's new address the server sent a NEW_TOKEN.", append(events(Trigger, trig), events(Response, tok)...)...)
		return
	}
	t.Warn("new-token", req, fmt.Sprintf("The server validated the tester's new address but sent no NEW_TOKEN within %v; send a fresh token for the new address.", t.Settle().Round(time.Millisecond)), events(Trigger, trig, resp)...)
}

func runPrefAddrFormat(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "engine"})
	tp := t.serverTP(c)
	if !tp.HasPreferredAddress {
		t.Unsupported("The server sent no preferred_address.")
	}
	reqs := t.sc.Requirements
	if len(tp.PreferredAddress.ConnectionID) == 0 {
		t.Fail("cid", reqs[0], "The server's preferred_address carries a zero-length connection ID; the tester would be bound to close with TRANSPORT_PARAMETER_ERROR.")
		return
	}
	if len(c.trace.serverHandshakeSCID()) == 0 {
		t.Fail("cid", reqs[1], "The server uses a zero-length connection ID and still provides a preferred address.")
		return
	}
	t.Pass("cid", reqs[0], fmt.Sprintf("The preferred_address carries a %d-byte connection ID and a stateless reset token.", len(tp.PreferredAddress.ConnectionID)))
}
