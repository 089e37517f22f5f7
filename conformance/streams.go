package conformance

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic/wire"
)

func runStopSendingReset(ctx context.Context, t *T) {
	// A 32 KiB stream limit keeps the response stream in the Send state:
	// the server cannot finish it before the STOP_SENDING arrives.
	const window = 32 << 10
	rc, _ := t.fcClient(ctx, "stop-sending", func(tp *wire.TransportParameters) { tp.InitialMaxStreamDataBidiLocal = window })
	req := rc.Request(t.profile.Target.LargePath)
	if !rc.stallOn(ctx, func() bool { return rc.streamEnd(req.ID) >= 10<<10 }) {
		t.Inconclusive(fmt.Sprintf("The server did not send the first 10 KiB of %s within the settle window.", t.profile.Target.LargePath))
	}
	code := uint64(0x7)
	if req.ALPN == h3.ALPNH3 {
		code = 0x10c // H3_REQUEST_CANCELLED
	}
	mark := t.mark()
	ss := rc.Send1RTT([]wire.Frame{&wire.StopSendingFrame{StreamID: req.ID, ErrorCode: code}}, rawquic.ShortOpts{})
	trig := events(Trigger, ss)
	var reset *packet
	var rs *wire.ResetStreamFrame
	find := func() bool {
		for _, fa := range framesOf[*wire.ResetStreamFrame](t.rec.snapshot(), rc.trace.id, mark, false) {
			if f := fa.f.(*wire.ResetStreamFrame); f.StreamID == req.ID {
				reset, rs = fa.p, f
				return true
			}
		}
		return false
	}
	rc.Receive(ctx, t.Settle(), find)
	find()
	// Watch a little longer for STREAM frames after the reset.
	rc.Receive(ctx, 3*t.PTO(), nil)
	ps := t.rec.snapshot()
	must, copyCode, noStream := t.sc.Requirements[0], t.sc.Requirements[1], t.sc.Requirements[2]
	s := rc.Stream(req.ID)
	if reset == nil {
		if cl := firstClose(received(ps, rc.trace.id, mark)); cl != nil {
			t.Check(
				"reset",
				Inconclusive,
				must,
				fmt.Sprintf("The server closed the connection (%s) instead of resetting the stream.", closeCode(cl.closeFrame())),
				append(trig, events(Response, cl)...)...)
			return
		}
		if s != nil && s.Fin {
			t.Check("reset", Inconclusive, must, "The server had already sent the whole response (FIN), so the stream had left the Send state.", trig...)
			return
		}
		t.Fail(
			"reset",
			must,
			fmt.Sprintf(
				"The server sent no RESET_STREAM within %v of STOP_SENDING for stream %d, whose response was held in the Send state by flow control; answer STOP_SENDING with RESET_STREAM.",
				t.Settle().Round(time.Millisecond),
				req.ID,
			),
			trig...)
		return
	}
	t.Fact("stream.stop-sending-reset-code", fmt.Sprintf("0x%x", rs.ErrorCode))
	t.Pass(
		"reset",
		must,
		fmt.Sprintf("The server answered STOP_SENDING with RESET_STREAM for stream %d (final size %d).", req.ID, rs.FinalSize),
		append(trig, events(Response, reset)...)...)
	if rs.ErrorCode == code {
		t.Pass("code", copyCode, fmt.Sprintf("The RESET_STREAM carries the STOP_SENDING error code 0x%x.", code), events(Response, reset)...)
	} else {
		t.Warn("code", copyCode, fmt.Sprintf("The RESET_STREAM carries error code 0x%x, not the 0x%x of the STOP_SENDING; copy the code.", rs.ErrorCode, code), events(Response, reset)...)
	}
	for _, p := range received(ps, rc.trace.id, mark) {
		if p.pn <= reset.pn || p.space != spaceApp {
			continue
		}
		for _, f := range p.frames {
			switch f := f.(type) {
			case *wire.StreamFrame:
				if f.StreamID == req.ID {
					t.Fail("after-reset", noStream, fmt.Sprintf("The server sent a STREAM frame for stream %d in packet %d, after its RESET_STREAM in packet %d.", req.ID, p.pn, reset.pn), events(Response, reset, p)...)
					return
				}
			case *wire.StreamDataBlockedFrame:
				if f.StreamID == req.ID {
					t.Fail("after-reset", noStream, fmt.Sprintf("The server sent STREAM_DATA_BLOCKED for stream %d in packet %d, after its RESET_STREAM in packet %d.", req.ID, p.pn, reset.pn), events(Response, reset, p)...)
					return
				}
			}
		}
	}
	t.Pass("after-reset", noStream, "No STREAM or STREAM_DATA_BLOCKED frame for the stream followed the RESET_STREAM.", events(Response, reset)...)
}

// Family D, stream limits (docs/scenarios.md): whether the server raises the
// tester's stream credit on its own, and whether the streams it opens stay
// within the tester's limits.

var (
	reqStreamsNoWait    = rfc9000("4.6", MustNot, "An endpoint MUST NOT wait to receive this signal before advertising additional credit")
	reqStreamsNotExceed = rfc9000("4.6", MustNot, "Endpoints MUST NOT exceed the limit set by their peer.")
)

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
	var reqs []*rawquic.Request
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
	for uint64(len(reqs)) < total && ctx.Err() == nil && !rc.PeerClosed {
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
		blocked = rc.Send1RTT([]wire.Frame{&wire.StreamsBlockedFrame{Bidi: true, Limit: allowed}}, rawquic.ShortOpts{})
	}
	rc.awaitRequests(ctx, t.Settle(), reqs...)
	done := 0
	for _, r := range reqs {
		if rc.ResponseDone(r) {
			done++
		}
	}
	t.Fact("streams.completed", fmt.Sprintf("%d of %d requests (%d opened)", done, total, len(reqs)))
	t.Fact("streams.final-limit", allowed)
	r := t.sc.Requirements[0]
	switch {
	case firstRaise == nil:
		t.Observe(
			"raised",
			fmt.Sprintf(
				"The server never raised its bidirectional stream limit of %d, not even after STREAMS_BLOCKED; %d of %d requests completed.",
				limit,
				done,
				total,
			),
			events(Trigger, blocked)...)
	case blocked == nil || firstRaise.at.Before(blocked.at):
		t.Pass(
			"raised",
			r,
			fmt.Sprintf(
				"The server raised its bidirectional stream limit from %d to %d with MAX_STREAMS as streams completed, without waiting for STREAMS_BLOCKED; %d of %d requests completed.",
				limit,
				allowed,
				done,
				total,
			),
			events(Response, firstRaise)...)
	default:
		t.Fail(
			"raised",
			r,
			fmt.Sprintf(
				"The server sent MAX_STREAMS only after the tester's STREAMS_BLOCKED, although %d streams had completed for %v before; advertise credit as streams close.",
				done,
				t.Settle().Round(time.Millisecond),
			),
			evidence(events(Trigger, blocked), events(Response, firstRaise))...)
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
	var buf rawquic.CryptoBuffer
	for _, p := range c.packets {
		if !p.sent || p.space != 0 {
			continue
		}
		for _, f := range p.frames {
			if cf, ok := f.(*wire.CryptoFrame); ok {
				buf.Add(cf.Offset, cf.Data)
			}
		}
	}
	raw, ok := findClientTransportParameters(buf.Contiguous())
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
					return fmt.Sprintf(
							"the server opened bidirectional stream %d, beyond the tester's limit of %d server bidirectional streams.",
							id,
							bidi,
						), []*packet{
							p,
						}
				}
			case 3:
				if id/4 >= uni {
					return fmt.Sprintf(
							"the server opened unidirectional stream %d, beyond the tester's limit of %d server unidirectional streams.",
							id,
							uni,
						), []*packet{
							p,
						}
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
	tp := rawquic.DefaultClientTP(scid)
	tp.InitialMaxStreamsBidi = 0
	if t.alpn() != h3.ALPNH3 {
		tp.InitialMaxStreamsUni = 0
	}
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "no-server-streams", SCID: scid, TP: tp}, nil)
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
	t.judgeOwn(
		"limits",
		t.sc.Requirements[0],
		judgeServerStreams,
		fmt.Sprintf(
			"the server opened no stream beyond the tester's limits (bidirectional %d, unidirectional %d on the active connection)",
			tp.InitialMaxStreamsBidi,
			tp.InitialMaxStreamsUni,
		),
	)
	t.judgeOwn(
		"stream-state",
		t.sc.Requirements[1],
		judgeServerStreamState,
		"the server sent no STREAM frame on a client unidirectional stream or on a client stream the tester had not opened",
	)
}

// Family D, stream delivery (docs/scenarios.md): requests whose bytes reach
// the server out of order, split, overlapping, on implicitly opened
// streams, or many at once. The raw client builds every STREAM frame, so
// the order on the wire is exactly the scenario's.

var reqOrderedDelivery = rfc9000("2.2", Must, "Endpoints MUST be able to deliver stream data to an application as an ordered byte stream.")

// healthy sends a PING and reports whether the server acknowledged it
// within a settle window without closing.
func (rc *rawClient) healthy(ctx context.Context) bool {
	if rc.PeerClosed {
		return false
	}
	p := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	ok := rc.receiveUntil(ctx, rc.t.Settle(), 0, func(q *packet) bool {
		for _, f := range q.frames {
			if a, ok := f.(*wire.AckFrame); ok && q.space == spaceApp && a.Acks(p.pn) {
				return true
			}
		}
		return false
	}) != nil
	return ok && !rc.PeerClosed
}

// reorderedRequest sends the small request as the frames split returns,
// each in its own packet and datagram 10 ms apart, and judges whether the
// server reassembled and answered it (catalogue stream-fin-before-data).
func (t *T) reorderedRequest(ctx context.Context, check string, split func(*rawquic.Request) []*wire.StreamFrame, what string) {
	rc := t.rawHandshake(ctx)
	req := rc.PrepareRequest(0, t.profile.SmallPath)
	mark := t.mark()
	var trig []*packet
	for i, f := range split(req) {
		if i > 0 {
			sleep(ctx, 10*time.Millisecond)
		}
		trig = append(trig, rc.Send1RTT([]wire.Frame{f}, rawquic.ShortOpts{}))
	}
	rc.awaitRequests(ctx, t.Settle(), req)
	body, done := rc.Body(req)
	ps := t.rec.snapshot()
	resp := packetsOf(framesOf[*wire.StreamFrame](ps, rc.trace.id, mark, false))
	r := t.sc.Requirements[0]
	if done {
		t.Pass(
			check,
			r,
			fmt.Sprintf("The server reassembled the request sent as %s and answered it (%d bytes).", what, len(body)),
			evidence(events(Trigger, trig...), events(Response, lastN(resp, 2)...))...)
		return
	}
	if cl := firstClose(received(ps, rc.trace.id, mark)); cl != nil {
		t.Check(
			check,
			Inconclusive,
			r,
			fmt.Sprintf("The server closed the connection (%s) after %s, so the reassembly could not be judged.", closeCode(cl.closeFrame()), what),
			evidence(events(Trigger, trig...), events(Response, cl))...)
		return
	}
	allAcked := true
	for _, p := range trig {
		if ackedBy(ps, rc.trace.id, spaceApp, p.pn) == nil {
			allAcked = false
		}
	}
	if allAcked && rc.healthy(ctx) {
		t.Fail(
			check,
			r,
			fmt.Sprintf(
				"The server acknowledged every packet of %s and the connection stays healthy, yet it never answered the request (%d response bytes after %v); reassemble stream data by offset before delivering it.",
				what,
				len(body),
				t.Settle().Round(time.Millisecond),
			),
			events(Trigger, trig...)...)
		return
	}
	t.Check(
		check,
		Inconclusive,
		r,
		fmt.Sprintf("The request sent as %s got no complete answer, but the server did not acknowledge all its packets or stopped answering PINGs.", what),
		events(Trigger, trig...)...)
}

// serverStreamErrors returns the RESET_STREAM and STOP_SENDING frames the
// server sent for stream id from index mark.
func serverStreamErrors(ps []*packet, conn, mark int, id uint64) []*packet {
	var out []*packet
	for _, fa := range framesOf[*wire.ResetStreamFrame](ps, conn, mark, false) {
		if fa.f.(*wire.ResetStreamFrame).StreamID == id {
			out = append(out, fa.p)
		}
	}
	for _, fa := range framesOf[*wire.StopSendingFrame](ps, conn, mark, false) {
		if fa.f.(*wire.StopSendingFrame).StreamID == id {
			out = append(out, fa.p)
		}
	}
	return out
}

func runStreamImplicitOpen(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	if tp := rc.ServerTP(); tp != nil && tp.InitialMaxStreamsBidi < 3 {
		t.Unsupported(fmt.Sprintf("The server allows %d client bidirectional streams; the scenario needs 3.", tp.InitialMaxStreamsBidi))
	}
	mark := t.mark()
	reqs := make([]*rawquic.Request, 3)
	var trig []*packet
	for i, id := range []uint64{8, 0, 4} {
		reqs[i] = rc.PrepareRequest(id, t.profile.SmallPath)
		trig = append(trig, rc.Send1RTT([]wire.Frame{reqs[i].Frame}, rawquic.ShortOpts{}))
		if i == 0 {
			// Let stream 8 open alone before its lower neighbours speak.
			rc.Receive(ctx, 20*time.Millisecond, nil)
		}
	}
	rc.awaitRequests(ctx, t.Settle(), reqs...)
	ps := t.rec.snapshot()
	r := t.sc.Requirements[0]
	if cl := firstClose(received(ps, rc.trace.id, mark)); cl != nil {
		cc := cl.closeFrame()
		if !cc.Application && cc.ErrorCode == uint64(wire.StreamStateError) {
			t.Fail(
				"implicit",
				r,
				"The server closed with STREAM_STATE_ERROR when the tester used streams 0 and 4 after stream 8; opening stream 8 opens every lower client bidirectional stream.",
				evidence(events(Trigger, trig...), events(Response, cl))...)
			return
		}
		t.Check(
			"implicit",
			Inconclusive,
			r,
			fmt.Sprintf("The server closed the connection (%s) during the requests on streams 8, 0 and 4.", closeCode(cc)),
			evidence(events(Trigger, trig...), events(Response, cl))...)
		return
	}
	answered := func(req *rawquic.Request) bool { return rc.ResponseDone(req) }
	for _, i := range []int{1, 2} {
		if errs := serverStreamErrors(ps, rc.trace.id, mark, reqs[i].ID); len(errs) > 0 && !answered(reqs[i]) {
			t.Fail(
				"implicit",
				r,
				fmt.Sprintf("The server rejected the request on stream %d (RESET_STREAM or STOP_SENDING) after stream 8 had opened it implicitly.", reqs[i].ID),
				evidence(events(Trigger, trig...), events(Response, errs...))...)
			return
		}
	}
	switch {
	case answered(reqs[0]) && answered(reqs[1]) && answered(reqs[2]):
		t.Pass("implicit", r, "The server answered the requests on streams 8, 0 and 4, sent in that order.", events(Trigger, trig...)...)
	case answered(reqs[0]):
		t.Fail(
			"implicit",
			r,
			"The server answered the request on stream 8 but not those on streams 0 and 4 that stream 8 opened implicitly.",
			events(Trigger, trig...)...)
	default:
		t.Check(
			"implicit",
			Inconclusive,
			r,
			"The server answered none of the requests on streams 8, 0 and 4 within the settle window.",
			events(Trigger, trig...)...)
	}
}

func runStreamOverlapDifferent(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	ref, err := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	if err != nil {
		t.Inconclusive(fmt.Sprintf("The control request for %s failed: %v.", t.profile.SmallPath, err))
	}
	req := rc.PrepareRequest(4, t.profile.SmallPath)
	bad := append([]byte(nil), req.Frame.Data[:3]...)
	bad[2] ^= 0x0c // "GET" becomes "GEX"
	mark := t.mark()
	first := rc.Send1RTT([]wire.Frame{&wire.StreamFrame{StreamID: req.ID, Data: bad}}, rawquic.ShortOpts{})
	sleep(ctx, 10*time.Millisecond)
	second := rc.Send1RTT([]wire.Frame{req.Frame}, rawquic.ShortOpts{})
	trig := events(Trigger, first, second)
	rc.awaitRequests(ctx, t.Settle(), req)
	ps := t.rec.snapshot()
	body, done := rc.Body(req)
	switch cl := firstClose(received(ps, rc.trace.id, mark)); {
	case cl != nil:
		cc := cl.closeFrame()
		t.Fact("stream.overlap-reaction", "close "+closeCode(cc))
		t.Observe(
			"overlap",
			fmt.Sprintf("The server closed the connection with %s on overlapping bytes that differ (%q, then %q).", closeCode(cc), bad, req.Frame.Data[:3]),
			append(trig, events(Response, cl)...)...)
	case done && bytes.Equal(body, ref):
		t.Fact("stream.overlap-reaction", "took the later bytes")
		t.Observe(
			"overlap",
			fmt.Sprintf("The server answered the request correctly: it took the later bytes %q over the first %q.", req.Frame.Data[:3], bad),
			trig...)
	default:
		t.Fact("stream.overlap-reaction", "kept the first bytes")
		errs := serverStreamErrors(ps, rc.trace.id, mark, req.ID)
		t.Observe(
			"overlap",
			fmt.Sprintf(
				"The server did not answer the request correctly (%d bytes, complete %v, %d stream errors): it kept the first bytes %q.",
				len(body),
				done,
				len(errs),
				bad,
			),
			append(trig, events(Response, errs...)...)...)
	}
}

func runStreamMultiplex(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	ref, err := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	if err != nil {
		t.Inconclusive(fmt.Sprintf("The control request for %s failed: %v.", t.profile.SmallPath, err))
	}
	n := uint64(8)
	if tp := rc.ServerTP(); tp != nil && tp.InitialMaxStreamsBidi < n+1 {
		n = max(tp.InitialMaxStreamsBidi, 1) - 1
	}
	if n < 2 {
		t.Unsupported("The server allows fewer than three client bidirectional streams, so two cannot run beside the control request.")
	}
	reqs := make([]*rawquic.Request, n)
	for i := range reqs {
		reqs[i] = rc.PrepareRequest(clientBidi(uint64(i)+1), t.profile.SmallPath)
	}
	mark := t.mark()
	// Interleave the requests: first every request's first half, then
	// every second half with FIN, two frames per packet.
	var trig []*packet
	for half := 0; half < 2; half++ {
		for i := 0; i < len(reqs); i += 2 {
			var fs []wire.Frame
			for _, r := range reqs[i:min(i+2, len(reqs))] {
				d, mid := r.Frame.Data, len(r.Frame.Data)/2
				if half == 0 {
					fs = append(fs, &wire.StreamFrame{StreamID: r.ID, Data: d[:mid]})
				} else {
					fs = append(fs, &wire.StreamFrame{StreamID: r.ID, Offset: uint64(mid), Data: d[mid:], Fin: true})
				}
			}
			trig = append(trig, rc.Send1RTT(fs, rawquic.ShortOpts{}))
		}
	}
	rc.awaitRequests(ctx, t.Settle(), reqs...)
	// Observed: how often consecutive server STREAM frames switch stream.
	var order []uint64
	for _, fa := range framesOf[*wire.StreamFrame](t.rec.snapshot(), rc.trace.id, mark, false) {
		if id := fa.f.(*wire.StreamFrame).StreamID; id%4 == 0 {
			order = append(order, id)
		}
	}
	switches := 0
	for i := 1; i < len(order); i++ {
		if order[i] != order[i-1] {
			switches++
		}
	}
	t.Fact("stream.multiplex-switches", fmt.Sprintf("%d switches between streams over %d response STREAM frames on %d streams", switches, len(order), n))
	r := t.sc.Requirements[0]
	var stalled, wrong []uint64
	for _, req := range reqs {
		body, done := rc.Body(req)
		switch {
		case !done:
			stalled = append(stalled, req.ID)
		case !bytes.Equal(body, ref):
			wrong = append(wrong, req.ID)
		}
	}
	switch {
	case len(wrong) > 0:
		// The requirement is descriptive, so the catalogue allows only
		// pass or inconclusive; the streams with a wrong body are named.
		t.Check(
			"multiplex",
			Inconclusive,
			r,
			fmt.Sprintf("Streams %v completed with content different from the control fetch of %s.", wrong, t.profile.SmallPath),
			events(Trigger, trig...)...)
	case len(stalled) > 0:
		t.Check(
			"multiplex",
			Inconclusive,
			r,
			fmt.Sprintf("Of %d interleaved requests, those on streams %v did not complete within %v.", n, stalled, t.Settle().Round(time.Millisecond)),
			events(Trigger, trig...)...)
	default:
		t.Pass(
			"multiplex",
			r,
			fmt.Sprintf(
				"All %d interleaved requests completed with FIN and the same content as the control fetch; the server switched streams %d times over %d STREAM frames.",
				n,
				switches,
				len(order),
			),
			events(Trigger, trig...)...)
	}
}

// Family D: streams and flow control (docs/scenarios.md). Stream IDs are
// chosen so that the tester's engine has not used them: the scenarios
// inject raw frames and never open streams through the engine first.

var reqStreamStateSTREAM = rfc9000(
	"19.8",
	Must,
	"MUST terminate the connection with error STREAM_STATE_ERROR if it receives a STREAM frame for a locally initiated stream that has not yet been created, or for a send-only stream.",
)

// clientBidi and clientUni return the ID of the n-th client-initiated
// stream of each type (RFC 9000 §2.1).
func clientBidi(n uint64) uint64 { return 4 * n }

func clientUni(n uint64) uint64 { return 4*n + 2 }

func init() {
	Register(&Scenario{
		ID: "stream-stop-sending-reset", Title: "STOP_SENDING is answered with RESET_STREAM", Family: "D", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{
			rfc9000(
				"3.5",
				Must,
				"An endpoint that receives a STOP_SENDING frame MUST send a RESET_STREAM frame if the stream is in the \"Ready\" or \"Send\" state.",
			),
			rfc9000("3.5", Should, "An endpoint SHOULD copy the error code from the STOP_SENDING frame to the RESET_STREAM frame it sends"),
			rfc9000(
				"3.3",
				MustNot,
				"A sender MUST NOT send a STREAM or STREAM_DATA_BLOCKED frame for a stream in the \"Reset Sent\" state or any terminal state",
			),
		},
		Run: runStopSendingReset,
	})
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
	Register(&Scenario{
		ID: "stream-fin-before-data", Title: "FIN arrives before the request bytes", Family: "D", Needs: []string{NeedApp},
		Requirements: []Requirement{reqOrderedDelivery},
		Run: func(ctx context.Context, t *T) {
			t.reorderedRequest(ctx, "fin-first", func(req *rawquic.Request) []*wire.StreamFrame {
				f := req.Frame
				return []*wire.StreamFrame{
					{StreamID: f.StreamID, Offset: uint64(len(f.Data)), Fin: true},
					{StreamID: f.StreamID, Data: f.Data},
				}
			}, "an empty STREAM frame with FIN at the end offset, then (10 ms later, lower packet number) the request bytes at offset 0")
		},
	})
	Register(&Scenario{
		ID: "stream-out-of-order-data", Title: "Request split in three, sent in reverse order", Family: "D", Needs: []string{NeedApp},
		Requirements: []Requirement{reqOrderedDelivery},
		Run: func(ctx context.Context, t *T) {
			t.reorderedRequest(ctx, "reversed", func(req *rawquic.Request) []*wire.StreamFrame {
				f := req.Frame
				n := len(f.Data)
				a, b := n/3, 2*n/3
				return []*wire.StreamFrame{
					{StreamID: f.StreamID, Offset: uint64(b), Data: f.Data[b:], Fin: true},
					{StreamID: f.StreamID, Offset: uint64(a), Data: f.Data[a:b]},
					{StreamID: f.StreamID, Data: f.Data[:a]},
				}
			}, "the request in three STREAM frames, sent last part first")
		},
	})
	Register(&Scenario{
		ID: "stream-implicit-open", Title: "Stream 8 opens streams 0 and 4", Family: "D", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("3.2", Must, "Before a stream is created, all streams of the same type with lower-numbered stream IDs MUST be created."),
		},
		Run: runStreamImplicitOpen,
	})
	Register(&Scenario{
		ID: "stream-overlap-different-data", Title: "Overlapping STREAM data that differs", Family: "D", Needs: []string{NeedHQ}, ObservationOnly: true,
		Requirements: []Requirement{
			rfc9000(
				"2.2",
				May,
				"an endpoint MAY treat receipt of different data at the same offset within a stream as a connection error of type PROTOCOL_VIOLATION.",
			),
		},
		Run: runStreamOverlapDifferent,
	})
	Register(&Scenario{
		ID: "stream-multiplex", Title: "Eight interleaved requests at once", Family: "D", Needs: []string{NeedApp}, PassOnly: true,
		Requirements: []Requirement{
			rfc9000(
				"2",
				Descriptive,
				"Streams can be created by either endpoint, can concurrently send data interleaved with other streams, and can be canceled.",
			),
		},
		Run: runStreamMultiplex,
	})
	stateErr := transportCodes(wire.StreamStateError)
	registerProvoked(provokedSpec{
		id: "stream-limit-exceeded-bidi", title: "Client opens one bidirectional stream too many", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"4.6",
				Must,
				"An endpoint that receives a frame with a stream ID exceeding the limit it has sent MUST treat this as a connection error of type STREAM_LIMIT_ERROR",
			),
		},
		codes:    transportCodes(wire.StreamLimitError),
		describe: "a STREAM frame on the first bidirectional stream beyond initial_max_streams_bidi",
		frames: func(t *T, c *Conn) []wire.Frame {
			tp := t.serverTP(c)
			return []wire.Frame{&wire.StreamFrame{StreamID: clientBidi(tp.InitialMaxStreamsBidi), Data: []byte("GET /\r\n")}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-limit-exceeded-uni", title: "Client opens one unidirectional stream too many", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"19.11",
				Must,
				"An endpoint MUST terminate a connection with an error of type STREAM_LIMIT_ERROR if a peer opens more streams than was permitted.",
			),
		},
		codes:    transportCodes(wire.StreamLimitError),
		describe: "a STREAM frame on the first unidirectional stream beyond initial_max_streams_uni",
		frames: func(t *T, c *Conn) []wire.Frame {
			tp := t.serverTP(c)
			return []wire.Frame{&wire.StreamFrame{StreamID: clientUni(tp.InitialMaxStreamsUni), Data: []byte{0x21}}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-stop-sending-receive-only", title: "STOP_SENDING for a client unidirectional stream", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"19.5",
				Must,
				"An endpoint that receives a STOP_SENDING frame for a receive-only stream MUST terminate the connection with error STREAM_STATE_ERROR.",
			),
		},
		codes:    stateErr,
		describe: "STOP_SENDING for client unidirectional stream 2, which is receive-only for the server",
		frames: func(t *T, c *Conn) []wire.Frame {
			if t.serverTP(c).InitialMaxStreamsUni == 0 {
				t.Unsupported("The server allows no client unidirectional stream (initial_max_streams_uni = 0).")
			}
			// 0x21 is a reserved HTTP/3 stream type, ignored by h3 servers.
			return []wire.Frame{&wire.StreamFrame{StreamID: clientUni(0), Data: []byte{0x21}}, &wire.StopSendingFrame{StreamID: clientUni(0), ErrorCode: 0x21}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-stop-sending-unopened-local", title: "STOP_SENDING for an unopened server stream", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"19.5",
				Must,
				"Receiving a STOP_SENDING frame for a locally initiated stream that has not yet been created MUST be treated as a connection error of type STREAM_STATE_ERROR.",
			),
		},
		codes:    stateErr,
		describe: "STOP_SENDING for server bidirectional stream 1, which the server never opened",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.StopSendingFrame{StreamID: 1, ErrorCode: 0}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-data-on-send-only", title: "STREAM frame on a server-initiated stream", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{reqStreamStateSTREAM}, codes: stateErr,
		describe: "a STREAM frame for a stream the server initiated",
		variants: []variant{
			injectVariant("unopened server bidi stream 1", func(t *T, c *Conn) []wire.Frame {
				return []wire.Frame{&wire.StreamFrame{StreamID: 1, Data: []byte("x")}}
			}),
			injectVariant("server unidirectional stream 3", func(t *T, c *Conn) []wire.Frame {
				return []wire.Frame{&wire.StreamFrame{StreamID: 3, Data: []byte("x")}}
			}),
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-max-stream-data-receive-only", title: "MAX_STREAM_DATA for a receive-only or unopened stream", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"19.10",
				Must,
				"An endpoint that receives a MAX_STREAM_DATA frame for a receive-only stream MUST terminate the connection with error STREAM_STATE_ERROR.",
			),
			rfc9000(
				"19.10",
				Must,
				"Receiving a MAX_STREAM_DATA frame for a locally initiated stream that has not yet been created MUST be treated as a connection error of type STREAM_STATE_ERROR.",
			),
		},
		codes: stateErr, describe: "MAX_STREAM_DATA for a stream the server cannot send on",
		variants: []variant{
			injectVariant("client uni stream 2", func(t *T, c *Conn) []wire.Frame {
				if t.serverTP(c).InitialMaxStreamsUni == 0 {
					t.Unsupported("The server allows no client unidirectional stream.")
				}
				return []wire.Frame{
					&wire.StreamFrame{StreamID: clientUni(0), Data: []byte{0x21}},
					&wire.MaxStreamDataFrame{StreamID: clientUni(0), Maximum: 1 << 20},
				}
			}),
			injectVariant("unopened server bidi stream 1", func(t *T, c *Conn) []wire.Frame {
				return []wire.Frame{&wire.MaxStreamDataFrame{StreamID: 1, Maximum: 1 << 20}}
			}),
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-reset-send-only", title: "RESET_STREAM for the server's control stream", family: "D", needs: []string{NeedH3},
		reqs: []Requirement{
			rfc9000(
				"19.4",
				Must,
				"An endpoint that receives a RESET_STREAM frame for a send-only stream MUST terminate the connection with error STREAM_STATE_ERROR.",
			),
		},
		codes:    stateErr,
		describe: "RESET_STREAM for server unidirectional stream 3 (its HTTP/3 control stream)",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.ResetStreamFrame{StreamID: 3, ErrorCode: 0x100, FinalSize: 0}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-data-blocked-send-only", title: "STREAM_DATA_BLOCKED for the server's control stream", family: "D", needs: []string{NeedH3},
		reqs: []Requirement{
			rfc9000(
				"19.13",
				Must,
				"An endpoint that receives a STREAM_DATA_BLOCKED frame for a send-only stream MUST terminate the connection with error STREAM_STATE_ERROR.",
			),
		},
		codes:    stateErr,
		describe: "STREAM_DATA_BLOCKED for server unidirectional stream 3",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.StreamDataBlockedFrame{StreamID: 3, Limit: 0}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-offset-max", title: "STREAM frame ending beyond 2^62-1", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"19.8",
				Must,
				"Receipt of a frame that exceeds this limit MUST be treated as a connection error of type FRAME_ENCODING_ERROR or FLOW_CONTROL_ERROR.",
			),
		},
		codes:    transportCodes(wire.FrameEncodingError, wire.FlowControlError),
		describe: "a STREAM frame at offset 2^62-1 with one byte",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.StreamFrame{StreamID: 0, Offset: wire.MaxVarint, Data: []byte("x")}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-max-streams-over-limit", title: "MAX_STREAMS above 2^60", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"19.11",
				Must,
				"Receipt of a frame that permits opening of a stream larger than this limit MUST be treated as a connection error of type FRAME_ENCODING_ERROR.",
			),
		},
		codes:    transportCodes(wire.FrameEncodingError),
		describe: "a MAX_STREAMS (bidirectional) frame of 2^60+1",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.MaxStreamsFrame{Bidi: true, Maximum: wire.MaxStreams + 1}}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-streams-blocked-over-limit", title: "STREAMS_BLOCKED above 2^60", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"19.14",
				Must,
				"Receipt of a frame that encodes a larger stream ID MUST be treated as a connection error of type STREAM_LIMIT_ERROR or FRAME_ENCODING_ERROR.",
			),
		},
		codes:    transportCodes(wire.StreamLimitError, wire.FrameEncodingError),
		describe: "a STREAMS_BLOCKED (bidirectional) frame of 2^60+1",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.StreamsBlockedFrame{Bidi: true, Limit: wire.MaxStreams + 1}}
		},
	})
	registerProvoked(provokedSpec{
		id: "fc-stream-violation", title: "One byte beyond the stream flow-control limit", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"4.1",
				Must,
				"A receiver MUST close the connection with an error of type FLOW_CONTROL_ERROR if the sender violates the advertised connection or stream data limits",
			),
		},
		codes:    transportCodes(wire.FlowControlError),
		describe: "a STREAM frame whose last byte lies at initial_max_stream_data_bidi_remote",
		frames: func(t *T, c *Conn) []wire.Frame {
			tp := t.serverTP(c)
			return []wire.Frame{&wire.StreamFrame{StreamID: 0, Offset: tp.InitialMaxStreamDataBidiRemote, Data: []byte("x")}}
		},
	})
	registerProvoked(provokedSpec{
		id: "fc-connection-violation", title: "One byte beyond the connection flow-control limit", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"19.9",
				Must,
				"An endpoint MUST terminate a connection with an error of type FLOW_CONTROL_ERROR if it receives more data than the maximum data value that it has sent.",
			),
		},
		codes:    transportCodes(wire.FlowControlError),
		describe: "STREAM frames on several streams, each within its limit, that together exceed initial_max_data by one byte",
		frames: func(t *T, c *Conn) []wire.Frame {
			tp := t.serverTP(c)
			per, total := tp.InitialMaxStreamDataBidiRemote, tp.InitialMaxData+1
			if per == 0 {
				t.Inconclusive("The server's stream limit is 0, so no data can be spread over streams.")
			}
			n := (total + per - 1) / per
			if n > tp.InitialMaxStreamsBidi || n > 64 {
				t.Inconclusive("The server's stream limits cannot add up to its connection limit within its stream count.")
			}
			var fs []wire.Frame
			for i := uint64(0); i < n; i++ {
				end := min(per, total-i*per)
				// Flow control counts the highest offset: one byte at
				// end-1 is enough to claim end bytes.
				fs = append(fs, &wire.StreamFrame{StreamID: clientBidi(i), Offset: end - 1, Data: []byte("x")})
			}
			return fs
		},
	})
	registerProvoked(provokedSpec{
		id: "fc-final-size-counted", title: "Reset final sizes count against the connection limit", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"4.5",
				Must,
				"The receiver MUST use the final size of the stream to account for all bytes sent on the stream in its connection-level flow controller.",
			),
		},
		codes:    transportCodes(wire.FlowControlError),
		describe: "RESET_STREAM final sizes close to initial_max_data, then data that exceeds the limit only if they are counted",
		frames: func(t *T, c *Conn) []wire.Frame {
			tp := t.serverTP(c)
			per, limit := tp.InitialMaxStreamDataBidiRemote, tp.InitialMaxData
			if per == 0 || limit < 20 {
				t.Inconclusive("The server's limits are too small for the construction.")
			}
			resetTotal := limit - 10
			n := (resetTotal + per - 1) / per
			if n+1 > tp.InitialMaxStreamsBidi || n > 64 {
				t.Inconclusive("The server's stream limits do not allow the construction.")
			}
			var fs []wire.Frame
			for i := uint64(0); i < n; i++ {
				size := min(per, resetTotal-i*per)
				fs = append(
					fs,
					&wire.StreamFrame{StreamID: clientBidi(i), Data: []byte("x")},
					&wire.ResetStreamFrame{StreamID: clientBidi(i), ErrorCode: 0, FinalSize: size},
				)
			}
			fs = append(fs, &wire.StreamFrame{StreamID: clientBidi(n), Offset: 19, Data: []byte("x")})
			return fs
		},
		goesOn: func(t *T, c *Conn, ps []*packet, mark int) (Requirement, string) {
			tp := c.TransportParameters()
			if tp == nil {
				return Requirement{}, ""
			}
			return judgeFinalSizeGoesOn(ps, c.ID(), mark, tp.InitialMaxData)
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-final-size-change", title: "STREAM frame changes the final size", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"4.5",
				Should,
				"If a RESET_STREAM or STREAM frame is received indicating a change in the final size for the stream, an endpoint SHOULD respond with an error of type FINAL_SIZE_ERROR",
			),
		},
		codes:    transportCodes(wire.FinalSizeError),
		warnOnly: true,
		describe: "a STREAM frame with FIN at offset n+10 after a FIN at offset n",
		frames: func(t *T, c *Conn) []wire.Frame {
			req := []byte("GET " + t.profile.SmallPath + "\r\n")
			return []wire.Frame{
				&wire.StreamFrame{StreamID: 0, Data: req, Fin: true},
				&wire.StreamFrame{StreamID: 0, Offset: uint64(len(req)), Data: make([]byte, 10), Fin: true},
			}
		},
	})
	registerProvoked(provokedSpec{
		id: "stream-reset-final-size-lower", title: "RESET_STREAM below the data already sent", family: "D", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"4.5",
				Should,
				"A receiver SHOULD treat receipt of data at or beyond the final size as an error of type FINAL_SIZE_ERROR, even after a stream is closed.",
			),
		},
		codes:    transportCodes(wire.FinalSizeError),
		warnOnly: true,
		describe: "100 bytes on a stream followed by RESET_STREAM with final size 50",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.StreamFrame{StreamID: 0, Data: make([]byte, 100)}, &wire.ResetStreamFrame{StreamID: 0, ErrorCode: 0, FinalSize: 50}}
		},
	})

}

// reqAdvertisedLimit is RFC 9000 §4.1's rule on data beyond the limits a
// receiver has advertised.
var reqAdvertisedLimit = rfc9000(
	"4.1",
	Must,
	"A receiver MUST close the connection with an error of type FLOW_CONTROL_ERROR if the sender violates the advertised connection or stream data limits",
)

// judgeFinalSizeGoesOn names what a server did that processed
// fc-final-size-counted's trigger (reset final sizes up to 10 bytes below
// initial_max_data, then 20 bytes on a new stream) and went on. A
// MAX_DATA above initial_max_data after the trigger shows it counted the
// final sizes (RFC 9000 §4.5) but released the reset streams' credit
// before announcing it, and so accepted data beyond the limit it had
// advertised (§4.1). Without one, the sentence says only what the wire
// shows.
func judgeFinalSizeGoesOn(ps []*packet, conn, mark int, limit uint64) (Requirement, string) {
	for _, fa := range framesOf[*wire.MaxDataFrame](ps, conn, mark, false) {
		if m := fa.f.(*wire.MaxDataFrame).Maximum; m > limit {
			return reqAdvertisedLimit, fmt.Sprintf("The server counted the reset streams' final sizes but released their credit before announcing it: "+
				"it accepted 20 bytes that took the connection 10 bytes past the initial_max_data of %d it had advertised, raised MAX_DATA to %d only afterwards, "+
				"and never closed with FLOW_CONTROL_ERROR. Credit counts once it is advertised; data beyond the advertised limit must close the connection.", limit, m)
		}
	}
	return Requirement{}, fmt.Sprintf(
		"The server accepted 20 bytes that, with the final sizes of the reset streams, took the connection 10 bytes past its initial_max_data of %d, "+
			"and never closed with FLOW_CONTROL_ERROR; it sent no MAX_DATA that would show it counted the final sizes.",
		limit,
	)
}
