package conformance

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/wire"
)

func runCloseDrainingSilence(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	rc.Receive(ctx, t.PTO(), nil)
	rc.NoAcks = true
	mark := len(t.rec.snapshot())
	trig := rc.Send1RTT([]wire.Frame{&wire.ConnectionCloseFrame{ErrorCode: 0}}, rawquic.ShortOpts{})
	start := time.Now()
	for time.Since(start) < t.PTO() && ctx.Err() == nil {
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
		rc.Receive(ctx, 50*time.Millisecond, nil)
	}
	rc.Receive(ctx, 3*t.PTO()-time.Since(start), nil)
	req := t.sc.Requirements[0]
	var closes, other []*packet
	for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
		if p.closeFrame() != nil && len(closes) == 0 {
			closes = append(closes, p)
		} else {
			other = append(other, p)
		}
	}
	if len(other) > 0 {
		t.Fail(
			"silence",
			req,
			fmt.Sprintf(
				"After the tester's CONNECTION_CLOSE the server sent %d more packet(s) (first: %s) instead of draining in silence.",
				len(other),
				other[0].ev.PacketType,
			),
			evidence(events(Trigger, trig), events(Response, lastN(other, 3)...))...)
		return
	}
	t.Pass(
		"silence",
		req,
		fmt.Sprintf(
			"After the tester's CONNECTION_CLOSE the server sent %d closing packet(s) and then nothing for 3 PTO, while PINGs kept arriving.",
			len(closes),
		),
		evidence(events(Trigger, trig), events(Response, closes...))...)
}

func runCloseReasonUTF8(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{})
	t.Provoke(
		ctx,
		c,
		Expectation{
			Check: "provoke",
			Req: rfc9000(
				"12.4",
				Must,
				"An endpoint MUST treat the receipt of a frame of unknown type as a connection error of type FRAME_ENCODING_ERROR.",
			),
			Codes:    transportCodes(wire.FrameEncodingError),
			Describe: "an unknown frame type",
		},
		func() {
			c.Inject(spaceApp, &wire.RawFrame{Bytes: wire.AppendVarint(nil, unknownFrameType)})
		},
	)
	// The provoking check is context for this scenario, not its verdict.
	t.mu.Lock()
	t.checks = t.checks[:0]
	t.mu.Unlock()
	n := 0
	for _, p := range received(t.rec.snapshot(), -1, 0) {
		cc := p.closeFrame()
		if cc == nil {
			continue
		}
		n++
		if !utf8.Valid(cc.Reason) {
			t.Warn(
				"utf8",
				t.sc.Requirements[0],
				fmt.Sprintf("The server's CONNECTION_CLOSE reason phrase %q is not valid UTF-8.", cc.Reason),
				events(Response, p)...)
			return
		}
	}
	if n == 0 {
		t.Inconclusive("The server sent no CONNECTION_CLOSE to judge.")
	}
	t.Pass("utf8", t.sc.Requirements[0], fmt.Sprintf("All %d reason phrases the server sent are valid UTF-8.", n))
}

func runIdleMin3PTO(ctx context.Context, t *T) {
	tp := rawquic.DefaultClientTP(nil)
	scid := randomBytes(8)
	tp.InitialSourceConnectionID = scid
	tp.MaxIdleTimeout = 1
	rc := t.newRaw(ctx, rawquic.Options{Label: "idle-1ms", SCID: scid, TP: tp})
	if err := rc.Handshake(ctx, t.Settle()+2*time.Second); err != nil {
		t.Inconclusive(fmt.Sprintf("The handshake with max_idle_timeout = 1 ms did not complete: %v.", err))
	}
	// Quiet for 1.5 PTO, then PINGs one PTO apart.
	sleep(ctx, t.PTO()*3/2)
	mark := len(t.rec.snapshot())
	var pings []*packet
	req := t.sc.Requirements[0]
	for i := 0; i < 3; i++ {
		pg := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
		pings = append(pings, pg)
		rc.Receive(ctx, t.PTO(), nil)
		ps := t.rec.snapshot()
		if a := ackedBy(ps, rc.trace.id, 2, pg.pn); a != nil {
			t.Pass(
				"alive",
				req,
				fmt.Sprintf("After 1.5 PTO of silence with max_idle_timeout = 1 ms, the server still acknowledged a PING."),
				evidence(events(Trigger, pg), events(Response, a))...)
			return
		}
		for _, p := range received(ps, rc.trace.id, mark) {
			if p.ev.PacketType == "stateless_reset" {
				t.Fail(
					"alive",
					req,
					"The server answered with a stateless reset after 1.5 PTO of silence: it used an idle timeout below 3 PTO.",
					events(Response, p)...)
				return
			}
		}
	}
	t.requireControl(ctx, "The server never acknowledged the PINGs after 1.5 PTO of silence")
	t.Fail(
		"alive",
		req,
		"With max_idle_timeout = 1 ms the server dropped the connection within 1.5 PTO: three PINGs went unanswered while a normal connection works.",
		events(Trigger, pings...)...)
}

func runSRUnknownCID(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "unknown-cid"})
	policy := map[string]string{}
	for _, size := range []int{1200, 100, 50} {
		before := t.datagramsReceived(rc.trace.id)
		b := append([]byte{0x40 | 0x01}, randomBytes(size-1)...)
		rc.Send(b)
		rc.Receive(ctx, max(t.PTO(), 300*time.Millisecond), nil)
		if n := t.datagramsReceived(rc.trace.id) - before; n > 0 {
			policy[fmt.Sprint(size)] = fmt.Sprintf("%d answer(s)", n)
		} else {
			policy[fmt.Sprint(size)] = "silent"
		}
	}
	t.Fact("sr.policy", policy)
	t.Observe("policy", fmt.Sprintf("Answers to short-header packets with unknown connection IDs, by size: %v.", policy))
}

// Family L: idle timeout and stateless reset (docs/scenarios.md), on the raw
// client, which sends nothing on its own while it waits.

var (
	reqIdleSilent = rfc9000(
		"10.1",
		Descriptive,
		"the connection is silently closed and its state is discarded when it remains idle for longer than the minimum of the max_idle_timeout value advertised by both endpoints.",
	)
	reqIdleCommit = rfc9000(
		"10.1",
		Descriptive,
		"By announcing a max_idle_timeout, an endpoint commits to initiating an immediate close … if it abandons the connection prior to the effective value.",
	)
	reqSRMay = rfc9000(
		"10.3",
		May,
		"An endpoint MAY send a Stateless Reset in response to receiving a packet that it cannot associate with an active connection.",
	)
	reqSRAmplify = rfc9000(
		"10.3",
		MustNot,
		"An endpoint MUST NOT send a Stateless Reset that is three times or more larger than the packet it receives to avoid being used for amplification.",
	)
	reqSRShortHeader = rfc9000("10.3", Must, "Endpoints MUST send Stateless Resets formatted as a packet with a short header.")
	reqSRTooSmall    = rfc9000("10.3", Must, "Endpoints MUST discard packets that are too small to be valid QUIC packets.")
	reqSROneShorter  = rfc9000(
		"10.3",
		Should,
		"in response to a packet that is 43 bytes or shorter SHOULD send a Stateless Reset that is one byte shorter than the packet it responds to.",
	)
	reqSRSmaller = rfc9000(
		"10.3.3",
		Must,
		"An endpoint MUST ensure that every Stateless Reset that it sends is smaller than the packet that triggered it, unless it maintains state sufficient to prevent looping.",
	)
	reqSRDrain = rfc9000(
		"10.3.1",
		Must,
		"identical in value to a stateless reset token, the endpoint MUST enter the draining period and not send any further packets on this connection.",
	)
	reqSRNotForeign = rfc9000(
		"10.3.1",
		MustNot,
		"An endpoint MUST NOT check for any stateless reset tokens associated with connection IDs it has not used or for connection IDs that have been retired.",
	)
)

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
	tp := rawquic.DefaultClientTP(scid)
	tp.MaxIdleTimeout = uint64(testerIdleTimeout / time.Millisecond)
	rc := t.rawEstablished(ctx, rawquic.Options{Label: label, SCID: scid, TP: tp}, nil)
	rc.Receive(ctx, t.PTO(), nil)
	ic := &idleConn{rc: rc, effective: testerIdleTimeout}
	if stp := rc.ServerTP(); stp != nil && stp.MaxIdleTimeout > 0 {
		ic.server = time.Duration(stp.MaxIdleTimeout) * time.Millisecond
		ic.effective = min(ic.effective, ic.server)
	}
	ic.quiet = time.Now()
	if p := rc.LastSent(); p != nil {
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
	pr.ping = rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
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
			onExpiry = fmt.Sprintf("%d packet(s), first %v", len(pr.during), pr.during[0].frameNames())
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
	t.Observe(
		"idle",
		fmt.Sprintf(
			"With max_idle_timeout %v (tester) and %v (server), the connection expired %s (expected %v); alive after %v, expired after %v; an expired connection answered a PING with %s; on expiry the server sent %s.",
			testerIdleTimeout,
			conns[0].server,
			eff,
			e,
			alive,
			dead,
			orNothing(answer),
			onExpiry,
		),
		evs...)
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
		t.Check(
			"kept",
			Observed,
			req,
			fmt.Sprintf(
				"After %v of silence (0.8 × the effective %v) the server still answered a request (%d bytes).",
				quietFor.Round(time.Millisecond),
				ic.effective,
				len(body),
			),
			events(Trigger, trig...)...)
	case closed != nil:
		t.Fact("idle.early-abandon", "closed explicitly")
		t.Check(
			"kept",
			Observed,
			req,
			fmt.Sprintf(
				"The server closed the connection explicitly (%s) before the effective idle timeout of %v.",
				closeCode(closed.closeFrame()),
				ic.effective,
			),
			events(Response, closed)...)
	default:
		t.Fact("idle.early-abandon", "abandoned silently")
		t.Check(
			"kept",
			Observed,
			req,
			fmt.Sprintf(
				"Abandoned silently before the effective timeout: after %v of silence (0.8 × %v) the request went unanswered (%v) and the server never sent CONNECTION_CLOSE.",
				quietFor.Round(time.Millisecond),
				ic.effective,
				err,
			),
			events(Trigger, trig...)...)
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
	out := []serverCIDToken{{seq: 0, cid: rc.ServerSCID}}
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
	for _, d := range t.rec.allDatagramsLocked() {
		if !d.sent && d.local == rc.Paths[0].Local && !d.at.Before(at) {
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
		rc.Send(shortJunk(s.cid, 100))
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
	t.Observe(
		"reset",
		fmt.Sprintf(
			"%v after the tester went quiet (effective idle timeout %v), 100-byte packets to the server's %d connection ID(s) drew: %v.",
			wait.Round(time.Millisecond),
			ic.effective,
			len(cids),
			results,
		),
		lastEvents(evs, 3)...)
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
				bad(
					"too-small",
					Fail,
					2,
					fmt.Sprintf(
						"The server answered a %d-byte short-header datagram, too small to be a QUIC packet, with %d bytes instead of discarding it.",
						pr.trigger,
						len(a),
					),
				)
			case len(a) > 0 && a[0]&0x80 != 0:
				bad(
					"short-header",
					Fail,
					1,
					fmt.Sprintf(
						"The server answered a %d-byte trigger with a long-header datagram (first byte 0x%02x); a stateless reset has a short header.",
						pr.trigger,
						a[0],
					),
				)
			case len(a) >= 3*pr.trigger:
				bad(
					"amplification",
					Fail,
					0,
					fmt.Sprintf("The server answered a %d-byte trigger with a %d-byte stateless reset, three times or more its size.", pr.trigger, len(a)),
				)
			case pr.trigger <= 43 && len(a) != pr.trigger-1:
				bad(
					"one-shorter",
					Warn,
					3,
					fmt.Sprintf(
						"The server answered a %d-byte trigger with a %d-byte stateless reset; one byte shorter (%d) keeps resets from looping.",
						pr.trigger,
						len(a),
						pr.trigger-1,
					),
				)
			}
			if pr.trigger >= 21 && len(a) >= pr.trigger {
				notSmaller = append(notSmaller, fmt.Sprintf("%d→%d", pr.trigger, len(a)))
			}
		}
	}
	if len(notSmaller) > 0 {
		out = append(
			out,
			srJudgement{"smaller", Observed, 4, fmt.Sprintf("Resets not smaller than their trigger (allowed only with anti-looping state): %v.", notSmaller)},
		)
	}
	return out
}

func runSRSizeRules(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "unknown-cid"})
	wait := max(t.PTO(), 300*time.Millisecond)
	probe := func(n int) srProbe {
		at := time.Now()
		rc.Send(shortJunk(randomBytes(8), n))
		rc.Receive(ctx, wait, nil)
		return srProbe{trigger: n, answers: t.answersSince(rc, at)}
	}
	first := probe(1200)
	if len(first.answers) == 0 {
		t.requireControl(ctx, "The server did not answer a 1200-byte packet with an unknown connection ID")
		t.Unsupported(
			"The server sends no stateless reset to a 1200-byte packet with an unknown connection ID (sr-unknown-cid), so there are no reset sizes to judge.",
		)
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
		t.Pass(
			"sizes",
			reqs[0],
			fmt.Sprintf(
				"Stateless resets by trigger size (bytes): %v; all short-header, under three times their trigger, and none for the 18-byte datagram.",
				sizes,
			),
		)
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
	rc.Send(b)
	return p
}

// newTesterCID issues a connection ID of the tester's length with a
// random stateless reset token and returns both with the frame's packet.
func (rc *rawClient) newTesterCID(seq, rpt uint64) ([]byte, [16]byte, *packet) {
	cid := randomBytes(len(rc.SCID))
	tok := [16]byte(randomBytes(16))
	p := rc.Send1RTT(
		[]wire.Frame{&wire.NewConnectionIDFrame{SequenceNumber: seq, RetirePriorTo: rpt, ConnectionID: cid, StatelessResetToken: tok}},
		rawquic.ShortOpts{},
	)
	return cid, tok, p
}

// sentTo returns a predicate for server 1-RTT packets addressed to cid.
func sentTo(cid []byte) func(p *packet) bool {
	return func(p *packet) bool { return p.space == 2 && bytes.Equal(p.dcid, cid) }
}

func runSRHonoured(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	rc.Receive(ctx, t.PTO(), nil)
	mark := t.mark()
	cid, tok, ncid := rc.newTesterCID(1, 1)
	used := rc.receiveUntil(ctx, t.Settle(), mark, sentTo(cid))
	if used == nil {
		t.Inconclusive(
			fmt.Sprintf(
				"The server never addressed the tester's sequence-1 connection ID within %v of Retire Prior To 1, so it had no reason to check that ID's token.",
				t.Settle().Round(time.Millisecond),
			),
			events(Trigger, ncid)...)
	}
	rc.Receive(ctx, 10*time.Millisecond, nil)
	rc.NoAcks = true
	rs := rc.rawStatelessReset(rc.DCID, 50, tok)
	var pings []*packet
	for waited := time.Duration(0); waited < t.Settle() && ctx.Err() == nil; waited += t.PTO() {
		pings = append(pings, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{}))
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
		t.Fail(
			"draining",
			req,
			fmt.Sprintf(
				"After a stateless reset carrying the token of the tester's sequence-1 connection ID (which the server used), the server sent %d more packet(s) (acknowledging a later PING or over one PTO after the reset), the first %v after it.",
				len(after),
				after[0].at.Sub(rs.at).Round(time.Millisecond),
			),
			evidence(events(Trigger, ncid, rs), events(Response, lastN(after, 3)...))...)
		return
	}
	t.Pass(
		"draining",
		req,
		fmt.Sprintf("After the stateless reset the server sent nothing more for %v while the tester kept sending PINGs.", t.Settle().Round(time.Millisecond)),
		evidence(events(Trigger, ncid, rs), events(Context, used))...)
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
		rc := t.rawEstablished(ctx, rawquic.Options{Label: name}, nil)
		rc.Receive(ctx, t.PTO(), nil)
		tok, ok, why, evs := setup(rc)
		mark := t.mark()
		rs := rc.rawStatelessReset(rc.DCID, 50, tok)
		var pings []*packet
		for waited := time.Duration(0); waited < t.Settle() && ctx.Err() == nil; waited += t.PTO() {
			pg := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
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
		trig := evidence(events(Context, evs...), events(Trigger, rs))
		switch foreignOutcome(ok, ack != nil, answered) {
		case Pass:
			t.Pass(
				name,
				req,
				fmt.Sprintf("%s: the server ignored a stateless reset carrying that ID's token and acknowledged a later PING.", why),
				append(trig, events(Response, ack)...)...)
		case Fail:
			t.Fail(
				name,
				req,
				fmt.Sprintf(
					"%s: after a stateless reset carrying that ID's token the server went silent and acknowledged none of %d PINGs over %v.",
					why,
					len(pings),
					t.Settle().Round(time.Millisecond),
				),
				append(trig, events(Trigger, lastN(pings, 2)...)...)...)
		default:
			t.Check(
				name,
				Inconclusive,
				Requirement{},
				fmt.Sprintf("%s; the variant could not be judged (precondition held: %v, answers after the reset: %v).", why, ok, answered),
				trig...)
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

// Family L: the closing state, where CONNECTION_CLOSE frames travel, and
// the close during the handshake (docs/scenarios.md).

var (
	reqClosingRate     = rfc9000("10.2.1", Should, "An endpoint SHOULD limit the rate at which it generates packets in the closing state.")
	reqClose1dReplaced = rfc9000(
		"10.2.3",
		Must,
		"A CONNECTION_CLOSE of type 0x1d MUST be replaced by a CONNECTION_CLOSE of type 0x1c when sending the frame in Initial or Handshake packets.",
	)
	reqCloseReasonClear = rfc9000(
		"10.2.3",
		Must,
		"Endpoints MUST clear the value of the Reason Phrase field … when converting to a CONNECTION_CLOSE of type 0x1c.",
	)
	reqCloseAppError   = rfc9000("10.2.3", Should, "SHOULD use the APPLICATION_ERROR code when converting to a CONNECTION_CLOSE of type 0x1c.")
	reqClose1RTTOnly   = rfc9000("10.2.3", Must, "After the handshake is confirmed … an endpoint MUST send any CONNECTION_CLOSE frames in a 1-RTT packet.")
	reqCloseBothLevels = rfc9000(
		"10.2.3",
		Should,
		"Under these circumstances, a server SHOULD send a CONNECTION_CLOSE frame in both Handshake and Initial packets to ensure that at least one of them is processable by the client.",
	)
)

// closingBurst is how many packets the tester sends in the closing state
// within 50 ms.
const closingBurst = 50

func runCloseClosingState(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	rc.Receive(ctx, t.PTO(), nil)
	mark := t.mark()
	trig := rc.Send1RTT([]wire.Frame{&wire.RawFrame{Bytes: wire.AppendVarint(nil, unknownFrameType)}}, rawquic.ShortOpts{})
	cl := rc.receiveUntil(ctx, t.Settle(), mark, func(p *packet) bool { return p.closeFrame() != nil })
	if cl == nil {
		t.Inconclusive(
			fmt.Sprintf(
				"The server did not close the connection within %v of a frame of unknown type 0x%x, so there was no closing state to probe.",
				t.Settle().Round(time.Millisecond),
				unknownFrameType,
			),
			events(Trigger, trig)...)
	}
	// The closing state lasts three PTO from the close (RFC 9000 §10.2):
	// the burst goes out at once.
	burst := t.mark()
	start := time.Now()
	var pings []*packet
	for i := 0; i < closingBurst && time.Since(start) < 50*time.Millisecond; i++ {
		pings = append(pings, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{}))
	}
	rc.Receive(ctx, 150*time.Millisecond, nil)
	burstEnd := t.mark()
	later := 0
	for i := 0; i < 4 && ctx.Err() == nil; i++ {
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
		later++
		rc.Receive(ctx, 200*time.Millisecond, nil)
	}
	ps := t.rec.snapshot()
	var inBurst, afterBurst []*packet
	for i, p := range ps {
		if i < burst || p.sent || p.conn != rc.trace.id {
			continue
		}
		if i < burstEnd {
			inBurst = append(inBurst, p)
		} else {
			afterBurst = append(afterBurst, p)
		}
	}
	closes, other := 0, 0
	for _, p := range inBurst {
		if p.closeFrame() != nil {
			closes++
		} else {
			other++
		}
	}
	// Identical answers: the same bytes as the first closing datagram.
	var first []byte
	identical := 0
	t.rec.mu.Lock()
	for _, d := range t.rec.allDatagramsLocked() {
		if d.sent || d.local != rc.Local || d.at.Before(cl.at) {
			continue
		}
		if first == nil {
			first = d.b
		} else if bytes.Equal(d.b, first) {
			identical++
		}
	}
	t.rec.mu.Unlock()
	t.Fact(
		"close.closing-answers",
		map[string]int{
			"burst":             len(pings),
			"closes-to-burst":   closes,
			"other-to-burst":    other,
			"later-pings":       later,
			"answers-to-later":  len(afterBurst),
			"identical-repeats": identical,
		},
	)
	v, sentence := judgeClosingRate(len(pings), closes)
	sentence += fmt.Sprintf(
		" Answers to %d later PINGs over the next 800 ms: %d; repeats identical to the first closing datagram: %d.",
		later,
		len(afterBurst),
		identical,
	)
	evs := evidence(events(Trigger, trig, pings[0], pings[len(pings)-1]), events(Response, append([]*packet{cl}, lastN(inBurst, 3)...)...))
	if v == Warn {
		t.Warn("rate", reqClosingRate, sentence, evs...)
		return
	}
	t.Pass("rate", reqClosingRate, sentence, evs...)
}

// judgeClosingRate judges how many closing packets answered a burst of
// packets in the closing state: one for each is no limit at all.
func judgeClosingRate(burst, closes int) (Verdict, string) {
	if closes >= burst {
		return Warn, fmt.Sprintf(
			"In the closing state the server answered each of the %d packets of a 50 ms burst with its own closing packet (%d); limit the rate, for instance by answering the 1st, 2nd, 4th, 8th … packet.",
			burst,
			closes,
		)
	}
	return Pass, fmt.Sprintf("In the closing state the server answered a 50 ms burst of %d packets with %d closing packet(s).", burst, closes)
}

func runCloseFramePlacement(ctx context.Context, t *T) {
	// After the handshake: a transport error.
	if c, err := t.Dial(ctx, DialOptions{Label: "after-handshake"}); err == nil {
		mark := t.mark()
		c.Inject(spaceApp, &wire.RawFrame{Bytes: wire.AppendVarint(nil, unknownFrameType)})
		t.rec.wait(ctx, t.Settle(), func(ps []*packet) bool { return firstClose(received(ps, c.ID(), mark)) != nil })
	}
	// During the handshake: an Initial carrying a STREAM frame.
	rc := t.newRaw(ctx, rawquic.Options{Label: "during-handshake"})
	if rc.earlyFlight(ctx, t.Settle()) {
		m := t.mark()
		rc.sendInitialStream()
		rc.receiveUntil(ctx, t.Settle(), m, func(p *packet) bool { return p.closeFrame() != nil })
	}
	// An HTTP/3 error after the handshake (a second control stream): a
	// close of type 0x1d.
	if t.profile.HasALPN("h3") {
		if c, err := t.Dial(ctx, DialOptions{Label: "h3-error", ALPN: []string{"h3"}}); err == nil {
			mark := t.mark()
			settings := []byte{0x00, 0x04, 0x00}
			c.Inject(spaceApp, &wire.StreamFrame{StreamID: 2, Data: settings}, &wire.StreamFrame{StreamID: 6, Data: settings})
			t.rec.wait(ctx, t.Settle(), func(ps []*packet) bool { return firstClose(received(ps, c.ID(), mark)) != nil })
		}
	}
	closes := 0
	for _, p := range received(t.rec.snapshot(), -1, 0) {
		if p.closeFrame() != nil && p.space >= 0 {
			closes++
		}
	}
	if closes == 0 {
		t.Inconclusive("The server sent no CONNECTION_CLOSE the tester could read, so there was nothing to judge.")
	}
	sc := t.sc
	for _, c := range t.records() {
		for _, pc := range runWideChecks {
			if pc.id != sc.ID {
				continue
			}
			if sentence, ps := pc.judge(c); sentence != "" {
				v := Fail
				if pc.warn {
					v = Warn
				}
				t.Check("placement", v, sc.Requirements[pc.req], fmt.Sprintf("Connection %d (%s): %s", c.conn, c.label, sentence), events(Response, ps...)...)
			}
		}
	}
	if !t.hasChecks() {
		t.Pass(
			"placement",
			reqClose1dReplaced,
			fmt.Sprintf(
				"The server's %d CONNECTION_CLOSE frame(s) (after the handshake, during it, and on an HTTP/3 error where h3 is spoken) travelled in allowed packet types.",
				closes,
			),
		)
	}
}

// placementRule judges one CONNECTION_CLOSE p carries (cc) against the
// server packets of its epoch; it returns a sentence on a violation.
type placementRule func(epoch []*packet, p *packet, cc *wire.ConnectionCloseFrame) string

// placementJudge applies rule to every CONNECTION_CLOSE the server sent
// on a connection. The connection is cut into epochs at each new server
// Source Connection ID (a scenario that restarts its handshake).
func placementJudge(rule placementRule) func(c connRecord) (string, []*packet) {
	return func(c connRecord) (string, []*packet) {
		// Each close is judged against its own epoch.
		start := 0
		var scid []byte
		var pkts []*packet
		for _, p := range c.packets {
			if !p.sent && p.space >= 0 && p.ev.PacketType != "unknown" {
				pkts = append(pkts, p)
			}
		}
		for i, p := range pkts {
			if len(p.scid) > 0 && !bytes.Equal(p.scid, scid) {
				if scid != nil {
					start = i
				}
				scid = p.scid
			}
			cc := p.closeFrame()
			if cc == nil {
				continue
			}
			if s := rule(pkts[start:], p, cc); s != "" {
				return s, []*packet{p}
			}
		}
		return "", nil
	}
}

// isLongSpace reports whether a packet is an Initial or Handshake packet.
func isLongSpace(p *packet) bool { return p.space == 0 || p.space == 1 }

func placement1dInLong(_ []*packet, p *packet, cc *wire.ConnectionCloseFrame) string {
	if isLongSpace(p) && cc.Application {
		return fmt.Sprintf("the server sent a CONNECTION_CLOSE of type 0x1d (code 0x%x) in a %s packet.", cc.ErrorCode, p.ev.PacketType)
	}
	return ""
}

// converted reports whether a type-0x1c close in an Initial or Handshake
// packet stands for an application close: it carries APPLICATION_ERROR,
// or a type-0x1d close left in 1-RTT within 5 ms of it.
func converted(epoch []*packet, p *packet, cc *wire.ConnectionCloseFrame) bool {
	if !isLongSpace(p) || cc.Application {
		return false
	}
	if cc.ErrorCode == uint64(wire.ApplicationError) {
		return true
	}
	for _, q := range epoch {
		if qc := q.closeFrame(); qc != nil && qc.Application && q.space == 2 && q.at.Sub(p.at).Abs() <= 5*time.Millisecond {
			return true
		}
	}
	return false
}

func placementReason(epoch []*packet, p *packet, cc *wire.ConnectionCloseFrame) string {
	if converted(epoch, p, cc) && len(cc.Reason) > 0 {
		return fmt.Sprintf(
			"the server's CONNECTION_CLOSE converted from an application close in a %s packet keeps the reason phrase %q; clear it.",
			p.ev.PacketType,
			cc.Reason,
		)
	}
	return ""
}

func placementCode(epoch []*packet, p *packet, cc *wire.ConnectionCloseFrame) string {
	if converted(epoch, p, cc) && cc.ErrorCode != uint64(wire.ApplicationError) {
		return fmt.Sprintf(
			"the server converted an application close to type 0x1c in a %s packet with %s instead of APPLICATION_ERROR.",
			p.ev.PacketType,
			wire.TransportErrorCode(cc.ErrorCode),
		)
	}
	return ""
}

// placementAfterConfirmed: once the server sent HANDSHAKE_DONE its
// handshake is confirmed (RFC 9001 §4.1.2), so a close in an Initial or
// Handshake packet after it breaks §10.2.3.
func placementAfterConfirmed(epoch []*packet, p *packet, cc *wire.ConnectionCloseFrame) string {
	if !isLongSpace(p) {
		return ""
	}
	for _, q := range epoch {
		if q == p {
			break
		}
		if q.has(wire.FrameTypeHandshakeDone) {
			return fmt.Sprintf(
				"the server sent CONNECTION_CLOSE in a %s packet %v after its HANDSHAKE_DONE, when the handshake was confirmed.",
				p.ev.PacketType,
				p.at.Sub(q.at).Round(time.Microsecond),
			)
		}
	}
	return ""
}

// sendInitialStream sends an Initial packet carrying an ACK of the
// server's Initial packets and a STREAM frame, which Initial packets do
// not allow (RFC 9000 §12.4, Table 3).
func (rc *rawClient) sendInitialStream() *packet {
	pkt, _ := rc.LongPacket(
		0,
		[]wire.Frame{rc.AckFrame(0), &wire.StreamFrame{StreamID: 0, Data: []byte("GET /\r\n"), Fin: true}},
		rawquic.LongOpts{PadTo: 1200},
	)
	p := rc.LastSent()
	rc.Send(pkt)
	return p
}

func runCloseHandshakeBothLevels(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "stream-in-initial"})
	if !rc.earlyFlight(ctx, t.Settle()) {
		t.Inconclusive(fmt.Sprintf("The server's first flight did not give the tester Handshake keys within %v.", t.Settle().Round(time.Millisecond)))
	}
	mark := t.mark()
	trig := rc.sendInitialStream()
	both := func() bool {
		in, hs, _ := closesBySpace(received(t.rec.snapshot(), rc.trace.id, mark))
		return in != nil && hs != nil
	}
	rc.Receive(ctx, t.Settle(), both)
	unopened := t.recoverCloses(rc.trace, t.markTime(mark))
	in, hs, app := closesBySpace(received(t.rec.snapshot(), rc.trace.id, mark))
	if in == nil && hs == nil && app == nil && len(unopened) > 0 {
		t.Inconclusive(unopenedSentence("server", unopened), evidence(events(Trigger, trig), unopenedEvents(t.started, unopened))...)
	}
	if in == nil && hs == nil && app == nil {
		// Did the connection go on? Finish the handshake.
		rc.Silent = false
		rc.Flush()
		rc.Receive(ctx, t.Settle(), func() bool { return rc.Confirmed || rc.PeerClosed })
		// An acknowledgment proves the packet was processed (RFC 9000
		// §13.1); a server that dropped it unread is not judged.
		if a := ackedBy(t.rec.snapshot(), rc.trace.id, 0, trig.pn); rc.Confirmed && a != nil {
			t.Fail(
				"close",
				reqFrameNotPermitted,
				"The server acknowledged an Initial packet carrying a STREAM frame and completed the handshake instead of closing with PROTOCOL_VIOLATION.",
				evidence(events(Trigger, trig), events(Response, a))...)
			return
		}
		if rc.Confirmed {
			t.Inconclusive(
				"The server never acknowledged the Initial packet carrying a STREAM frame and completed the handshake: it may have dropped the packet unread.",
				events(Trigger, trig)...)
		}
		t.Inconclusive(
			fmt.Sprintf(
				"No CONNECTION_CLOSE arrived within %v of an Initial packet carrying a STREAM frame, and the handshake did not complete either.",
				t.Settle().Round(time.Millisecond),
			),
			events(Trigger, trig)...)
	}
	first := in
	for _, p := range []*packet{hs, app} {
		if first == nil || p != nil && p.at.Before(first.at) {
			first = p
		}
	}
	cc := first.closeFrame()
	if !cc.Application && cc.ErrorCode == uint64(wire.ProtocolViolation) {
		t.Pass(
			"close",
			reqFrameNotPermitted,
			"The server closed with PROTOCOL_VIOLATION after an Initial packet carrying a STREAM frame.",
			evidence(events(Trigger, trig), events(Response, first))...)
	} else {
		t.Warn("close", reqMostAppropriate, fmt.Sprintf("The server closed after an Initial packet carrying a STREAM frame, but with %s instead of PROTOCOL_VIOLATION; use the specific code.", closeCode(cc)), evidence(events(Trigger, trig), events(Response, first))...)
	}
	levels := func() string {
		var ls []string
		for _, p := range []*packet{in, hs, app} {
			if p != nil {
				ls = append(ls, p.ev.PacketType)
			}
		}
		return strings.Join(ls, " and ")
	}
	switch {
	case in != nil && hs != nil:
		t.Pass(
			"both-levels",
			reqCloseBothLevels,
			fmt.Sprintf("Before the handshake was confirmed the server sent CONNECTION_CLOSE in %s packets.", levels()),
			events(Response, in, hs, app)...)
	case in != nil:
		t.Warn(
			"both-levels",
			reqCloseBothLevels,
			fmt.Sprintf(
				"The server sent CONNECTION_CLOSE in %s packets but in no Handshake packet, although the tester may already hold Handshake keys; send it in a Handshake packet too.",
				levels(),
			),
			events(Response, in, app)...)
	default:
		t.Warn(
			"both-levels",
			reqCloseBothLevels,
			fmt.Sprintf(
				"The server sent CONNECTION_CLOSE in %s packets but in no Initial packet, although the tester may not hold Handshake keys yet; send it in an Initial packet too.",
				levels(),
			),
			events(Response, hs, app)...)
	}
}

// closesBySpace returns the first received Initial, Handshake and 1-RTT
// packets carrying CONNECTION_CLOSE.
func closesBySpace(ps []*packet) (in, hs, app *packet) {
	for _, p := range ps {
		if p.closeFrame() == nil {
			continue
		}
		switch {
		case p.space == 0 && in == nil:
			in = p
		case p.space == 1 && hs == nil:
			hs = p
		case p.space == 2 && app == nil:
			app = p
		}
	}
	return in, hs, app
}

func judgeCloseUTF8(c connRecord) (string, []*packet) {
	for _, p := range c.packets {
		if p.sent || p.ev.PacketType == "unknown" {
			continue
		}
		if cc := p.closeFrame(); cc != nil && !utf8.Valid(cc.Reason) {
			return fmt.Sprintf("the server's CONNECTION_CLOSE reason phrase %q is not valid UTF-8.", cc.Reason), []*packet{p}
		}
	}
	return "", nil
}

func init() {
	Register(&Scenario{
		ID: "close-draining-silence", Title: "Server silent while draining", Family: "L", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("10.2.2", MustNot, "While otherwise identical to the closing state, an endpoint in the draining state MUST NOT send any packets."),
			rfc9000(
				"10.2.2",
				May,
				"An endpoint that receives a CONNECTION_CLOSE frame MAY send a single packet containing a CONNECTION_CLOSE frame before entering the draining state",
			),
		},
		Run: runCloseDrainingSilence,
	})
	Register(&Scenario{
		ID: "close-reason-utf8", Title: "CONNECTION_CLOSE reason phrases are UTF-8", Family: "L", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{rfc9000("19.19", Should, "This SHOULD be a UTF-8 encoded string")},
		Run:          runCloseReasonUTF8,
	})
	Register(&Scenario{
		ID: "idle-timeout-min-3pto", Title: "Idle timeout stretched to 3 PTO", Family: "L", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"10.1",
				Must,
				"To avoid excessively small idle timeout periods, endpoints MUST increase the idle timeout period to be at least three times the current Probe Timeout (PTO).",
			),
		},
		Run: runIdleMin3PTO,
	})
	Register(&Scenario{
		ID: "sr-unknown-cid", Title: "Stateless reset policy for unknown connection IDs", Family: "L", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{
			rfc9000(
				"10.3",
				May,
				"An endpoint MAY send a Stateless Reset in response to receiving a packet that it cannot associate with an active connection.",
			),
		},
		Run: runSRUnknownCID,
	})
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
	Register(&Scenario{
		ID: "close-closing-state", Title: "Closing packets are rate-limited", Family: "L", Needs: []string{NeedApp},
		Requirements: []Requirement{reqClosingRate},
		Run:          runCloseClosingState,
	})
	Register(&Scenario{
		ID: "close-frame-placement", Title: "CONNECTION_CLOSE in the right packet types", Family: "L", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{reqClose1dReplaced, reqCloseReasonClear, reqCloseAppError, reqClose1RTTOnly},
		Run:          runCloseFramePlacement,
	})
	Register(&Scenario{
		ID: "close-handshake-both-levels", Title: "Handshake-time close in Initial and Handshake packets", Family: "L", Needs: []string{NeedApp},
		Requirements: []Requirement{reqCloseBothLevels, reqFrameNotPermitted},
		Run:          runCloseHandshakeBothLevels,
	})
	// close-frame-placement also judges every connection of the run.
	runWideChecks = append(runWideChecks,
		passiveCheck{id: "close-frame-placement", req: 0, judge: placementJudge(placement1dInLong)},
		passiveCheck{id: "close-frame-placement", req: 1, judge: placementJudge(placementReason)},
		passiveCheck{id: "close-frame-placement", req: 2, warn: true, judge: placementJudge(placementCode)},
		passiveCheck{id: "close-frame-placement", req: 3, judge: placementJudge(placementAfterConfirmed)},
	)
}
