package conformance

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

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
		ps := t.rec.snapshot()
		fs := serverNCIDs(t, c.ID())
		if bad, n := judgeCIDLimit(tp.HasPreferredAddress, limit, fs, framesOf[*wire.RetireConnectionIDFrame](ps, c.ID(), 0, true)); bad != nil {
			t.Fail(
				"limit",
				req,
				fmt.Sprintf(
					"With active_connection_id_limit = %d the server had %d active connection IDs after NEW_CONNECTION_ID sequence %d (Retire Prior To %d).",
					limit,
					n,
					bad.SequenceNumber,
					bad.RetirePriorTo,
				),
				events(Response, packetsOf(fs)...)...)
			return
		}
		issued[fmt.Sprintf("limit-%d", limit)] = len(fs)
	}
	t.Fact("cid.issued", issued)
	t.Pass("limit", req, fmt.Sprintf("The server stayed within the tester's active_connection_id_limit of 3 and of 2 (NEW_CONNECTION_ID frames: %v).", issued))
}

// judgeCIDLimit replays, in time order, the server's NEW_CONNECTION_ID
// frames and the tester's RETIRE_CONNECTION_ID frames: an ID stops being
// active when Retire Prior To passes it or when the tester retired it
// (RFC 9000 §5.1.2: a client that moves to the preferred address retires
// the handshake's ID, and the server replaces it). A tester's retirement
// counts from when it was sent, so the server is never blamed for an ID
// the tester had already given up. It returns the first frame that left
// more than limit IDs active, and how many.
func judgeCIDLimit(prefAddr bool, limit uint64, ncids, retires []frameAt) (*wire.NewConnectionIDFrame, int) {
	active := map[uint64]bool{0: true}
	if prefAddr {
		active[1] = true
	}
	all := append(append([]frameAt(nil), ncids...), retires...)
	slices.SortStableFunc(all, func(a, b frameAt) int { return a.p.at.Compare(b.p.at) })
	for _, fa := range all {
		switch f := fa.f.(type) {
		case *wire.RetireConnectionIDFrame:
			delete(active, f.SequenceNumber)
		case *wire.NewConnectionIDFrame:
			active[f.SequenceNumber] = true
			for s := range active {
				if s < f.RetirePriorTo {
					delete(active, s)
				}
			}
			if uint64(len(active)) > limit {
				return f, len(active)
			}
		}
	}
	return nil, 0
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
		bySeq[1] = &wire.NewConnectionIDFrame{
			SequenceNumber:      1,
			ConnectionID:        tp.PreferredAddress.ConnectionID,
			StatelessResetToken: tp.PreferredAddress.StatelessResetToken,
		}
		tokens[tp.PreferredAddress.StatelessResetToken] = "preferred_address"
	}
	ids := map[string]uint64{}
	if scid := c.trace.serverHandshakeSCID(); scid != nil {
		ids[string(scid)] = 0
	}
	for _, fa := range fs {
		f := fa.f.(*wire.NewConnectionIDFrame)
		if len(f.ConnectionID) < 1 || len(f.ConnectionID) > 20 {
			t.Fail(
				"length",
				reqs[2],
				fmt.Sprintf(
					"The server issued a %d-byte connection ID (sequence %d); the tester would be bound to close with FRAME_ENCODING_ERROR.",
					len(f.ConnectionID),
					f.SequenceNumber,
				),
				events(Response, fa.p)...)
			return
		}
		if prev, ok := bySeq[f.SequenceNumber]; ok {
			if !bytes.Equal(prev.ConnectionID, f.ConnectionID) || prev.StatelessResetToken != f.StatelessResetToken {
				t.Fail(
					"sequence",
					reqs[0],
					fmt.Sprintf("The server sent sequence number %d twice with different connection IDs or tokens.", f.SequenceNumber),
					events(Response, fa.p)...)
				return
			}
			continue // a repeat repairing a loss
		}
		if s, ok := ids[string(f.ConnectionID)]; ok {
			t.Fail(
				"unique",
				reqs[1],
				fmt.Sprintf("The server issued connection ID %x twice (sequence %d and %d).", f.ConnectionID, s, f.SequenceNumber),
				events(Response, fa.p)...)
			return
		}
		if where, ok := tokens[f.StatelessResetToken]; ok {
			t.Fail(
				"tokens",
				reqs[3],
				fmt.Sprintf("The server gave sequence %d the same stateless reset token as %s.", f.SequenceNumber, where),
				events(Response, fa.p)...)
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
			t.Fail(
				"sequence",
				reqs[0],
				fmt.Sprintf("The server's connection ID sequence numbers are %v: they do not go up by one from 1.", seqs),
				events(Response, packetsOf(fs)...)...)
			return
		}
	}
	t.Fact("cid.issued", len(seqs))
	if len(seqs) == 0 {
		t.Pass("format", reqs[0], "The server issued no connection ID beyond the handshake one; nothing breaks the rules.")
		return
	}
	t.Pass(
		"format",
		reqs[0],
		fmt.Sprintf(
			"The server's %d extra connection IDs have sequence numbers 1…%d, distinct values of valid length and distinct reset tokens.",
			len(seqs),
			len(seqs),
		),
		events(Response, packetsOf(fs)...)...)
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
		t.Pass(
			"supply",
			req,
			fmt.Sprintf("The server gave the tester %d spare connection ID(s) after the handshake.", len(fs)),
			events(Response, packetsOf(fs)...)...)
	case tp.DisableActiveMigration:
		t.Observe("supply", "The server issued no spare connection ID and sent disable_active_migration, so the tester has no use for one.")
	default:
		t.Warn(
			"supply",
			req,
			fmt.Sprintf(
				"The server issued no spare connection ID within %v although it allows migration; issue NEW_CONNECTION_ID frames after the handshake.",
				t.Settle().Round(time.Millisecond),
			),
		)
	}
}

func runCIDNewServerCIDAccepted(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	spare := t.rawSpareCID(ctx, rc)
	old := rc.DCID
	rc.DCID = append([]byte(nil), spare.ConnectionID...)
	mark := t.mark()
	req := t.sc.Requirements[0]
	body, err := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	trig := framesOf[*wire.StreamFrame](t.rec.snapshot(), rc.trace.id, mark, true)
	if err == nil || len(body) > 0 {
		t.Pass(
			"accepted",
			req,
			fmt.Sprintf(
				"Addressed with its sequence-%d connection ID %x, the server answered the request (%d bytes).",
				spare.SequenceNumber,
				spare.ConnectionID,
				len(body),
			),
			events(Trigger, packetsOf(trig)...)...)
		return
	}
	for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
		if p.ev.PacketType == "stateless_reset" {
			t.Fail(
				"accepted",
				req,
				fmt.Sprintf("The server answered packets addressed to its sequence-%d connection ID with a stateless reset.", spare.SequenceNumber),
				evidence(events(Trigger, packetsOf(trig)...), events(Response, p))...)
			return
		}
	}
	// Does the old ID still work?
	rc.DCID = old
	m2 := t.mark()
	pg := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	if a := rc.receiveUntil(ctx, t.PTO()*2, m2, func(p *packet) bool { return ackedBy([]*packet{p}, rc.trace.id, 2, pg.pn) != nil }); a != nil {
		t.Fail(
			"accepted",
			req,
			fmt.Sprintf(
				"The server ignored packets addressed to its sequence-%d connection ID (%v) while it still acknowledges its sequence-0 ID.",
				spare.SequenceNumber,
				err,
			),
			evidence(events(Trigger, packetsOf(trig)...), events(Response, a))...)
		return
	}
	t.Inconclusive(
		fmt.Sprintf("The server answered neither on its new connection ID (%v) nor on the old one afterwards.", err),
		events(Trigger, packetsOf(trig)...)...)
}

func runCIDRetireReplacement(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	spare := t.rawSpareCID(ctx, rc)
	rc.Receive(ctx, t.PTO(), nil) // let the rest of the server's first batch arrive
	var maxSeq uint64
	for _, fa := range framesOf[*wire.NewConnectionIDFrame](t.rec.snapshot(), rc.trace.id, 0, false) {
		maxSeq = max(maxSeq, fa.f.(*wire.NewConnectionIDFrame).SequenceNumber)
	}
	rc.DCID = append([]byte(nil), spare.ConnectionID...)
	mark := t.mark()
	trig := rc.Send1RTT([]wire.Frame{&wire.RetireConnectionIDFrame{SequenceNumber: 0}}, rawquic.ShortOpts{})
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
		t.Pass(
			"replacement",
			req,
			fmt.Sprintf("After the tester retired sequence 0, the server issued a new connection ID above sequence %d.", maxSeq),
			evidence(events(Trigger, trig), events(Response, p))...)
		return
	}
	if rc.PeerClosed {
		t.Inconclusive("The server closed the connection after the tester retired sequence 0.", events(Trigger, trig)...)
	}
	t.Warn(
		"replacement",
		req,
		fmt.Sprintf(
			"The server issued no new connection ID within %v after the tester retired sequence 0; supply a replacement when the peer retires one.",
			t.Settle().Round(time.Millisecond),
		),
		events(Trigger, trig)...)
}

func runCIDRetireCurrent(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	spare := t.rawSpareCID(ctx, rc)
	rc.DCID = append([]byte(nil), spare.ConnectionID...)
	mark := t.mark()
	trig := rc.Send1RTT([]wire.Frame{&wire.RetireConnectionIDFrame{SequenceNumber: spare.SequenceNumber}}, rawquic.ShortOpts{})
	rc.Receive(ctx, t.PTO(), nil)
	pg := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	rc.Receive(ctx, t.Settle(), func() bool { return rc.PeerClosed })
	ps := t.rec.snapshot()
	if cl := firstClose(received(ps, rc.trace.id, mark)); cl != nil {
		t.Fact("cid.retire-current", "close "+closeCode(cl.closeFrame()))
		t.Observe(
			"reaction",
			fmt.Sprintf("The server closed with %s when a packet retired its own connection ID (allowed).", closeCode(cl.closeFrame())),
			evidence(events(Trigger, trig), events(Response, cl))...)
		return
	}
	if a := ackedBy(ps, rc.trace.id, 2, pg.pn); a != nil {
		t.Fact("cid.retire-current", "ignored")
		t.Observe("reaction", "The server went on after a packet retired its own connection ID.", evidence(events(Trigger, trig), events(Response, a))...)
		return
	}
	t.Inconclusive(
		"After the tester retired the connection ID of the very packet, the server neither closed nor acknowledged a later PING.",
		events(Trigger, trig, pg)...)
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
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	if len(rc.SCID) == 0 {
		t.Errorf("the raw client has a zero-length connection ID")
	}
	rc.Receive(ctx, t.PTO(), nil)
	old := rc.SCID
	cid := randomBytes(len(rc.SCID))
	mark := t.mark()
	trig := rc.Send1RTT(
		[]wire.Frame{&wire.NewConnectionIDFrame{SequenceNumber: 1, RetirePriorTo: 1, ConnectionID: cid, StatelessResetToken: [16]byte(randomBytes(16))}},
		rawquic.ShortOpts{},
	)
	sent := time.Now()
	for waited := time.Duration(0); waited < t.Settle() && !rc.PeerClosed; waited += t.PTO() {
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
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
		t.Fail(
			"retired",
			req,
			fmt.Sprintf(
				"After NEW_CONNECTION_ID sequence 1 with Retire Prior To 1 the server never retired sequence 0 within %v.",
				t.Settle().Round(time.Millisecond),
			),
			events(Trigger, trig)...)
		return
	}
	late := sent.Add(t.PTO() + t.RTT())
	for _, p := range received(ps, rc.trace.id, mark) {
		if p.space == 2 && p.at.After(late) && bytes.Equal(p.dcid, old) {
			t.Fail(
				"stopped",
				req,
				fmt.Sprintf(
					"The server retired sequence 0 but still addressed packets to it (%x) %v after the tester's Retire Prior To.",
					old,
					p.at.Sub(sent).Round(time.Millisecond),
				),
				evidence(events(Trigger, trig), events(Response, retire, p))...)
			return
		}
	}
	t.Pass(
		"retired",
		req,
		fmt.Sprintf("The server retired sequence 0 and moved its packets to %x.", cid),
		evidence(events(Trigger, trig), events(Response, retire))...)
}

func runCIDDuplicateFrame(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	rc.Receive(ctx, t.PTO(), nil)
	f := &wire.NewConnectionIDFrame{SequenceNumber: 1, ConnectionID: randomBytes(len(rc.SCID)), StatelessResetToken: [16]byte(randomBytes(16))}
	if len(rc.SCID) == 0 {
		t.Errorf("the raw client has a zero-length connection ID")
	}
	mark := t.mark()
	var trig []*packet
	for i := 0; i < 3; i++ {
		trig = append(trig, rc.Send1RTT([]wire.Frame{f}, rawquic.ShortOpts{}))
		rc.Receive(ctx, 10*time.Millisecond, nil)
	}
	var pings []*packet
	for waited := time.Duration(0); waited < t.Settle() && !rc.PeerClosed; waited += t.PTO() {
		pings = append(pings, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{}))
		rc.Receive(ctx, t.PTO(), nil)
	}
	ps := t.rec.snapshot()
	req := t.sc.Requirements[0]
	if cl := firstClose(received(ps, rc.trace.id, mark)); cl != nil {
		t.Fail(
			"tolerated",
			req,
			fmt.Sprintf("The server closed with %s after receiving the same NEW_CONNECTION_ID frame three times.", closeCode(cl.closeFrame())),
			evidence(events(Trigger, trig...), events(Response, cl))...)
		return
	}
	for _, pg := range pings {
		if a := ackedBy(ps, rc.trace.id, 2, pg.pn); a != nil {
			t.Pass(
				"tolerated",
				req,
				"The server kept the connection open and acknowledged later PINGs after the same NEW_CONNECTION_ID frame arrived three times.",
				evidence(events(Trigger, trig...), events(Response, a))...)
			return
		}
	}
	t.Inconclusive("After the repeated NEW_CONNECTION_ID frames the server neither closed nor acknowledged later PINGs.", events(Trigger, trig...)...)
}

func init() {
	Register(&Scenario{
		ID: "cid-issue-within-limit", Title: "Server connection IDs within the tester's limit", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{reqCIDLimit,
			rfc9000(
				"5.1.1",
				May,
				"An endpoint MAY send connection IDs that temporarily exceed a peer's limit if the NEW_CONNECTION_ID frame also requires the retirement of any excess",
			)},
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
		Requirements: []Requirement{
			rfc9000("5.1.1", Should, "An endpoint SHOULD ensure that its peer has a sufficient number of available and unused connection IDs."),
		},
		Run: runCIDSupply,
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
		reqs: []Requirement{
			rfc9000(
				"19.16",
				Must,
				"Receipt of a RETIRE_CONNECTION_ID frame containing a sequence number greater than any previously sent to the peer MUST be treated as a connection error of type PROTOCOL_VIOLATION.",
			),
		},
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
		Requirements: []Requirement{
			rfc9000(
				"5.1.1",
				Must,
				"if the number of active connection IDs exceeds the value advertised in its active_connection_id_limit transport parameter, an endpoint MUST close the connection with an error of type CONNECTION_ID_LIMIT_ERROR.",
			),
		},
		Run: runCIDClientExceedsLimit,
	})
	Register(&Scenario{
		ID: "cid-retire-prior-to-honoured", Title: "Server honours Retire Prior To", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("5.1.2", Must, "the peer MUST stop using the corresponding connection IDs and retire them with RETIRE_CONNECTION_ID frames"),
		},
		Run: runCIDRetirePriorToHonoured,
	})
	registerProvoked(provokedSpec{
		id: "cid-retire-prior-to-invalid", title: "Retire Prior To above the sequence number", family: "E", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"19.15",
				Must,
				"Receiving a value in the Retire Prior To field that is greater than that in the Sequence Number field MUST be treated as a connection error of type FRAME_ENCODING_ERROR.",
			),
		},
		codes:    transportCodes(wire.FrameEncodingError),
		describe: "a NEW_CONNECTION_ID frame whose Retire Prior To is one above its Sequence Number",
		frames: func(t *T, c *Conn) []wire.Frame {
			seq := nextTesterSeq(t, c)
			return []wire.Frame{
				&wire.NewConnectionIDFrame{
					SequenceNumber:      seq,
					RetirePriorTo:       seq + 1,
					ConnectionID:        randomBytes(8),
					StatelessResetToken: [16]byte(randomBytes(16)),
				},
			}
		},
	})
	registerProvoked(provokedSpec{
		id: "cid-length-invalid", title: "NEW_CONNECTION_ID with length 0 or 21", family: "E", needs: []string{NeedApp},
		reqs:     []Requirement{reqCIDLengthInvalid},
		codes:    transportCodes(wire.FrameEncodingError),
		describe: "a NEW_CONNECTION_ID frame with an invalid Length",
		variants: []variant{
			injectVariant("length-0", func(t *T, c *Conn) []wire.Frame {
				return []wire.Frame{
					&wire.NewConnectionIDFrame{SequenceNumber: nextTesterSeq(t, c), ConnectionID: []byte{}, StatelessResetToken: [16]byte(randomBytes(16))},
				}
			}),
			injectVariant("length-21", func(t *T, c *Conn) []wire.Frame {
				return []wire.Frame{
					&wire.NewConnectionIDFrame{
						SequenceNumber:      nextTesterSeq(t, c),
						ConnectionID:        randomBytes(21),
						StatelessResetToken: [16]byte(randomBytes(16)),
					},
				}
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
		Requirements: []Requirement{
			rfc9000(
				"19.15",
				Must,
				"An endpoint that is sending packets with a zero-length Destination Connection ID MUST treat receipt of a NEW_CONNECTION_ID frame as a connection error of type PROTOCOL_VIOLATION.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawEstablished(ctx, rawquic.Options{Label: "zero-length-scid", SCID: []byte{}}, nil)
			t.rawProvoke(ctx, rc, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation),
				Describe: "a NEW_CONNECTION_ID frame from a client whose Source Connection ID is zero-length"}, true, func() {
				rc.Send1RTT(
					[]wire.Frame{&wire.NewConnectionIDFrame{SequenceNumber: 1, ConnectionID: randomBytes(8), StatelessResetToken: [16]byte(randomBytes(16))}},
					rawquic.ShortOpts{},
				)
			})
		},
	})
	Register(&Scenario{
		ID: "cid-retire-to-zero-length-issuer", Title: "RETIRE_CONNECTION_ID to a server with zero-length IDs", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"19.16",
				Must,
				"An endpoint that provides a zero-length connection ID MUST treat receipt of a RETIRE_CONNECTION_ID frame as a connection error of type PROTOCOL_VIOLATION.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
			if len(rc.ServerSCID) > 0 {
				t.Unsupported(fmt.Sprintf("The server uses %d-byte connection IDs, not zero-length ones.", len(rc.ServerSCID)))
			}
			t.rawProvoke(ctx, rc, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation),
				Describe: "a RETIRE_CONNECTION_ID frame to a server with a zero-length connection ID"}, true, func() {
				rc.Send1RTT([]wire.Frame{&wire.RetireConnectionIDFrame{SequenceNumber: 0}}, rawquic.ShortOpts{})
			})
		},
	})
}
