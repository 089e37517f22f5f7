package conformance

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// reorderSequence is the worked example of ACK-FREQ §6.2.1 with a
// Reordering Threshold of 3: packet numbers relative to the first.
var reorderSequence = []uint64{0, 1, 3, 4, 5, 8, 9, 10}

// reorderWant are the packets whose receipt must trigger an immediate
// ACK in that example.
var reorderWant = []uint64{5, 9, 10}

// judgeReorderAcks takes the Largest Acknowledged of each ACK the server
// sent during the sequence (relative, in order) and returns the packets
// of reorderWant no ACK answered, and the ACKs beyond them.
func judgeReorderAcks(largest []uint64) (missing, extra []uint64) {
	for _, w := range reorderWant {
		if !slices.Contains(largest, w) {
			missing = append(missing, w)
		}
	}
	for _, l := range largest {
		if !slices.Contains(reorderWant, l) && !slices.Contains(extra, l) {
			extra = append(extra, l)
		}
	}
	return missing, extra
}

func runAFReorderingThreshold(ctx context.Context, t *T) {
	rc, _ := t.rawAckFreq(ctx)
	af := t.setAckFrequency(ctx, rc, &wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 9, RequestedMaxAckDelay: 50000, ReorderingThreshold: 3})
	req := t.sc.Requirements[0]
	var lastMissing, lastExtra []uint64
	var lastTrig []*packet
	for run := 0; run < 2 && ctx.Err() == nil; run++ {
		base := rc.NextPN[2]
		mark := t.mark()
		var trig []*packet
		// Packets 5 ms apart, so that each is processed before the next
		// arrives, and all within the 50 ms Requested Max Ack Delay.
		for _, rel := range reorderSequence {
			pn := base + rel
			trig = append(trig, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{PN: &pn}))
			rc.Receive(ctx, 5*time.Millisecond, nil)
		}
		rc.NextPN[2] = base + reorderSequence[len(reorderSequence)-1] + 1
		last := trig[len(trig)-1]
		rc.Receive(ctx, t.immediate(), nil)
		var largest []uint64
		var acks []*packet
		for _, fa := range framesOf[*wire.AckFrame](t.rec.snapshot(), rc.trace.id, mark, false) {
			a := fa.f.(*wire.AckFrame)
			if fa.p.space != 2 || len(a.Ranges) == 0 || a.Ranges[0].Largest < base {
				continue
			}
			l := a.Ranges[0].Largest - base
			if l == 10 && fa.p.at.Sub(last.at) > t.immediate() {
				continue // the delayed ACK, not an immediate one
			}
			largest = append(largest, l)
			acks = append(acks, fa.p)
		}
		missing, extra := judgeReorderAcks(largest)
		if len(missing) == 0 {
			t.Fact("ackfreq.reorder-early-acks", extra)
			t.Pass(
				"window",
				req,
				fmt.Sprintf(
					"With Reordering Threshold 3, the sequence 0, 1, 3, 4, 5, 8, 9, 10 drew immediate ACKs on 5, 9 and 10 (ACKs with Largest Acknowledged %v; extra early ACKs, allowed: %v).",
					largest,
					extra,
				),
				evidence(events(Trigger, af), events(Response, acks...))...)
			return
		}
		lastMissing, lastExtra, lastTrig = missing, extra, trig
		rc.Receive(ctx, 100*time.Millisecond, nil)
	}
	t.Warn(
		"window",
		req,
		fmt.Sprintf(
			"With Reordering Threshold 3, the sequence 0, 1, 3, 4, 5, 8, 9, 10 (5 ms apart, twice) drew no immediate ACK on %v, where the reordering window is exceeded (ACKs beyond those: %v).",
			lastMissing,
			lastExtra,
		),
		evidence(events(Trigger, af), events(Trigger, lastTrig...))...)
}

func runAFCEImmediate(ctx context.Context, t *T) {
	t.requireECNSock()
	rc, _ := t.rawAckFreq(ctx)
	af := t.setAckFrequency(ctx, rc, &wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 9, RequestedMaxAckDelay: 50000, ReorderingThreshold: 1})
	var ce uint8 = 2
	rc.Paths[0].ECN = func() uint8 { return ce }
	req := t.sc.Requirements[0]
	// Control: the same burst without a CE mark must not be acknowledged
	// at once, or a prompt ACK says nothing about the mark.
	ctl := rc.burst(5, nil)[4]
	rc.Receive(ctx, 100*time.Millisecond, nil)
	// A server that reports no ECN counts does not see the marks (it may
	// not read them: ECN is optional), so a CE mark cannot draw anything
	// from it, as in ack-ce-immediate.
	if _, n := ecnAcks(t.rec.snapshot(), rc.trace.id); n == 0 {
		t.Unsupported("The server's ACK frames carry no ECN counts, although the tester's packets were marked ECT(0), so it does not see CE marks.")
	}
	if d := t.ackDelays(rc.trace.id, []*packet{ctl})[0]; d >= 0 && d <= t.immediate() {
		t.Inconclusive(
			fmt.Sprintf(
				"With Ack-Eliciting Threshold 9 the server acknowledged the fifth of five ECT(0) packets after %v anyway, so a prompt ACK of a CE mark would show nothing.",
				d.Round(time.Microsecond),
			),
			events(Trigger, af, ctl)...)
	}
	var marked []*packet
	prompt := 0
	var delays []time.Duration
	for run := 0; run < 3 && ctx.Err() == nil; run++ {
		ce = 2 // ECT(0)
		rc.burst(4, nil)
		ce = 3 // CE
		p := rc.burst(1, nil)[0]
		ce = 2
		marked = append(marked, p)
		rc.Receive(ctx, 100*time.Millisecond, nil)
		d := t.ackDelays(rc.trace.id, []*packet{p})[0]
		delays = append(delays, d)
		if d >= 0 && d <= t.immediate() {
			prompt++
		}
	}
	t.Fact("ackfreq.ce-ack-delays", fmt.Sprint(delays))
	if prompt >= 2 {
		t.Pass(
			"immediate",
			req,
			fmt.Sprintf(
				"With Ack-Eliciting Threshold 9, the CE-marked packet after four ECT(0) ones was acknowledged within %v in %d of 3 runs (delays %v).",
				t.immediate().Round(time.Millisecond),
				prompt,
				delays,
			),
			evidence(events(Trigger, af), events(Trigger, marked...))...)
		return
	}
	t.Warn(
		"immediate",
		req,
		fmt.Sprintf(
			"With Ack-Eliciting Threshold 9, a CE-marked packet after four ECT(0) ones was acknowledged within %v in only %d of 3 runs (delays %v); acknowledge the first CE mark at once.",
			t.immediate().Round(time.Millisecond),
			prompt,
			delays,
		),
		evidence(events(Trigger, af), events(Trigger, marked...))...)
}

// Family H: the ACK frequency extension (docs/scenarios.md). The sequences of
// packets with chosen gaps run on the raw client.

// tpMinAckDelay is min_ack_delay at draft-14's code point; the older
// drafts' code points only feed ackfreq.support.
const (
	tpMinAckDelay    = 0xff04de1b
	tpMinAckDelayOld = 0xff04de1a
	tpMinAckDelayV02 = 0xff02de1a
)

var reqAFThreshold = ackFreq("4", Should, "A receiving endpoint SHOULD send at least one ACK frame after receiving more than this many ack-eliciting packets.")

// ackFreqSupport records ackfreq.support and reports whether the server
// advertised min_ack_delay at draft-14's code point, with its value (µs).
func (t *T) ackFreqSupport(tp *wire.TransportParameters) (uint64, bool) {
	if v, ok := rawTPVarint(tp, tpMinAckDelay); ok {
		t.Fact("ackfreq.support", fmt.Sprintf("min_ack_delay 0xff04de1b = %d µs", v))
		return v, true
	}
	for _, id := range []uint64{tpMinAckDelayOld, tpMinAckDelayV02} {
		if v, ok := rawTPVarint(tp, id); ok {
			t.Fact("ackfreq.support", fmt.Sprintf("older draft: min_ack_delay 0x%x = %d µs", id, v))
			return 0, false
		}
	}
	t.Fact("ackfreq.support", "none")
	return 0, false
}

// requireAckFreq makes a normal connection and ends the scenario as
// unsupported when the server did not advertise min_ack_delay.
func (t *T) requireAckFreq(ctx context.Context) (uint64, *wire.TransportParameters) {
	c := t.mustDial(ctx, DialOptions{Label: "ackfreq-check"})
	tp := t.serverTP(c)
	v, ok := t.ackFreqSupport(tp)
	if !ok {
		t.Unsupported("The server did not advertise min_ack_delay (0xff04de1b).")
	}
	return v, tp
}

// rawAckFreq runs the raw handshake and requires min_ack_delay.
func (t *T) rawAckFreq(ctx context.Context) (*rawClient, uint64) {
	rc := t.rawEstablished(ctx, rawquic.Options{Label: "raw"}, nil)
	v, ok := t.ackFreqSupport(rc.ServerTP())
	if !ok {
		t.Unsupported("The server did not advertise min_ack_delay (0xff04de1b).")
	}
	rc.Receive(ctx, t.PTO(), nil)
	return rc, v
}

// ackDelays pairs each ping with the delay to its first acknowledgment
// (negative when never acknowledged).
func (t *T) ackDelays(conn int, pings []*packet) []time.Duration {
	ps := t.rec.snapshot()
	out := make([]time.Duration, len(pings))
	for i, p := range pings {
		if a := ackedBy(ps, conn, 2, p.pn); a != nil {
			out[i] = a.at.Sub(p.at)
		} else {
			out[i] = -1
		}
	}
	return out
}

// immediate is the tolerance for "at once": the RTT plus 10 ms of
// scheduling on a busy tester (docs/conformance-model.md, Verdicts rule 4).
func (t *T) immediate() time.Duration { return t.RTT() + 10*time.Millisecond }

func runAFTPValid(ctx context.Context, t *T) {
	// The tester's engine rejects an invalid pair itself, so the
	// parameters are read from the server's EncryptedExtensions even when
	// the handshake fails.
	c, _ := t.Dial(ctx, DialOptions{Label: "engine"})
	tp, _ := c.trace.transportParameters()
	if tp == nil {
		t.Inconclusive("The server's transport parameters could not be read.")
	}
	v, ok := t.ackFreqSupport(tp)
	if !ok {
		t.Unsupported("The server did not advertise min_ack_delay (0xff04de1b).")
	}
	mad, has := rawTPVarint(tp, uint64(0x0b))
	if !has {
		mad = 25
	}
	req := t.sc.Requirements[0]
	if v > mad*1000 {
		t.Fail("min-max", req, fmt.Sprintf("The server's min_ack_delay is %d µs, above its max_ack_delay of %d ms.", v, mad))
		return
	}
	t.Pass("min-max", req, fmt.Sprintf("The server's min_ack_delay (%d µs) is not above its max_ack_delay (%d ms).", v, mad))
}

// setAckFrequency sends an ACK_FREQUENCY frame and waits for its
// acknowledgment, so that what follows runs under it.
func (t *T) setAckFrequency(ctx context.Context, rc *rawClient, f *wire.AckFrequencyFrame) *packet {
	p := rc.Send1RTT([]wire.Frame{f}, rawquic.ShortOpts{})
	m := t.mark()
	rc.receiveUntil(ctx, t.PTO()+100*time.Millisecond, m, func(q *packet) bool { return ackedBy([]*packet{q}, rc.trace.id, 2, p.pn) != nil })
	rc.Receive(ctx, 20*time.Millisecond, nil)
	return p
}

func runAFThresholdZero(ctx context.Context, t *T) {
	rc, minDelay := t.rawAckFreq(ctx)
	af := t.setAckFrequency(ctx, rc, &wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 0,
		RequestedMaxAckDelay: max(minDelay, 5000), ReorderingThreshold: 1})
	var pings []*packet
	for i := 0; i < 20 && ctx.Err() == nil; i++ {
		pings = append(pings, rc.burst(1, nil)...)
		rc.Receive(ctx, 20*time.Millisecond, nil)
	}
	var bursts []*packet
	for i := 0; i < 2; i++ {
		bursts = append(bursts, rc.burst(10, nil)...)
		rc.Receive(ctx, 60*time.Millisecond, nil)
	}
	rc.Receive(ctx, 50*time.Millisecond, nil)
	// A burst that arrives in one read batch may be answered by one ACK
	// covering all of it; what counts is that each packet is covered at
	// once.
	all := append(pings, bursts...)
	prompt := 0
	for _, d := range t.ackDelays(rc.trace.id, all) {
		if d >= 0 && d <= t.immediate() {
			prompt++
		}
	}
	frac := float64(prompt) / float64(len(all))
	t.Fact("ackfreq.threshold-0-prompt", fmt.Sprintf("%d/%d", prompt, len(all)))
	req := t.sc.Requirements[0]
	if frac < 0.9 {
		t.Warn(
			"every-packet",
			req,
			fmt.Sprintf(
				"With Ack-Eliciting Threshold 0, only %d of %d PINGs (20 spaced, two bursts of 10) were acknowledged within %v; acknowledge every packet at once.",
				prompt,
				len(all),
				t.immediate().Round(time.Millisecond),
			),
			events(Trigger, af)...)
		return
	}
	t.Pass(
		"every-packet",
		req,
		fmt.Sprintf(
			"With Ack-Eliciting Threshold 0, %d of %d PINGs (20 spaced, two bursts of 10) were acknowledged within %v.",
			prompt,
			len(all),
			t.immediate().Round(time.Millisecond),
		),
		events(Trigger, af)...)
}

func runAFThresholdLarge(ctx context.Context, t *T) {
	rc, _ := t.rawAckFreq(ctx)
	af := t.setAckFrequency(ctx, rc, &wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 9, RequestedMaxAckDelay: 50000, ReorderingThreshold: 0})
	limit := 50*time.Millisecond + t.RTT() + 20*time.Millisecond
	var late []string
	acksPer := map[int]int{}
	for _, n := range []int{10, 15, 3} {
		m := t.mark()
		pings := rc.burst(n, nil)
		rc.Receive(ctx, 200*time.Millisecond, nil)
		acksPer[n] = t.ackPackets(rc.trace.id, m)
		unacked := 0
		for _, d := range t.ackDelays(rc.trace.id, pings) {
			if d < 0 || d > limit {
				unacked++
			}
		}
		if unacked > 9 || (n <= 9 && unacked > 0) {
			late = append(late, fmt.Sprintf("%d of a burst of %d", unacked, n))
		}
	}
	t.Fact("ackfreq.acks-per-burst", acksPer)
	t.Fact("ackfreq.honoured", acksPer[15] < 15/2)
	req := t.sc.Requirements[0]
	if len(late) > 0 {
		t.Warn(
			"threshold",
			req,
			fmt.Sprintf("With Ack-Eliciting Threshold 9 and 50 ms, PINGs went unacknowledged past %v: %v.", limit.Round(time.Millisecond), late),
			events(Trigger, af)...)
		return
	}
	t.Pass(
		"threshold",
		req,
		fmt.Sprintf(
			"With Ack-Eliciting Threshold 9 and 50 ms, every PING was acknowledged within %v (ACK packets per burst of 10, 15, 3: %v).",
			limit.Round(time.Millisecond),
			acksPer,
		),
		events(Trigger, af)...)
}

func runAFImmediateAck(ctx context.Context, t *T) {
	rc, _ := t.rawAckFreq(ctx)
	t.setAckFrequency(ctx, rc, &wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 9, RequestedMaxAckDelay: 50000, ReorderingThreshold: 0})
	var trig []*packet
	for i := 0; i < 5 && ctx.Err() == nil; i++ {
		trig = append(trig, rc.Send1RTT([]wire.Frame{&wire.ImmediateAckFrame{}}, rawquic.ShortOpts{}))
		rc.Receive(ctx, 200*time.Millisecond, nil)
	}
	late := 0
	for _, d := range t.ackDelays(rc.trace.id, trig) {
		if d < 0 || d > t.immediate() {
			late++
		}
	}
	req := t.sc.Requirements[0]
	if late >= 3 {
		t.Warn(
			"immediate",
			req,
			fmt.Sprintf("%d of 5 IMMEDIATE_ACK frames were acknowledged later than %v; acknowledge them at once.", late, t.immediate().Round(time.Millisecond)),
			events(Trigger, trig...)...)
		return
	}
	t.Pass(
		"immediate",
		req,
		fmt.Sprintf("%d of 5 IMMEDIATE_ACK frames were acknowledged within %v.", 5-late, t.immediate().Round(time.Millisecond)),
		events(Trigger, trig...)...)
}

func runAFInvalidMaxAckDelay(ctx context.Context, t *T) {
	minDelay, _ := t.requireAckFreq(ctx)
	vs := []struct {
		name  string
		delay uint64
	}{{"above-2^14-ms", 16384000}}
	if minDelay > 0 {
		vs = append([]struct {
			name  string
			delay uint64
		}{{"below-min-ack-delay", minDelay - 1}}, vs...)
	}
	for i, v := range vs {
		c := t.mustDial(ctx, DialOptions{Label: v.name})
		t.Provoke(ctx, c, Expectation{Check: v.name, Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation),
			Describe: fmt.Sprintf("an ACK_FREQUENCY frame with Requested Max Ack Delay %d µs", v.delay)}, func() {
			c.Inject(
				spaceApp,
				&wire.AckFrequencyFrame{SequenceNumber: uint64(i), AckElicitingThreshold: 1, RequestedMaxAckDelay: v.delay, ReorderingThreshold: 1},
			)
		})
	}
}

func runAFStaleSequence(ctx context.Context, t *T) {
	rc, minDelay := t.rawAckFreq(ctx)
	t.setAckFrequency(
		ctx,
		rc,
		&wire.AckFrequencyFrame{SequenceNumber: 5, AckElicitingThreshold: 0, RequestedMaxAckDelay: max(minDelay, 5000), ReorderingThreshold: 1},
	)
	stale := t.setAckFrequency(
		ctx,
		rc,
		&wire.AckFrequencyFrame{SequenceNumber: 3, AckElicitingThreshold: 20, RequestedMaxAckDelay: 100000, ReorderingThreshold: 0},
	)
	var delays []time.Duration
	var last []*packet
	for i := 0; i < 2; i++ {
		b := rc.burst(10, nil)
		rc.Receive(ctx, 150*time.Millisecond, nil)
		l := b[len(b)-1]
		last = append(last, l)
		delays = append(delays, t.ackDelays(rc.trace.id, []*packet{l})[0])
	}
	t.Fact("ackfreq.stale-burst-ack-delays", fmt.Sprint(delays))
	req := t.sc.Requirements[0]
	prompt, held := 0, 0
	for _, d := range delays {
		switch {
		case d >= 0 && d <= t.immediate():
			prompt++
		case d < 0 || d >= 80*time.Millisecond:
			held++
		}
	}
	switch {
	case held == len(delays):
		t.Fail(
			"ignored",
			req,
			fmt.Sprintf(
				"After a stale ACK_FREQUENCY (sequence 3, threshold 20, 100 ms, after sequence 5 with threshold 0) bursts of ten were acknowledged only after %v: the server applied the stale frame.",
				delays,
			),
			evidence(events(Trigger, stale), events(Context, last...))...)
	case prompt == len(delays):
		t.Pass("ignored", req, fmt.Sprintf("After a stale ACK_FREQUENCY the server still acknowledged bursts at once (%v).", delays), events(Trigger, stale)...)
	default:
		t.Inconclusive(fmt.Sprintf("The ACK timing after a stale ACK_FREQUENCY is mixed (%v).", delays), events(Trigger, stale)...)
	}
}

func runAFReorderZero(ctx context.Context, t *T) {
	rc, _ := t.rawAckFreq(ctx)
	t.setAckFrequency(ctx, rc, &wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 9, RequestedMaxAckDelay: 50000, ReorderingThreshold: 0})
	early := 0
	var trig, resp []*packet
	for rep := 0; rep < 3 && ctx.Err() == nil; rep++ {
		m := t.mark()
		ps := rc.burst(7, map[int]bool{1: true, 3: true, 5: true}) // packets 0, 2, 4, 6: three gaps
		trig = append(trig, ps...)
		last := ps[len(ps)-1].at
		// Only an ACK that covers one of these packets answers them.
		if a := rc.receiveUntil(ctx, 150*time.Millisecond, m, func(p *packet) bool { return ackedBy([]*packet{p}, rc.trace.id, 2, ps[0].pn) != nil }); a != nil &&
			a.at.Sub(last) < 20*time.Millisecond {
			early++
			resp = append(resp, a)
		}
		rc.Receive(ctx, 100*time.Millisecond, nil)
	}
	req := t.sc.Requirements[0]
	if early >= 2 {
		t.Warn(
			"no-immediate",
			req,
			fmt.Sprintf(
				"With Reordering Threshold 0, packets with gaps still drew an ACK within 20 ms in %d of 3 runs (four packets, below the threshold of 9).",
				early,
			),
			evidence(events(Trigger, lastN(trig, 4)...), events(Response, resp...))...)
		return
	}
	t.Pass(
		"no-immediate",
		req,
		fmt.Sprintf("With Reordering Threshold 0, gaps did not trigger immediate ACKs (%d of 3 runs had an early ACK).", early),
		events(Trigger, lastN(trig, 4)...)...)
}

func runAFUnsolicited(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "engine"})
	if _, ok := t.ackFreqSupport(t.serverTP(c)); ok {
		t.Unsupported("The server advertised min_ack_delay, so ACK_FREQUENCY is not unsolicited.")
	}
	t.Provoke(ctx, c, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.FrameEncodingError, wire.ProtocolViolation),
		Describe: "an ACK_FREQUENCY frame the server never asked for"}, func() {
		c.Inject(spaceApp, &wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 1, RequestedMaxAckDelay: 25000, ReorderingThreshold: 1})
	})
	// docs/conformance-model.md, Ambiguities 11: the tester cannot tell whether the type is
	// unknown to the server, so going on is observed, never a fail.
	t.mu.Lock()
	for i, c := range t.checks {
		if c.Verdict == Fail || c.Verdict == Warn {
			t.checks[i].Verdict = Observed
			t.checks[i].Sentence = "(observed: the server may implement the extension without advertising it) " + c.Sentence
		}
	}
	t.mu.Unlock()
}

func runAFServerSends(ctx context.Context, t *T) {
	t.judgesUnsummarised() // ACK_FREQUENCY and IMMEDIATE_ACK frames are never summarised
	c := t.mustDial(ctx, DialOptions{Label: "min-ack-delay-1ms", Config: func(cfg *quic.Config) { cfg.MinAckDelay = time.Millisecond }})
	t.fetchPath(ctx, c, t.profile.Target.LargePath)
	fs := framesOf[*wire.AckFrequencyFrame](t.rec.snapshot(), c.ID(), 0, false)
	t.Fact("ackfreq.sends", len(fs))
	reqs := t.sc.Requirements
	if len(fs) == 0 {
		t.Observe("sends", "The server sent no ACK_FREQUENCY frame during the download.")
		return
	}
	var last int64 = -1
	for _, fa := range fs {
		f := fa.f.(*wire.AckFrequencyFrame)
		if int64(f.SequenceNumber) <= last {
			t.Fail(
				"sequence",
				reqs[0],
				fmt.Sprintf("The server's ACK_FREQUENCY sequence numbers did not increase (%d after %d).", f.SequenceNumber, last),
				events(Response, fa.p)...)
			return
		}
		last = int64(f.SequenceNumber)
		if f.RequestedMaxAckDelay < 1000 || f.RequestedMaxAckDelay >= 1<<14*1000 {
			t.Fail(
				"delay",
				reqs[1],
				fmt.Sprintf(
					"The server asked for a Requested Max Ack Delay of %d µs, outside [1000 µs, 2^14 ms); the tester would be bound to close.",
					f.RequestedMaxAckDelay,
				),
				events(Response, fa.p)...)
			return
		}
		if fa.p.space != 2 || fa.p.ev.PacketType != "1RTT" {
			t.Fail("packet-type", reqs[1], fmt.Sprintf("The server sent ACK_FREQUENCY in a %s packet.", fa.p.ev.PacketType), events(Response, fa.p)...)
			return
		}
	}
	t.Pass(
		"valid",
		reqs[0],
		fmt.Sprintf("The server sent %d valid ACK_FREQUENCY frame(s) with increasing sequence numbers.", len(fs)),
		events(Response, packetsOf(fs)...)...)
}

func runAFNotSentWithoutTP(ctx context.Context, t *T) {
	t.judgesUnsummarised() // ACK_FREQUENCY and IMMEDIATE_ACK frames are never summarised
	c := t.mustDial(ctx, DialOptions{Label: "no-min-ack-delay", Config: func(cfg *quic.Config) { cfg.MinAckDelay = -1 }})
	t.fetchPath(ctx, c, t.profile.Target.LargePath)
	ps := t.rec.snapshot()
	bad := append(framesOf[*wire.AckFrequencyFrame](ps, -1, 0, false), framesOf[*wire.ImmediateAckFrame](ps, -1, 0, false)...)
	req := t.sc.Requirements[0]
	if len(bad) > 0 {
		t.Fail(
			"absent",
			req,
			fmt.Sprintf("The server sent %s although the tester did not advertise min_ack_delay.", frameString(bad[0].f)),
			events(Response, bad[0].p)...)
		return
	}
	t.Pass("absent", req, "The server sent no ACK_FREQUENCY or IMMEDIATE_ACK to a tester that did not advertise min_ack_delay.")
}

func init() {
	Register(&Scenario{
		ID: "af-reordering-threshold", Title: "Reordering Threshold 3: immediate ACKs outside the window", Family: "H", Needs: []string{NeedApp},
		Requirements: []Requirement{reqAFReorderWindow},
		Run:          runAFReorderingThreshold,
	})
	Register(&Scenario{
		ID: "af-ce-immediate", Title: "A CE mark is acknowledged at once", Family: "H", Needs: []string{NeedApp},
		Requirements: []Requirement{reqAFCEImmediate},
		Run:          runAFCEImmediate,
	})
	Register(&Scenario{
		ID: "af-tp-valid", Title: "min_ack_delay not above max_ack_delay", Family: "H", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{ackFreq("3", MustNot, "An endpoint's min_ack_delay MUST NOT be greater than its max_ack_delay.")},
		Run:          runAFTPValid,
	})
	Register(&Scenario{
		ID: "af-tp-invalid-from-tester", Title: "Tester's min_ack_delay above its max_ack_delay", Family: "H", Needs: []string{NeedApp},
		Requirements: []Requirement{
			ackFreq(
				"3",
				Must,
				"Endpoints that support this extension MUST treat receipt of a min_ack_delay that is greater than the max_ack_delay as a connection error of type TRANSPORT_PARAMETER_ERROR.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			t.requireAckFreq(ctx)
			t.ProvokeHandshake(ctx, DialOptions{Label: "min-above-max", Probe: quic.Probe{TransportParameters: func(tp *wire.TransportParameters) {
				tp.MaxAckDelay, tp.HasMinAckDelay, tp.MinAckDelay = 1, true, 5000
			}}}, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.TransportParameterError),
				Describe: "transport parameters with max_ack_delay = 1 ms and min_ack_delay = 5000 µs"})
		},
	})
	Register(&Scenario{
		ID: "af-threshold-zero", Title: "Ack-Eliciting Threshold 0: every packet acknowledged at once", Family: "H", Needs: []string{NeedApp},
		Requirements: []Requirement{
			reqAFThreshold,
			ackFreq("4", Descriptive, "A value of 0 results in a receiver immediately acknowledging every ack-eliciting packet."),
		},
		Run: runAFThresholdZero,
	})
	Register(&Scenario{
		ID: "af-threshold-large", Title: "Ack-Eliciting Threshold 9 with 50 ms delay", Family: "H", Needs: []string{NeedApp},
		Requirements: []Requirement{
			reqAFThreshold,
			ackFreq("4", Should, "On receipt of a valid value, the endpoint SHOULD update its max_ack_delay to the value provided by the peer."),
		},
		Run: runAFThresholdLarge,
	})
	Register(&Scenario{
		ID: "af-immediate-ack", Title: "IMMEDIATE_ACK is answered at once", Family: "H", Needs: []string{NeedApp},
		Requirements: []Requirement{
			ackFreq("5", Should, "An endpoint SHOULD send a packet containing an ACK frame immediately upon receiving an IMMEDIATE_ACK frame."),
		},
		Run: runAFImmediateAck,
	})
	Register(&Scenario{
		ID: "af-invalid-max-ack-delay", Title: "ACK_FREQUENCY with an invalid Requested Max Ack Delay", Family: "H", Needs: []string{NeedApp},
		Requirements: []Requirement{
			ackFreq("4", Must, "Receipt of an invalid value MUST be treated as a connection error of type PROTOCOL_VIOLATION."),
			ackFreq("4", Descriptive, "A value smaller than the min_ack_delay advertised by the peer is also invalid."),
		},
		Run: runAFInvalidMaxAckDelay,
	})
	Register(&Scenario{
		ID: "af-stale-sequence-ignored", Title: "ACK_FREQUENCY with an older sequence number is ignored", Family: "H", Needs: []string{NeedApp},
		Requirements: []Requirement{
			ackFreq(
				"4",
				Must,
				"A receiving endpoint MUST ignore a received ACK_FREQUENCY frame unless the Sequence Number value in the frame is greater than the largest processed value.",
			),
		},
		Run: runAFStaleSequence,
	})
	Register(&Scenario{
		ID: "af-reordering-threshold-zero", Title: "Reordering Threshold 0: gaps trigger no immediate ACK", Family: "H", Needs: []string{NeedApp},
		Requirements: []Requirement{
			ackFreq(
				"6.2",
				ShouldNot,
				"has a Reordering Threshold value of 0, the endpoint SHOULD NOT send an immediate acknowledgment in response to packets received out of order",
			),
		},
		Run: runAFReorderZero,
	})
	Register(&Scenario{
		ID: "af-unsolicited-frame", Title: "ACK_FREQUENCY to a server without the extension", Family: "H", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("12.4", Must, "An endpoint MUST treat the receipt of a frame of unknown type as a connection error of type FRAME_ENCODING_ERROR."),
		},
		Run: runAFUnsolicited,
	})
	Register(&Scenario{
		ID: "af-server-sends", Title: "ACK_FREQUENCY frames the server sends", Family: "H", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{
			ackFreq("4", Must, "A sending endpoint MUST send monotonically increasing values in the Sequence Number field"),
			ackFreq("4", Must, "Receipt of an invalid value MUST be treated as a connection error of type PROTOCOL_VIOLATION."),
		},
		Run: runAFServerSends,
	})
	Register(&Scenario{
		ID: "af-not-sent-without-tp", Title: "No ACK_FREQUENCY or IMMEDIATE_ACK without min_ack_delay", Family: "H", Needs: []string{NeedApp, NeedLarge}, Passive: true,
		Requirements: []Requirement{
			rfc9000(
				"19.21",
				Must,
				"An extension to QUIC that wishes to use a new type of frame MUST first ensure that a peer is able to understand the frame.",
			),
			ackFreq(
				"3",
				MustNot,
				"Endpoints MUST NOT remember the value of the min_ack_delay transport parameter they received for use in a subsequent connection.",
			),
		},
		Run: runAFNotSentWithoutTP,
	})
}
