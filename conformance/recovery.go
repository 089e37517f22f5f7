package conformance

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family G: loss recovery and ACK behaviour (docs/scenarios.md, RFC 9002 and
// RFC 9000 §13). Every scenario runs on the raw client, which lets the
// tester choose packet numbers, hold back or drop datagrams in either
// direction, withhold acknowledgments and mark ECN per datagram.

var (
	reqAckImmediate = rfc9000(
		"13.2.1",
		Must,
		"An endpoint MUST acknowledge all ack-eliciting Initial and Handshake packets immediately and all ack-eliciting 0-RTT and 1-RTT packets within its advertised max_ack_delay",
	)
	reqAckCE = rfc9000(
		"13.2.1",
		Should,
		"packets marked with the ECN Congestion Experienced (CE) codepoint in the IP header SHOULD be acknowledged immediately",
	)
	reqECNFeedback = rfc9000(
		"13.4.1",
		Must,
		"Even if an endpoint does not set an ECT field in packets it sends, the endpoint MUST provide feedback about ECN markings it receives, if these are accessible.",
	)
	reqInitialCwnd = rfc9002(
		"7.2",
		Should,
		"Endpoints SHOULD use an initial congestion window of ten times the maximum datagram size … while limiting the window to the larger of 14,720 bytes or twice the maximum datagram size.",
	)
)

// recRaw runs the raw handshake, lets the server's first 1-RTT packets
// (HANDSHAKE_DONE, NEW_TOKEN, tickets) settle, and returns the client
// with the server's max_ack_delay and ack_delay_exponent.
func (t *T) recRaw(ctx context.Context, label string, setup func(*rawClient)) (*rawClient, serverAckParams) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: label}, setup)
	rc.Receive(ctx, min(t.PTO(), 200*time.Millisecond), nil)
	return rc, ackParamsOf(rc.ServerTP())
}

// serverAckParams are the server's transport parameters that govern its
// acknowledgments.
type serverAckParams struct {
	maxAckDelay time.Duration
	exponent    uint64
}

func ackParamsOf(tp *wire.TransportParameters) serverAckParams {
	p := serverAckParams{maxAckDelay: wire.DefaultMaxAckDelay * time.Millisecond, exponent: wire.DefaultAckDelayExponent}
	if tp != nil {
		p.maxAckDelay = time.Duration(tp.MaxAckDelay) * time.Millisecond
		p.exponent = tp.AckDelayExponent
	}
	return p
}

// delayOf decodes an ACK frame's ACK Delay.
func (p serverAckParams) delayOf(a *wire.AckFrame) time.Duration {
	if p.exponent > 20 {
		return 0
	}
	return time.Duration(a.AckDelay<<p.exponent) * time.Microsecond
}

// ackFor returns the first server packet of conn in space whose ACK frame
// covers pn, with that frame.
func ackFor(ps []*packet, conn, space int, pn uint64) (*packet, *wire.AckFrame) {
	for _, p := range ps {
		if p.sent || p.conn != conn || p.space != space {
			continue
		}
		for _, f := range p.frames {
			if a, ok := f.(*wire.AckFrame); ok && a.Acks(pn) {
				return p, a
			}
		}
	}
	return nil, nil
}

// isAckOnly reports whether a packet carries an ACK frame and nothing
// ack-eliciting.
func isAckOnly(p *packet) bool {
	return !p.ackEliciting && p.has(wire.FrameTypeAck) || !p.ackEliciting && p.has(wire.FrameTypeAckECN)
}

func durations(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		if d < 0 {
			s = append(s, "none")
		} else {
			s = append(s, d.Round(100*time.Microsecond).String())
		}
	}
	return strings.Join(s, ", ")
}

func runAckHandshakeImmediate(ctx context.Context, t *T) {
	req := t.sc.Requirements[0]
	var lags []time.Duration
	var late []*packet
	var mad time.Duration
	stoodIn := 0
	for i := 0; i < 3 && ctx.Err() == nil; i++ {
		rc := t.rawEstablished(ctx, rawquic.Options{Label: fmt.Sprintf("connection %d", i+1)}, nil)
		rc.Receive(ctx, 50*time.Millisecond, nil)
		mad = ackParamsOf(rc.ServerTP()).maxAckDelay
		ps := t.rec.snapshot()
		var fin, firstOut *packet
		var firstIn *packet
		for _, p := range ps {
			if p.conn != rc.trace.id {
				continue
			}
			switch {
			case p.sent && firstOut == nil:
				firstOut = p
			case !p.sent && firstIn == nil && p.space >= 0:
				firstIn = p
			}
			if p.sent && p.space == 1 && p.has(wire.FrameTypeCrypto) && fin == nil {
				fin = p
			}
		}
		if fin == nil || firstOut == nil || firstIn == nil {
			t.Inconclusive("The tester could not find its Finished or the server's first packet in the record.")
		}
		rtt := firstIn.at.Sub(firstOut.at)
		// A server confirms the handshake on the client's Finished and
		// may discard its Handshake keys at once (RFC 9001 §4.9.2), so its
		// HANDSHAKE_DONE can stand in for the Handshake ACK.
		resp, _ := ackFor(ps, rc.trace.id, 1, fin.pn)
		if resp == nil {
			for _, p := range received(ps, rc.trace.id, 0) {
				if p.at.After(fin.at) && p.has(wire.FrameTypeHandshakeDone) {
					resp = p
					stoodIn++
					break
				}
			}
		}
		if resp == nil {
			lags = append(lags, -1)
			continue
		}
		lag := resp.at.Sub(fin.at) - rtt
		lags = append(lags, resp.at.Sub(fin.at))
		if lag > mad {
			late = append(late, resp)
		}
	}
	t.Fact("ack.handshake-delays", durations(lags))
	if stoodIn > 0 {
		t.Fact("ack.handshake-done-for-ack", stoodIn)
	}
	answered := 0
	for _, l := range lags {
		if l >= 0 {
			answered++
		}
	}
	if answered < 2 {
		t.Inconclusive(fmt.Sprintf("The server acknowledged the tester's Finished in only %d of 3 connections (delays %s).", answered, durations(lags)))
	}
	if len(late) >= 2 {
		t.Fail(
			"immediate",
			req,
			fmt.Sprintf(
				"In %d of 3 connections the server's acknowledgment of the tester's Handshake packet (the Finished) lagged the RTT by more than its max_ack_delay of %v (delays %s).",
				len(late),
				mad,
				durations(lags),
			),
			events(Response, late...)...)
		return
	}
	t.Pass(
		"immediate",
		req,
		fmt.Sprintf(
			"The server acknowledged the tester's Handshake packet (the Finished) at once in at least 2 of 3 connections (delays %s; the server's max_ack_delay is %v).",
			durations(lags),
			mad,
		),
	)
}

// isolatedPings sends n PINGs, each alone in its datagram, gap apart, and
// returns them.
func (t *T) isolatedPings(ctx context.Context, rc *rawClient, n int, gap time.Duration) []*packet {
	var pings []*packet
	for i := 0; i < n && ctx.Err() == nil; i++ {
		pings = append(pings, rc.burst(1, nil)...)
		rc.Receive(ctx, gap, nil)
	}
	return pings
}

// pingGap is the spacing of isolated PINGs: far above any max_ack_delay
// seen in practice (25 ms), so each PING is alone in flight; the
// catalogue's 500 ms would cost 5 s per target for no more evidence.
const pingGap = 150 * time.Millisecond

func runAck1RTTMaxAckDelay(ctx context.Context, t *T) {
	rc, ap := t.recRaw(ctx, "pings", nil)
	pings := t.isolatedPings(ctx, rc, 10, pingGap)
	ps := t.rec.snapshot()
	limit := 2 * (t.RTT() + ap.maxAckDelay)
	var delays, reported []time.Duration
	var late []*packet
	for _, p := range pings {
		a, f := ackFor(ps, rc.trace.id, 2, p.pn)
		if a == nil {
			delays = append(delays, -1)
			late = append(late, p)
			continue
		}
		d := a.at.Sub(p.at)
		delays = append(delays, d)
		reported = append(reported, ap.delayOf(f))
		if d > limit {
			late = append(late, a)
		}
	}
	t.Fact("ack.delays", durations(delays))
	t.Fact("ack.reported-delays", durations(reported))
	req := t.sc.Requirements[0]
	if len(reported) == 0 {
		t.requireControl(ctx, "The server acknowledged none of ten PINGs")
		t.Inconclusive("The server acknowledged none of ten isolated PINGs, although a normal exchange works.")
	}
	if len(late) >= 3 {
		t.Fail(
			"max-ack-delay",
			req,
			fmt.Sprintf(
				"%d of 10 isolated PINGs were acknowledged later than 2 × (RTT + max_ack_delay) = %v, or never (delays %s).",
				len(late),
				limit.Round(time.Millisecond),
				durations(delays),
			),
			events(Response, late...)...)
		return
	}
	t.Pass(
		"max-ack-delay",
		req,
		fmt.Sprintf(
			"%d of 10 isolated PINGs were acknowledged within 2 × (RTT + max_ack_delay) = %v (delays %s; ACK Delay fields %s).",
			10-len(late),
			limit.Round(time.Millisecond),
			durations(delays),
			durations(reported),
		),
	)
}

func runAckSingleAckOnly(ctx context.Context, t *T) {
	rc, _ := t.recRaw(ctx, "pings", nil)
	m := t.mark()
	pings := t.isolatedPings(ctx, rc, 10, pingGap)
	ps := t.rec.snapshot()[m:]
	req := t.sc.Requirements[0]
	judged := 0
	for i, ping := range pings {
		var end time.Time
		if i+1 < len(pings) {
			end = pings[i+1].at
		}
		alone := true
		var answers []*packet
		seen := map[uint64]bool{}
		for _, p := range ps {
			if p.conn != rc.trace.id || p.at.Before(ping.at) || (!end.IsZero() && !p.at.Before(end)) || p == ping {
				continue
			}
			if p.sent {
				alone = false
				continue
			}
			// Only ACK-only packets that acknowledge this PING answer
			// it; a delayed ACK of the one before may cross it.
			if p.space == 2 && isAckOnly(p) && !seen[p.pn] && ackedBy([]*packet{p}, rc.trace.id, 2, ping.pn) != nil {
				seen[p.pn] = true
				answers = append(answers, p)
			}
		}
		if !alone {
			continue
		}
		judged++
		if len(answers) >= 2 {
			t.Fail(
				"single",
				req,
				fmt.Sprintf(
					"The server answered one isolated PING (packet %d) with %d ACK-only packets, with nothing else from the tester in between.",
					ping.pn,
					len(answers),
				),
				evidence(events(Trigger, ping), events(Response, answers...))...)
			return
		}
	}
	if judged == 0 {
		t.Inconclusive("Every PING window also held other packets from the tester, so none could be judged.")
	}
	t.Pass("single", req, fmt.Sprintf("Each of %d isolated PINGs drew at most one ACK-only packet.", judged))
}

func runAckNotForAckOnly(ctx context.Context, t *T) {
	t.judgesUnsummarised() // server ACK frames are never summarised; the tester's own packets are in the ledger
	rc, _ := t.recRaw(ctx, "download", nil)
	body, err := rc.Fetch(ctx, t.profile.Target.LargePath, 20*time.Second)
	rc.Receive(ctx, t.PTO(), nil)
	if err != nil && len(body) == 0 {
		t.requireControl(ctx, "The large resource did not come")
		t.Inconclusive(fmt.Sprintf("The download of the large resource did not start: %v.", err))
	}
	// Every packet of the download counts, those the recorder summarised
	// too (their ledger entries keep the number and the ack-eliciting flag).
	ackOnly := map[uint64]bool{}
	var pending []uint64 // the tester's 1-RTT packets not yet acknowledged
	req := t.sc.Requirements[0]
	sentAckOnly, serverAckOnly := 0, 0
	var failSentence string
	var failAt *packet
	t.record(rc.trace.id).walk(func(v pktView) bool {
		if v.space() != 2 {
			return true
		}
		if v.sent() {
			pending = append(pending, v.pn())
			if v.p != nil && !v.p.ackEliciting || v.p == nil && !v.e.ackEliciting {
				ackOnly[v.pn()] = true
				sentAckOnly++
			}
			return true
		}
		p := v.p
		if p == nil {
			return true // a summarised server packet carries no ACK frame
		}
		var newly []uint64
		for _, f := range p.frames {
			a, ok := f.(*wire.AckFrame)
			if !ok {
				continue
			}
			pending = slices.DeleteFunc(pending, func(pn uint64) bool {
				if a.Acks(pn) {
					newly = append(newly, pn)
					return true
				}
				return false
			})
		}
		if p.ackEliciting || len(newly) == 0 {
			return true
		}
		serverAckOnly++
		for _, pn := range newly {
			if !ackOnly[pn] {
				return true
			}
		}
		failSentence = fmt.Sprintf(
			"The server sent an ACK-only packet (%d) whose only new acknowledgments were of the tester's ACK-only packets %v.",
			p.pn,
			newly[:min(len(newly), 8)],
		)
		failAt = p
		return false
	})
	if failAt != nil {
		t.Fail("ack-only", req, failSentence, events(Response, failAt)...)
		return
	}
	t.Fact("ack.tester-ack-only", sentAckOnly)
	t.Fact("ack.server-ack-only", serverAckOnly)
	if sentAckOnly == 0 {
		t.Inconclusive("The tester sent no ACK-only packet, so the condition was not provoked.")
	}
	t.Pass(
		"ack-only",
		req,
		fmt.Sprintf(
			"During the download the tester sent %d ACK-only packets; none of the server's %d ACK-only packets acknowledged only those.",
			sentAckOnly,
			serverAckOnly,
		),
	)
}

// ackSample sends one PING, waits for its acknowledgment and returns the
// path's RTT from it (the ACK Delay taken off), or false.
func (t *T) ackSample(ctx context.Context, rc *rawClient, ap serverAckParams) (time.Duration, bool) {
	ping := rc.burst(1, nil)[0]
	a := rc.receiveUntil(ctx, 2*(t.RTT()+ap.maxAckDelay)+100*time.Millisecond, t.mark()-1, func(p *packet) bool {
		return ackedBy([]*packet{p}, rc.trace.id, 2, ping.pn) != nil
	})
	if a == nil {
		return 0, false
	}
	_, f := ackFor([]*packet{a}, rc.trace.id, 2, ping.pn)
	return max(a.at.Sub(ping.at)-ap.delayOf(f), 0), true
}

func runAckReorderImmediate(ctx context.Context, t *T) {
	rc, ap := t.recRaw(ctx, "gap", nil)
	var pr promptness
	var trig []*packet
	for i := 0; i < 3 && ctx.Err() == nil; i++ {
		// Packet n is acknowledged first, so that the two-packet rule
		// (§13.2.2) cannot explain a prompt ACK of n + 2.
		rtt, ok := t.ackSample(ctx, rc, ap)
		if !ok {
			t.Inconclusive("The server did not acknowledge a PING, so the path's RTT could not be measured.")
		}
		rc.Receive(ctx, 10*time.Millisecond, nil)
		held := rc.NextPN[2]
		rc.NextPN[2]++
		p := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
		trig = append(trig, p)
		m := t.mark()
		a := rc.receiveUntil(ctx, 100*time.Millisecond, m, func(q *packet) bool { return ackedBy([]*packet{q}, rc.trace.id, 2, p.pn) != nil })
		d := time.Duration(-1)
		if a != nil {
			d = a.at.Sub(p.at)
		}
		pr.add(d, rtt, ap.maxAckDelay)
		rc.Receive(ctx, max(0, 100*time.Millisecond-time.Since(p.at)), nil)
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{PN: &held})
		rc.Receive(ctx, 50*time.Millisecond, nil)
	}
	t.Fact("ack.gap-delays", durations(pr.delays))
	req := t.sc.Requirements[0]
	switch {
	case pr.late >= 2:
		t.Warn(
			"gap",
			req,
			fmt.Sprintf(
				"A PING sent after a gap of one packet number was acknowledged late in %d of 3 tries (delays %s; max_ack_delay %v): the ACK waited for the delay timer instead of reporting the gap at once.",
				pr.late,
				durations(pr.delays),
				ap.maxAckDelay,
			),
			events(Trigger, trig...)...)
	case pr.prompt >= 2:
		t.Pass(
			"gap",
			req,
			fmt.Sprintf(
				"A PING sent after a gap of one packet number was acknowledged within the RTT + 5 ms in %d of 3 tries (delays %s).",
				pr.prompt,
				durations(pr.delays),
			),
			events(Trigger, trig...)...)
	default:
		t.Inconclusive(
			fmt.Sprintf(
				"The acknowledgments of PINGs after a gap were neither clearly prompt nor clearly delayed (delays %s; max_ack_delay %v).",
				durations(pr.delays),
				ap.maxAckDelay,
			),
		)
	}
}

func runAckEverySecond(ctx context.Context, t *T) {
	rc, _ := t.recRaw(ctx, "bursts", nil)
	m := t.mark()
	var sent int
	// The PINGs of a burst leave 2 ms apart: back-to-back datagrams on
	// loopback reach the server in one read batch, and one ACK for a
	// batch says nothing about the rule.
	for i := 0; i < 5 && ctx.Err() == nil; i++ {
		for j := 0; j < 10; j++ {
			sent += len(rc.burst(1, nil))
			rc.Receive(ctx, 2*time.Millisecond, nil)
		}
		rc.Receive(ctx, 80*time.Millisecond, nil)
	}
	rc.Receive(ctx, 50*time.Millisecond, nil)
	acks := t.ackPackets(rc.trace.id, m)
	ratio := float64(acks) / float64(sent)
	t.Fact("ack.ratio", fmt.Sprintf("%d ACK packets for %d ack-eliciting packets (%.2f)", acks, sent, ratio))
	ackRatioLater(ctx, t, rc)
	req := t.sc.Requirements[0]
	if acks == 0 {
		t.Inconclusive("The server acknowledged none of the 50 PINGs.")
	}
	if ratio < 0.4 {
		t.Warn(
			"ratio",
			req,
			fmt.Sprintf(
				"Over five bursts of ten PINGs 2 ms apart the server sent %d packets carrying ACK frames for %d ack-eliciting packets (%.2f per packet; one per two is 0.5).",
				acks,
				sent,
				ratio,
			),
		)
		return
	}
	t.Pass(
		"ratio",
		req,
		fmt.Sprintf(
			"Over five bursts of ten PINGs 2 ms apart the server sent %d packets carrying ACK frames for %d ack-eliciting packets (%.2f per packet).",
			acks,
			sent,
			ratio,
		),
	)
}

// ackRatioLater records the ACK ratio once the connection's packet
// numbers are past 100: an implementation may acknowledge less often on
// a connection that has lasted (x/net acknowledges every 10th packet
// there). RFC 9000 §13.2.2 leaves room for it: "Knowledge of network
// conditions, knowledge of the peer's congestion controller, or further
// research and experimentation might suggest alternative acknowledgment
// strategies with better performance characteristics." It is a fact, not
// a verdict. The PINGs leave 2 ms apart without pause, so that ten of them
// arrive well within any max_ack_delay and the count, not the timer,
// decides the ACKs.
func ackRatioLater(ctx context.Context, t *T, rc *rawClient) {
	for rc.NextPN[2] <= 100 && ctx.Err() == nil {
		rc.burst(1, nil)
		rc.Receive(ctx, 2*time.Millisecond, nil)
	}
	rc.Receive(ctx, 80*time.Millisecond, nil)
	m := t.mark()
	sent := 0
	for i := 0; i < 50 && ctx.Err() == nil; i++ {
		sent += len(rc.burst(1, nil))
		rc.Receive(ctx, 2*time.Millisecond, nil)
	}
	rc.Receive(ctx, 50*time.Millisecond, nil)
	if ctx.Err() != nil || sent == 0 {
		return
	}
	acks := t.ackPackets(rc.trace.id, m)
	t.Fact(
		"ack.ratio-above-pn-100",
		fmt.Sprintf("%d ACK packets for %d ack-eliciting packets numbered above 100 (%.2f)", acks, sent, float64(acks)/float64(sent)),
	)
}

// ecnMarker marks the raw client's datagrams: mark chooses the codepoint
// from the packet the datagram ends with.
func ecnMarker(rc *rawClient, mark func(p *packet) uint8) {
	rc.Paths[0].ECN = func() uint8 {
		p := rc.LastSent()
		if p == nil {
			return 0
		}
		return mark(p)
	}
}

// ecnAcks returns the server's ACK frames in space 2 of conn, in order,
// with the packet of each.
func ecnAcks(ps []*packet, conn int) (all []frameAt, withCounts int) {
	for _, fa := range framesOf[*wire.AckFrame](ps, conn, 0, false) {
		if fa.p.space != 2 {
			continue
		}
		all = append(all, fa)
		if fa.f.(*wire.AckFrame).ECN {
			withCounts++
		}
	}
	return all, withCounts
}

func runAckCEImmediate(ctx context.Context, t *T) {
	t.requireECNSock()
	var ce bool
	var ceMu sync.Mutex
	rc, ap := t.recRaw(ctx, "ce", func(rc *rawClient) {
		ecnMarker(rc, func(*packet) uint8 {
			ceMu.Lock()
			defer ceMu.Unlock()
			if ce {
				return 3
			}
			return 2
		})
	})
	if _, ok := t.ackSample(ctx, rc, ap); !ok {
		t.Inconclusive("The server did not acknowledge a PING.")
	}
	if _, n := ecnAcks(t.rec.snapshot(), rc.trace.id); n == 0 {
		t.Unsupported("The server's ACK frames carry no ECN counts, although the tester's packets were marked ECT(0).")
	}
	var pr promptness
	var trig []*packet
	counted := 0
	for i := 0; i < 3 && ctx.Err() == nil; i++ {
		rtt, ok := t.ackSample(ctx, rc, ap)
		if !ok {
			t.Inconclusive("The server stopped acknowledging PINGs.")
		}
		rc.Receive(ctx, 10*time.Millisecond, nil)
		ceMu.Lock()
		ce = true
		ceMu.Unlock()
		p := rc.burst(1, nil)[0]
		ceMu.Lock()
		ce = false
		ceMu.Unlock()
		trig = append(trig, p)
		m := t.mark()
		a := rc.receiveUntil(ctx, 100*time.Millisecond, m, func(q *packet) bool { return ackedBy([]*packet{q}, rc.trace.id, 2, p.pn) != nil })
		d := time.Duration(-1)
		if a != nil {
			d = a.at.Sub(p.at)
			if _, f := ackFor([]*packet{a}, rc.trace.id, 2, p.pn); f != nil && f.ECN && f.ECNCE > 0 {
				counted++
			}
		}
		pr.add(d, rtt, ap.maxAckDelay)
		rc.Receive(ctx, 50*time.Millisecond, nil)
	}
	t.Fact("ack.ce-delays", durations(pr.delays))
	t.Fact("ecn.ce-counted", fmt.Sprintf("%d of 3", counted))
	req := t.sc.Requirements[0]
	switch {
	case pr.late >= 2:
		t.Warn(
			"ce",
			req,
			fmt.Sprintf(
				"A PING marked CE was acknowledged late in %d of 3 tries (delays %s; max_ack_delay %v).",
				pr.late,
				durations(pr.delays),
				ap.maxAckDelay,
			),
			events(Trigger, trig...)...)
	case pr.prompt >= 2:
		t.Pass(
			"ce",
			req,
			fmt.Sprintf("A PING marked CE was acknowledged within the RTT + 5 ms in %d of 3 tries (delays %s).", pr.prompt, durations(pr.delays)),
			events(Trigger, trig...)...)
	default:
		t.Inconclusive(fmt.Sprintf("The acknowledgments of CE-marked PINGs were neither clearly prompt nor clearly delayed (delays %s).", durations(pr.delays)))
	}
}

func runAckIncludesLargest(ctx context.Context, t *T) {
	rc, _ := t.recRaw(ctx, "traffic", nil)
	t.isolatedPings(ctx, rc, 5, 20*time.Millisecond)
	rc.Fetch(ctx, t.profile.SmallPath, 3*time.Second)
	rc.burst(10, nil)
	rc.Receive(ctx, 100*time.Millisecond, nil)
	req := t.sc.Requirements[0]
	n, missing := ackLargestCheck(t.rec.snapshot(), rc.trace.id, t.RTT())
	if n == 0 {
		t.Inconclusive("The server sent no ACK frame in 1-RTT packets.")
	}
	if len(missing) >= 3 && len(missing)*10 > n {
		t.Warn(
			"largest",
			req,
			fmt.Sprintf("%d of %d ACK frames left out the largest packet number the tester had sent at least one RTT earlier.", len(missing), n),
			events(Response, missing[:min(len(missing), 4)]...)...)
		return
	}
	t.Pass(
		"largest",
		req,
		fmt.Sprintf("%d of %d ACK frames included the largest packet number the tester had sent at least one RTT earlier.", n-len(missing), n),
	)
}

// ackLargestCheck returns how many 1-RTT ACK frames the server sent on
// conn and the packets whose ACK frame did not reach the largest packet
// number the tester had sent at least one RTT (plus 5 ms) before.
func ackLargestCheck(ps []*packet, conn int, rtt time.Duration) (n int, missing []*packet) {
	var sent []*packet
	for _, p := range ps {
		if p.conn != conn || p.space != 2 {
			continue
		}
		if p.sent {
			sent = append(sent, p)
			continue
		}
		for _, f := range p.frames {
			a, ok := f.(*wire.AckFrame)
			if !ok {
				continue
			}
			n++
			var largest uint64
			found := false
			for _, s := range sent {
				if s.at.Add(rtt+5*time.Millisecond).Before(p.at) && (!found || s.pn > largest) {
					largest, found = s.pn, true
				}
			}
			if found && a.LargestAcked() < largest {
				missing = append(missing, p)
			}
		}
	}
	return n, missing
}

func runECNFeedback(ctx context.Context, t *T) {
	t.requireECNSock()
	rc, _ := t.recRaw(ctx, "ect0", func(rc *rawClient) { ecnMarker(rc, func(*packet) uint8 { return 2 }) })
	rc.Fetch(ctx, t.profile.SmallPath, 3*time.Second)
	t.isolatedPings(ctx, rc, 10, 10*time.Millisecond)
	rc.Receive(ctx, 50*time.Millisecond, nil)
	ps := t.rec.snapshot()
	acks, n := ecnAcks(ps, rc.trace.id)
	req := t.sc.Requirements[0]
	if len(acks) == 0 {
		t.Inconclusive("The server sent no ACK frame in 1-RTT packets.")
	}
	if n == 0 {
		t.Unsupported(
			fmt.Sprintf(
				"None of the server's %d ACK frames carries ECN counts although every tester packet was marked ECT(0): the server does not read or report ECN.",
				len(acks),
			),
		)
	}
	// The last ACK frame with counts: ECT(0) must cover every tester
	// 1-RTT packet it acknowledges, and no more than were sent.
	var last frameAt
	for _, fa := range acks {
		if fa.f.(*wire.AckFrame).ECN {
			last = fa
		}
	}
	a := last.f.(*wire.AckFrame)
	var ackedMarked, sentMarked int
	for _, p := range ps {
		if p.sent && p.conn == rc.trace.id && p.space == 2 && p.at.Before(last.p.at) {
			sentMarked++
			if _, f := ackFor(ps[:slices.Index(ps, last.p)+1], rc.trace.id, 2, p.pn); f != nil {
				ackedMarked++
			}
		}
	}
	t.Fact(
		"ecn.feedback",
		fmt.Sprintf("ECT(0)=%d ECT(1)=%d CE=%d in the last ACK; %d marked packets acknowledged of %d sent", a.ECT0, a.ECT1, a.ECNCE, ackedMarked, sentMarked),
	)
	if a.ECT0 < uint64(ackedMarked) || a.ECT0+a.ECT1+a.ECNCE > uint64(sentMarked) {
		t.Inconclusive(
			fmt.Sprintf(
				"The server reports ECN counts, but ECT(0)=%d does not match the %d ECT(0)-marked packets it acknowledged (of %d sent); the path may re-mark.",
				a.ECT0,
				ackedMarked,
				sentMarked,
			),
			events(Response, last.p)...)
	}
	t.Pass(
		"feedback",
		req,
		fmt.Sprintf(
			"The server's ACK frames carry ECN counts (%d of %d), and the last reports ECT(0)=%d for the %d ECT(0)-marked packets it acknowledged.",
			n,
			len(acks),
			a.ECT0,
			ackedMarked,
		),
		events(Response, last.p)...)
}

// onLoopback reports whether the target is on a loopback address, where
// nothing on the path can re-mark ECN.
func (t *T) onLoopback() bool {
	ap, err := netip.ParseAddrPort(t.profile.Target.Address)
	return err == nil && ap.Addr().IsLoopback()
}

func runECNCEFeedback(ctx context.Context, t *T) {
	t.requireECNSock()
	rc, _ := t.recRaw(ctx, "ce-every-tenth", func(rc *rawClient) {
		ecnMarker(rc, func(p *packet) uint8 {
			if p.space == 2 && p.pn%10 == 9 {
				return 3
			}
			return 2
		})
	})
	rc.Fetch(ctx, t.profile.SmallPath, 3*time.Second)
	t.isolatedPings(ctx, rc, 30, 5*time.Millisecond)
	rc.Receive(ctx, 50*time.Millisecond, nil)
	ps := t.rec.snapshot()
	acks, n := ecnAcks(ps, rc.trace.id)
	if n == 0 {
		t.Unsupported(fmt.Sprintf("None of the server's %d ACK frames carries ECN counts.", len(acks)))
	}
	var maxCE uint64
	var lastECN *packet
	for _, fa := range acks {
		if a := fa.f.(*wire.AckFrame); a.ECN {
			maxCE = max(maxCE, a.ECNCE)
			lastECN = fa.p
		}
	}
	ackedCE := 0
	for _, p := range ps {
		if p.sent && p.conn == rc.trace.id && p.space == 2 && p.pn%10 == 9 {
			if a, _ := ackFor(ps, rc.trace.id, 2, p.pn); a != nil {
				ackedCE++
			}
		}
	}
	t.Fact("ecn.ce-feedback", fmt.Sprintf("largest ECN-CE count %d; %d CE-marked packets acknowledged", maxCE, ackedCE))
	req := t.sc.Requirements[0]
	switch {
	case ackedCE == 0:
		t.Inconclusive("The server acknowledged none of the CE-marked packets.")
	case maxCE >= uint64(ackedCE):
		t.Pass(
			"ce-counted",
			req,
			fmt.Sprintf("The server's ECN-CE count reached %d for the %d CE-marked packets it acknowledged.", maxCE, ackedCE),
			events(Response, lastECN)...)
	case maxCE == 0 && t.onLoopback():
		t.Fail(
			"ce-counted",
			req,
			fmt.Sprintf(
				"The server reports ECN counts but its ECN-CE count stayed 0 although it acknowledged %d CE-marked packets on loopback, where nothing re-marks.",
				ackedCE,
			),
			events(Response, lastECN)...)
	default:
		t.Inconclusive(
			fmt.Sprintf("The server's ECN-CE count (%d) is below the %d CE-marked packets it acknowledged; the path may re-mark.", maxCE, ackedCE),
			events(Response, lastECN)...)
	}
}

// serverMarks counts the server's 1-RTT packets of conn by ECN codepoint,
// from index from.
func serverMarks(ps []*packet, conn int, from time.Time) (counts [4]int) {
	for _, p := range ps {
		if !p.sent && p.conn == conn && p.space >= 0 && !p.at.Before(from) {
			counts[p.ecn&3]++
		}
	}
	return counts
}

func marksString(c [4]int) string {
	return fmt.Sprintf("not-ECT %d, ECT(1) %d, ECT(0) %d, CE %d", c[0], c[1], c[2], c[3])
}

func runECNServerMarks(ctx context.Context, t *T) {
	t.requireECNSock()
	rc, _ := t.recRaw(ctx, "ecn-feedback", func(rc *rawClient) { rc.ECNFeedback = true })
	start := time.Now()
	for i := 0; i < 3; i++ {
		rc.Fetch(ctx, t.profile.SmallPath, 3*time.Second)
	}
	mid := time.Now()
	rc.Receive(ctx, t.PTO(), nil)
	rc.Fetch(ctx, t.profile.SmallPath, 3*time.Second)
	ps := t.rec.snapshot()
	all := serverMarks(ps, rc.trace.id, time.Time{})
	late := serverMarks(ps, rc.trace.id, mid)
	t.Fact("ecn.marking", marksString(all))
	t.Fact("ecn.marking-after-validation", marksString(late))
	_ = start
	switch {
	case all[1]+all[2]+all[3] == 0:
		t.Observe("marking", fmt.Sprintf("The server marked none of its packets (%s).", marksString(all)))
	case late[1]+late[2] > 0:
		t.Observe(
			"marking",
			fmt.Sprintf(
				"The server marks its packets and kept marking after the tester reported correct counts (%s; later: %s).",
				marksString(all),
				marksString(late),
			),
		)
	default:
		t.Observe(
			"marking",
			fmt.Sprintf(
				"The server marked packets early and stopped later although the tester's counts were correct (%s; later: %s).",
				marksString(all),
				marksString(late),
			),
		)
	}
}

func runECNValidationFailure(ctx context.Context, t *T) {
	t.requireECNSock()
	// The raw client's ACK frames carry no ECN counts by default, which
	// fails the server's ECN validation (RFC 9000 §13.4.2.1) once it
	// has marked packets.
	rc, _ := t.recRaw(ctx, "no-counts", nil)
	rc.Fetch(ctx, t.profile.SmallPath, 3*time.Second)
	ps := t.rec.snapshot()
	early := serverMarks(ps, rc.trace.id, time.Time{})
	t.Fact("ecn.marking", marksString(early))
	if early[1]+early[2] == 0 {
		t.Unsupported(fmt.Sprintf("The server does not mark its packets ECT (%s), so there is no validation to fail (needs ecn-mark).", marksString(early)))
	}
	// The first tester ACK after a marked server packet starts the
	// failure; marking must stop within one settle window.
	var firstMarked time.Time
	for _, p := range ps {
		if !p.sent && p.conn == rc.trace.id && (p.ecn == 1 || p.ecn == 2) {
			firstMarked = p.at
			break
		}
	}
	rc.Receive(ctx, t.Settle(), nil)
	after := time.Now()
	rc.Fetch(ctx, t.profile.SmallPath, 3*time.Second)
	rc.isolatedPingsRaw(ctx, 5, 10*time.Millisecond)
	ps = t.rec.snapshot()
	late := serverMarks(ps, rc.trace.id, after)
	t.Fact("ecn.marking-after-failure", marksString(late))
	req := t.sc.Requirements[0]
	if late[0]+late[1]+late[2]+late[3] == 0 {
		t.Inconclusive("The server sent nothing after the settle window, so whether it still marks is unknown.")
	}
	if late[1]+late[2] > 0 {
		var ev []*packet
		for _, p := range received(ps, rc.trace.id, 0) {
			if p.at.After(after) && (p.ecn == 1 || p.ecn == 2) {
				ev = append(ev, p)
			}
		}
		t.Fail(
			"disabled",
			req,
			fmt.Sprintf(
				"The tester's ACK frames never carried ECN counts, so the server's validation failed, yet %v after its first marked packet it still marked %d packets ECT (%s).",
				after.Sub(firstMarked).Round(time.Millisecond),
				late[1]+late[2],
				marksString(late),
			),
			events(Response, lastN(ev, 3)...)...)
		return
	}
	t.Pass(
		"disabled",
		req,
		fmt.Sprintf(
			"The server marked its early packets (%s) and, with the tester's ACK frames carrying no ECN counts, stopped marking (%s after one settle window).",
			marksString(early),
			marksString(late),
		),
	)
}

// isolatedPingsRaw sends n PINGs gap apart.
func (rc *rawClient) isolatedPingsRaw(ctx context.Context, n int, gap time.Duration) {
	for i := 0; i < n && ctx.Err() == nil; i++ {
		rc.burst(1, nil)
		rc.Receive(ctx, gap, nil)
	}
}

// receiveStream receives until the response stream of req holds n
// contiguous bytes (framing included: an h3 DATA frame may span the
// whole body), completes, or d passes; it returns the stream's length.
func (rc *rawClient) receiveStream(ctx context.Context, req *rawquic.Request, n int, d time.Duration) (int, bool) {
	got := func() (int, bool) {
		s := rc.Stream(req.ID)
		if s == nil {
			return 0, false
		}
		return s.Received(), s.Complete()
	}
	rc.Receive(ctx, d, func() bool {
		l, done := got()
		return l >= n || done
	})
	return got()
}

// clusters splits the server's packets of conn after from into groups
// separated by silences longer than gap.
func clusters(ps []*packet, conn int, from time.Time, gap time.Duration) [][]*packet {
	var out [][]*packet
	var last time.Time
	for _, p := range ps {
		if p.sent || p.conn != conn || p.space < 0 || p.at.Before(from) {
			continue
		}
		if len(out) == 0 || p.at.Sub(last) > gap {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], p)
		last = p.at
	}
	return out
}

func runRecPTOBackoff(ctx context.Context, t *T) {
	rc, _ := t.recRaw(ctx, "silent-mid-download", nil)
	req := rc.Request(t.profile.Target.LargePath)
	if n, done := rc.receiveStream(ctx, req, 64<<10, 5*time.Second); done || n < 64<<10 {
		t.Inconclusive(fmt.Sprintf("The download did not reach 64 KiB while still running (%d bytes, complete %v).", n, done))
	}
	stop := time.Now()
	rc.NoAcks = true
	rc.AckOwed[2] = false
	var cs [][]*packet
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		rc.Receive(ctx, 100*time.Millisecond, nil)
		cs = clusters(t.rec.snapshot(), rc.trace.id, stop, 15*time.Millisecond)
		if len(cs) >= 6 {
			break
		}
	}
	// Resume, so the server's connection ends well.
	rc.NoAcks = false
	rc.AckOwed[2] = true
	rc.Flush()
	rc.Receive(ctx, 100*time.Millisecond, nil)
	if len(cs) < 3 {
		t.Inconclusive(
			fmt.Sprintf("After the tester went silent the server sent %d groups of packets in 3 s; at least two probes are needed.", max(len(cs)-1, 0)),
		)
	}
	// cs[0] is the rest of the flight; each later group is one PTO's
	// probes.
	probes := cs[1:]
	var starts []time.Duration
	var intervals []time.Duration
	prev := cs[0][len(cs[0])-1].at
	for _, g := range probes {
		starts = append(starts, g[0].at.Sub(stop))
		intervals = append(intervals, g[0].at.Sub(prev))
		prev = g[0].at
	}
	t.Fact("pto.schedule", durations(starts))
	t.Fact("pto.intervals", durations(intervals))
	for _, g := range probes {
		for _, p := range g {
			if !p.ackEliciting {
				t.Fail(
					"ack-eliciting",
					t.sc.Requirements[1],
					fmt.Sprintf(
						"A packet the server sent on a PTO (packet %d, %v after the tester went silent) is not ack-eliciting.",
						p.pn,
						p.at.Sub(stop).Round(time.Millisecond),
					),
					events(Response, p)...)
				return
			}
		}
	}
	t.Pass("ack-eliciting", t.sc.Requirements[1], fmt.Sprintf("All %d groups of probe packets were ack-eliciting.", len(probes)))
	flat := 0
	for i := 1; i < len(intervals); i++ {
		if float64(intervals[i]) <= 1.2*float64(intervals[i-1]) {
			flat++
			if flat >= 3 {
				t.Fail(
					"backoff",
					t.sc.Requirements[0],
					fmt.Sprintf("Three successive probe intervals failed to grow (intervals %s): the PTO period did not double.", durations(intervals)),
					events(Response, probes[i][0])...)
				return
			}
		} else {
			flat = 0
		}
	}
	if len(intervals) < 3 {
		t.Observe("backoff", fmt.Sprintf("Only %d probe intervals were seen (%s), too few to judge the backoff.", len(intervals), durations(intervals)))
		return
	}
	t.Pass("backoff", t.sc.Requirements[0], fmt.Sprintf("The probe intervals grew (%s).", durations(intervals)))
}

func runRecServerHandshakeProbe(ctx context.Context, t *T) {
	// One Initial and then silence, until a datagram comes after the
	// first flight (a probe) or 3.2 s pass: the initial PTO is about 1 s.
	// A Retry is answered (with the ClientHello again and the token) but
	// is not part of the flight: it creates no state on the server (RFC
	// 9000 §17.2.5), so nothing of it is retransmitted, and a server that
	// always sends Retry must be judged on the flight that follows.
	rc := t.newRaw(ctx, rawquic.Options{Label: "silent"})
	rc.Silent = true
	rc.SendClientHello(ctx, 1200)
	pick := rc.onPath(0)
	flightOf := func(dgs []datagramRec) (first time.Time, flight, later int, probeAt time.Duration) {
		for _, d := range dgs {
			if d.sent || !pick(d) || isRetryDatagram(d.b) {
				continue
			}
			if first.IsZero() {
				first = d.at
			}
			if d.at.Sub(first) < 300*time.Millisecond {
				flight += d.size
				continue
			}
			if later == 0 {
				probeAt = d.at.Sub(first)
			}
			later += d.size
		}
		return
	}
	rc.Receive(ctx, 3200*time.Millisecond, func() bool {
		t.rec.mu.Lock()
		defer t.rec.mu.Unlock()
		_, _, later, _ := flightOf(t.rec.allDatagramsLocked())
		return later > 0
	})
	sent, _, _ := t.ampCounts(rc)
	t.rec.mu.Lock()
	first, flight, later, probeAt := flightOf(t.rec.allDatagramsLocked())
	t.rec.mu.Unlock()
	req := t.sc.Requirements[0]
	if first.IsZero() {
		t.requireControl(ctx, "The server sent nothing to the silent client")
		t.Inconclusive("The server sent nothing to a client whose first Initial it never saw acknowledged, although a normal handshake works.")
	}
	room := 3*sent - flight
	t.Fact("amplification.first-flight", flight)
	t.Fact("pto.schedule", firstFlightSchedule(t.rec.snapshot(), rc.trace.id))
	switch {
	case later > 0:
		t.Pass(
			"probe",
			req,
			fmt.Sprintf("After a first flight of %d bytes the server probed %v later (%d more bytes).", flight, probeAt.Round(time.Millisecond), later),
		)
	case room < 1200:
		t.Pass(
			"probe",
			req,
			fmt.Sprintf("The server's first flight of %d bytes used the 3× allowance of the %d bytes it received, so no probe could follow.", flight, sent),
		)
	default:
		t.Fail(
			"probe",
			req,
			fmt.Sprintf(
				"The server sent a first flight of %d bytes, leaving %d bytes of its 3× allowance, and then nothing for 3.2 s: no probe when its PTO (about 1 s) expired.",
				flight,
				room,
			),
			events(Context, lastN(received(t.rec.snapshot(), rc.trace.id, 0), 2)...)...)
	}
}

// lossPattern drops two consecutive short-header datagrams in every 40
// (5 %), at an offset that moves from block to block.
type lossPattern struct {
	n, dropped int
}

func (l *lossPattern) drop(b []byte) bool {
	if len(b) == 0 || b[0]&0x80 != 0 {
		return false
	}
	i := l.n
	l.n++
	block, off := i/40, i%40
	at := 5 + (block*13)%30
	if off == at || off == at+1 {
		l.dropped++
		return true
	}
	return false
}

func runRecTransferWithLoss(ctx context.Context, t *T) {
	path := t.profile.Target.LargePath
	clean, _ := t.recRaw(ctx, "clean", nil)
	creq := clean.Request(path)
	if _, err := clean.Await(ctx, creq, 15*time.Second); err != nil {
		t.Inconclusive(fmt.Sprintf("The large resource did not come without loss: %v.", err))
	}
	want := clean.BodyDigest(creq)
	lp := &lossPattern{}
	rc, _ := t.recRaw(ctx, "lossy", func(rc *rawClient) {})
	rc.DropIn = func(_ int, b []byte) bool { return lp.drop(b) }
	start := time.Now()
	req := rc.Request(path)
	_, err := rc.Await(ctx, req, 30*time.Second)
	took := time.Since(start)
	got := rc.BodyDigest(req)
	t.Fact("loss.dropped-datagrams", lp.dropped)
	t.Fact("loss.transfer-time", took.Round(time.Millisecond).String())
	if err != nil {
		t.Inconclusive(
			fmt.Sprintf("With %d of %d server datagrams dropped the download stalled: %v (%d of %d bytes).", lp.dropped, lp.n, err, got.Len, want.Len),
		)
	}
	if got != want {
		t.Inconclusive(fmt.Sprintf("With loss the body differs from the clean download (%v; clean %v).", got, want))
	}
	t.Pass(
		"intact",
		t.sc.Requirements[0],
		fmt.Sprintf(
			"With %d of %d server 1-RTT datagrams dropped (5 %%, in pairs) the %d-byte resource completed intact in %v.",
			lp.dropped,
			lp.n,
			got.Len,
			took.Round(time.Millisecond),
		),
	)
}

// isRetryDatagram reports whether a datagram holds a Retry packet (of any
// version the header parser knows).
func isRetryDatagram(b []byte) bool {
	if !wire.IsLongHeader(b) {
		return false
	}
	h, err := wire.ParseHeader(b, 0)
	return err == nil && h.Type == wire.PacketTypeRetry
}

// roundTrip is the tester's emulated round trip in rec-loss-reduces-flight:
// it acknowledges once per round, so the server's flight per round is its
// congestion window.
const roundTrip = 50 * time.Millisecond

// flightRounds downloads the large resource acknowledging once per
// round, drops three consecutive datagrams in the first round that
// follows one of at least 30 000 bytes, and returns the bytes per round,
// the round that held the loss (-1 when none) and whether the transfer
// was still running after the last round, which is the second after the
// loss (lossWatchRounds).
func (t *T) flightRounds(ctx context.Context, label string) (rounds []int, lossRound int, running bool) {
	armed, skip, drop := false, 0, 0
	rc, _ := t.recRaw(ctx, label, func(rc *rawClient) {})
	rc.NoAcks = true
	rc.DropIn = func(_ int, b []byte) bool {
		if !armed || len(b) == 0 || b[0]&0x80 != 0 {
			return false
		}
		if skip > 0 {
			skip--
			return false
		}
		if drop > 0 {
			drop--
			return true
		}
		return false
	}
	req := rc.Request(t.profile.Target.LargePath)
	lossRound = -1
	for r := 0; r < 14 && ctx.Err() == nil; r++ {
		from := time.Now()
		rc.Receive(ctx, roundTrip, nil)
		n, _ := t.datagramBytes(func(d datagramRec) bool {
			return !d.at.Before(from) && d.peer == rc.Paths[0].Peer && d.local == rc.Paths[0].Local
		}, false, time.Time{})
		rounds = append(rounds, n)
		if armed && lossRound < 0 {
			lossRound = r
		}
		if !armed && r >= 1 && n >= 30000 {
			armed, skip, drop = true, 4, 3
		}
		done := rc.ResponseDone(req)
		if lossRound >= 0 && r == lossRound+lossWatchRounds {
			running = !done
			break
		}
		if done {
			break
		}
		rc.Send1RTT([]wire.Frame{rc.AckFrame(2)}, rawquic.ShortOpts{})
	}
	return rounds, lossRound, running
}

// lossWatchRounds is how many rounds after the one that lost three
// packets rec-loss-reduces-flight watches: the ACK that ends the loss
// round reports the loss by packet threshold, and a sender with a larger
// threshold (RFC 9002 §6.1.1 only sets the floor) declares it by time one
// round later.
const lossWatchRounds = 2

// lossReaction is what the bytes per round of one connection show about
// the window after a loss. RFC 9002 §7.3.2: “Implementations MAY reduce
// the congestion window immediately upon entering a recovery period or use
// other mechanisms, such as Proportional Rate Reduction …, to reduce the
// congestion window more gradually.”
type lossReaction int

const (
	lossUnknown  lossReaction = iota // the tester cannot tell
	lossReduced                      // the window after the loss fell short of the trend before it
	lossNoAction                     // the window went on growing as before, data still waiting
)

// judgeLossRounds compares the window the server showed per round trip
// before and after the loss (the tester acknowledges once per round, so
// each round's bytes are what the server's window let it send). Before
// the loss the window grew by g per round (rounds[lr] / rounds[lr-1]). A
// sender that reduces its window shows a round after the loss that grew
// by less than 0.8 × g: in slow start, halving a window that would have
// doubled leaves the next flight about as large as the last one, so a
// smaller next flight is not what to look for. A sender that went on
// growing by at least 0.8 × g in every round watched, while still
// window-limited (g ≥ 1.5) and with data left to send, showed no action.
// Anything else — no growth before the loss (a sender limited by pacing,
// its application or flow control shows no window), too few rounds, a
// transfer that ended — cannot be told.
func judgeLossRounds(rounds []int, lr int, running bool) (lossReaction, string) {
	if lr < 1 || lr+1 >= len(rounds) || rounds[lr-1] <= 0 {
		return lossUnknown, "too few rounds around the loss"
	}
	g := float64(rounds[lr]) / float64(rounds[lr-1])
	prev := rounds[lr]
	for _, n := range rounds[lr+1:] {
		if prev > 0 && float64(n)/float64(prev) < 0.8*g {
			return lossReduced, fmt.Sprintf(
				"the window grew ×%.2f per round before the loss and ×%.2f in the round after round %d",
				g,
				float64(n)/float64(prev),
				lr,
			)
		}
		prev = n
	}
	if g < 1.5 {
		return lossUnknown, fmt.Sprintf("the window grew only ×%.2f per round before the loss, so the flights do not show the window", g)
	}
	if !running || len(rounds) < lr+1+lossWatchRounds {
		return lossUnknown, "the transfer ended before the rounds after the loss could show the window"
	}
	return lossNoAction, fmt.Sprintf(
		"the window grew ×%.2f per round before the loss and at least ×%.2f in each of the %d rounds after it",
		g,
		0.8*g,
		lossWatchRounds,
	)
}

func runRecLossReducesFlight(ctx context.Context, t *T) {
	req := t.sc.Requirements[0]
	noAction := 0
	var all, why []string
	for rep := 1; rep <= 3 && ctx.Err() == nil; rep++ {
		rounds, lr, running := t.flightRounds(ctx, fmt.Sprintf("rounds %d", rep))
		all = append(all, fmt.Sprint(rounds))
		if lr < 0 {
			why = append(why, "no loss")
			continue
		}
		r, reason := judgeLossRounds(rounds, lr, running)
		why = append(why, reason)
		switch r {
		case lossReduced:
			t.Fact("loss.flight-per-round", all)
			t.Pass(
				"reduces",
				req,
				fmt.Sprintf(
					"Acknowledging once per %v, with three packets lost in round %d, %s: the server reduced its window (bytes per round: %v).",
					roundTrip,
					lr,
					reason,
					rounds,
				),
			)
			return
		case lossNoAction:
			noAction++
		}
	}
	t.Fact("loss.flight-per-round", all)
	if noAction == 3 {
		t.Fail(
			"reduces",
			req,
			fmt.Sprintf(
				"In three connections the server's window went on growing after a reported loss of three packets, with data still to send and credit (%s; bytes per round: %s).",
				strings.Join(why, "; "),
				strings.Join(all, "; "),
			),
		)
		return
	}
	t.Inconclusive(
		fmt.Sprintf(
			"The bytes per round trip do not show whether the server reduced its window after the loss (%s; bytes per round: %s).",
			strings.Join(why, "; "),
			strings.Join(all, "; "),
		),
	)
}

// isPMTUProbe reports whether p holds only PING and PADDING, as a path MTU
// probe does.
func isPMTUProbe(p *packet) bool {
	ping := false
	for _, f := range p.frames {
		switch f.Type() {
		case wire.FrameTypePing:
			ping = true
		case wire.FrameTypePadding:
		default:
			return false
		}
	}
	return ping && p.datagram > 1200
}

// initialWindow is RFC 9002 §7.2's initial window for a maximum datagram
// size.
func initialWindow(mds int) int {
	return min(10*mds, max(14720, 2*mds))
}

func runRecInitialWindow(ctx context.Context, t *T) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "no-acks"}, func(rc *rawClient) { rc.NoAcks = true })
	reqSent := time.Now()
	rc.Request(t.profile.Target.LargePath)
	rc.Receive(ctx, 20*time.Millisecond, nil)
	window := time.Now()
	// Release the acknowledgments and let the transfer go on briefly.
	rc.NoAcks = false
	rc.AckOwed[2] = true
	rc.Flush()
	rc.Receive(ctx, 50*time.Millisecond, nil)
	var fin time.Time
	var counted []*packet
	bytes, mds, pkts, probes := 0, 0, 0, 0
	for _, p := range t.rec.snapshot() {
		if p.conn != rc.trace.id {
			continue
		}
		if p.sent && p.space == 1 && p.has(wire.FrameTypeCrypto) {
			fin = p.at
		}
		if p.sent || p.space != 2 || fin.IsZero() || !p.at.Before(window) || !p.ackEliciting {
			continue
		}
		if isPMTUProbe(p) {
			// A path MTU probe (RFC 9000 §14.4) is larger than the
			// datagrams the window is computed from; it is left out of
			// both.
			probes++
			continue
		}
		bytes += p.ev.Size
		mds = max(mds, p.datagram)
		pkts++
		counted = append(counted, p)
	}
	if pkts == 0 {
		t.Inconclusive("The server sent no 1-RTT data within 20 ms of the request.")
	}
	// RFC 9002 §7.2 has the window recalculated when the maximum
	// datagram size changes; a server that sends 1200-byte datagrams
	// until its handshake is confirmed and larger ones a moment later
	// may size its window for the larger, so the largest datagram of
	// the connection (path MTU probes aside) sets the limit.
	for _, p := range received(t.rec.snapshot(), rc.trace.id, 0) {
		if p.space == 2 && !isPMTUProbe(p) {
			mds = max(mds, p.datagram)
		}
	}
	iw := initialWindow(mds)
	t.Fact("cwnd.first-round-bytes", bytes)
	t.Fact("cwnd.first-round-packets", pkts)
	if probes > 0 {
		t.Fact("cwnd.pmtu-probes-left-out", probes)
	}
	_ = reqSent
	req := t.sc.Requirements[0]
	if bytes > iw {
		t.Warn(
			"initial-window",
			req,
			fmt.Sprintf(
				"Before the tester's first 1-RTT acknowledgment the server had %d bytes of ack-eliciting 1-RTT packets in flight (%d packets), above the initial window of %d bytes for its %d-byte datagrams.",
				bytes,
				pkts,
				iw,
				mds,
			),
			events(Response, counted...)...)
		return
	}
	t.Pass(
		"initial-window",
		req,
		fmt.Sprintf(
			"Before the tester's first 1-RTT acknowledgment the server had %d bytes of ack-eliciting 1-RTT packets in flight (%d packets), within the initial window of %d bytes for its %d-byte datagrams.",
			bytes,
			pkts,
			iw,
			mds,
		),
	)
}

// burstDelay is the path delay the tester emulates in rec-burst-limit by
// acknowledging each packet only burstDelay after it arrived: on loopback
// the RTT is so small that a correctly paced sender's packets are less
// than 50 µs apart. At 100 ms a window of 1 MB paces at about 100 µs per
// 1200-byte packet.
const burstDelay = 100 * time.Millisecond

// burstSample is how much of the large resource rec-burst-limit watches:
// enough for many round trips of bursts, whatever the resource's size.
const burstSample = 4 << 20

func runRecBurstLimit(ctx context.Context, t *T) {
	t.keepEverything() // the judge reads every packet of the sample
	rc, _ := t.recRaw(ctx, "timestamps", nil)
	rc.StampArrivals = true
	rc.Arrivals = nil
	rc.NoAcks = true
	req := rc.Request(t.profile.Target.LargePath)
	deadline := time.Now().Add(20 * time.Second)
	var lastLargest uint64
	var acked, waiting []*packet // the server's 1-RTT packets, acknowledged or not yet
	next := 0
	sampled := func() bool {
		s := rc.Stream(req.ID)
		return s != nil && s.Received() >= burstSample
	}
	for ctx.Err() == nil && time.Now().Before(deadline) {
		rc.Receive(ctx, 2*time.Millisecond, nil)
		if rc.ResponseDone(req) || rc.PeerClosed || sampled() {
			break
		}
		t.rec.mu.Lock()
		for _, p := range t.rec.packets[next:] {
			if !p.sent && p.conn == rc.trace.id && p.space == 2 {
				waiting = append(waiting, p)
			}
		}
		next = len(t.rec.packets)
		t.rec.mu.Unlock()
		// Acknowledge what arrived at least burstDelay ago.
		cut := time.Now().Add(-burstDelay)
		n := 0
		for n < len(waiting) && waiting[n].at.Before(cut) {
			n++
		}
		if n == 0 {
			continue
		}
		acked, waiting = append(acked, waiting[:n]...), waiting[n:]
		pns := make([]uint64, len(acked))
		for i, p := range acked {
			pns[i] = p.pn
		}
		if a := rc.AckFrameOf(2, pns); a.LargestAcked() != lastLargest {
			lastLargest = a.LargestAcked()
			rc.Send1RTT([]wire.Frame{a}, rawquic.ShortOpts{})
		}
	}
	rc.NoAcks = false
	rc.AckOwed[2] = true
	rc.Flush()
	if !rc.ResponseDone(req) && !sampled() {
		t.Inconclusive(
			fmt.Sprintf(
				"Neither the large resource nor its first %d bytes came within 20 s while the tester acknowledged each packet %v after it arrived.",
				burstSample,
				burstDelay,
			),
		)
	}
	arr := rc.Arrivals
	kernel := len(arr) > 0 && arr[0].Kernel
	mds := 0
	for _, a := range arr {
		mds = max(mds, a.Size)
	}
	iw := initialWindow(mds)
	var bursts []int
	var starts []time.Time
	over, largest := 0, 0
	cur := 0
	for i, a := range arr {
		if i > 0 && a.At.Sub(arr[i-1].At) >= 50*time.Microsecond {
			bursts = append(bursts, cur)
			cur = 0
		}
		if cur == 0 {
			starts = append(starts, a.At)
		}
		cur += a.Size
	}
	bursts = append(bursts, cur)
	var overList []string
	for i, b := range bursts {
		largest = max(largest, b)
		if b > iw {
			over++
			if len(overList) < 8 {
				overList = append(overList, fmt.Sprintf("%d B at +%v", b, starts[i].Sub(arr[0].At).Round(100*time.Microsecond)))
			}
		}
	}
	if len(overList) > 0 {
		t.Fact("pacing.bursts-over-window", overList)
	}
	t.Fact("pacing.bursts", len(bursts))
	t.Fact("pacing.largest-burst", largest)
	t.Fact("pacing.kernel-timestamps", kernel)
	rq := t.sc.Requirements[0]
	if over > 1 {
		if !kernel {
			t.Inconclusive(
				fmt.Sprintf(
					"%d bursts exceeded the initial window of %d bytes, but the socket gave no kernel timestamps, so the tester's own scheduling may have bunched them.",
					over,
					iw,
				),
			)
		}
		t.Warn(
			"bursts",
			rq,
			fmt.Sprintf(
				"With the tester acknowledging each packet %v after it arrived, %d of %d bursts (datagrams less than 50 µs apart on arrival) exceeded the initial window of %d bytes; the largest was %d bytes.",
				burstDelay,
				over,
				len(bursts),
				iw,
				largest,
			),
		)
		return
	}
	t.Pass(
		"bursts",
		rq,
		fmt.Sprintf(
			"With the tester acknowledging each packet %v after it arrived, over %d datagrams in %d bursts (arrivals less than 50 µs apart) at most one exceeded the initial window of %d bytes; the largest was %d bytes.",
			burstDelay,
			len(arr),
			len(bursts),
			iw,
			largest,
		),
	)
}

func runRecBlackhole(ctx context.Context, t *T) {
	rc, _ := t.recRaw(ctx, "blackhole", nil)
	req := rc.Request(t.profile.Target.LargePath)
	if n, done := rc.receiveStream(ctx, req, 256<<10, 10*time.Second); done || n < 256<<10 {
		t.Inconclusive(fmt.Sprintf("The download did not reach 256 KiB while still running (%d bytes, complete %v).", n, done))
	}
	// Nothing in either direction for 2 s.
	rc.Silent = true
	rc.DropIn = func(int, []byte) bool { return true }
	rc.Receive(ctx, 2*time.Second, nil)
	rc.Silent, rc.DropIn = false, nil
	end := time.Now()
	rc.AckOwed[2] = true
	rc.Flush()
	_, err := rc.Await(ctx, req, 30*time.Second)
	var first time.Time
	for _, p := range received(t.rec.snapshot(), rc.trace.id, 0) {
		if p.at.After(end) {
			first = p.at
			break
		}
	}
	if !first.IsZero() {
		t.Fact("blackhole.first-packet-after", first.Sub(end).Round(time.Millisecond).String())
	}
	if err != nil {
		t.Inconclusive(fmt.Sprintf("After a 2 s blackhole the download did not complete: %v (%d bytes).", err, rc.BodyDigest(req).Len))
	}
	t.Fact("blackhole.recovered-in", time.Since(end).Round(time.Millisecond).String())
	t.Pass(
		"recovered",
		t.sc.Requirements[0],
		fmt.Sprintf(
			"After 2 s with nothing in either direction the download recovered and completed (%d bytes; first server packet %v after the blackhole).",
			rc.BodyDigest(req).Len,
			first.Sub(end).Round(time.Millisecond),
		),
	)
}

func init() {
	Register(&Scenario{
		ID: "ack-handshake-immediate", Title: "Handshake packets acknowledged at once", Family: "G", Needs: []string{NeedApp},
		Requirements: []Requirement{reqAckImmediate},
		Run:          runAckHandshakeImmediate,
	})
	Register(&Scenario{
		ID: "ack-1rtt-max-ack-delay", Title: "1-RTT packets acknowledged within max_ack_delay", Family: "G", Needs: []string{NeedApp},
		Requirements: []Requirement{reqAckImmediate},
		Run:          runAck1RTTMaxAckDelay,
	})
	Register(&Scenario{
		ID: "ack-not-for-ack-only", Title: "No ACK-only packet in response to ACK-only packets", Family: "G", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{
			rfc9000(
				"13.2.1",
				MustNot,
				"An endpoint MUST NOT send a non-ack-eliciting packet in response to a non-ack-eliciting packet, even if there are packet gaps that precede the received packet.",
			),
		},
		Run: runAckNotForAckOnly,
	})
	Register(&Scenario{
		ID: "ack-single-ack-only-response", Title: "At most one ACK-only packet per ack-eliciting packet", Family: "G", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"13.2.1",
				MustNot,
				"Since packets containing only ACK frames are not congestion controlled, an endpoint MUST NOT send more than one such packet in response to receiving an ack-eliciting packet.",
			),
		},
		Run: runAckSingleAckOnly,
	})
	Register(&Scenario{
		ID: "ack-reorder-immediate", Title: "A gap in packet numbers is acknowledged at once", Family: "G", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"13.2.1",
				Should,
				"an endpoint SHOULD generate and send an ACK frame without delay when it receives an ack-eliciting packet either … there are missing packets between that packet and this packet.",
			),
		},
		Run: runAckReorderImmediate,
	})
	Register(&Scenario{
		ID: "ack-every-second-packet", Title: "An ACK for every two ack-eliciting packets", Family: "G", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("13.2.2", Should, "A receiver SHOULD send an ACK frame after receiving at least two ack-eliciting packets.")},
		Run:          runAckEverySecond,
	})
	Register(&Scenario{
		ID: "ack-ce-immediate", Title: "A CE-marked packet is acknowledged at once", Family: "G", Needs: []string{NeedApp},
		Requirements: []Requirement{reqAckCE},
		Run:          runAckCEImmediate,
	})
	Register(&Scenario{
		ID: "ack-includes-largest", Title: "ACK frames include the largest packet number received", Family: "G", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000("13.2.3", Should, "A receiver SHOULD include an ACK Range containing the largest received packet number in every ACK frame."),
		},
		Run: runAckIncludesLargest,
	})
	Register(&Scenario{
		ID: "ecn-feedback", Title: "ECN counts for ECT(0)-marked packets", Family: "G", Needs: []string{NeedApp},
		Requirements: []Requirement{reqECNFeedback},
		Run:          runECNFeedback,
	})
	Register(&Scenario{
		ID: "ecn-ce-feedback", Title: "ECN-CE marks counted", Family: "G", Needs: []string{NeedApp},
		Requirements: []Requirement{reqECNFeedback},
		Run:          runECNCEFeedback,
	})
	Register(&Scenario{
		ID: "ecn-server-marks", Title: "ECN marking of the server's packets", Family: "G", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{
			rfc9000(
				"13.4.2.2",
				May,
				"Upon successful validation, an endpoint MAY continue to set an ECT codepoint in subsequent packets it sends, with the expectation that the path is ECN capable.",
			),
		},
		Run: runECNServerMarks,
	})
	Register(&Scenario{
		ID: "ecn-validation-failure-disables", Title: "ECN disabled when validation fails", Family: "G", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("13.4.2.2", Must, "If validation fails, then the endpoint MUST disable ECN.")},
		Run:          runECNValidationFailure,
	})
	Register(&Scenario{
		ID: "rec-pto-backoff", Title: "PTO probes are ack-eliciting and back off", Family: "G", Needs: []string{NeedApp, NeedLarge}, Long: true,
		Requirements: []Requirement{
			rfc9002(
				"6.2.1",
				Must,
				"When a PTO timer expires, the PTO backoff MUST be increased, resulting in the PTO period being set to twice its current value.",
			),
			rfc9002("6.2.4", Must, "All probe packets sent on a PTO MUST be ack-eliciting."),
		},
		Run: runRecPTOBackoff,
	})
	Register(&Scenario{
		ID: "rec-server-handshake-probe", Title: "The server probes during the handshake", Family: "G", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9002("6.2.4", Must, "When a PTO timer expires, a sender MUST send at least one ack-eliciting packet in the packet number space as a probe."),
		},
		Run: runRecServerHandshakeProbe,
	})
	Register(&Scenario{
		ID: "rec-transfer-with-loss", Title: "A transfer completes through 5 % loss", Family: "G", Needs: []string{NeedApp, NeedLarge}, Long: true, PassOnly: true,
		Requirements: []Requirement{
			rfc9000(
				"13.3",
				Descriptive,
				"Application data sent in STREAM frames is retransmitted in new STREAM frames unless the endpoint has sent a RESET_STREAM for that stream.",
			),
			rfc9002("6.2", Descriptive, "A PTO enables a connection to recover from loss of tail packets or acknowledgments."),
		},
		Run: runRecTransferWithLoss,
	})
	Register(&Scenario{
		ID: "rec-loss-reduces-flight", Title: "Loss shrinks the window", Family: "G", Revision: 2, Needs: []string{NeedApp, NeedLarge}, Long: true,
		Requirements: []Requirement{rfc9000("13.3", Must, "Upon detecting losses, a sender MUST take appropriate congestion control action.")},
		Run:          runRecLossReducesFlight,
	})
	Register(&Scenario{
		ID: "rec-initial-window", Title: "The first flight fits the initial window", Family: "G", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqInitialCwnd},
		Run:          runRecInitialWindow,
	})
	Register(&Scenario{
		ID: "rec-burst-limit", Title: "Bursts no larger than the initial window", Family: "G", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{rfc9002("7.7", Should, "Senders SHOULD limit bursts to the initial congestion window"), reqInitialCwnd},
		Run:          runRecBurstLimit,
	})
	Register(&Scenario{
		ID: "rec-blackhole-recovery", Title: "A transfer recovers from a 2 s blackhole", Family: "G", Needs: []string{NeedApp, NeedLarge}, Long: true, PassOnly: true,
		Requirements: []Requirement{rfc9002("6.2", Descriptive, "A PTO enables a connection to recover from loss of tail packets or acknowledgments.")},
		Run:          runRecBlackhole,
	})
}
