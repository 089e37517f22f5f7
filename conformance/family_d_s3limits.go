package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family D, stream limits (catalogue §3.D): whether the server raises the
// tester's stream credit on its own, and whether the streams it opens stay
// within the tester's limits.

var (
	reqStreamsNoWait    = rfc9000("4.6", MustNot, "An endpoint MUST NOT wait to receive this signal before advertising additional credit")
	reqStreamsNotExceed = rfc9000("4.6", MustNot, "Endpoints MUST NOT exceed the limit set by their peer.")
)

func init() {
	Register(&Scenario{
		ID: "stream-limit-raised-without-blocked", Title: "Stream credit raised without STREAMS_BLOCKED", Family: "D", Needs: []string{NeedApp},
		Requirements: []Requirement{reqStreamsNoWait},
		Run:          runStreamLimitRaised,
	})
	Register(&Scenario{
		ID: "stream-server-respects-limits", Title: "Server streams within the tester's limits", Family: "D", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{reqStreamsNotExceed, reqStreamStateSTREAM},
		Run:          runStreamServerRespectsLimits,
	})
	runWideChecks = append(runWideChecks,
		passiveCheck{id: "stream-server-respects-limits", judge: judgeServerStreams},
		passiveCheck{id: "stream-server-respects-limits", req: 1, judge: judgeServerStreamState},
	)
}

func runStreamLimitRaised(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	tp := rc.ServerTP()
	if tp == nil {
		t.Inconclusive("The tester could not read the server's transport parameters.")
	}
	limit := tp.InitialMaxStreamsBidi
	if limit == 0 || limit >= 1000 {
		t.Unsupported(fmt.Sprintf("The server's initial_max_streams_bidi is %d; the scenario needs a finite limit below 1000 (and above 0).", limit))
	}
	total := limit + 50
	allowed := limit
	var reqs []*rawRequest
	var firstRaise, blocked *packet
	scanned := t.mark()
	// update reads the server's MAX_STREAMS (bidirectional) frames
	// recorded since the last call.
	update := func() bool {
		ps := t.rec.snapshot()
		raised := false
		for _, fa := range framesOf[*wire.MaxStreamsFrame](ps, rc.trace.id, scanned, false) {
			if f := fa.f.(*wire.MaxStreamsFrame); f.Bidi && f.Maximum > allowed {
				allowed = f.Maximum
				raised = true
				if firstRaise == nil {
					firstRaise = fa.p
				}
			}
		}
		scanned = len(ps)
		return raised
	}
	for uint64(len(reqs)) < total && ctx.Err() == nil && !rc.peerClosed {
		for uint64(len(reqs)) < min(total, allowed) {
			reqs = append(reqs, rc.Request(t.profile.SmallPath))
		}
		if uint64(len(reqs)) >= total {
			break
		}
		// Wait for credit: one settle window without STREAMS_BLOCKED,
		// then once more after it.
		rc.Receive(ctx, t.Settle(), update)
		if update() || uint64(len(reqs)) < allowed {
			continue
		}
		if blocked != nil {
			break
		}
		blocked = rc.Send1RTT([]wire.Frame{&wire.StreamsBlockedFrame{Bidi: true, Limit: allowed}}, shortOpts{})
	}
	rc.awaitRequests(ctx, t.Settle(), reqs...)
	done := 0
	for _, r := range reqs {
		if _, ok := rc.Body(r); ok {
			done++
		}
	}
	t.Fact("streams.completed", fmt.Sprintf("%d of %d requests (%d opened)", done, total, len(reqs)))
	t.Fact("streams.final-limit", allowed)
	r := t.sc.Requirements[0]
	switch {
	case firstRaise == nil:
		t.Observe("raised", fmt.Sprintf("The server never raised its bidirectional stream limit of %d, not even after STREAMS_BLOCKED; %d of %d requests completed.", limit, done, total), events(Trigger, blocked)...)
	case blocked == nil || firstRaise.at.Before(blocked.at):
		t.Pass("raised", r, fmt.Sprintf("The server raised its bidirectional stream limit from %d to %d with MAX_STREAMS as streams completed, without waiting for STREAMS_BLOCKED; %d of %d requests completed.", limit, allowed, done, total), events(Response, firstRaise)...)
	default:
		t.Fail("raised", r, fmt.Sprintf("The server sent MAX_STREAMS only after the tester's STREAMS_BLOCKED, although %d streams had completed for %v before; advertise credit as streams close.", done, t.Settle().Round(time.Millisecond)), append(events(Trigger, blocked), events(Response, firstRaise)...)...)
	}
}

// findClientTransportParameters returns the quic_transport_parameters
// extension of a ClientHello at the start of an Initial CRYPTO stream.
func findClientTransportParameters(stream []byte) ([]byte, bool) {
	ms := tlsMessages(stream)
	if len(ms) == 0 || ms[0][0] != 1 {
		return nil, false
	}
	b := ms[0][4:]
	// legacy_version, random
	if len(b) < 34 {
		return nil, false
	}
	b = b[34:]
	skip := func(lenBytes int) bool {
		if len(b) < lenBytes {
			return false
		}
		n := 0
		for _, x := range b[:lenBytes] {
			n = n<<8 | int(x)
		}
		if len(b) < lenBytes+n {
			return false
		}
		b = b[lenBytes+n:]
		return true
	}
	// session id, cipher suites, compression methods
	if !skip(1) || !skip(2) || !skip(1) {
		return nil, false
	}
	return findExtension(b, extQUICTransportParams)
}

// testerTP decodes the transport parameters the tester sent on one
// connection, from the ClientHello in its Initial CRYPTO data.
func testerTP(c connRecord) *wire.TransportParameters {
	var buf cryptoBuffer
	for _, p := range c.packets {
		if !p.sent || p.space != 0 {
			continue
		}
		for _, f := range p.frames {
			if cf, ok := f.(*wire.CryptoFrame); ok {
				buf.add(cf.Offset, cf.Data)
			}
		}
	}
	raw, ok := findClientTransportParameters(buf.contiguous())
	if !ok {
		return nil
	}
	tp, err := wire.ParseTransportParameters(raw, false)
	if err != nil {
		return nil
	}
	return tp
}

// streamIDOf returns the stream a frame concerns, for the frames that
// open or use a stream.
func streamIDOf(f wire.Frame) (uint64, bool) {
	switch f := f.(type) {
	case *wire.StreamFrame:
		return f.StreamID, true
	case *wire.ResetStreamFrame:
		return f.StreamID, true
	case *wire.StreamDataBlockedFrame:
		return f.StreamID, true
	case *wire.StopSendingFrame:
		return f.StreamID, true
	case *wire.MaxStreamDataFrame:
		return f.StreamID, true
	}
	return 0, false
}

// judgeServerStreams checks the streams the server opens (STREAM,
// RESET_STREAM or STREAM_DATA_BLOCKED on a server-initiated stream)
// against the tester's initial_max_streams and the MAX_STREAMS frames it
// had sent before they arrived.
func judgeServerStreams(c connRecord) (string, []*packet) {
	tp := testerTP(c)
	if tp == nil {
		return "", nil
	}
	bidi, uni := tp.InitialMaxStreamsBidi, tp.InitialMaxStreamsUni
	for _, p := range c.packets {
		if p.space != spaceApp {
			continue
		}
		for _, f := range p.frames {
			if p.sent {
				if ms, ok := f.(*wire.MaxStreamsFrame); ok {
					if ms.Bidi {
						bidi = max(bidi, ms.Maximum)
					} else {
						uni = max(uni, ms.Maximum)
					}
				}
				continue
			}
			switch f.(type) {
			case *wire.StreamFrame, *wire.ResetStreamFrame, *wire.StreamDataBlockedFrame:
			default:
				continue
			}
			id, _ := streamIDOf(f)
			switch id % 4 {
			case 1:
				if id/4 >= bidi {
					return fmt.Sprintf("the server opened bidirectional stream %d, beyond the tester's limit of %d server bidirectional streams.", id, bidi), []*packet{p}
				}
			case 3:
				if id/4 >= uni {
					return fmt.Sprintf("the server opened unidirectional stream %d, beyond the tester's limit of %d server unidirectional streams.", id, uni), []*packet{p}
				}
			}
		}
	}
	return "", nil
}

// judgeServerStreamState checks that the server sends no STREAM frame on
// a client unidirectional stream (receive-only for the server) or on a
// client bidirectional stream the tester has not opened: the tester would
// be bound to close with STREAM_STATE_ERROR.
func judgeServerStreamState(c connRecord) (string, []*packet) {
	var opened [4]uint64 // 1 + the highest client stream index the tester used, per type
	for _, p := range c.packets {
		if p.space != spaceApp {
			continue
		}
		for _, f := range p.frames {
			if p.sent {
				if id, ok := streamIDOf(f); ok && id%2 == 0 {
					opened[id%4] = max(opened[id%4], id/4+1)
				}
				continue
			}
			sf, ok := f.(*wire.StreamFrame)
			if !ok {
				continue
			}
			switch id := sf.StreamID; {
			case id%4 == 2:
				return fmt.Sprintf("the server sent a STREAM frame on client unidirectional stream %d, which is receive-only for it.", id), []*packet{p}
			case id%4 == 0 && id/4 >= opened[0]:
				return fmt.Sprintf("the server sent a STREAM frame on client bidirectional stream %d, which the tester had not opened.", id), []*packet{p}
			}
		}
	}
	return "", nil
}

func runStreamServerRespectsLimits(ctx context.Context, t *T) {
	// The active connection: no stream credit at all for the server
	// (HTTP/3 needs three unidirectional streams, RFC 9114 §6.2).
	scid := randomBytes(8)
	tp := defaultClientTP(scid)
	tp.InitialMaxStreamsBidi = 0
	if t.alpn() != h3.ALPNH3 {
		tp.InitialMaxStreamsUni = 0
	}
	rc := t.rawEstablished(ctx, rawOptions{Label: "no-server-streams", SCID: scid, TP: tp}, nil)
	if _, err := rc.Fetch(ctx, t.profile.SmallPath, t.Settle()); err != nil {
		t.Fact("streams.active-fetch", err.Error())
	}
	rc.Receive(ctx, 2*t.PTO(), nil)
	opened := map[uint64]bool{}
	for _, fa := range framesOf[*wire.StreamFrame](t.rec.snapshot(), rc.trace.id, 0, false) {
		if id := fa.f.(*wire.StreamFrame).StreamID; id%2 == 1 {
			opened[id] = true
		}
	}
	t.Fact("streams.server-opened", len(opened))
	t.judgeOwn("limits", t.sc.Requirements[0], judgeServerStreams, fmt.Sprintf("the server opened no stream beyond the tester's limits (bidirectional %d, unidirectional %d on the active connection)", tp.InitialMaxStreamsBidi, tp.InitialMaxStreamsUni))
	t.judgeOwn("stream-state", t.sc.Requirements[1], judgeServerStreamState, "the server sent no STREAM frame on a client unidirectional stream or on a client stream the tester had not opened")
}
