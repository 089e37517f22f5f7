package conformance

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// path-cc-reset-on-address-change (docs/scenarios.md) on the raw client. The
// server's congestion window is read off the wire as the bytes it sends
// while the tester withholds acknowledgments: with nothing in flight and
// flow-control credit opened at once, that is its window. The tester's
// connection-level flow limit first lets the window grow on a bounded
// transfer, all of it acknowledged, so that nothing is in flight when the
// credit opens again, on the new path or (control) on the old one.

var reqCCReset = rfc9000(
	"9.4",
	Must,
	"On confirming a peer's ownership of its new address, an endpoint MUST immediately reset the congestion controller and round-trip time estimator for the new path to initial values",
)

// ccFlowLimit is the tester's initial_max_data: the transfer over which
// the server's window grows before the move.
const ccFlowLimit = 96 << 10

// ccWindow is the longest a flight is taken to last, and ccGap the pause
// that ends one; both stay below the server's PTO, which includes the
// tester's 25 ms max_ack_delay.
const (
	ccWindow = 20 * time.Millisecond
	ccGap    = 8 * time.Millisecond
)

// flightAfter sums the datagrams carrying STREAM frames that the server
// sent on path from index mark: from the first, until ccWindow passed or
// ccGap went by without one.
func (t *T) flightAfter(rc *rawClient, path, mark int) int {
	n := 0
	var first, last time.Time
	for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
		if p.path != path || !hasFrame[*wire.StreamFrame]()(p) {
			continue
		}
		if first.IsZero() {
			first = p.at
		} else if p.at.Sub(first) > ccWindow || p.at.Sub(last) > ccGap {
			break
		}
		n += p.datagram
		last = p.at
	}
	return n
}

// awaitFlight receives until the server's first STREAM data on path
// from index mark (within the settle window, so that a slow first answer
// on a busy host is not taken for none), then for 2 × ccWindow more.
func (rc *rawClient) awaitFlight(ctx context.Context, path, mark int) {
	rc.receiveUntil(ctx, rc.t.Settle(), mark, func(p *packet) bool { return p.path == path && hasFrame[*wire.StreamFrame]()(p) })
	rc.Receive(ctx, 2*ccWindow, nil)
}

// ccRun is one connection of the scenario: the initial flight (ref), the
// bounded transfer, then, after a move to ip (or none for the control),
// the flight when the credit opens.
type ccRun struct {
	ref, flight int
	trig        *packet
	problem     string
}

func (t *T) runCC(ctx context.Context, label string, ip netip.Addr) ccRun {
	scid := randomBytes(8)
	tp := rawquic.DefaultClientTP(scid)
	tp.InitialMaxData = ccFlowLimit
	rc := t.rawEstablished(ctx, rawquic.Options{Label: label, SCID: scid, TP: tp}, nil)
	t.needServerCID(rc)
	if stp := rc.ServerTP(); stp != nil && stp.DisableActiveMigration {
		t.Unsupported("The server sent disable_active_migration.")
	}
	rc.giveSpareCIDs()
	rc.Receive(ctx, t.PTO(), nil)
	var spare *wire.NewConnectionIDFrame
	if ip.IsValid() {
		spare = t.rawSpareCID(ctx, rc)
	}
	// The initial window: the first flight of the response, unacknowledged.
	rc.NoAcks = true
	m := t.mark()
	req := rc.Request(t.profile.Target.LargePath)
	rc.awaitFlight(ctx, 0, m)
	run := ccRun{ref: t.flightAfter(rc, 0, m)}
	rc.NoAcks = false
	// The rest of the bounded transfer, all acknowledged.
	got := -1
	for i := 0; i < 50 && ctx.Err() == nil; i++ {
		rc.Send1RTT([]wire.Frame{rc.AckFrame(2)}, rawquic.ShortOpts{})
		rc.Receive(ctx, 30*time.Millisecond, nil)
		s := rc.Stream(req.ID)
		if s != nil && s.Received() == got {
			break
		}
		if s != nil {
			got = s.Received()
		}
	}
	rc.Send1RTT([]wire.Frame{rc.AckFrame(2)}, rawquic.ShortOpts{})
	rc.Receive(ctx, 10*time.Millisecond, nil)
	path := 0
	if ip.IsValid() {
		np, err := rc.NewPath(ip)
		if err != nil {
			run.problem = fmt.Sprintf("no socket from %v: %v", ip, err)
			return run
		}
		rc.Migrate(np)
		rc.DCID = append([]byte(nil), spare.ConnectionID...)
		m2 := t.mark()
		rc.Send1RTT([]wire.Frame{rc.AckFrame(2), &wire.PingFrame{}}, rawquic.ShortOpts{PadTo: 1200})
		if rc.receiveUntil(ctx, t.Settle(), m2, func(p *packet) bool { return p.path == np && p.has(wire.FrameTypePathChallenge) }) == nil {
			run.problem = fmt.Sprintf("the server did not validate the new address %v", ip)
			return run
		}
		rc.Receive(ctx, 10*time.Millisecond, nil) // its PATH_RESPONSE arrives
		path = np
	}
	rc.NoAcks = true
	m3 := t.mark()
	run.trig = rc.Send1RTT([]wire.Frame{&wire.MaxDataFrame{Maximum: 64 << 20}, &wire.PingFrame{}}, rawquic.ShortOpts{})
	rc.awaitFlight(ctx, path, m3)
	run.flight = t.flightAfter(rc, path, m3)
	rc.NoAcks = false
	if run.ref == 0 || run.flight == 0 {
		run.problem = fmt.Sprintf("no flight to measure (initial %d bytes, after %d bytes)", run.ref, run.flight)
	}
	return run
}

// judgeCCReset decides from the control (no move) and three moves: a
// flight after a move above 1.5 × the initial one means the window was
// kept, in every repetition for a fail; the control must show that the
// window had grown past that, or nothing can be told apart.
func judgeCCReset(control ccRun, moves []ccRun) (Verdict, string) {
	over := func(r ccRun) bool { return float64(r.flight) > 1.5*float64(r.ref) }
	var list []string
	exceed := 0
	for _, r := range moves {
		list = append(list, fmt.Sprintf("%d/%d", r.flight, r.ref))
		if over(r) {
			exceed++
		}
	}
	ctl := fmt.Sprintf("without a move the reopened flight was %d bytes against an initial %d", control.flight, control.ref)
	switch {
	case control.problem != "" || control.ref == 0:
		return Inconclusive, fmt.Sprintf("The control connection gave no measurement (%s).", control.problem)
	case !over(control):
		return Inconclusive, fmt.Sprintf(
			"The server's window did not grow past 1.5 × its initial flight before a move (%s), so a reset cannot be told from no reset.",
			ctl,
		)
	case exceed == len(moves):
		return Fail, fmt.Sprintf(
			"After each of %d moves to a new client IP address the server's first flight exceeded 1.5 × its initial one (flight/initial bytes: %v; %s): it kept its congestion window.",
			len(moves),
			list,
			ctl,
		)
	case exceed == 0:
		return Pass, fmt.Sprintf(
			"After each of %d moves to a new client IP address the server's first flight stayed within 1.5 × its initial one (flight/initial bytes: %v), while %s.",
			len(moves),
			list,
			ctl,
		)
	}
	return Inconclusive, fmt.Sprintf("The flights after %d moves disagree (flight/initial bytes: %v; %s).", len(moves), list, ctl)
}

func runPathCCReset(ctx context.Context, t *T) {
	probe := t.newRaw(ctx, rawquic.Options{Label: "address-check"})
	ip, ok := probe.SecondLocalAddr()
	if !ok {
		t.Inconclusive("The tester has no second local IP address from which it can reach the target (2addr).")
	}
	control := t.runCC(ctx, "control", netip.Addr{})
	var moves []ccRun
	var trig []*packet
	for i := 0; i < 3 && ctx.Err() == nil; i++ {
		r := t.runCC(ctx, fmt.Sprintf("move-%d", i+1), ip)
		if r.problem != "" && ctx.Err() == nil {
			r = t.runCC(ctx, fmt.Sprintf("move-%d (again)", i+1), ip)
		}
		if r.problem != "" {
			t.Inconclusive(fmt.Sprintf("Move %d: %s.", i+1, r.problem))
		}
		moves = append(moves, r)
		trig = append(trig, r.trig)
	}
	facts := map[string]any{"control": []int{control.ref, control.flight}}
	for i, r := range moves {
		facts[fmt.Sprintf("move-%d", i+1)] = []int{r.ref, r.flight}
	}
	t.Fact("path.cc-flights-initial-after", facts)
	v, sentence := judgeCCReset(control, moves)
	switch v {
	case Fail:
		t.Fail("reset", reqCCReset, sentence, events(Trigger, trig...)...)
	case Pass:
		t.Pass("reset", reqCCReset, sentence, events(Trigger, trig...)...)
	default:
		t.Inconclusive(sentence, events(Trigger, trig...)...)
	}
}

func runPathChallengeEcho(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	rc.Receive(ctx, t.PTO(), nil)
	data := [8]byte(randomBytes(8))
	mark := t.mark()
	trig := rc.Send1RTT([]wire.Frame{&wire.PathChallengeFrame{Data: data}}, rawquic.ShortOpts{PadTo: 1200})
	sent := trig.at
	resp := rc.receiveUntil(ctx, t.Settle(), mark, hasFrame[*wire.PathResponseFrame]())
	if resp == nil {
		// An acknowledgment proves the challenge was processed (RFC
		// 9000 §13.1), so its missing answer is a violation, not silence.
		if a := ackedBy(t.rec.snapshot(), rc.trace.id, 2, trig.pn); a != nil {
			t.Fail(
				"echo",
				t.sc.Requirements[0],
				fmt.Sprintf(
					"The server acknowledged the packet carrying the PATH_CHALLENGE but sent no PATH_RESPONSE within %v.",
					t.Settle().Round(time.Millisecond),
				),
				evidence(events(Trigger, trig), events(Response, a))...)
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
			t.Fail(
				"echo",
				reqs[0],
				fmt.Sprintf("The server's PATH_RESPONSE carries %x, not the challenge's %x.", fa.f.(*wire.PathResponseFrame).Data, data),
				evidence(events(Trigger, trig), events(Response, fa.p))...)
			return
		}
	}
	t.Pass(
		"echo",
		reqs[0],
		fmt.Sprintf("The server echoed the challenge data after %v.", delay.Round(time.Microsecond)),
		evidence(events(Trigger, trig), events(Response, resp))...)
	if len(rs) > 1 {
		t.Fail(
			"once",
			reqs[4],
			fmt.Sprintf("The server sent %d PATH_RESPONSE frames for one PATH_CHALLENGE.", len(rs)),
			evidence(events(Trigger, trig), events(Response, packetsOf(rs)...))...)
	}
	if resp.datagram > 0 && resp.datagram < 1200 {
		t.Fail(
			"size",
			reqs[2],
			fmt.Sprintf("The server's PATH_RESPONSE came in a %d-byte datagram on the already validated path; expand it to 1200 bytes.", resp.datagram),
			evidence(events(Trigger, trig), events(Response, resp))...)
	} else {
		t.Pass("size", reqs[2], fmt.Sprintf("The PATH_RESPONSE datagram was %d bytes.", resp.datagram), events(Response, resp)...)
	}
	if delay > 2*t.PTO() {
		t.Fail(
			"no-delay",
			reqs[1],
			fmt.Sprintf(
				"The PATH_RESPONSE came %v after the challenge, more than 2 PTO (%v) with nothing else in flight.",
				delay.Round(time.Millisecond),
				(2*t.PTO()).Round(time.Millisecond),
			),
			evidence(events(Trigger, trig), events(Response, resp))...)
	}
	for _, p := range received(ps, rc.trace.id, mark) {
		if !isProbingOnly(p) && p.space == 2 {
			t.Pass(
				"non-probing",
				reqs[3],
				fmt.Sprintf("A non-probing packet followed %v after the challenge.", p.at.Sub(sent).Round(time.Microsecond)),
				events(Response, p)...)
			return
		}
	}
	t.Warn(
		"non-probing",
		reqs[3],
		fmt.Sprintf(
			"No non-probing packet (such as one carrying an ACK) followed the challenge within %v; answer a challenge on the active path with a non-probing packet.",
			(t.PTO()+t.Settle()).Round(time.Millisecond),
		),
		events(Trigger, trig)...)
}

func runPathChallengeSmall(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	rc.Receive(ctx, t.PTO(), nil)
	data := [8]byte(randomBytes(8))
	mark := t.mark()
	trig := rc.Send1RTT([]wire.Frame{&wire.PathChallengeFrame{Data: data}}, rawquic.ShortOpts{PadTo: 60})
	req := t.sc.Requirements[0]
	if resp := rc.receiveUntil(ctx, t.Settle(), mark, hasFrame[*wire.PathResponseFrame]()); resp != nil {
		t.Pass(
			"answered",
			req,
			fmt.Sprintf("The server answered a PATH_CHALLENGE in a %d-byte datagram.", len(trig.frameNames())+trig.ev.Size),
			evidence(events(Trigger, trig), events(Response, resp))...)
		return
	}
	// Control: the same challenge in a full-size datagram.
	m2 := t.mark()
	ctl := rc.Send1RTT([]wire.Frame{&wire.PathChallengeFrame{Data: [8]byte(randomBytes(8))}}, rawquic.ShortOpts{PadTo: 1200})
	if resp := rc.receiveUntil(ctx, t.Settle(), m2, hasFrame[*wire.PathResponseFrame]()); resp != nil {
		t.Fail(
			"answered",
			req,
			fmt.Sprintf("The server ignored a PATH_CHALLENGE in a %d-byte packet but answered the same challenge in a 1200-byte datagram.", trig.ev.Size),
			evidence(events(Trigger, trig, ctl), events(Response, resp))...)
		return
	}
	t.Inconclusive("The server answered neither the small PATH_CHALLENGE nor a 1200-byte control challenge.", events(Trigger, trig, ctl)...)
}

func runPathProbeNewPort(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	t.needServerCID(rc)
	if tp := rc.ServerTP(); tp != nil && tp.DisableActiveMigration {
		// RFC 9000 §9: the tester must not send probing packets from
		// another local address then.
		t.Unsupported("The server sent disable_active_migration, so the tester may not probe from another address.")
	}
	rc.giveSpareCIDs()
	dcid := rc.DCID
	rc.receiveUntil(ctx, t.PTO(), 0, hasFrame[*wire.NewConnectionIDFrame]())
	for _, fa := range framesOf[*wire.NewConnectionIDFrame](t.rec.snapshot(), rc.trace.id, 0, false) {
		if f := fa.f.(*wire.NewConnectionIDFrame); f.SequenceNumber >= 1 && len(f.ConnectionID) > 0 {
			dcid = f.ConnectionID // RFC 9000 §9.5: a new path takes a new connection ID
			break
		}
	}
	np, err := rc.NewPath(netip.Addr{})
	if err != nil {
		t.Inconclusive(err.Error())
	}
	data := [8]byte(randomBytes(8))
	mark := t.mark()
	trig := rc.Send1RTTOn(np, []wire.Frame{&wire.PathChallengeFrame{Data: data}}, rawquic.ShortOpts{PadTo: 1200, DCID: dcid})
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
		t.Inconclusive(
			fmt.Sprintf("No PATH_RESPONSE to the probe from the new port arrived within %v.", t.Settle().Round(time.Millisecond)),
			events(Trigger, trig)...)
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
		t.Fail(
			"path",
			reqs[0],
			fmt.Sprintf("The PATH_RESPONSE to a challenge from port %d went to port %d instead.", rc.Paths[np].Local.Port(), rc.Paths[resp.path].Local.Port()),
			evidence(events(Trigger, trig), events(Response, resp))...)
		return
	}
	t.Pass("path", reqs[0], "The PATH_RESPONSE went back to the new port the challenge came from.", evidence(events(Trigger, trig), events(Response, resp))...)
	if resp.datagram < 1200 {
		// 1200 bytes received from the new path allow 3600 back.
		t.Fail(
			"size",
			reqs[1],
			fmt.Sprintf("The PATH_RESPONSE on the new path came in a %d-byte datagram although 1200 bytes from that path allow 3600 back.", resp.datagram),
			events(Response, resp)...)
		return
	}
	t.Pass("size", reqs[1], fmt.Sprintf("The PATH_RESPONSE datagram was %d bytes.", resp.datagram), events(Response, resp)...)
}

// giveSpareCIDs issues the server spare tester connection IDs, up to its
// active_connection_id_limit (at most 4 in all), as a client that may
// migrate does.
func (rc *rawClient) giveSpareCIDs() {
	if len(rc.SCID) == 0 || rc.SparesGiven {
		return
	}
	rc.SparesGiven = true
	limit := uint64(2)
	if tp := rc.ServerTP(); tp != nil && tp.ActiveConnectionIDLimit > 0 {
		limit = min(tp.ActiveConnectionIDLimit, 4)
	}
	var frames []wire.Frame
	for s := uint64(1); s < limit; s++ {
		frames = append(
			frames,
			&wire.NewConnectionIDFrame{SequenceNumber: s, ConnectionID: randomBytes(len(rc.SCID)), StatelessResetToken: [16]byte(randomBytes(16))},
		)
	}
	if len(frames) > 0 {
		rc.Send1RTT(frames, rawquic.ShortOpts{})
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
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	t.needServerCID(rc)
	rb := &rebinding{rc: rc, tp: rc.ServerTP()}
	rc.giveSpareCIDs()
	req := rc.Request(t.profile.Target.LargePath)
	rc.Receive(ctx, t.Settle(), func() bool {
		b, done := rc.Body(req)
		return len(b) >= 256<<10 || done || rc.PeerClosed
	})
	if b, _ := rc.Body(req); len(b) == 0 {
		t.Inconclusive("The download of the large resource did not start, so there was nothing to rebind in the middle of.")
	}
	np, err := rc.NewPath(netip.Addr{})
	if err != nil {
		t.Inconclusive(err.Error())
	}
	rb.np, rb.at, rb.mark = np, time.Now(), t.mark()
	if silent {
		rc.NoPathResponse = map[int]bool{np: true}
		rb.trig = rc.Send1RTTOn(np, []wire.Frame{rc.AckFrame(2), &wire.PingFrame{}}, rawquic.ShortOpts{PadTo: 100})
		rc.Silent = true
		rc.Receive(ctx, t.Settle(), nil)
		return rb
	}
	rc.Migrate(np)
	rb.trig = rc.Send1RTT([]wire.Frame{rc.AckFrame(2), &wire.PingFrame{}}, rawquic.ShortOpts{})
	deadline := time.Now().Add(max(t.Settle(), 3*time.Second))
	for time.Now().Before(deadline) && ctx.Err() == nil && !rc.PeerClosed {
		rc.Receive(ctx, t.PTO(), func() bool { return rc.ResponseDone(req) })
		if rc.ResponseDone(req) {
			rb.complete = true
			break
		}
		// Keep the new path alive even when the server sends nothing.
		rc.Send1RTT([]wire.Frame{rc.AckFrame(2), &wire.PingFrame{}}, rawquic.ShortOpts{})
	}
	rc.Receive(ctx, t.PTO(), nil)
	return rb
}

func runPathNATRebinding(ctx context.Context, t *T) {
	t.judgesUnsummarised() // PATH_CHALLENGE frames, resets and the first packets on a path are never summarised
	rb := t.rebind(ctx, false)
	reqs := t.sc.Requirements
	var onNew, challenges []*packet
	for _, p := range received(t.rec.snapshot(), rb.rc.trace.id, rb.mark) {
		if p.ev.PacketType == "stateless_reset" {
			t.Fail(
				"no-reset",
				reqs[1],
				"The server answered packets from the tester's new port with a stateless reset.",
				evidence(events(Trigger, rb.trig), events(Response, p))...)
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
		t.Pass(
			"follow",
			reqs[1],
			"The server, which disabled active migration, dropped the packets from the new port without a stateless reset.",
			events(Trigger, rb.trig)...)
	case len(onNew) == 0:
		t.Fact("path.rebinding", "not followed")
		_, n := t.datagramBytes(rb.rc.onPath(rb.np), false, time.Time{})
		t.Inconclusive(
			fmt.Sprintf("The server sent no packet the tester could open to its new port after the rebinding (%d datagram(s) arrived there).", n),
			events(Trigger, rb.trig)...)
	case len(challenges) == 0:
		t.Fact("path.rebinding", "followed without validation")
		t.Fail(
			"follow",
			reqs[0],
			fmt.Sprintf(
				"The server sent %d packet(s) to the tester's new port but never a PATH_CHALLENGE there.",
				len(onNew)+t.rec.droppedSince(rb.rc.trace.id, rb.np, rb.mark),
			),
			evidence(events(Trigger, rb.trig), events(Response, lastN(onNew, 3)...))...)
	default:
		t.Fact("path.rebinding", fmt.Sprintf("followed and validated; download complete: %v", rb.complete))
		t.Pass(
			"follow",
			reqs[0],
			fmt.Sprintf(
				"The server moved to the tester's new port (%d packets) and validated it with a PATH_CHALLENGE.",
				len(onNew)+t.rec.droppedSince(rb.rc.trace.id, rb.np, rb.mark),
			),
			evidence(events(Trigger, rb.trig), events(Response, challenges[0]))...)
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
		// What the server had surely received from the new path when it
		// built this datagram: the datagram that moved it there, and the
		// tester's datagrams on that path it had acknowledged before this
		// one arrived. A guess from send times overcounted under load
		// (a datagram sent two round trips earlier was still queued), and
		// a fail must rest on bytes the server is known to have had.
		in := provenReceived(t.rec.snapshot(), rb.rc.trace.id, rb.mark, rb.np, rb.trig, p.at)
		out, _ := t.datagramBytes(rb.rc.onPath(rb.np), false, p.at.Add(-time.Nanosecond))
		if out+1200 <= 3*in {
			t.Fail(
				"size",
				req,
				fmt.Sprintf(
					"The server's PATH_CHALLENGE to the new port came in a %d-byte datagram although it had received %d bytes there and sent %d (the 3× allowance had room for 1200).",
					p.datagram,
					in,
					out,
				),
				evidence(events(Trigger, rb.trig), events(Response, p))...)
			return
		}
	}
	if len(seen) == 0 {
		t.Unsupported("The server never validated the tester's new port.", events(Trigger, rb.trig)...)
	}
	t.Pass(
		"size",
		req,
		fmt.Sprintf("The server's %d PATH_CHALLENGE datagram(s) on the new path were at least 1200 bytes or within the 3× allowance.", len(seen)),
		events(Response, seen...)...)
}

// provenReceived is how many datagram bytes the server is known to have
// received from the tester on path np by the time before: the trigger's
// datagram (the server moved to the path on it) and every tester datagram
// on the path whose packet a server ACK that arrived before then covers.
func provenReceived(ps []*packet, conn, mark, np int, trig *packet, before time.Time) int {
	var sent []*packet
	var acks []*wire.AckFrame
	for i, p := range ps {
		if i < mark || p.conn != conn || !p.at.Before(before) {
			continue
		}
		if p.sent && p.path == np && p.space == 2 {
			sent = append(sent, p)
			continue
		}
		if !p.sent && p.space == 2 {
			for _, f := range p.frames {
				if a, ok := f.(*wire.AckFrame); ok {
					acks = append(acks, a)
				}
			}
		}
	}
	n := 0
	if trig != nil {
		n = trig.datagram
	}
	for _, p := range sent {
		if p == trig {
			continue
		}
		for _, a := range acks {
			if a.Acks(p.pn) {
				n += p.datagram
				break
			}
		}
	}
	return n
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
		t.Fail(
			"limit",
			req,
			fmt.Sprintf(
				"The server sent %d bytes in %d datagrams to the tester's unvalidated new port after receiving %d bytes from it (%.2f×); the limit is 3×.",
				out,
				n,
				in,
				float64(out)/float64(in),
			),
			evidence(events(Trigger, rb.trig), events(Response, lastN(onNew, 4)...))...)
	default:
		t.Pass(
			"limit",
			req,
			fmt.Sprintf("The server sent %d bytes to the unvalidated new port after receiving %d (%.2f×).", out, in, float64(out)/float64(in)),
			evidence(events(Trigger, rb.trig), events(Response, lastN(onNew, 4)...))...)
	}
}

func runPathOldPathValidated(ctx context.Context, t *T) {
	t.judgesUnsummarised() // PATH_CHALLENGE frames and the first packets on a path are never summarised
	rb := t.rebind(ctx, false)
	if rb.tp != nil && rb.tp.DisableActiveMigration {
		t.Unsupported("The server sent disable_active_migration.")
	}
	req := t.sc.Requirements[0]
	// The server may challenge the old path after it has sent the rest of
	// the download (a loaded host sends it later still): wait for it up to
	// the window the verdict names, counted from the move, not from the
	// end of the transfer.
	window := max(t.Settle(), 3*time.Second)
	if left := time.Until(rb.at.Add(window)); left > 0 {
		rb.rc.receiveUntil(ctx, left, rb.mark, func(p *packet) bool { return p.path == 0 && p.has(wire.FrameTypePathChallenge) })
	}
	var followed bool
	for _, p := range received(t.rec.snapshot(), rb.rc.trace.id, rb.mark) {
		if p.path == rb.np {
			followed = true
		}
		if p.path == 0 && p.has(wire.FrameTypePathChallenge) {
			t.Pass(
				"old-path",
				req,
				"After the migration the server sent a PATH_CHALLENGE on the previously active path.",
				evidence(events(Trigger, rb.trig), events(Response, p))...)
			return
		}
	}
	if !followed {
		t.Inconclusive("The server did not follow the tester to its new port, so there was no migration to answer.", events(Trigger, rb.trig)...)
	}
	t.Fail(
		"old-path",
		req,
		fmt.Sprintf(
			"The server followed the tester to its new port but sent no PATH_CHALLENGE on the previously active path (still listening) within %v of the move.",
			window.Round(time.Millisecond),
		),
		events(Trigger, rb.trig)...)
}

func runPathMigrationDisabled(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	if tp := rc.ServerTP(); tp == nil || !tp.DisableActiveMigration {
		t.Unsupported("The server did not send disable_active_migration.")
	}
	np, err := rc.NewPath(netip.Addr{})
	if err != nil {
		t.Inconclusive(err.Error())
	}
	mark := t.mark()
	rc.Migrate(np)
	var trig []*packet
	for i := 0; i < 3; i++ {
		trig = append(trig, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{}))
		rc.Receive(ctx, t.PTO(), nil)
	}
	rc.Receive(ctx, t.Settle(), nil)
	req := t.sc.Requirements[0]
	for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
		if p.ev.PacketType == "stateless_reset" {
			t.Fail(
				"no-reset",
				req,
				"The server answered packets from a new port with a stateless reset although it still holds the connection.",
				evidence(events(Trigger, trig...), events(Response, p))...)
			return
		}
	}
	t.Pass("no-reset", req, "The server answered the migration it had disabled without a stateless reset.", events(Trigger, trig...)...)
}

// runPathActiveMigration gives the server spare tester IDs, then moves to
// a new port (or, with newAddr, another local IP address) with a new
// server connection ID, and fetches the small resource there.
func runPathActiveMigration(ctx context.Context, t *T, newAddr bool) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	t.needServerCID(rc)
	tp := rc.ServerTP()
	if tp != nil && tp.DisableActiveMigration {
		t.Unsupported("The server sent disable_active_migration.")
	}
	var ip netip.Addr
	if newAddr {
		var ok bool
		if ip, ok = rc.SecondLocalAddr(); !ok {
			t.Inconclusive("The tester has no second local IP address from which it can reach the target.")
		}
	}
	rc.giveSpareCIDs()
	spare := t.rawSpareCID(ctx, rc)
	oldDCID := rc.SCID // what the server sent to on the old path
	np, err := rc.NewPath(ip)
	if err != nil {
		t.Inconclusive(fmt.Sprintf("The tester cannot send from a second local address: %v.", err))
	}
	mark := t.mark()
	rc.Migrate(np)
	rc.DCID = append([]byte(nil), spare.ConnectionID...)
	_, ferr := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	rc.Receive(ctx, t.PTO(), nil)
	trig := rc.Paths[np].Local
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
			t.Fail(
				"new-cid",
				cidReq,
				fmt.Sprintf("On the new path from %v the server still addressed the tester with %x, the connection ID it used on the old path.", trig, oldDCID),
				events(Response, p)...)
			return
		}
	}
	t.Pass(
		"new-cid",
		cidReq,
		fmt.Sprintf("On the new path from %v the server used connection ID %x, not the old path's %x.", trig, onNew[0].dcid, oldDCID),
		events(Response, onNew[0])...)
	if newAddr {
		if challenge == nil {
			t.Fail(
				"validated",
				reqs[0],
				fmt.Sprintf("The server sent %d packet(s) to the new address %v but never a PATH_CHALLENGE there.", len(onNew), trig),
				events(Response, lastN(onNew, 3)...)...)
			return
		}
		t.Pass(
			"validated",
			reqs[0],
			fmt.Sprintf("The server followed the tester to %v and validated it with a PATH_CHALLENGE.", trig),
			events(Response, challenge)...)
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
		t.Observe(
			"reaction",
			fmt.Sprintf("The server closed with %s on an unsolicited PATH_RESPONSE (allowed).", closeCode(cl.closeFrame())),
			events(Response, cl)...)
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
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	t.needServerCID(rc)
	rc.receiveUntil(ctx, t.Settle(), 0, hasFrame[*wire.NewTokenFrame]())
	if len(framesOf[*wire.NewTokenFrame](t.rec.snapshot(), rc.trace.id, 0, false)) == 0 {
		t.Unsupported(fmt.Sprintf("The server sent no NEW_TOKEN within %v of the handshake.", t.Settle().Round(time.Millisecond)))
	}
	if tp := rc.ServerTP(); tp != nil && tp.DisableActiveMigration {
		t.Unsupported("The server sent disable_active_migration.")
	}
	np, err := rc.NewPath(netip.Addr{})
	if err != nil {
		t.Inconclusive(err.Error())
	}
	mark := t.mark()
	rc.Migrate(np)
	trig := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	req := t.sc.Requirements[0]
	resp := rc.receiveUntil(ctx, t.Settle(), mark, func(p *packet) bool { return p.path == np && p.has(wire.FrameTypePathChallenge) })
	if resp == nil {
		t.Unsupported("The server did not validate the tester's new port.", events(Trigger, trig)...)
	}
	m2 := t.mark()
	if tok := rc.receiveUntil(ctx, t.Settle(), m2, hasFrame[*wire.NewTokenFrame]()); tok != nil {
		t.Pass(
			"new-token",
			req,
			"After validating the tester's new address the server sent a NEW_TOKEN.",
			evidence(events(Trigger, trig), events(Response, tok))...)
		return
	}
	t.Warn(
		"new-token",
		req,
		fmt.Sprintf(
			"The server validated the tester's new address but sent no NEW_TOKEN within %v; send a fresh token for the new address.",
			t.Settle().Round(time.Millisecond),
		),
		events(Trigger, trig, resp)...)
}

func runPrefAddrFormat(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "engine"})
	tp := t.serverTP(c)
	if !tp.HasPreferredAddress {
		t.Unsupported("The server sent no preferred_address.")
	}
	reqs := t.sc.Requirements
	if len(tp.PreferredAddress.ConnectionID) == 0 {
		t.Fail(
			"cid",
			reqs[0],
			"The server's preferred_address carries a zero-length connection ID; the tester would be bound to close with TRANSPORT_PARAMETER_ERROR.",
		)
		return
	}
	if len(c.trace.serverHandshakeSCID()) == 0 {
		t.Fail("cid", reqs[1], "The server uses a zero-length connection ID and still provides a preferred address.")
		return
	}
	t.Pass(
		"cid",
		reqs[0],
		fmt.Sprintf("The preferred_address carries a %d-byte connection ID and a stateless reset token.", len(tp.PreferredAddress.ConnectionID)),
	)
}

// Family E: the server's preferred address (RFC 9000 §9.6). The raw client
// opens a socket towards the address in preferred_address and sends there
// under the parameter's connection ID.

var (
	reqPrefAddrProbe   = rfc9000("9.6.2", Must, "The server MUST probe on the path toward the client from its preferred address.")
	reqPrefAddrNoEarly = rfc9000(
		"9.6.2",
		Must,
		"MUST send non-probing packets from its original address until it receives a non-probing packet from the client at its preferred address and until the server has validated the new path.",
	)
)

// prefAddrPath is the raw client's path towards the server's preferred
// address.
type prefAddrPath struct {
	rc    *rawClient
	pa    wire.PreferredAddress
	np    int
	addr  netip.AddrPort
	probe *packet // the tester's PATH_CHALLENGE there
	resp  *packet // the server's PATH_RESPONSE from there
	mark  int
}

// preferredTarget picks the address of preferred_address in the family of
// the tester's current path.
func preferredTarget(pa wire.PreferredAddress, cur netip.AddrPort) (netip.AddrPort, bool) {
	v4 := netip.AddrPortFrom(netip.AddrFrom4(pa.IPv4), pa.IPv4Port)
	v6 := netip.AddrPortFrom(netip.AddrFrom16(pa.IPv6), pa.IPv6Port)
	if cur.Addr().Unmap().Is4() {
		if pa.IPv4Port != 0 && !v4.Addr().IsUnspecified() {
			return v4, true
		}
		return netip.AddrPort{}, false
	}
	if pa.IPv6Port != 0 && !v6.Addr().IsUnspecified() {
		return v6, true
	}
	return netip.AddrPort{}, false
}

// probePreferred completes a handshake, gives the server spare connection
// IDs (it must not use one ID from two local addresses, RFC 9000 §9.5),
// opens a socket towards the preferred address and sends a PATH_CHALLENGE
// there under the parameter's connection ID. It ends the scenario as
// unsupported without preferred_address and inconclusive when the address
// cannot be used or does not answer.
func (t *T) probePreferred(ctx context.Context) *prefAddrPath {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	tp := rc.ServerTP()
	if tp == nil || !tp.HasPreferredAddress {
		t.Unsupported("The server sent no preferred_address.")
	}
	pp := &prefAddrPath{rc: rc, pa: tp.PreferredAddress}
	addr, ok := preferredTarget(pp.pa, rc.Peer)
	if !ok {
		t.Inconclusive(fmt.Sprintf("The server's preferred_address has no address in the family of the tester's path to %v.", rc.Peer))
	}
	pp.addr = addr
	fam := "IPv4"
	if addr.Addr().Is6() {
		fam = "IPv6"
	}
	t.Fact("prefaddr.address", map[string]string{"address": addr.String(), "family": fam})
	rc.giveSpareCIDs()
	rc.Receive(ctx, t.PTO(), nil)
	np, err := rc.NewPathTo(netip.Addr{}, addr)
	if err != nil {
		t.Inconclusive(err.Error())
	}
	pp.np = np
	pp.mark = t.mark()
	data := [8]byte(randomBytes(8))
	for try := 0; try < 3 && pp.resp == nil && ctx.Err() == nil; try++ {
		p := rc.Send1RTTOn(np, []wire.Frame{&wire.PathChallengeFrame{Data: data}}, rawquic.ShortOpts{PadTo: 1200, DCID: pp.pa.ConnectionID})
		if pp.probe == nil {
			pp.probe = p
		}
		pp.resp = rc.receiveUntil(ctx, max(t.PTO(), 300*time.Millisecond), pp.mark, func(p *packet) bool {
			for _, f := range p.frames {
				if r, ok := f.(*wire.PathResponseFrame); ok && r.Data == data {
					return true
				}
			}
			return false
		})
	}
	if pp.resp == nil {
		t.Inconclusive(
			fmt.Sprintf("The server's preferred address %v did not answer three PATH_CHALLENGEs sent to it under the parameter's connection ID.", addr),
			events(Trigger, pp.probe)...)
	}
	return pp
}

func runPrefAddrMigrate(ctx context.Context, t *T) {
	pp := t.probePreferred(ctx)
	rc := pp.rc
	rc.Migrate(pp.np)
	rc.DCID = append([]byte(nil), pp.pa.ConnectionID...)
	body, ferr := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	rc.Receive(ctx, t.PTO(), func() bool { return pp.challenge(t) != nil })
	req := t.sc.Requirements[0]
	if ch := pp.challenge(t); ch != nil {
		t.Pass(
			"probed",
			req,
			fmt.Sprintf(
				"After the tester moved to the preferred address %v, the server probed the path towards it from there (fetch: %d bytes, %v).",
				pp.addr,
				len(body),
				errText(ferr),
			),
			evidence(events(Trigger, pp.probe), events(Response, pp.resp, ch))...)
		return
	}
	t.Fail(
		"probed",
		req,
		fmt.Sprintf(
			"The tester validated the preferred address %v and moved its traffic there, but the server never sent a PATH_CHALLENGE from it (fetch: %d bytes, %v).",
			pp.addr,
			len(body),
			errText(ferr),
		),
		evidence(events(Trigger, pp.probe), events(Response, pp.resp))...)
}

func errText(err error) string {
	if err == nil {
		return "complete"
	}
	return err.Error()
}

// challenge returns the first PATH_CHALLENGE the server sent from its
// preferred address.
func (pp *prefAddrPath) challenge(t *T) *packet {
	for _, p := range received(t.rec.snapshot(), pp.rc.trace.id, pp.mark) {
		if p.path == pp.np && p.has(wire.FrameTypePathChallenge) {
			return p
		}
	}
	return nil
}

// firstNonProbing returns the first packet of ps that carries a frame
// other than PATH_CHALLENGE, PATH_RESPONSE, NEW_CONNECTION_ID or PADDING.
func firstNonProbing(ps []*packet) *packet {
	for _, p := range ps {
		if p.space == 2 && !isProbingOnly(p) {
			return p
		}
	}
	return nil
}

func runPrefAddrNoEarlySwitch(ctx context.Context, t *T) {
	pp := t.probePreferred(ctx)
	rc := pp.rc
	// Non-probing traffic stays on the original path; the new one only
	// carries the tester's probes and its answers to the server's.
	start := time.Now()
	for time.Since(start) < t.Settle() && ctx.Err() == nil && !rc.PeerClosed {
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
		rc.Send1RTTOn(pp.np, []wire.Frame{&wire.PathChallengeFrame{Data: [8]byte(randomBytes(8))}}, rawquic.ShortOpts{PadTo: 1200, DCID: pp.pa.ConnectionID})
		rc.Receive(ctx, t.PTO(), nil)
	}
	var onPref, onOrig []*packet
	for _, p := range received(t.rec.snapshot(), rc.trace.id, pp.mark) {
		if p.path == pp.np {
			onPref = append(onPref, p)
		} else if p.space == 2 && !isProbingOnly(p) {
			onOrig = append(onOrig, p)
		}
	}
	t.Fact("prefaddr.early", map[string]int{"from-preferred": len(onPref), "non-probing-from-original": len(onOrig)})
	req := t.sc.Requirements[0]
	if bad := firstNonProbing(onPref); bad != nil {
		t.Fail(
			"original",
			req,
			fmt.Sprintf(
				"The server sent a non-probing packet (%v) from its preferred address %v although the tester had sent only probing packets there.",
				bad.frameNames(),
				pp.addr,
			),
			evidence(events(Trigger, pp.probe), events(Response, bad))...)
		return
	}
	t.Pass(
		"original",
		req,
		fmt.Sprintf(
			"For %v of probing only, the server sent %d probing-only packet(s) from its preferred address %v and its %d non-probing packet(s) from the original address.",
			t.Settle().Round(time.Millisecond),
			len(onPref),
			pp.addr,
			len(onOrig),
		),
		evidence(events(Trigger, pp.probe), events(Response, pp.resp))...)
}

func init() {
	Register(&Scenario{
		ID: "path-cc-reset-on-address-change", Title: "Congestion control restarts on a new client IP address", Family: "E", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqCCReset,
			rfc9000(
				"9.4",
				May,
				"the endpoint MAY instead retain its congestion control state and round-trip estimate in those cases instead of reverting to initial values.",
			)},
		Run: runPathCCReset,
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
		Requirements: []Requirement{
			rfc9000("8.2.1", MustNot, "endpoints MUST NOT discard datagrams that appear to be too small when they contain PATH_CHALLENGE or PATH_RESPONSE."),
		},
		Run: runPathChallengeSmall,
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
		Requirements: []Requirement{
			rfc9000(
				"19.18",
				May,
				"does not match the content of a PATH_CHALLENGE frame previously sent by the endpoint, the endpoint MAY generate a connection error of type PROTOCOL_VIOLATION.",
			),
		},
		Run: runPathResponseUnsolicited,
	})
	Register(&Scenario{
		ID: "path-new-token-after-validation", Title: "NEW_TOKEN after a new client address is validated", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("9.3", Should, "After verifying a new client address, the server SHOULD send new address validation tokens … to the client."),
		},
		Run: runPathNewTokenAfterValidation,
	})
	Register(&Scenario{
		ID: "prefaddr-format", Title: "preferred_address carries a connection ID and token", Family: "E", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000("18.2", MustNot, "Similarly, a server MUST NOT include a zero-length connection ID in this transport parameter."),
			rfc9000("18.2", MustNot, "A server that chooses a zero-length connection ID MUST NOT provide a preferred address."),
		},
		Run: runPrefAddrFormat,
	})
	Register(&Scenario{
		ID: "prefaddr-migrate", Title: "Migration to the server's preferred address", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{reqPrefAddrProbe},
		Run:          runPrefAddrMigrate,
	})
	Register(&Scenario{
		ID: "prefaddr-no-early-switch", Title: "No non-probing packets from the preferred address too early", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{reqPrefAddrNoEarly},
		Run:          runPrefAddrNoEarlySwitch,
	})
}
