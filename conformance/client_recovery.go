package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// ackOnlyViolations returns the client's non-ack-eliciting packets whose
// newly acknowledged tester packets are all non-ack-eliciting: packets
// sent in response to ACK-only packets (RFC 9000 §13.2.1).
func ackOnlyViolations(ps []*packet, conn, from int) []*packet {
	sentElicit := map[uint64]bool{}
	acked := map[uint64]bool{}
	var bad []*packet
	for i, p := range ps {
		if p.conn != conn || p.space != spaceApp {
			continue
		}
		if p.sent {
			sentElicit[p.pn] = p.ackEliciting
			continue
		}
		var fresh []uint64
		for _, f := range p.frames {
			a, ok := f.(*wire.AckFrame)
			if !ok {
				continue
			}
			for pn := range sentElicit {
				if !acked[pn] && a.Acks(pn) {
					fresh = append(fresh, pn)
				}
			}
		}
		for _, pn := range fresh {
			acked[pn] = true
		}
		if i < from || p.ackEliciting || p.closeFrame() != nil || len(fresh) == 0 {
			continue
		}
		elicited := false
		for _, pn := range fresh {
			if sentElicit[pn] {
				elicited = true
			}
		}
		if !elicited {
			bad = append(bad, p)
		}
	}
	return bad
}

// ackOf acknowledges every packet number in pns.
func ackOf(pns []uint64) *wire.AckFrame {
	slices.Sort(pns)
	pns = slices.Compact(pns)
	a := &wire.AckFrame{}
	for i := len(pns) - 1; i >= 0; i-- {
		if n := len(a.Ranges); n > 0 && a.Ranges[n-1].Smallest == pns[i]+1 {
			a.Ranges[n-1].Smallest = pns[i]
			continue
		}
		a.Ranges = append(a.Ranges, wire.AckRange{Smallest: pns[i], Largest: pns[i]})
	}
	return a
}

func registerClientAckRules() {
	registerClient(&Scenario{
		ID: "cli-ack-only-not-acked", Title: "The client does not answer ACK-only packets with ACK-only packets", Requirements: []Requirement{reqCliNoAckOfAck},
		Run: func(ctx context.Context, t *T) {
			// The catalogue sends the ACK-only packets during a download;
			// during a held request the client's own acknowledgments are
			// the only other traffic, so any answer to them stands out.
			s, c := t.holdOpen(ctx, serveOptions{Label: "ack-only"})
			mark := t.mark()
			const n = 12
			for i := 0; i < n; i++ {
				var pns []uint64
				for _, p := range received(t.rec.snapshot(), s.trace.id, 0) {
					if p.space == spaceApp {
						pns = append(pns, p.pn)
					}
				}
				if len(pns) == 0 {
					t.Inconclusive("The tester decrypted no 1-RTT packet from the client to acknowledge.")
				}
				if i%4 == 3 {
					// Now and then a PING, which the client must
					// acknowledge, so that it has reason to send ACKs.
					c.Ping()
				} else {
					c.Inject(spaceApp, ackOf(pns))
				}
				t.rec.wait(ctx, max(t.RTT(), 20*time.Millisecond), nil)
			}
			t.rec.wait(ctx, t.PTO(), nil)
			ps := t.rec.snapshot()
			ackOnly := 0
			for _, p := range ps[mark:] {
				if p.sent && p.conn == s.trace.id && p.space == spaceApp && !p.ackEliciting {
					ackOnly++
				}
			}
			if ackOnly == 0 {
				t.Inconclusive("The tester's server sent no ACK-only packet (its injected ACKs were bundled with other frames).")
			}
			if bad := ackOnlyViolations(ps, s.trace.id, mark); len(bad) > 0 {
				t.Fail("no-ack-of-ack", reqCliNoAckOfAck, fmt.Sprintf("The client sent %d non-ack-eliciting packet(s) whose only new acknowledgments were of the tester's ACK-only packets.", len(bad)), events(Response, lastN(bad, 4)...)...)
				return
			}
			t.Pass("no-ack-of-ack", reqCliNoAckOfAck, fmt.Sprintf("The client answered none of the tester's %d ACK-only packets with an ACK-only packet.", ackOnly))
		},
	})
	registerClient(&Scenario{
		ID: "cli-anti-deadlock-probe", Title: "The client probes with a Handshake packet while the server is held back", Requirements: []Requirement{reqCliAntiDeadlock, reqCliAntiDeadlockH},
		Run: func(ctx context.Context, t *T) {
			const hold = 3 * time.Second
			var mu sync.Mutex
			var first time.Time
			var released bool
			// Until released, the server's datagrams keep only their
			// Initial packets: the ServerHello and ACK arrive, the
			// Handshake flight does not.
			out := func(d []byte) [][]byte {
				mu.Lock()
				defer mu.Unlock()
				if first.IsZero() {
					first = time.Now()
				}
				if released || time.Since(first) > hold {
					return [][]byte{d}
				}
				var keep []byte
				for rest := d; len(rest) > 0; {
					h, err := wire.ParseHeader(rest, 8)
					if err != nil {
						break
					}
					if h.Type == wire.PacketTypeInitial {
						keep = append(keep, rest[:h.PacketLen]...)
					}
					rest = rest[h.PacketLen:]
				}
				if keep == nil {
					return nil
				}
				return [][]byte{keep}
			}
			s := t.serve(ctx, serveOptions{Label: "handshake withheld", Out: out})
			cr := t.launch(ctx, s, smallResource)
			probe := func(ps []*packet) *packet {
				for _, p := range received(ps, s.trace.id, 0) {
					if p.space == spaceHandshake && p.ackEliciting {
						return p
					}
				}
				return nil
			}
			found := t.rec.wait(ctx, clientHandshakeWait+hold, func(ps []*packet) bool { return probe(ps) != nil })
			mu.Lock()
			released = true
			start := first
			mu.Unlock()
			if start.IsZero() {
				t.Inconclusive("The client sent no Initial to the tester's server.")
			}
			if found {
				p := probe(t.rec.snapshot())
				cr.wait(ctx, clientRunWait)
				t.Fact("download-after-probe", cr.downloaded(smallResource))
				if d := p.at.Sub(start); d <= hold {
					t.Pass("probe", reqCliAntiDeadlock, fmt.Sprintf("The client sent a probe %v after the tester's Initial while the Handshake flight was withheld.", d.Round(time.Millisecond)), events(Response, p)...)
					t.Pass("handshake-probe", reqCliAntiDeadlockH, "The probe was a Handshake packet.", events(Response, p)...)
					return
				}
			}
			// No Handshake probe in time: was there an Initial probe?
			var initProbe *packet
			for _, p := range received(t.rec.snapshot(), s.trace.id, 0) {
				if p.space == spaceInitial && p.ackEliciting && p.at.After(start) && p.at.Sub(start) <= hold {
					initProbe = p
					break
				}
			}
			if initProbe != nil {
				t.Pass("probe", reqCliAntiDeadlock, fmt.Sprintf("The client sent an Initial probe %v after the tester's Initial.", initProbe.at.Sub(start).Round(time.Millisecond)), events(Response, initProbe)...)
				t.Fail("handshake-probe", reqCliAntiDeadlockH, "The client probed with an Initial packet although the tester's ServerHello had given it Handshake keys.", events(Response, initProbe)...)
				return
			}
			t.Fail("probe", reqCliAntiDeadlock, fmt.Sprintf("The client sent no ack-eliciting packet within %v after the tester's Initial, while the server's Handshake flight was withheld: the handshake deadlocks.", hold), events(Context, lastN(received(t.rec.snapshot(), s.trace.id, 0), 3)...)...)
		},
	})
}

// Family M, ECN feedback (docs/scenarios.md, Client-facing, cli-ecn): the tester's server,
// on its own UDP socket so that it can mark, sends every datagram ECT(0)
// and one in ten CE during a 1 MiB download.

var reqCliECNFeedback = rfc9000("13.4.1", Must, "Even if an endpoint does not set an ECT field in packets it sends, the endpoint MUST provide feedback about ECN markings it receives, if these are accessible.")

// ecnFeedback is the largest ECN counts the client reported in the
// application space.
type ecnFeedback struct {
	frames          int
	ect0, ect1, ce  uint64
	sentApp         int
	markedCE, total int
}

// judgeECN maps the client's feedback to a verdict: nothing reported is
// unsupported; counts without any CE although CE marks went out, or more
// counts than packets sent, fail.
func judgeECN(f ecnFeedback) (Verdict, string) {
	switch {
	case f.frames == 0:
		return Unsupported, fmt.Sprintf("The client sent no ACK frame with ECN counts although all %d datagrams of the tester were marked (%d CE).", f.total, f.markedCE)
	case f.ect0+f.ect1+f.ce > uint64(f.sentApp):
		return Fail, fmt.Sprintf("The client's ECN counts (ECT(0) %d, ECT(1) %d, CE %d) add up to more than the %d 1-RTT packets the tester sent.", f.ect0, f.ect1, f.ce, f.sentApp)
	case f.ce == 0 && f.markedCE >= 5:
		return Fail, fmt.Sprintf("The client reported ECT(0) %d but CE 0, although %d of the tester's datagrams were marked CE: the counts leave out the CE marks.", f.ect0, f.markedCE)
	case f.ect0 == 0:
		return Fail, fmt.Sprintf("The client reported CE %d but ECT(0) 0, although the tester marked its other datagrams ECT(0).", f.ce)
	}
	return Pass, fmt.Sprintf("The client's ECN counts (ECT(0) %d, CE %d over %d 1-RTT packets, %d datagrams marked CE) include the tester's marks.", f.ect0, f.ce, f.sentApp, f.markedCE)
}

func registerClientECN() {
	registerClient(&Scenario{
		ID: "cli-ecn", Title: "The client reports the ECN marks it receives", Requirements: []Requirement{reqCliECNFeedback},
		Run: func(ctx context.Context, t *T) {
			var mu sync.Mutex
			var f ecnFeedback
			clientMarked := 0
			probe := quic.Probe{
				ECN: func() uint8 {
					mu.Lock()
					defer mu.Unlock()
					f.total++
					if f.total%10 == 0 {
						f.markedCE++
						return 3
					}
					return 2
				},
				OnPacketReceived: func(pi quic.PacketInfo) {
					if pi.ECN != 0 {
						mu.Lock()
						clientMarked++
						mu.Unlock()
					}
				},
			}
			s := t.serve(ctx, serveOptions{Label: "ecn", Probe: probe, RealSocket: true})
			cr := t.launch(ctx, s, largeResource)
			cr.wait(ctx, clientRunWait)
			ps := t.rec.snapshot()
			var last *packet
			for _, p := range ps {
				if p.conn != s.trace.id || p.space != spaceApp {
					continue
				}
				if p.sent {
					f.sentApp++
					continue
				}
				for _, fr := range p.frames {
					if a, ok := fr.(*wire.AckFrame); ok && a.ECN {
						f.frames++
						f.ect0, f.ect1, f.ce = max(f.ect0, a.ECT0), max(f.ect1, a.ECT1), max(f.ce, a.ECNCE)
						last = p
					}
				}
			}
			mu.Lock()
			fb, own := f, clientMarked
			mu.Unlock()
			t.Fact("ecn.client-marked-packets", own)
			t.Fact("ecn.download", cr.downloaded(largeResource))
			if fb.sentApp == 0 {
				t.Inconclusive(fmt.Sprintf("The client never reached the 1-RTT download (%v).", cr.err))
			}
			v, sentence := judgeECN(fb)
			var evs []PacketEvent
			if last != nil {
				evs = events(Response, last)
			}
			switch v {
			case Unsupported:
				t.Unsupported(sentence)
			case Fail:
				t.Fail("feedback", reqCliECNFeedback, sentence, evs...)
			default:
				t.Pass("feedback", reqCliECNFeedback, sentence, evs...)
			}
		},
	})
}

// clientMinAckDelay returns the client's min_ack_delay in microseconds, or
// ends the scenario as unsupported.
func (t *T) clientMinAckDelay(s *testServer) uint64 {
	tp := t.clientTPOf(s)
	if !tp.HasMinAckDelay {
		t.Unsupported("The client does not advertise min_ack_delay (no ACK frequency extension).")
	}
	t.Fact("tp.client.min_ack_delay_us", tp.MinAckDelay)
	return tp.MinAckDelay
}

// pingAckDelays sends n lone PINGs gap apart and returns, for each, how
// long the client took to acknowledge it (-1 when it did not within wait).
func (t *T) pingAckDelays(ctx context.Context, s *testServer, c *Conn, n int, gap, wait time.Duration, frames ...wire.Frame) []time.Duration {
	var out []time.Duration
	for i := 0; i < n; i++ {
		mark := t.mark()
		c.Inject(spaceApp, append([]wire.Frame{&wire.PingFrame{}}, frames...)...)
		var sent *packet
		find := func(ps []*packet) bool {
			if sent == nil {
				for _, p := range ps[min(mark, len(ps)):] {
					if p.sent && p.conn == s.trace.id && p.space == spaceApp && p.has(wire.FrameTypePing) {
						sent = p
						break
					}
				}
			}
			return sent != nil && ackedBy(ps[mark:], s.trace.id, spaceApp, sent.pn) != nil
		}
		if t.rec.wait(ctx, wait, find) {
			a := ackedBy(t.rec.snapshot()[mark:], s.trace.id, spaceApp, sent.pn)
			out = append(out, a.at.Sub(sent.at))
		} else {
			out = append(out, -1)
		}
		t.rec.wait(ctx, gap, nil)
	}
	return out
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ackDelayList(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		if d < 0 {
			parts = append(parts, "none")
		} else {
			parts = append(parts, d.Round(100*time.Microsecond).String())
		}
	}
	return strings.Join(parts, ", ")
}

func registerClientAckFreq() {
	registerClient(&Scenario{
		ID: "cli-ackfreq-invalid", Title: "ACK_FREQUENCY with an invalid Requested Max Ack Delay", Requirements: []Requirement{reqCliAFInvalid},
		Needs: []string{NeedCAny, "c-ackfreq"},
		Run: func(ctx context.Context, t *T) {
			for _, v := range []struct {
				name  string
				delay func(minAck uint64) (uint64, bool)
			}{
				{"below min_ack_delay", func(m uint64) (uint64, bool) { return m - 1, m > 0 }},
				{"2^14 ms", func(uint64) (uint64, bool) { return 1 << 14 * 1000, true }},
			} {
				s, c := t.holdOpen(ctx, serveOptions{Label: v.name})
				d, ok := v.delay(t.clientMinAckDelay(s))
				if !ok {
					t.Check(v.name, Inconclusive, Requirement{}, "The client's min_ack_delay is 0, so no Requested Max Ack Delay is below it.")
					continue
				}
				e := Expectation{Check: v.name, Req: reqCliAFInvalid, Codes: transportCodes(wire.ProtocolViolation),
					Describe: fmt.Sprintf("ACK_FREQUENCY with Requested Max Ack Delay %d µs (%s)", d, v.name)}
				t.Provoke(ctx, c, e, func() {
					c.Inject(spaceApp, &wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 1, RequestedMaxAckDelay: d, ReorderingThreshold: 1})
				})
			}
		},
	})
	registerClient(&Scenario{
		ID: "cli-ackfreq-honoured", Title: "The client follows ACK_FREQUENCY and IMMEDIATE_ACK", Requirements: []Requirement{reqCliAFThreshold, reqCliAFImmediate},
		Needs: []string{NeedCAny, "c-ackfreq"},
		Run: func(ctx context.Context, t *T) {
			// The catalogue sends these during a download; the tester holds
			// a request open instead and times lone PINGs, so that each
			// acknowledgment delay is measured on its own packet.
			s, c := t.holdOpen(ctx, serveOptions{Label: "ack frequency"})
			minAck := time.Duration(t.clientMinAckDelay(s)) * time.Microsecond
			if minAck > 10*time.Millisecond {
				t.Inconclusive(fmt.Sprintf("The client's min_ack_delay (%v) is too close to the default 25 ms max_ack_delay to tell an immediate acknowledgment from a delayed one.", minAck))
			}
			const gap = 40 * time.Millisecond
			wait := 300 * time.Millisecond
			// Threshold 0: every ack-eliciting packet is acknowledged at
			// once (within the requested min_ack_delay).
			c.Inject(spaceApp, &wire.AckFrequencyFrame{SequenceNumber: 0, AckElicitingThreshold: 0, RequestedMaxAckDelay: uint64(minAck / time.Microsecond), ReorderingThreshold: 1})
			t.rec.wait(ctx, t.PTO(), nil)
			ds := t.pingAckDelays(ctx, s, c, 6, gap, wait)
			t.Fact("ackfreq.threshold0-ack-delays", ackDelayList(ds))
			limit := minAck + t.RTT() + 10*time.Millisecond
			if m := median(ds); m < 0 || m > limit {
				t.Warn("threshold", reqCliAFThreshold, fmt.Sprintf("With Ack-Eliciting Threshold 0 and Requested Max Ack Delay %v, the client acknowledged lone PINGs after %s (median above %v).", minAck, ackDelayList(ds), limit.Round(time.Millisecond)))
			} else {
				t.Pass("threshold", reqCliAFThreshold, fmt.Sprintf("With Ack-Eliciting Threshold 0 the client acknowledged lone PINGs after %s.", ackDelayList(ds)))
			}
			// Threshold 9 and a 200 ms delay: a lone PING may wait, one
			// with IMMEDIATE_ACK may not.
			const long = 200 * time.Millisecond
			c.Inject(spaceApp, &wire.AckFrequencyFrame{SequenceNumber: 1, AckElicitingThreshold: 9, RequestedMaxAckDelay: uint64(long / time.Microsecond), ReorderingThreshold: 1})
			t.rec.wait(ctx, t.PTO(), nil)
			lone := t.pingAckDelays(ctx, s, c, 2, gap, 2*long)
			imm := t.pingAckDelays(ctx, s, c, 4, gap, 2*long, &wire.ImmediateAckFrame{})
			t.Fact("ackfreq.threshold9-ack-delays", ackDelayList(lone))
			t.Fact("ackfreq.immediate-ack-delays", ackDelayList(imm))
			if m := median(imm); m < 0 || m > long/2 {
				t.Warn("immediate-ack", reqCliAFImmediate, fmt.Sprintf("With Ack-Eliciting Threshold 9 and a %v Requested Max Ack Delay, the client acknowledged PINGs that carried IMMEDIATE_ACK after %s, not at once.", long, ackDelayList(imm)))
				return
			}
			t.Pass("immediate-ack", reqCliAFImmediate, fmt.Sprintf("The client acknowledged PINGs carrying IMMEDIATE_ACK after %s (lone PINGs under the same settings: %s).", ackDelayList(imm), ackDelayList(lone)))
		},
	})
}

func init() {
	registerClientAckRules()
	registerClientECN()
	registerClientAckFreq()
}
