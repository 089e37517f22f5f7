package conformance

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

func newGet(ctx context.Context, p *Profile, path string) (*http.Request, error) {
	host := p.sni()
	if host == "" {
		host = "localhost"
	}
	return http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+path, nil)
}

// Expectation is what a provoked error must look like (docs/conformance-model.md, Provoked errors).
type Expectation struct {
	// Check names the check in the result.
	Check string
	// Req is the MUST the close rests on.
	Req Requirement
	// Codes are the expected error codes; any of them passes.
	Codes []uint64
	// Application selects CONNECTION_CLOSE type 0x1d (HTTP/3, QPACK).
	Application bool
	// Describe names the offence for the sentences ("a NEW_TOKEN frame").
	Describe string
	// GoesOnWarns makes "the connection goes on" a warn instead of a fail,
	// for scenarios whose requirement is only a SHOULD (Req then says
	// SHOULD).
	GoesOnWarns bool
	// StreamErrors accepts RESET_STREAM or STOP_SENDING with an expected
	// code as a pass (HTTP/3 stream errors).
	StreamErrors bool
	// AnyCode passes on any CONNECTION_CLOSE.
	AnyCode bool
	// GoesOn, when set, may name what happened when the target processed
	// the trigger and went on, with the requirement that rests on it; an
	// empty sentence keeps the default (Req, "kept the connection open").
	GoesOn func(ps []*packet, conn, mark int) (Requirement, string)
}

func (e Expectation) codeNames() string {
	var s []string
	for _, c := range e.Codes {
		if e.Application {
			s = append(s, fmt.Sprintf("0x%x", c))
		} else {
			s = append(s, wire.TransportErrorCode(c).String())
		}
	}
	return strings.Join(s, " or ")
}

// Provoke runs the provoked-error pattern on an established connection
// (docs/conformance-model.md, Provoked errors): it waits until the
// handshake is confirmed, lets trigger send the offending thing, then
// sends a PING every PTO for one settle window and maps what came back to
// a verdict. When the target went on without ever showing that it
// processed the packet carrying the trigger, and that packet can be sent
// again harmlessly, the trigger goes out once more in a fresh packet.
func (t *T) Provoke(ctx context.Context, c *Conn, e Expectation, trigger func()) {
	t.awaitConfirmed(ctx, c)
	o := t.provokeOnce(ctx, c, e, trigger)
	if o.unprocessed && o.retryable && ctx.Err() == nil && c.Conn != nil && c.Err() == nil {
		first := o
		o = t.provokeOnce(ctx, c, e, trigger)
		o.retried(first)
	}
	t.recordProvoked(e, o)
}

// provokeOnce sends the trigger once and watches one settle window.
func (t *T) provokeOnce(ctx context.Context, c *Conn, e Expectation, trigger func()) provokedOutcome {
	mark := t.mark()
	trigger()
	end := t.triggerSent(ctx, c.trace.id, mark)
	t.watchConn(ctx, c, mark, e, true)
	return t.assessProvoked(c.trace, c.Conn != nil, mark, end, e)
}

// awaitConfirmed waits, at most one settle window, until the server's
// HANDSHAKE_DONE has arrived on an engine connection. quic.Dial returns at
// handshake completion, and RFC 9001 §5.7 lets a server drop 1-RTT packets
// until the handshake is confirmed: “a server MUST NOT process incoming
// 1-RTT protected packets before the TLS handshake is complete”, and
// packets that arrive before that may be dropped. A client-facing run has
// nothing to wait for: the tester is the server, which confirms the
// handshake when it completes (RFC 9001 §4.1.2).
func (t *T) awaitConfirmed(ctx context.Context, c *Conn) {
	if c.Conn == nil || t.who() == "client" {
		return
	}
	t.rec.wait(ctx, t.Settle(), func(ps []*packet) bool {
		return handshakeDoneAfter(ps, c.trace.id, time.Time{}) != nil || c.Err() != nil
	})
}

// watchAfter is the second half of the provoked-error pattern: watch the
// connection for one settle window from packet index mark, pinging every
// PTO when ping is set, and judge.
func (t *T) watchAfter(ctx context.Context, c *Conn, mark int, e Expectation, ping bool) {
	t.watchConn(ctx, c, mark, e, ping)
	t.judgeProvoked(c.trace, c.Conn != nil, mark, e)
}

// watchConn watches the connection for one settle window from packet
// index mark, pinging every PTO when ping is set, until a close.
func (t *T) watchConn(ctx context.Context, c *Conn, mark int, e Expectation, ping bool) {
	settle := t.Settle()
	pto := t.PTO()
	closed := func(ps []*packet) bool {
		for _, p := range received(ps, c.trace.id, mark) {
			if p.closeFrame() != nil || p.ev.PacketType == "stateless_reset" {
				return true
			}
			if e.StreamErrors && streamErrorWith(p, e.Codes) != nil {
				return true
			}
		}
		return false
	}
	ended := func() bool {
		if c.Conn == nil {
			return false
		}
		if err := c.Err(); err != nil {
			c.trace.noteRemoteClose(err)
			return true
		}
		return false
	}
	for waited := 0 * pto; waited < settle; waited += pto {
		if closed(t.rec.snapshot()) || ended() {
			break
		}
		if c.Conn != nil && ping {
			c.Ping()
		}
		if t.rec.wait(ctx, pto, closed) || ended() {
			break
		}
		if ctx.Err() != nil {
			break
		}
	}
	ended()
}

func streamErrorWith(p *packet, codes []uint64) wire.Frame {
	for _, f := range p.frames {
		switch f := f.(type) {
		case *wire.ResetStreamFrame:
			if slices.Contains(codes, f.ErrorCode) {
				return f
			}
		case *wire.StopSendingFrame:
			if slices.Contains(codes, f.ErrorCode) {
				return f
			}
		}
	}
	return nil
}

// judgeProvoked maps the packets after mark to the verdicts of
// docs/conformance-model.md, Provoked errors, taking the first packet the
// tester sent after mark that carries anything but acknowledgments as the
// trigger.
func (t *T) judgeProvoked(trace *connTrace, established bool, mark int, e Expectation) {
	t.recordProvoked(e, t.assessProvoked(trace, established, mark, -1, e))
}

// recordProvoked records the outcome as the expectation's check.
func (t *T) recordProvoked(e Expectation, o provokedOutcome) {
	t.Check(e.Check, o.v, o.req, o.sentence, o.evs...)
}

// assessProvoked judges the packets of trace after mark. The trigger is
// what the tester sent in [mark, end) (end < 0: the first packet after
// mark that carries more than acknowledgments); PINGs sent after it are
// the probes that show whether the connection went on.
func (t *T) assessProvoked(trace *connTrace, established bool, mark, end int, e Expectation) provokedOutcome {
	unopened := t.recoverCloses(trace, t.markTime(mark))
	ps := t.rec.snapshot()
	trigger := triggerPackets(ps, trace.id, mark, end)
	var pings []*packet
	for i, p := range ps {
		if i < mark || p.conn != trace.id || !p.sent || slices.Contains(trigger, p) {
			continue
		}
		if p.has(wire.FrameTypePing) && (len(trigger) == 0 || p.at.After(trigger[0].at) || p.at.Equal(trigger[0].at)) {
			pings = append(pings, p)
		}
	}
	out := func(v Verdict, req Requirement, msg string, evs ...PacketEvent) provokedOutcome {
		return provokedOutcome{v: v, req: req, sentence: msg, evs: evs, trigger: trigger, retryable: retryable(trigger)}
	}
	rcv := received(ps, trace.id, mark)
	for _, p := range rcv {
		if p.ev.PacketType == "stateless_reset" {
			return out(
				Fail,
				reqNoResetWithState,
				fmt.Sprintf(
					"The "+t.who()+" answered %s with a stateless reset although it still held the connection; it must close with %s.",
					e.Describe,
					e.codeNames(),
				),
				evidence(events(Trigger, trigger...), events(Response, p))...)
		}
		if e.StreamErrors {
			if f := streamErrorWith(p, e.Codes); f != nil {
				return out(Pass, e.Req, fmt.Sprintf("The "+t.who()+" answered %s with a stream error (%s).", e.Describe, frameString(f)),
					evidence(events(Trigger, trigger...), events(Response, p))...)
			}
		}
		cc := p.closeFrame()
		if cc == nil {
			continue
		}
		// A close after the trigger counts as processing it.
		evs := evidence(events(Trigger, trigger...), events(Response, p))
		if e.AnyCode || cc.Application == e.Application && slices.Contains(e.Codes, cc.ErrorCode) {
			return out(Pass, e.Req, fmt.Sprintf("The "+t.who()+" closed the connection with %s after %s.", closeCode(cc), e.Describe), evs...)
		}
		return out(
			Warn,
			reqMostAppropriate,
			fmt.Sprintf(
				"The "+t.who()+" closed the connection after %s, but with %s instead of %s; use the specific code.",
				e.Describe,
				closeCode(cc),
				e.codeNames(),
			),
			evs...)
	}
	// No close. Did the connection go on?
	var acked []*packet
	for _, pg := range pings {
		if a := ackedBy(ps, trace.id, pg.space, pg.pn); a != nil {
			acked = append(acked, pg, a)
		}
	}
	inconclusive := func(msg string, evs ...PacketEvent) provokedOutcome {
		return out(Inconclusive, Requirement{}, msg, evs...)
	}
	if len(unopened) > 0 && len(acked) == 0 {
		evs := evidence(events(Trigger, trigger...), unopenedEvents(t.started, unopened))
		return inconclusive(unopenedSentence(t.who(), unopened), evs...)
	}
	if !established {
		// Handshake-time probes: the connection "goes on" when the
		// handshake completed; here it did not.
		if len(rcv) == 0 {
			return inconclusive(
				fmt.Sprintf("The "+t.who()+" sent nothing at all within %v after %s: no close and no handshake.", t.Settle().Round(1e6), e.Describe),
				events(Trigger, trigger...)...)
		}
		return inconclusive(
			fmt.Sprintf("The handshake did not complete after %s, but no CONNECTION_CLOSE arrived either.", e.Describe),
			evidence(events(Trigger, trigger...), events(Context, lastN(rcv, 3)...))...)
	}
	if len(acked) > 0 {
		proof, missing := triggerProcessed(ps, trace.id, trigger)
		if len(trigger) == 0 {
			o := inconclusive(
				fmt.Sprintf(
					"The "+t.who()+" acknowledged %d later PING packet(s) and never closed, but the tester saw no packet carrying %s leave.",
					len(acked)/2,
					e.Describe,
				),
				events(Context, acked...)...)
			o.unprocessed = true
			return o
		}
		if len(missing) > 0 {
			// RFC 9000 §13.1: packets are acknowledged only once
			// processed. Without an acknowledgment of the trigger, going
			// on may simply mean the packet was dropped unread.
			o := inconclusive(
				fmt.Sprintf(
					"The "+t.who()+" acknowledged %d later PING packet(s) and never closed, but it never acknowledged %s carrying %s, so it may have dropped it unread; going on proves nothing.",
					len(acked)/2,
					pnList(missing),
					e.Describe,
				),
				evidence(events(Trigger, trigger...), events(Context, acked...))...)
			o.unprocessed = true
			return o
		}
		req := e.Req
		msg := fmt.Sprintf(
			"The "+t.who()+" processed %s (it acknowledged %s), then kept the connection open: it acknowledged %d later PING packet(s) over a %v settle window and never sent CONNECTION_CLOSE (%s expected).",
			e.Describe,
			pnList(trigger),
			len(acked)/2,
			t.Settle().Round(1e6),
			e.codeNames(),
		)
		if e.GoesOn != nil {
			if r, m := e.GoesOn(ps, trace.id, mark); m != "" {
				msg = m
				if r.Quote != "" {
					req = r
				}
			}
		}
		// A stream error with the expected code, where the requirement
		// names a connection error, is the usual way to get this wrong:
		// say so, and keep the frame as evidence.
		for _, p := range rcv {
			if f := streamErrorWith(p, e.Codes); f != nil && e.Application && !e.StreamErrors {
				msg += fmt.Sprintf(" It answered with a stream error instead (%s); the requirement asks for a connection error.", frameString(f))
				acked = append(acked, p)
				break
			}
		}
		evs := evidence(events(Trigger, trigger...), events(Response, append(proof, acked...)...))
		if e.GoesOnWarns {
			return out(Warn, req, msg, evs...)
		}
		return out(Fail, req, msg, evs...)
	}
	if len(rcv) > 0 {
		return inconclusive(
			fmt.Sprintf("After %s the "+t.who()+" neither closed nor acknowledged the tester's PINGs within %v.", e.Describe, t.Settle().Round(1e6)),
			evidence(events(Trigger, trigger...), events(Context, lastN(rcv, 3)...))...)
	}
	return inconclusive(
		fmt.Sprintf("Nothing came back within %v after %s: no close and no acknowledgment.", t.Settle().Round(1e6), e.Describe),
		evidence(events(Trigger, trigger...), events(Context, pings...))...)
}

func lastN(ps []*packet, n int) []*packet {
	if len(ps) > n {
		return ps[len(ps)-n:]
	}
	return ps
}

// ProvokeHandshake runs the provoked-error pattern where the offence is
// in the handshake itself (a transport parameter, an ALPN): the
// connection "goes on" when the handshake completes and later PINGs are
// acknowledged.
func (t *T) ProvokeHandshake(ctx context.Context, o DialOptions, e Expectation) {
	mark := len(t.rec.snapshot())
	c, err := t.Dial(ctx, o)
	if err != nil {
		t.judgeProvoked(c.trace, false, mark, e)
		return
	}
	t.watchAfter(ctx, c, mark, e, true)
}

// controlResult caches the control probe of a scenario.
type controlResult struct {
	ok  bool
	evs []PacketEvent
	msg string
}

// Control runs the control probe (docs/conformance-model.md, Verdicts rule 6): a normal
// handshake on the same target, to prove it is reachable. Without a
// successful control, silence is inconclusive.
func (t *T) Control(ctx context.Context) (bool, string) {
	t.mu.Lock()
	if t.control != nil {
		cr := t.control
		t.mu.Unlock()
		return cr.ok, cr.msg
	}
	t.mu.Unlock()
	c, err := t.Dial(ctx, DialOptions{Label: "control"})
	if err != nil && ctx.Err() == nil {
		// One lost handshake on a busy machine must not make the
		// scenario inconclusive: try once more.
		c, err = t.Dial(ctx, DialOptions{Label: "control (again)"})
	}
	cr := &controlResult{ok: err == nil}
	if err != nil {
		cr.msg = fmt.Sprintf("the control handshake failed (%v)", err)
	} else {
		cr.msg = "the control handshake succeeded"
		c.Close(0, "")
	}
	t.mu.Lock()
	t.control = cr
	t.mu.Unlock()
	return cr.ok, cr.msg
}

// requireControl ends the scenario as inconclusive when the control probe
// fails.
func (t *T) requireControl(ctx context.Context, what string) {
	if ok, msg := t.Control(ctx); !ok {
		t.Inconclusive(fmt.Sprintf("%s, but %s, so the silence proves nothing.", what, msg))
	}
}

// mustDial dials with o and ends the scenario as inconclusive when the
// handshake fails.
func (t *T) mustDial(ctx context.Context, o DialOptions) *Conn {
	c, err := t.Dial(ctx, o)
	if err != nil && ctx.Err() == nil && len(received(t.rec.snapshot(), c.trace.id, 0)) == 0 {
		// Nothing came back at all: on a busy machine a first flight can
		// be lost. Try once more before giving up.
		o.Label += " (again)"
		c, err = t.Dial(ctx, o)
	}
	if err != nil {
		ps := received(t.rec.snapshot(), c.trace.id, 0)
		t.Inconclusive(fmt.Sprintf("The tester could not complete a normal handshake with the target: %v.", err), events(Context, lastN(ps, 3)...)...)
	}
	return c
}

// space constants re-exported for the scenario files.
const (
	spaceInitial   = quic.SpaceInitial
	spaceHandshake = quic.SpaceHandshake
	spaceApp       = quic.SpaceApplication
)

// rawProvoke is the provoked-error pattern on a raw client: once the
// handshake is confirmed (when the raw client has sent its Finished),
// trigger sends the offence, then a 1-RTT PING goes out every PTO for one
// settle window. As in Provoke, a trigger the target never showed it
// processed goes out once more in a fresh packet.
func (t *T) rawProvoke(ctx context.Context, rc *rawClient, e Expectation, established bool, trigger func()) {
	if established && rc.HandshakeSent && !rc.Confirmed && !rc.PeerClosed {
		rc.Receive(ctx, t.Settle(), func() bool { return rc.Confirmed || rc.PeerClosed })
	}
	o := t.rawProvokeOnce(ctx, rc, e, established, trigger)
	if o.unprocessed && o.retryable && ctx.Err() == nil && !rc.PeerClosed {
		first := o
		o = t.rawProvokeOnce(ctx, rc, e, established, trigger)
		o.retried(first)
	}
	t.recordProvoked(e, o)
}

func (t *T) rawProvokeOnce(ctx context.Context, rc *rawClient, e Expectation, established bool, trigger func()) provokedOutcome {
	mark := t.mark()
	trigger()
	end := t.mark()
	closed := func() bool {
		for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
			if p.closeFrame() != nil || p.ev.PacketType == "stateless_reset" {
				return true
			}
		}
		return false
	}
	for waited := time.Duration(0); waited < t.Settle() && !closed() && ctx.Err() == nil; waited += t.PTO() {
		if rc.Seal[2] != nil && rc.HandshakeSent {
			rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
		}
		rc.Receive(ctx, t.PTO(), closed)
	}
	return t.assessProvoked(rc.trace, established, mark, end, e)
}
