package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family D, flow control seen from the receiving side (docs/scenarios.md):
// the raw client advertises small limits and never raises them on its own
// (it sends no MAX_DATA or MAX_STREAM_DATA unless the scenario does), so
// every byte the server sends can be held against the limit in force.

var (
	reqFCNotExceed = rfc9000("4.1", MustNot, "Senders MUST NOT send data in excess of either limit.")
	reqFCBlocked   = rfc9000(
		"4.1",
		Should,
		"A sender SHOULD send a STREAM_DATA_BLOCKED or DATA_BLOCKED frame to indicate to the receiver that it has data to write but is blocked by flow control limits.",
	)
)

// Small limits the flow-control scenarios advertise.
const (
	fcStreamLimit = 1000
	fcConnLimit   = 3000
	// fcFull is the credit given at the end so that the download completes.
	fcFull = 16 << 20
)

// judgeFlowControl walks one connection's packets in recorded order and
// returns the first server STREAM frame that exceeds the tester's stream
// or connection limit. tp are the tester's transport parameters; the
// limits in force are the largest the tester had sent before the packet
// arrived (the server cannot have had later ones), so the judgement errs
// towards the server. It also returns the stream data totals seen.
func judgeFlowControl(ps []*packet, conn int, tp *wire.TransportParameters) (v *fcViolation, ends map[uint64]uint64, total uint64) {
	connLimit := tp.InitialMaxData
	streamLimit := map[uint64]uint64{}
	ends = map[uint64]uint64{}
	initial := func(id uint64) uint64 {
		switch id % 4 {
		case 0: // client bidirectional: the tester's local limit
			return tp.InitialMaxStreamDataBidiLocal
		case 1:
			return tp.InitialMaxStreamDataBidiRemote
		case 3:
			return tp.InitialMaxStreamDataUni
		}
		return 0 // the server cannot send on client unidirectional streams
	}
	for _, p := range ps {
		if p.conn != conn || p.space != spaceApp {
			continue
		}
		for _, f := range p.frames {
			if p.sent {
				switch f := f.(type) {
				case *wire.MaxDataFrame:
					connLimit = max(connLimit, f.Maximum)
				case *wire.MaxStreamDataFrame:
					if _, ok := streamLimit[f.StreamID]; !ok {
						streamLimit[f.StreamID] = initial(f.StreamID)
					}
					streamLimit[f.StreamID] = max(streamLimit[f.StreamID], f.Maximum)
				}
				continue
			}
			sf, ok := f.(*wire.StreamFrame)
			if !ok {
				continue
			}
			end := sf.Offset + uint64(len(sf.Data))
			if end <= ends[sf.StreamID] {
				continue
			}
			total += end - ends[sf.StreamID]
			ends[sf.StreamID] = end
			lim, ok := streamLimit[sf.StreamID]
			if !ok {
				lim = initial(sf.StreamID)
			}
			if v == nil && sf.StreamID%4 != 2 && end > lim {
				v = &fcViolation{p: p, stream: sf.StreamID, end: end, limit: lim}
			}
			if v == nil && total > connLimit {
				v = &fcViolation{p: p, stream: ^uint64(0), end: total, limit: connLimit}
			}
		}
	}
	return v, ends, total
}

func (t *T) fcLimitRespected(ctx context.Context, connLevel bool) {
	t.keepEverything() // judgeFlowControl reads every STREAM frame of the download
	var (
		rc   *rawClient
		tp   *wire.TransportParameters
		reqs []*rawquic.Request
	)
	first, raise := uint64(fcStreamLimit), uint64(2*fcStreamLimit)
	if connLevel {
		first, raise = fcConnLimit, 2*fcConnLimit
		rc, tp = t.fcClient(ctx, "max-data-3000", func(tp *wire.TransportParameters) { tp.InitialMaxData = fcConnLimit })
		reqs = []*rawquic.Request{rc.Request(t.profile.Target.LargePath), rc.Request(t.profile.Target.LargePath)}
	} else {
		rc, tp = t.fcClient(ctx, "stream-data-1000", func(tp *wire.TransportParameters) { tp.InitialMaxStreamDataBidiLocal = fcStreamLimit })
		reqs = []*rawquic.Request{rc.Request(t.profile.Target.LargePath)}
	}
	reached := func(limit uint64) func() bool {
		return func() bool {
			_, _, total := judgeFlowControl(t.rec.snapshot(), rc.trace.id, tp)
			if connLevel {
				return total >= limit
			}
			return rc.streamEnd(reqs[0].ID) >= limit
		}
	}
	grant := func(limit uint64) *packet {
		if connLevel {
			return rc.Send1RTT([]wire.Frame{&wire.MaxDataFrame{Maximum: limit}}, rawquic.ShortOpts{})
		}
		return rc.Send1RTT([]wire.Frame{&wire.MaxStreamDataFrame{StreamID: reqs[0].ID, Maximum: limit}}, rawquic.ShortOpts{})
	}
	// Phase 1: the initial limit for one settle window, phase 2: twice
	// it, phase 3: the full size (catalogue).
	rc.stallOn(ctx, func() bool { return false })
	stalledAt := time.Now()
	g1 := grant(raise)
	resumed1 := rc.stallOn(ctx, reached(raise))
	resume1 := time.Since(stalledAt)
	rc.stallOn(ctx, func() bool { return false })
	g2 := grant(fcFull)
	rc.awaitRequests(ctx, 2*t.Settle(), reqs...)
	ps := t.rec.snapshot()
	v, ends, total := judgeFlowControl(ps, rc.trace.id, tp)
	what := fmt.Sprintf("stream limit of %d (raised to %d, then %d)", first, raise, fcFull)
	if connLevel {
		what = fmt.Sprintf("connection limit of %d (raised to %d, then %d) over two downloads", first, raise, fcFull)
	}
	if resumed1 {
		t.Fact("fc.resume-after-raise", resume1.Round(10*time.Microsecond).String())
	} else {
		t.Fact("fc.resume-after-raise", "did not reach the raised limit within the settle window")
	}
	r := t.sc.Requirements[0]
	if v != nil {
		t.Fail("within-limit", r, fmt.Sprintf("Against a %s, %s.", what, v), evidence(events(Trigger, g1, g2), events(Response, v.p))...)
		return
	}
	if total == 0 {
		t.Inconclusive("The server sent no stream data at all, so no limit was put to the test.", events(Trigger, g1, g2)...)
	}
	done := 0
	for _, req := range reqs {
		if rc.ResponseDone(req) {
			done++
		}
	}
	t.Fact("fc.completed-downloads", fmt.Sprintf("%d of %d", done, len(reqs)))
	sid := reqs[0].ID
	t.Pass(
		"within-limit",
		r,
		fmt.Sprintf(
			"Against a %s the server never exceeded the limit in force (%d bytes in all, %d on stream %d); %d of %d downloads completed after the last raise.",
			what,
			total,
			ends[sid],
			sid,
			done,
			len(reqs),
		),
		events(Trigger, g1, g2)...)
}

// blockedFrames returns the server's STREAM_DATA_BLOCKED and DATA_BLOCKED
// frames recorded from index mark.
func blockedFrames(ps []*packet, conn, mark int) []*packet {
	var out []*packet
	for _, p := range received(ps, conn, mark) {
		if p.has(wire.FrameTypeStreamDataBlocked) || p.has(wire.FrameTypeDataBlocked) {
			out = append(out, p)
		}
	}
	return out
}

func runFCBlockedSignalled(ctx context.Context, t *T) {
	t.keepEverything() // judgeFlowControl reads every STREAM frame of the download
	r := t.sc.Requirements[0]
	type phase struct {
		label string
		edit  func(tp *wire.TransportParameters)
		limit uint64
		conn  bool
	}
	signalled, stalls := 0, 0
	for _, ph := range []phase{
		{"stream-data-1000", func(tp *wire.TransportParameters) { tp.InitialMaxStreamDataBidiLocal = fcStreamLimit }, fcStreamLimit, false},
		{"max-data-3000", func(tp *wire.TransportParameters) { tp.InitialMaxData = fcConnLimit }, fcConnLimit, true},
	} {
		rc, tp := t.fcClient(ctx, ph.label, ph.edit)
		req := rc.Request(t.profile.Target.LargePath)
		var stallAt time.Time
		var stallPkt *packet
		stalled := rc.stallOn(ctx, func() bool {
			ps := t.rec.snapshot()
			_, ends, total := judgeFlowControl(ps, rc.trace.id, tp)
			if (ph.conn && total >= ph.limit) || (!ph.conn && ends[req.ID] >= ph.limit) {
				if rs := received(ps, rc.trace.id, 0); len(rs) > 0 {
					stallPkt = rs[len(rs)-1]
				}
				stallAt = time.Now()
				return true
			}
			return false
		})
		kind := "stream"
		if ph.conn {
			kind = "connection"
		}
		if !stalled {
			t.Check(
				kind+"-blocked",
				Inconclusive,
				r,
				fmt.Sprintf("The server never used up the %s limit of %d bytes within the settle window, so it was never blocked.", kind, ph.limit),
			)
			continue
		}
		stalls++
		mark := t.mark()
		rc.Receive(ctx, t.Settle(), nil)
		ps := t.rec.snapshot()
		bl := blockedFrames(ps, rc.trace.id, 0)
		var within []*packet
		for _, p := range bl {
			if p.at.Before(stallAt.Add(t.Settle())) {
				within = append(within, p)
			}
		}
		t.Fact(
			"fc."+kind+"-blocked-frames",
			fmt.Sprintf("%d during the stall (%d after the first settle window)", len(bl), len(blockedFrames(ps, rc.trace.id, mark))),
		)
		if len(within) == 0 {
			t.Warn(
				kind+"-blocked",
				r,
				fmt.Sprintf(
					"Blocked by the tester's %s limit of %d bytes, the server sent no STREAM_DATA_BLOCKED or DATA_BLOCKED frame within %v; send one when data waits on flow control.",
					kind,
					ph.limit,
					t.Settle().Round(time.Millisecond),
				),
				events(Context, stallPkt)...)
			continue
		}
		signalled++
		t.Pass(
			kind+"-blocked",
			r,
			fmt.Sprintf(
				"Blocked by the tester's %s limit of %d bytes, the server signalled it (%d packets with BLOCKED frames during the stall).",
				kind,
				ph.limit,
				len(bl),
			),
			evidence(events(Context, stallPkt), events(Response, within[0]))...)
	}
	if stalls == 0 {
		t.Inconclusive("The server was never blocked by the tester's limits.")
	}
}

func runFCOutdated(ctx context.Context, t *T) {
	t.keepEverything() // judgeFlowControl reads every STREAM frame of the download
	const initial, big, small = 64 << 10, 192 << 10, 128 << 10
	rc, _ := t.fcClient(ctx, "outdated", func(tp *wire.TransportParameters) {
		tp.InitialMaxData = initial + 16<<10 // room for HTTP/3's own streams
		tp.InitialMaxStreamDataBidiLocal = initial
	})
	req := rc.Request(t.profile.Target.LargePath)
	if !rc.stallOn(ctx, func() bool { return rc.streamEnd(req.ID) >= initial }) {
		t.Inconclusive(
			fmt.Sprintf(
				"The server did not send the first %d bytes of %s within the settle window (%d arrived).",
				initial,
				t.profile.Target.LargePath,
				rc.streamEnd(req.ID),
			),
		)
	}
	mark := t.mark()
	raise := rc.Send1RTT([]wire.Frame{&wire.MaxDataFrame{Maximum: big + 16<<10}, &wire.MaxStreamDataFrame{StreamID: req.ID, Maximum: big}}, rawquic.ShortOpts{})
	old := rc.Send1RTT(
		[]wire.Frame{&wire.MaxDataFrame{Maximum: small + 16<<10}, &wire.MaxStreamDataFrame{StreamID: req.ID, Maximum: small}},
		rawquic.ShortOpts{},
	)
	trig := events(Trigger, raise, old)
	// Wait for the data to reach the larger limit and for the outdated
	// packet's acknowledgment (which a server may delay).
	rc.stallOn(ctx, func() bool {
		return rc.streamEnd(req.ID) >= big && ackedBy(t.rec.snapshot(), rc.trace.id, spaceApp, old.pn) != nil
	})
	ps := t.rec.snapshot()
	end := rc.streamEnd(req.ID)
	t.Fact("fc.outdated-stream-end", end)
	accept, ignore := t.sc.Requirements[0], t.sc.Requirements[1]
	if cl := firstClose(received(ps, rc.trace.id, mark)); cl != nil {
		t.Fail(
			"accepted",
			accept,
			fmt.Sprintf(
				"The server closed the connection (%s) after MAX_DATA and MAX_STREAM_DATA frames smaller than earlier ones; outdated values must be ignored.",
				closeCode(cl.closeFrame()),
			),
			append(trig, events(Response, cl)...)...)
		return
	}
	if ackedBy(ps, rc.trace.id, spaceApp, old.pn) == nil {
		t.Check("accepted", Inconclusive, accept, "The server never acknowledged the packet with the outdated limits.", trig...)
		return
	}
	t.Pass("accepted", accept, "The server acknowledged the packet with smaller MAX_DATA and MAX_STREAM_DATA values and kept the connection open.", trig...)
	switch {
	case end > small:
		t.Pass(
			"ignored",
			ignore,
			fmt.Sprintf("The server sent stream data up to offset %d, beyond the outdated limit of %d, within the larger limit of %d.", end, small, big),
			trig...)
	case end == small:
		// The catalogue fails only on a close; the RFC's MUST also covers
		// a sender that obeys the smaller value, which stopping exactly
		// at it shows.
		t.Fail(
			"ignored",
			ignore,
			fmt.Sprintf(
				"The server stopped at offset %d, exactly the outdated limit, although it had been given %d: it applied a MAX_STREAM_DATA or MAX_DATA that did not increase the limit.",
				end,
				big,
			),
			trig...)
	default:
		t.Check(
			"ignored",
			Inconclusive,
			ignore,
			fmt.Sprintf("The server's data reached only offset %d within the settle window, short of the outdated limit of %d.", end, small),
			trig...)
	}
}

func init() {
	Register(&Scenario{
		ID: "fc-stream-limit-respected", Title: "Server stays within a 1000-byte stream limit", Family: "D", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqFCNotExceed},
		Run: func(ctx context.Context, t *T) {
			t.fcLimitRespected(ctx, false)
		},
	})
	Register(&Scenario{
		ID: "fc-connection-limit-respected", Title: "Server stays within a 3000-byte connection limit", Family: "D", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqFCNotExceed},
		Run: func(ctx context.Context, t *T) {
			t.fcLimitRespected(ctx, true)
		},
	})
	Register(&Scenario{
		ID: "fc-blocked-signalled", Title: "Server signals that flow control blocks it", Family: "D", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqFCBlocked},
		Run:          runFCBlockedSignalled,
	})
	Register(&Scenario{
		ID: "fc-outdated-max-data-accepted", Title: "Smaller MAX_DATA and MAX_STREAM_DATA are ignored", Family: "D", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{
			rfc9000(
				"13.3",
				Must,
				"A receiver MUST accept packets containing an outdated frame, such as a MAX_DATA frame carrying a smaller maximum data value than one found in an older packet.",
			),
			rfc9000("4.1", Must, "A sender MUST ignore any MAX_STREAM_DATA or MAX_DATA frames that do not increase flow control limits."),
		},
		Run: runFCOutdated,
	})
}
