package conformance

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Family D, stream delivery (catalogue §3.D): requests whose bytes reach
// the server out of order, split, overlapping, on implicitly opened
// streams, or many at once. The raw client builds every STREAM frame, so
// the order on the wire is exactly the scenario's.

var reqOrderedDelivery = rfc9000("2.2", Must, "Endpoints MUST be able to deliver stream data to an application as an ordered byte stream.")

func init() {
	Register(&Scenario{
		ID: "stream-fin-before-data", Title: "FIN arrives before the request bytes", Family: "D", Needs: []string{NeedApp},
		Requirements: []Requirement{reqOrderedDelivery},
		Run: func(ctx context.Context, t *T) {
			t.reorderedRequest(ctx, "fin-first", func(req *rawRequest) []*wire.StreamFrame {
				f := req.frame
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
			t.reorderedRequest(ctx, "reversed", func(req *rawRequest) []*wire.StreamFrame {
				f := req.frame
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
		Requirements: []Requirement{rfc9000("3.2", Must, "Before a stream is created, all streams of the same type with lower-numbered stream IDs MUST be created.")},
		Run:          runStreamImplicitOpen,
	})
	Register(&Scenario{
		ID: "stream-overlap-different-data", Title: "Overlapping STREAM data that differs", Family: "D", Needs: []string{NeedHQ}, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("2.2", May, "an endpoint MAY treat receipt of different data at the same offset within a stream as a connection error of type PROTOCOL_VIOLATION.")},
		Run:          runStreamOverlapDifferent,
	})
	Register(&Scenario{
		ID: "stream-multiplex", Title: "Eight interleaved requests at once", Family: "D", Needs: []string{NeedApp}, PassOnly: true,
		Requirements: []Requirement{rfc9000("2", Descriptive, "Streams can be created by either endpoint, can concurrently send data interleaved with other streams, and can be canceled.")},
		Run:          runStreamMultiplex,
	})
}

// awaitRequests lets the raw client receive until every request is
// answered in full, the server closes, or d passes. Unlike Await it never
// resends a request: the order of the bytes is the point.
func (rc *rawClient) awaitRequests(ctx context.Context, d time.Duration, reqs ...*rawRequest) {
	rc.Receive(ctx, d, func() bool {
		if rc.peerClosed {
			return true
		}
		for _, r := range reqs {
			if _, done := rc.Body(r); !done {
				return false
			}
		}
		return true
	})
}

// healthy sends a PING and reports whether the server acknowledged it
// within a settle window without closing.
func (rc *rawClient) healthy(ctx context.Context) bool {
	if rc.peerClosed {
		return false
	}
	p := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	ok := rc.receiveUntil(ctx, rc.t.Settle(), 0, func(q *packet) bool {
		for _, f := range q.frames {
			if a, ok := f.(*wire.AckFrame); ok && q.space == spaceApp && a.Acks(p.pn) {
				return true
			}
		}
		return false
	}) != nil
	return ok && !rc.peerClosed
}

// reorderedRequest sends the small request as the frames split returns,
// each in its own packet and datagram 10 ms apart, and judges whether the
// server reassembled and answered it (catalogue stream-fin-before-data).
func (t *T) reorderedRequest(ctx context.Context, check string, split func(*rawRequest) []*wire.StreamFrame, what string) {
	rc := t.rawHandshake(ctx)
	req := rc.prepareRequest(0, t.profile.SmallPath)
	mark := t.mark()
	var trig []*packet
	for i, f := range split(req) {
		if i > 0 {
			sleep(ctx, 10*time.Millisecond)
		}
		trig = append(trig, rc.Send1RTT([]wire.Frame{f}, shortOpts{}))
	}
	rc.awaitRequests(ctx, t.Settle(), req)
	body, done := rc.Body(req)
	ps := t.rec.snapshot()
	resp := packetsOf(framesOf[*wire.StreamFrame](ps, rc.trace.id, mark, false))
	r := t.sc.Requirements[0]
	if done {
		t.Pass(check, r, fmt.Sprintf("The server reassembled the request sent as %s and answered it (%d bytes).", what, len(body)), append(events(Trigger, trig...), events(Response, lastN(resp, 2)...)...)...)
		return
	}
	if cl := firstClose(received(ps, rc.trace.id, mark)); cl != nil {
		t.Check(check, Inconclusive, r, fmt.Sprintf("The server closed the connection (%s) after %s, so the reassembly could not be judged.", closeCode(cl.closeFrame()), what), append(events(Trigger, trig...), events(Response, cl)...)...)
		return
	}
	allAcked := true
	for _, p := range trig {
		if ackedBy(ps, rc.trace.id, spaceApp, p.pn) == nil {
			allAcked = false
		}
	}
	if allAcked && rc.healthy(ctx) {
		t.Fail(check, r, fmt.Sprintf("The server acknowledged every packet of %s and the connection stays healthy, yet it never answered the request (%d response bytes after %v); reassemble stream data by offset before delivering it.", what, len(body), t.Settle().Round(time.Millisecond)), events(Trigger, trig...)...)
		return
	}
	t.Check(check, Inconclusive, r, fmt.Sprintf("The request sent as %s got no complete answer, but the server did not acknowledge all its packets or stopped answering PINGs.", what), events(Trigger, trig...)...)
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
	reqs := make([]*rawRequest, 3)
	var trig []*packet
	for i, id := range []uint64{8, 0, 4} {
		reqs[i] = rc.prepareRequest(id, t.profile.SmallPath)
		trig = append(trig, rc.Send1RTT([]wire.Frame{reqs[i].frame}, shortOpts{}))
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
			t.Fail("implicit", r, "The server closed with STREAM_STATE_ERROR when the tester used streams 0 and 4 after stream 8; opening stream 8 opens every lower client bidirectional stream.", append(events(Trigger, trig...), events(Response, cl)...)...)
			return
		}
		t.Check("implicit", Inconclusive, r, fmt.Sprintf("The server closed the connection (%s) during the requests on streams 8, 0 and 4.", closeCode(cc)), append(events(Trigger, trig...), events(Response, cl)...)...)
		return
	}
	answered := func(req *rawRequest) bool { _, done := rc.Body(req); return done }
	for _, i := range []int{1, 2} {
		if errs := serverStreamErrors(ps, rc.trace.id, mark, reqs[i].id); len(errs) > 0 && !answered(reqs[i]) {
			t.Fail("implicit", r, fmt.Sprintf("The server rejected the request on stream %d (RESET_STREAM or STOP_SENDING) after stream 8 had opened it implicitly.", reqs[i].id), append(events(Trigger, trig...), events(Response, errs...)...)...)
			return
		}
	}
	switch {
	case answered(reqs[0]) && answered(reqs[1]) && answered(reqs[2]):
		t.Pass("implicit", r, "The server answered the requests on streams 8, 0 and 4, sent in that order.", events(Trigger, trig...)...)
	case answered(reqs[0]):
		t.Fail("implicit", r, "The server answered the request on stream 8 but not those on streams 0 and 4 that stream 8 opened implicitly.", events(Trigger, trig...)...)
	default:
		t.Check("implicit", Inconclusive, r, "The server answered none of the requests on streams 8, 0 and 4 within the settle window.", events(Trigger, trig...)...)
	}
}

func runStreamOverlapDifferent(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	ref, err := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	if err != nil {
		t.Inconclusive(fmt.Sprintf("The control request for %s failed: %v.", t.profile.SmallPath, err))
	}
	req := rc.prepareRequest(4, t.profile.SmallPath)
	bad := append([]byte(nil), req.frame.Data[:3]...)
	bad[2] ^= 0x0c // "GET" becomes "GEX"
	mark := t.mark()
	first := rc.Send1RTT([]wire.Frame{&wire.StreamFrame{StreamID: req.id, Data: bad}}, shortOpts{})
	sleep(ctx, 10*time.Millisecond)
	second := rc.Send1RTT([]wire.Frame{req.frame}, shortOpts{})
	trig := events(Trigger, first, second)
	rc.awaitRequests(ctx, t.Settle(), req)
	ps := t.rec.snapshot()
	body, done := rc.Body(req)
	switch cl := firstClose(received(ps, rc.trace.id, mark)); {
	case cl != nil:
		cc := cl.closeFrame()
		t.Fact("stream.overlap-reaction", "close "+closeCode(cc))
		t.Observe("overlap", fmt.Sprintf("The server closed the connection with %s on overlapping bytes that differ (%q, then %q).", closeCode(cc), bad, req.frame.Data[:3]), append(trig, events(Response, cl)...)...)
	case done && bytes.Equal(body, ref):
		t.Fact("stream.overlap-reaction", "took the later bytes")
		t.Observe("overlap", fmt.Sprintf("The server answered the request correctly: it took the later bytes %q over the first %q.", req.frame.Data[:3], bad), trig...)
	default:
		t.Fact("stream.overlap-reaction", "kept the first bytes")
		errs := serverStreamErrors(ps, rc.trace.id, mark, req.id)
		t.Observe("overlap", fmt.Sprintf("The server did not answer the request correctly (%d bytes, complete %v, %d stream errors): it kept the first bytes %q.", len(body), done, len(errs), bad), append(trig, events(Response, errs...)...)...)
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
	reqs := make([]*rawRequest, n)
	for i := range reqs {
		reqs[i] = rc.prepareRequest(clientBidi(uint64(i)+1), t.profile.SmallPath)
	}
	mark := t.mark()
	// Interleave the requests: first every request's first half, then
	// every second half with FIN, two frames per packet.
	var trig []*packet
	for half := 0; half < 2; half++ {
		for i := 0; i < len(reqs); i += 2 {
			var fs []wire.Frame
			for _, r := range reqs[i:min(i+2, len(reqs))] {
				d, mid := r.frame.Data, len(r.frame.Data)/2
				if half == 0 {
					fs = append(fs, &wire.StreamFrame{StreamID: r.id, Data: d[:mid]})
				} else {
					fs = append(fs, &wire.StreamFrame{StreamID: r.id, Offset: uint64(mid), Data: d[mid:], Fin: true})
				}
			}
			trig = append(trig, rc.Send1RTT(fs, shortOpts{}))
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
			stalled = append(stalled, req.id)
		case !bytes.Equal(body, ref):
			wrong = append(wrong, req.id)
		}
	}
	switch {
	case len(wrong) > 0:
		// The requirement is descriptive, so the catalogue allows only
		// pass or inconclusive; the streams with a wrong body are named.
		t.Check("multiplex", Inconclusive, r, fmt.Sprintf("Streams %v completed with content different from the control fetch of %s.", wrong, t.profile.SmallPath), events(Trigger, trig...)...)
	case len(stalled) > 0:
		t.Check("multiplex", Inconclusive, r, fmt.Sprintf("Of %d interleaved requests, those on streams %v did not complete within %v.", n, stalled, t.Settle().Round(time.Millisecond)), events(Trigger, trig...)...)
	default:
		t.Pass("multiplex", r, fmt.Sprintf("All %d interleaved requests completed with FIN and the same content as the control fetch; the server switched streams %d times over %d STREAM frames.", n, switches, len(order)), events(Trigger, trig...)...)
	}
}
