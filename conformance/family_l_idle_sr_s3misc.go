package conformance

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Family L: idle timeout and stateless reset (catalogue §3.L), on the raw
// client, which sends nothing on its own while it waits.

var (
	reqIdleSilent    = rfc9000("10.1", Descriptive, "the connection is silently closed and its state is discarded when it remains idle for longer than the minimum of the max_idle_timeout value advertised by both endpoints.")
	reqIdleCommit    = rfc9000("10.1", Descriptive, "By announcing a max_idle_timeout, an endpoint commits to initiating an immediate close … if it abandons the connection prior to the effective value.")
	reqSRMay         = rfc9000("10.3", May, "An endpoint MAY send a Stateless Reset in response to receiving a packet that it cannot associate with an active connection.")
	reqSRAmplify     = rfc9000("10.3", MustNot, "An endpoint MUST NOT send a Stateless Reset that is three times or more larger than the packet it receives to avoid being used for amplification.")
	reqSRShortHeader = rfc9000("10.3", Must, "Endpoints MUST send Stateless Resets formatted as a packet with a short header.")
	reqSRTooSmall    = rfc9000("10.3", Must, "Endpoints MUST discard packets that are too small to be valid QUIC packets.")
	reqSROneShorter  = rfc9000("10.3", Should, "in response to a packet that is 43 bytes or shorter SHOULD send a Stateless Reset that is one byte shorter than the packet it responds to.")
	reqSRSmaller     = rfc9000("10.3.3", Must, "An endpoint MUST ensure that every Stateless Reset that it sends is smaller than the packet that triggered it, unless it maintains state sufficient to prevent looping.")
	reqSRDrain       = rfc9000("10.3.1", Must, "identical in value to a stateless reset token, the endpoint MUST enter the draining period and not send any further packets on this connection.")
	reqSRNotForeign  = rfc9000("10.3.1", MustNot, "An endpoint MUST NOT check for any stateless reset tokens associated with connection IDs it has not used or for connection IDs that have been retired.")
)

func init() {
	Register(&Scenario{
		ID: "idle-timeout-observed", Title: "Effective idle timeout", Family: "L", Needs: []string{NeedApp}, ObservationOnly: true, Long: true,
		Requirements: []Requirement{reqIdleSilent},
		Run:          runIdleTimeoutObserved,
	})
	Register(&Scenario{
		ID: "idle-no-early-abandon", Title: "Connection kept until the effective idle timeout", Family: "L", Needs: []string{NeedApp}, ObservationOnly: true, Long: true,
		Requirements: []Requirement{reqIdleCommit},
		Run:          runIdleNoEarlyAbandon,
	})
	Register(&Scenario{
		ID: "sr-after-state-loss", Title: "Stateless reset after an idle timeout", Family: "L", Needs: []string{NeedApp}, ObservationOnly: true, Long: true,
		Requirements: []Requirement{reqSRMay},
		Run:          runSRAfterStateLoss,
	})
	Register(&Scenario{
		ID: "sr-size-rules", Title: "Stateless reset sizes", Family: "L", Needs: []string{NeedApp},
		Requirements: []Requirement{reqSRAmplify, reqSRShortHeader, reqSRTooSmall, reqSROneShorter, reqSRSmaller},
		Run:          runSRSizeRules,
	})
	Register(&Scenario{
		ID: "sr-honoured-by-server", Title: "Server drains on a stateless reset", Family: "L", Needs: []string{NeedApp},
		Requirements: []Requirement{reqSRDrain},
		Run:          runSRHonoured,
	})
	Register(&Scenario{
		ID: "sr-foreign-token-ignored", Title: "Reset tokens of unused or retired IDs ignored", Family: "L", Needs: []string{NeedApp},
		Requirements: []Requirement{reqSRNotForeign},
		Run:          runSRForeignToken,
	})
}

// testerIdleTimeout is the max_idle_timeout the idle scenarios announce.
// The catalogue asks for 30 s; the effective timeout is the minimum of
// both sides' values (RFC 9000 §10.1) either way, and 5 s keeps each
// scenario within seconds, so the whole suite stays short.
const testerIdleTimeout = 5 * time.Second

// idleConn is a raw connection that announced testerIdleTimeout and then
// went quiet; quiet is when the tester last sent.
type idleConn struct {
	rc    *rawClient
	quiet time.Time
	// effective is the minimum of both sides' max_idle_timeout.
	effective time.Duration
	server    time.Duration
}

// newIdleConn completes a handshake announcing testerIdleTimeout, takes in
// what the server sends right after it, and goes quiet.
func (t *T) newIdleConn(ctx context.Context, label string) *idleConn {
	scid := randomBytes(8)
	tp := defaultClientTP(scid)
	tp.MaxIdleTimeout = uint64(testerIdleTimeout / time.Millisecond)
	rc := t.rawEstablished(ctx, rawOptions{Label: label, SCID: scid, TP: tp}, nil)
	rc.Receive(ctx, t.PTO(), nil)
	ic := &idleConn{rc: rc, effective: testerIdleTimeout}
	if stp := rc.ServerTP(); stp != nil && stp.MaxIdleTimeout > 0 {
		ic.server = time.Duration(stp.MaxIdleTimeout) * time.Millisecond
		ic.effective = min(ic.effective, ic.server)
	}
	ic.quiet = time.Now()
	if p := rc.lastSent(); p != nil {
		ic.quiet = p.at
	}
	return ic
}

// idleProbe is what a PING after a quiet period drew.
type idleProbe struct {
	after  time.Duration // quiet time before the PING
	ping   *packet
	answer string // "acknowledged", "stateless reset", "nothing"
	during []*packet
	resp   *packet
}

// probe sends a PING at ic.quiet+after and waits for its fate.
func (t *T) idleProbeAt(ctx context.Context, ic *idleConn, after time.Duration) idleProbe {
	sleep(ctx, time.Until(ic.quiet.Add(after)))
	rc := ic.rc
	pr := idleProbe{after: after}
	mark := t.mark()
	// What arrived during the quiet period is still queued: take it in
	// first, then probe.
	rc.NoAcks = true
	rc.Receive(ctx, time.Millisecond, nil)
	rc.NoAcks = false
	for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
		pr.during = append(pr.during, p)
	}
	m2 := t.mark()
	pr.ping = rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	pr.resp = rc.receiveUntil(ctx, max(3*t.PTO(), 300*time.Millisecond), m2, func(p *packet) bool {
		return p.ev.PacketType == "stateless_reset" || ackedBy([]*packet{p}, rc.trace.id, 2, pr.ping.pn) != nil
	})
	switch {
	case pr.resp == nil:
		pr.answer = "nothing"
	case pr.resp.ev.PacketType == "stateless_reset":
		pr.answer = "stateless reset"
	default:
		pr.answer = "acknowledged"
	}
	return pr
}

func runIdleTimeoutObserved(ctx context.Context, t *T) {
	var conns []*idleConn
	for i := 0; i < 4; i++ {
		conns = append(conns, t.newIdleConn(ctx, fmt.Sprintf("idle-%d", i+1)))
	}
	e := conns[0].effective
	afters := []time.Duration{e / 2, e * 9 / 10, e * 11 / 10, e + time.Second + 3*t.PTO()}
	var alive, dead []string
	var lastAlive, firstDead time.Duration = -1, -1
	onExpiry, answer := "nothing", ""
	var evs []PacketEvent
	for i, ic := range conns {
		pr := t.idleProbeAt(ctx, ic, afters[i])
		label := pr.after.Round(time.Millisecond).String()
		if pr.answer == "acknowledged" {
			alive = append(alive, label)
			lastAlive = pr.after
			continue
		}
		dead = append(dead, fmt.Sprintf("%s (%s)", label, pr.answer))
		if firstDead < 0 {
			firstDead = pr.after
		}
		if answer == "" {
			answer = pr.answer
		}
		if len(pr.during) > 0 {
			onExpiry = fmt.Sprintf("%d packet(s), first %v", len(pr.during), pr.during[0].ev.Frames)
			evs = append(evs, events(Response, pr.during[0])...)
		}
		evs = append(evs, events(Trigger, pr.ping)...)
		evs = append(evs, events(Response, pr.resp)...)
	}
	if ctx.Err() != nil {
		t.Inconclusive("The scenario ran out of time before the last probe.")
	}
	eff := "longer than the last probe"
	switch {
	case firstDead >= 0 && lastAlive < 0:
		eff = fmt.Sprintf("at most %v", firstDead.Round(time.Millisecond))
	case firstDead >= 0:
		eff = fmt.Sprintf("between %v and %v", lastAlive.Round(time.Millisecond), firstDead.Round(time.Millisecond))
	}
	t.Fact("idle.effective", map[string]any{"tester_ms": testerIdleTimeout.Milliseconds(), "server_ms": conns[0].server.Milliseconds(),
		"expected_ms": e.Milliseconds(), "measured": eff, "alive_after": alive, "expired_after": dead, "expired_answer": answer, "sent_on_expiry": onExpiry})
	t.Observe("idle", fmt.Sprintf("With max_idle_timeout %v (tester) and %v (server), the connection expired %s (expected %v); alive after %v, expired after %v; an expired connection answered a PING with %s; on expiry the server sent %s.",
		testerIdleTimeout, conns[0].server, eff, e, alive, dead, orNothing(answer), onExpiry), evs...)
}

func orNothing(s string) string {
	if s == "" {
		return "— (none expired)"
	}
	return s
}

func runIdleNoEarlyAbandon(ctx context.Context, t *T) {
	ic := t.newIdleConn(ctx, "idle-0.8")
	quietFor := ic.effective * 8 / 10
	sleep(ctx, time.Until(ic.quiet.Add(quietFor)))
	rc := ic.rc
	mark := t.mark()
	body, err := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	ps := received(t.rec.snapshot(), rc.trace.id, 0)
	var closed *packet
	for _, p := range ps {
		if p.closeFrame() != nil {
			closed = p
			break
		}
	}
	req := t.sc.Requirements[0]
	trig := packetsOf(framesOf[*wire.StreamFrame](t.rec.snapshot(), rc.trace.id, mark, true))
	switch {
	case err == nil:
		t.Fact("idle.early-abandon", false)
		t.Check("kept", Observed, req, fmt.Sprintf("After %v of silence (0.8 × the effective %v) the server still answered a request (%d bytes).", quietFor.Round(time.Millisecond), ic.effective, len(body)), events(Trigger, trig...)...)
	case closed != nil:
		t.Fact("idle.early-abandon", "closed explicitly")
		t.Check("kept", Observed, req, fmt.Sprintf("The server closed the connection explicitly (%s) before the effective idle timeout of %v.", closeCode(closed.closeFrame()), ic.effective), events(Response, closed)...)
	default:
		t.Fact("idle.early-abandon", "abandoned silently")
		t.Check("kept", Observed, req, fmt.Sprintf("Abandoned silently before the effective timeout: after %v of silence (0.8 × %v) the request went unanswered (%v) and the server never sent CONNECTION_CLOSE.", quietFor.Round(time.Millisecond), ic.effective, err), events(Trigger, trig...)...)
	}
}

// serverCIDToken is a server connection ID with its stateless reset token.
type serverCIDToken struct {
	seq      uint64
	cid      []byte
	token    [16]byte
	hasToken bool
}

// serverCIDsOf lists the connection IDs the server gave the raw client:
// its handshake ID (with stateless_reset_token, if sent) and every
// NEW_CONNECTION_ID.
func (t *T) serverCIDsOf(rc *rawClient) []serverCIDToken {
	out := []serverCIDToken{{seq: 0, cid: rc.serverSCID}}
	if tp := rc.ServerTP(); tp != nil && tp.HasStatelessResetToken {
		out[0].token, out[0].hasToken = tp.StatelessResetToken, true
	}
	if tp := rc.ServerTP(); tp != nil && tp.HasPreferredAddress {
		out = append(out, serverCIDToken{seq: 1, cid: tp.PreferredAddress.ConnectionID, token: tp.PreferredAddress.StatelessResetToken, hasToken: true})
	}
	for _, fa := range framesOf[*wire.NewConnectionIDFrame](t.rec.snapshot(), rc.trace.id, 0, false) {
		f := fa.f.(*wire.NewConnectionIDFrame)
		if slices.ContainsFunc(out, func(s serverCIDToken) bool { return s.seq == f.SequenceNumber }) {
			continue
		}
		out = append(out, serverCIDToken{seq: f.SequenceNumber, cid: f.ConnectionID, token: f.StatelessResetToken, hasToken: true})
	}
	return out
}

// shortJunk is a datagram of n bytes that looks like a short-header
// packet to dcid: the QUIC bit set, the rest random.
func shortJunk(dcid []byte, n int) []byte {
	b := append([]byte{0x40 | randomBytes(1)[0]&0x3f}, dcid...)
	if len(b) < n {
		b = append(b, randomBytes(n-len(b))...)
	}
	return b[:n]
}

// answersSince returns the datagrams received on the raw client's path 0
// since at.
func (t *T) answersSince(rc *rawClient, at time.Time) [][]byte {
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	var out [][]byte
	for _, d := range t.rec.datagrams {
		if !d.sent && d.local == rc.paths[0].local && !d.at.Before(at) {
			out = append(out, d.b)
		}
	}
	return out
}

func runSRAfterStateLoss(ctx context.Context, t *T) {
	ic := t.newIdleConn(ctx, "expired")
	rc := ic.rc
	cids := t.serverCIDsOf(rc)
	wait := ic.effective + time.Second + 3*t.PTO()
	sleep(ctx, time.Until(ic.quiet.Add(wait)))
	rc.NoAcks = true
	rc.Receive(ctx, time.Millisecond, nil)
	results := map[string]string{}
	var evs []PacketEvent
	for _, s := range cids {
		if len(s.cid) == 0 {
			continue
		}
		at := time.Now()
		rc.send(shortJunk(s.cid, 100))
		rc.Receive(ctx, max(t.PTO(), 300*time.Millisecond), nil)
		ans := t.answersSince(rc, at)
		key := fmt.Sprintf("seq %d (%x)", s.seq, s.cid)
		switch {
		case len(ans) == 0:
			results[key] = "no answer"
		case !s.hasToken:
			results[key] = fmt.Sprintf("%d-byte answer; no token known for this ID", len(ans[0]))
		case len(ans[0]) >= 16 && bytes.Equal(ans[0][len(ans[0])-16:], s.token[:]):
			results[key] = fmt.Sprintf("%d-byte stateless reset, token matches", len(ans[0]))
		default:
			results[key] = fmt.Sprintf("%d-byte answer, token does not match", len(ans[0]))
		}
	}
	for _, p := range received(t.rec.snapshot(), rc.trace.id, 0) {
		if p.ev.PacketType == "stateless_reset" {
			evs = append(evs, events(Response, p)...)
		}
	}
	t.Fact("sr.token-matches", results)
	t.Observe("reset", fmt.Sprintf("%v after the tester went quiet (effective idle timeout %v), 100-byte packets to the server's %d connection ID(s) drew: %v.", wait.Round(time.Millisecond), ic.effective, len(cids), results), lastEvents(evs, 3)...)
}

func lastEvents(evs []PacketEvent, n int) []PacketEvent {
	if len(evs) > n {
		return evs[len(evs)-n:]
	}
	return evs
}

// srProbe is one trigger of sr-size-rules and the datagrams it drew.
type srProbe struct {
	trigger int
	answers [][]byte
}

// srJudgement is one check of sr-size-rules.
type srJudgement struct {
	name     string
	verdict  Verdict
	req      int // index into the scenario's requirements
	sentence string
}

// judgeSRSizes applies RFC 9000 §10.3's size rules to the answers to
// triggers with unknown connection IDs.
func judgeSRSizes(probes []srProbe) []srJudgement {
	var out []srJudgement
	bad := func(name string, v Verdict, req int, s string) { out = append(out, srJudgement{name, v, req, s}) }
	var notSmaller []string
	for _, pr := range probes {
		for _, a := range pr.answers {
			switch {
			case pr.trigger < 21:
				bad("too-small", Fail, 2, fmt.Sprintf("The server answered a %d-byte short-header datagram, too small to be a QUIC packet, with %d bytes instead of discarding it.", pr.trigger, len(a)))
			case len(a) > 0 && a[0]&0x80 != 0:
				bad("short-header", Fail, 1, fmt.Sprintf("The server answered a %d-byte trigger with a long-header datagram (first byte 0x%02x); a stateless reset has a short header.", pr.trigger, a[0]))
			case len(a) >= 3*pr.trigger:
				bad("amplification", Fail, 0, fmt.Sprintf("The server answered a %d-byte trigger with a %d-byte stateless reset, three times or more its size.", pr.trigger, len(a)))
			case pr.trigger <= 43 && len(a) != pr.trigger-1:
				bad("one-shorter", Warn, 3, fmt.Sprintf("The server answered a %d-byte trigger with a %d-byte stateless reset; one byte shorter (%d) keeps resets from looping.", pr.trigger, len(a), pr.trigger-1))
			}
			if pr.trigger >= 21 && len(a) >= pr.trigger {
				notSmaller = append(notSmaller, fmt.Sprintf("%d→%d", pr.trigger, len(a)))
			}
		}
	}
	if len(notSmaller) > 0 {
		out = append(out, srJudgement{"smaller", Observed, 4, fmt.Sprintf("Resets not smaller than their trigger (allowed only with anti-looping state): %v.", notSmaller)})
	}
	return out
}

func runSRSizeRules(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "unknown-cid"})
	wait := max(t.PTO(), 300*time.Millisecond)
	probe := func(n int) srProbe {
		at := time.Now()
		rc.send(shortJunk(randomBytes(8), n))
		rc.Receive(ctx, wait, nil)
		return srProbe{trigger: n, answers: t.answersSince(rc, at)}
	}
	first := probe(1200)
	if len(first.answers) == 0 {
		t.requireControl(ctx, "The server did not answer a 1200-byte packet with an unknown connection ID")
		t.Unsupported("The server sends no stateless reset to a 1200-byte packet with an unknown connection ID (sr-unknown-cid), so there are no reset sizes to judge.")
	}
	probes := []srProbe{first}
	for _, n := range []int{18, 30, 43, 60} {
		probes = append(probes, probe(n))
	}
	sizes := map[int][]int{}
	for _, pr := range probes {
		for _, a := range pr.answers {
			sizes[pr.trigger] = append(sizes[pr.trigger], len(a))
		}
		if len(pr.answers) == 0 {
			sizes[pr.trigger] = []int{}
		}
	}
	t.Fact("sr.sizes", sizes)
	reqs := t.sc.Requirements
	js := judgeSRSizes(probes)
	failed := false
	for _, j := range js {
		t.Check(j.name, j.verdict, reqs[j.req], j.sentence)
		failed = failed || j.verdict == Fail
	}
	if !failed {
		t.Pass("sizes", reqs[0], fmt.Sprintf("Stateless resets by trigger size (bytes): %v; all short-header, under three times their trigger, and none for the 18-byte datagram.", sizes))
	}
}

// rawStatelessReset sends a datagram that looks like a short-header packet
// of size n, random apart from its last 16 bytes, tok; it records it as a
// stateless reset the tester sent.
func (rc *rawClient) rawStatelessReset(dcid []byte, n int, tok [16]byte) *packet {
	b := shortJunk(dcid, n-16)
	b = append(b, tok[:]...)
	now := time.Now()
	p := &packet{at: now, conn: rc.trace.id, sent: true, space: -1, datagram: len(b)}
	p.ev = PacketEvent{Direction: "sent", PacketType: "stateless_reset", Number: -1, Size: len(b), Frames: []string{fmt.Sprintf("token %x", tok)}}
	rc.t.rec.addPacket(p)
	rc.send(b)
	return p
}

// newTesterCID issues a connection ID of the tester's length with a
// random stateless reset token and returns both with the frame's packet.
func (rc *rawClient) newTesterCID(seq, rpt uint64) ([]byte, [16]byte, *packet) {
	cid := randomBytes(len(rc.scid))
	tok := [16]byte(randomBytes(16))
	p := rc.Send1RTT([]wire.Frame{&wire.NewConnectionIDFrame{SequenceNumber: seq, RetirePriorTo: rpt, ConnectionID: cid, StatelessResetToken: tok}}, shortOpts{})
	return cid, tok, p
}

// sentTo returns a predicate for server 1-RTT packets addressed to cid.
func sentTo(cid []byte) func(p *packet) bool {
	return func(p *packet) bool { return p.space == 2 && bytes.Equal(p.dcid, cid) }
}

func runSRHonoured(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	rc.Receive(ctx, t.PTO(), nil)
	mark := t.mark()
	cid, tok, ncid := rc.newTesterCID(1, 1)
	used := rc.receiveUntil(ctx, t.Settle(), mark, sentTo(cid))
	if used == nil {
		t.Inconclusive(fmt.Sprintf("The server never addressed the tester's sequence-1 connection ID within %v of Retire Prior To 1, so it had no reason to check that ID's token.", t.Settle().Round(time.Millisecond)), events(Trigger, ncid)...)
	}
	rc.Receive(ctx, 10*time.Millisecond, nil)
	rc.NoAcks = true
	rs := rc.rawStatelessReset(rc.dcid, 50, tok)
	var pings []*packet
	for waited := time.Duration(0); waited < t.Settle() && ctx.Err() == nil; waited += t.PTO() {
		pings = append(pings, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{}))
		rc.Receive(ctx, t.PTO(), nil)
	}
	// A packet the server built before it read the reset may still
	// arrive after it on a busy host; what proves it went on is an
	// acknowledgment of a later PING, or a packet well past one PTO.
	late := rs.at.Add(t.PTO() + 50*time.Millisecond)
	var after []*packet
	ps := t.rec.snapshot()
	for _, p := range received(ps, rc.trace.id, 0) {
		if p.space < 0 || !p.at.After(rs.at) {
			continue
		}
		acksLater := slices.ContainsFunc(pings, func(pg *packet) bool { return ackedBy([]*packet{p}, rc.trace.id, 2, pg.pn) != nil })
		if acksLater || p.at.After(late) {
			after = append(after, p)
		}
	}
	req := t.sc.Requirements[0]
	if len(after) > 0 {
		t.Fail("draining", req, fmt.Sprintf("After a stateless reset carrying the token of the tester's sequence-1 connection ID (which the server used), the server sent %d more packet(s) (acknowledging a later PING or over one PTO after the reset), the first %v after it.", len(after), after[0].at.Sub(rs.at).Round(time.Millisecond)),
			append(events(Trigger, ncid, rs), events(Response, lastN(after, 3)...)...)...)
		return
	}
	t.Pass("draining", req, fmt.Sprintf("After the stateless reset the server sent nothing more for %v while the tester kept sending PINGs.", t.Settle().Round(time.Millisecond)), append(events(Trigger, ncid, rs), events(Context, used)...)...)
}

// foreignOutcome judges one variant of sr-foreign-token-ignored:
// precondition says the token's ID was unused (or retired) when the reset
// was sent; acked that a later PING was acknowledged; answered that any
// packet came back after the reset.
func foreignOutcome(precondition, acked, answered bool) Verdict {
	switch {
	case !precondition:
		return Inconclusive
	case acked:
		return Pass
	case !answered:
		return Fail
	}
	return Inconclusive
}

func runSRForeignToken(ctx context.Context, t *T) {
	req := t.sc.Requirements[0]
	variant := func(name string, setup func(rc *rawClient) (tok [16]byte, ok bool, why string, evs []*packet)) {
		rc := t.rawEstablished(ctx, rawOptions{Label: name}, nil)
		rc.Receive(ctx, t.PTO(), nil)
		tok, ok, why, evs := setup(rc)
		mark := t.mark()
		rs := rc.rawStatelessReset(rc.dcid, 50, tok)
		var pings []*packet
		for waited := time.Duration(0); waited < t.Settle() && ctx.Err() == nil; waited += t.PTO() {
			pg := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
			pings = append(pings, pg)
			if rc.receiveUntil(ctx, t.PTO(), mark, func(p *packet) bool { return ackedBy([]*packet{p}, rc.trace.id, 2, pg.pn) != nil }) != nil {
				break
			}
		}
		ps := t.rec.snapshot()
		var ack *packet
		for _, pg := range pings {
			if a := ackedBy(ps, rc.trace.id, 2, pg.pn); a != nil {
				ack = a
				break
			}
		}
		// Decrypted packets only: a stateless reset from a server that
		// dropped the connection is not the connection going on.
		answered := slices.ContainsFunc(received(ps, rc.trace.id, mark), func(p *packet) bool { return p.space >= 0 })
		trig := append(events(Context, evs...), events(Trigger, rs)...)
		switch foreignOutcome(ok, ack != nil, answered) {
		case Pass:
			t.Pass(name, req, fmt.Sprintf("%s: the server ignored a stateless reset carrying that ID's token and acknowledged a later PING.", why), append(trig, events(Response, ack)...)...)
		case Fail:
			t.Fail(name, req, fmt.Sprintf("%s: after a stateless reset carrying that ID's token the server went silent and acknowledged none of %d PINGs over %v.", why, len(pings), t.Settle().Round(time.Millisecond)), append(trig, events(Trigger, lastN(pings, 2)...)...)...)
		default:
			t.Check(name, Inconclusive, Requirement{}, fmt.Sprintf("%s; the variant could not be judged (precondition held: %v, answers after the reset: %v).", why, ok, answered), trig...)
		}
	}
	variant("unused-id", func(rc *rawClient) ([16]byte, bool, string, []*packet) {
		// A server may move to a new ID of its own accord (quic-go does
		// once the handshake is confirmed); then the next one is tried.
		var ncids []*packet
		for seq := uint64(1); seq <= 3; seq++ {
			m := t.mark()
			cid, tok, ncid := rc.newTesterCID(seq, 0)
			ncids = append(ncids, ncid)
			rc.receiveUntil(ctx, t.PTO()+50*time.Millisecond, m, func(p *packet) bool { return ackedBy([]*packet{p}, rc.trace.id, 2, ncid.pn) != nil })
			rc.Receive(ctx, t.PTO(), nil)
			if !slices.ContainsFunc(received(t.rec.snapshot(), rc.trace.id, m), sentTo(cid)) {
				return tok, true, fmt.Sprintf("The tester issued sequence %d without Retire Prior To and the server never addressed it", seq), ncids
			}
		}
		return [16]byte{}, false, "The server addressed each of the tester's new connection IDs 1 to 3 as soon as it got them", ncids
	})
	variant("retired-id", func(rc *rawClient) ([16]byte, bool, string, []*packet) {
		m := t.mark()
		cid1, tok1, n1 := rc.newTesterCID(1, 1)
		rc.receiveUntil(ctx, t.Settle(), m, sentTo(cid1))
		m2 := t.mark()
		cid2, _, n2 := rc.newTesterCID(2, 2)
		retired := rc.receiveUntil(ctx, t.Settle(), m2, func(p *packet) bool {
			for _, f := range p.frames {
				if r, ok := f.(*wire.RetireConnectionIDFrame); ok && r.SequenceNumber == 1 {
					return true
				}
			}
			return false
		})
		rc.receiveUntil(ctx, t.PTO(), m2, sentTo(cid2))
		// The server retired the ID when it sent RETIRE_CONNECTION_ID;
		// the reset follows the tester's acknowledgment of that frame.
		rc.Receive(ctx, 5*time.Millisecond, nil)
		return tok1, retired != nil, "The server retired the tester's sequence-1 connection ID (Retire Prior To 2)", []*packet{n1, n2, retired}
	})
}
