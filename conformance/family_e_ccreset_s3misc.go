package conformance

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// path-cc-reset-on-address-change (catalogue §3.E) on the raw client. The
// server's congestion window is read off the wire as the bytes it sends
// while the tester withholds acknowledgments: with nothing in flight and
// flow-control credit opened at once, that is its window. The tester's
// connection-level flow limit first lets the window grow on a bounded
// transfer, all of it acknowledged, so that nothing is in flight when the
// credit opens again, on the new path or (control) on the old one.

var reqCCReset = rfc9000("9.4", Must, "On confirming a peer's ownership of its new address, an endpoint MUST immediately reset the congestion controller and round-trip time estimator for the new path to initial values")

func init() {
	Register(&Scenario{
		ID: "path-cc-reset-on-address-change", Title: "Congestion control restarts on a new client IP address", Family: "E", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqCCReset,
			rfc9000("9.4", May, "the endpoint MAY instead retain its congestion control state and round-trip estimate in those cases instead of reverting to initial values.")},
		Run: runPathCCReset,
	})
}

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
	tp := defaultClientTP(scid)
	tp.InitialMaxData = ccFlowLimit
	rc := t.rawEstablished(ctx, rawOptions{Label: label, SCID: scid, TP: tp}, nil)
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
		rc.Send1RTT([]wire.Frame{rc.ackFrame(2)}, shortOpts{})
		rc.Receive(ctx, 30*time.Millisecond, nil)
		s := rc.stream(req.id)
		if s != nil && len(s.data) == got {
			break
		}
		if s != nil {
			got = len(s.data)
		}
	}
	rc.Send1RTT([]wire.Frame{rc.ackFrame(2)}, shortOpts{})
	rc.Receive(ctx, 10*time.Millisecond, nil)
	path := 0
	if ip.IsValid() {
		np, err := rc.newPath(ip)
		if err != nil {
			run.problem = fmt.Sprintf("no socket from %v: %v", ip, err)
			return run
		}
		rc.migrate(np)
		rc.dcid = append([]byte(nil), spare.ConnectionID...)
		m2 := t.mark()
		rc.Send1RTT([]wire.Frame{rc.ackFrame(2), &wire.PingFrame{}}, shortOpts{PadTo: 1200})
		if rc.receiveUntil(ctx, t.Settle(), m2, func(p *packet) bool { return p.path == np && p.has(wire.FrameTypePathChallenge) }) == nil {
			run.problem = fmt.Sprintf("the server did not validate the new address %v", ip)
			return run
		}
		rc.Receive(ctx, 10*time.Millisecond, nil) // its PATH_RESPONSE arrives
		path = np
	}
	rc.NoAcks = true
	m3 := t.mark()
	run.trig = rc.Send1RTT([]wire.Frame{&wire.MaxDataFrame{Maximum: 64 << 20}, &wire.PingFrame{}}, shortOpts{})
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
		return Inconclusive, fmt.Sprintf("The server's window did not grow past 1.5 × its initial flight before a move (%s), so a reset cannot be told from no reset.", ctl)
	case exceed == len(moves):
		return Fail, fmt.Sprintf("After each of %d moves to a new client IP address the server's first flight exceeded 1.5 × its initial one (flight/initial bytes: %v; %s): it kept its congestion window.", len(moves), list, ctl)
	case exceed == 0:
		return Pass, fmt.Sprintf("After each of %d moves to a new client IP address the server's first flight stayed within 1.5 × its initial one (flight/initial bytes: %v), while %s.", len(moves), list, ctl)
	}
	return Inconclusive, fmt.Sprintf("The flights after %d moves disagree (flight/initial bytes: %v; %s).", len(moves), list, ctl)
}

func runPathCCReset(ctx context.Context, t *T) {
	probe := t.newRaw(ctx, rawOptions{Label: "address-check"})
	ip, ok := probe.secondLocalAddr()
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
