package conformance

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family C: packet-level invariants judged over what the server sends
// (catalogue §3.C): packet number encoding length, what ACK frames cover,
// the spin bit, the IPv4 DF bit and datagram sizes; and the one
// coalescing rule on the receiving side.

func init() {
	Register(&Scenario{
		ID: "pkt-coalesced-different-dcid", Title: "Coalesced packet for another connection ID is ignored", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("12.2", Should, "Receivers SHOULD ignore any subsequent packets with a different Destination Connection ID than the first packet in the datagram.")},
		Run:          runPktCoalescedDifferentDCID,
	})
	Register(&Scenario{
		ID: "inv-pn-length-sufficient", Title: "Server packet numbers are encoded long enough", Family: "C", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000("17.1", Must, "the sender MUST use a packet number size able to represent more than twice as large a range as the difference between the largest acknowledged packet number and the packet number being sent"),
			rfc9000("17.1", Must, "Prior to receiving an acknowledgment for a packet number space, the full packet number MUST be included"),
		},
		Run: runInvPNLength,
	})
	Register(&Scenario{
		ID: "inv-ack-only-received", Title: "Server ACK frames cover only packets the tester sent", Family: "C", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			reqNoAckBeforeOpen,
			rfc9000("13.2.6", Must, "ACK frames MUST only be carried in a packet that has the same packet number space as the packet being acknowledged"),
		},
		Run: runInvAckOnlyReceived,
	})
	Register(&Scenario{
		ID: "inv-spin-bit", Title: "What the server does with the spin bit", Family: "C", Needs: []string{NeedApp}, Passive: true, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("17.4", May, "When the spin bit is disabled, endpoints MAY set the spin bit to any value and MUST ignore any incoming value.")},
		Run:          runInvSpinBit,
	})
	Register(&Scenario{
		ID: "inv-ipv4-df", Title: "Don't Fragment on the server's IPv4 datagrams", Family: "C", Needs: []string{NeedApp}, Passive: true, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("14", Must, "In IPv4, the Don't Fragment (DF) bit MUST be set if possible, to prevent fragmentation on the path.")},
		Run:          runInvIPv4DF,
	})
	Register(&Scenario{
		ID: "inv-datagram-sizes", Title: "The largest datagrams the server sends", Family: "C", Needs: []string{NeedApp}, Passive: true, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("14.2", ShouldNot, "In the absence of these mechanisms, QUIC endpoints SHOULD NOT send datagrams larger than the smallest allowed maximum datagram size.")},
		Run:          runInvDatagramSizes,
	})
	runWideChecks = append(runWideChecks,
		passiveCheck{id: "inv-pn-length-sufficient", judge: judgePNLength},
		passiveCheck{id: "inv-ack-only-received", judge: judgeAckOnlyReceived},
	)
}

// pnLenOf is the packet number length a received packet's unprotected
// first byte gives, or 0 when the recorder does not know it.
func pnLenOf(p *packet) int {
	if p.firstByte == 0 || p.space < 0 || p.space > 2 {
		return 0
	}
	return int(p.firstByte&3) + 1
}

// largestIn is the largest packet number an ACK frame covers.
func largestIn(a *wire.AckFrame) uint64 {
	var l uint64
	for _, r := range a.Ranges {
		l = max(l, r.Largest)
	}
	return l
}

// judgePNLength checks every server packet whose encoded length the
// recorder knows against the largest packet number the tester had
// acknowledged in that space before the packet arrived.
//
// The catalogue names as reference the largest number acknowledged at
// least one RTT earlier, the acknowledgment the server had surely
// received. That reference is the strictest, not the most lenient: a more
// recent ACK raises the server's largest acknowledged and so allows a
// shorter encoding. So that a fail is certain, the reference here is the
// latest ACK the tester sent before the packet arrived, the most the
// server can have known. The range may also equal twice the distance:
// RFC 9000's own encoder (Appendix A.2) gives 8 bits for 128 unacknowledged
// packets.
func judgePNLength(c connRecord) (string, []*packet) {
	acked := [3]uint64{}
	hasAck := [3]bool{}
	for _, p := range c.packets {
		if p.space < 0 || p.space > 2 {
			continue
		}
		if p.sent {
			for _, f := range p.frames {
				if a, ok := f.(*wire.AckFrame); ok && len(a.Ranges) > 0 {
					acked[p.space] = max(acked[p.space], largestIn(a))
					hasAck[p.space] = true
				}
			}
			continue
		}
		n := pnLenOf(p)
		if n == 0 {
			continue
		}
		rng := uint64(1) << (8 * n)
		switch {
		case !hasAck[p.space] && p.pn >= rng:
			return fmt.Sprintf("before the tester acknowledged anything in the %s space, the server encoded packet number %d in %d bytes, which cannot hold it in full.", p.ev.PacketType, p.pn, n), []*packet{p}
		case hasAck[p.space] && p.pn > acked[p.space] && rng < 2*(p.pn-acked[p.space]):
			return fmt.Sprintf("the server encoded packet number %d in %d bytes (a range of %d) while the largest it could have seen acknowledged was %d, a distance of %d that needs a range of at least %d.", p.pn, n, rng, acked[p.space], p.pn-acked[p.space], 2*(p.pn-acked[p.space])), []*packet{p}
		}
	}
	return "", nil
}

// judgeAckOnlyReceived checks that every packet number the server's ACK
// frames cover in a space is one the tester sent in that space. Every
// packet the tester sends is recorded before it leaves, so an ACK can
// only cover recorded numbers.
func judgeAckOnlyReceived(c connRecord) (string, []*packet) {
	var sent [3]map[uint64]*packet
	for i := range sent {
		sent[i] = map[uint64]*packet{}
	}
	var missing []uint64
	for _, p := range c.packets {
		if p.space < 0 || p.space > 2 {
			continue
		}
		if p.sent {
			sent[p.space][p.pn] = p
			continue
		}
		for _, f := range p.frames {
			a, ok := f.(*wire.AckFrame)
			if !ok {
				continue
			}
			for _, r := range a.Ranges {
				if r.Largest < r.Smallest {
					continue
				}
				if r.Largest-r.Smallest > uint64(len(sent[p.space])) {
					return fmt.Sprintf("a server ACK frame in the %s space covers %d-%d, more packet numbers than the tester ever sent in that space (%d).", p.ev.PacketType, r.Smallest, r.Largest, len(sent[p.space])), []*packet{p}
				}
				missing = missing[:0]
				for pn := r.Smallest; pn <= r.Largest; pn++ {
					if sent[p.space][pn] == nil {
						missing = append(missing, pn)
					}
				}
				if len(missing) > 0 {
					return fmt.Sprintf("a server ACK frame in the %s space covers packet numbers %v that the tester never sent in that space (skipped on purpose, or sent in another space).", p.ev.PacketType, lastNums(missing, 5)), []*packet{p}
				}
			}
		}
	}
	return "", nil
}

func lastNums(xs []uint64, n int) []uint64 {
	if len(xs) > n {
		return xs[:n]
	}
	return xs
}

// judgeOwn runs a run-wide judge over the scenario's own connections: a
// fail on the first violation, else a pass naming how many were judged.
func (t *T) judgeOwn(name string, req Requirement, judge func(connRecord) (string, []*packet), what string) {
	n := 0
	for _, c := range t.records() {
		if len(c.packets) == 0 {
			continue
		}
		n++
		if s, ps := judge(c); s != "" {
			t.Fail(name, req, fmt.Sprintf("On connection %d (%s) %s", c.conn, c.label, s), events(Response, ps...)...)
			return
		}
	}
	t.Pass(name, req, fmt.Sprintf("On the %d connections of this scenario, %s.", n, what))
}

func runInvPNLength(ctx context.Context, t *T) {
	t.passiveTraffic(ctx)
	lens := map[int]int{}
	for _, p := range received(t.rec.snapshot(), -1, 0) {
		if n := pnLenOf(p); n > 0 {
			lens[n]++
		}
	}
	if len(lens) == 0 {
		t.Inconclusive("The tester learnt the packet number length of no server packet.")
	}
	t.Fact("pn.encoded-lengths", fmt.Sprintf("1 byte: %d, 2: %d, 3: %d, 4: %d packets", lens[1], lens[2], lens[3], lens[4]))
	t.judgeOwn("length", t.sc.Requirements[0], judgePNLength, "every server packet number was encoded long enough for the largest number the tester had acknowledged")
}

func runInvAckOnlyReceived(ctx context.Context, t *T) {
	// The engine connection skips every third 1-RTT packet number and
	// every second Handshake one; the raw one skips between PINGs.
	var calls [3]int
	c := t.mustDial(ctx, DialOptions{Label: "engine-skips", Probe: quic.Probe{SkipPacketNumber: func(space int) bool {
		calls[space]++
		return (space == quic.SpaceApplication && calls[space]%3 == 0) || (space == quic.SpaceHandshake && calls[space]%2 == 0)
	}}})
	t.fetchSmall(ctx, c)
	rc := t.rawHandshake(ctx)
	for i := 0; i < 6; i++ {
		rc.nextPN[2]++ // a number never sent
		p := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
		rc.receiveUntil(ctx, t.PTO(), 0, func(q *packet) bool {
			for _, f := range q.frames {
				if a, ok := f.(*wire.AckFrame); ok && q.space == spaceApp && a.Acks(p.pn) {
					return true
				}
			}
			return false
		})
	}
	// How many skipped numbers lay inside acknowledged spans: the gaps
	// the server had the chance to cover.
	gaps := 0
	for _, cr := range t.records() {
		var sent []uint64
		for _, p := range cr.packets {
			if p.sent && p.space == spaceApp {
				sent = append(sent, p.pn)
			}
		}
		slices.Sort(sent)
		for i := 1; i < len(sent); i++ {
			if sent[i] > sent[i-1]+1 {
				gaps++
			}
		}
	}
	if gaps == 0 {
		t.Inconclusive("The tester skipped no packet number inside the ranges it sent.")
	}
	t.Fact("ack.tester-gaps", gaps)
	t.judgeOwn("only-received", t.sc.Requirements[0], judgeAckOnlyReceived, fmt.Sprintf("every number the server's ACK frames covered was one the tester sent in that space (%d gaps skipped on purpose)", gaps))
}

func runPktCoalescedDifferentDCID(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	spare := t.rawSpareCID(ctx, rc)
	req := t.sc.Requirements[0]
	// A 1-RTT packet has no length field and must end its datagram, so
	// the first packet is a Handshake PING addressed to the current
	// connection ID (the server has discarded its Handshake keys and
	// drops it); the 1-RTT PING behind it is what is judged.
	coalesced := func(dcid []byte) *packet {
		hs, _ := rc.longPacket(1, []wire.Frame{&wire.PingFrame{}}, longOpts{})
		one, _ := rc.shortPacket([]wire.Frame{&wire.PingFrame{}}, shortOpts{DCID: dcid})
		p := rc.lastSent()
		rc.send(hs, one)
		return p
	}
	acked := func(p *packet) *packet {
		return rc.receiveUntil(ctx, t.Settle(), 0, func(q *packet) bool {
			for _, f := range q.frames {
				if a, ok := f.(*wire.AckFrame); ok && q.space == spaceApp && a.Acks(p.pn) {
					return true
				}
			}
			return false
		})
	}
	control := coalesced(rc.dcid)
	if acked(control) == nil {
		t.Inconclusive("The server did not acknowledge a 1-RTT PING coalesced behind a Handshake packet with the same connection ID (the control), so it cannot show whether a different one is ignored.", events(Trigger, control)...)
	}
	mark := t.mark()
	probe := coalesced(spare.ConnectionID)
	later := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	acked(later)
	rc.Receive(ctx, t.PTO(), nil)
	ps := t.rec.snapshot()
	if a := ackedBy(ps, rc.trace.id, spaceApp, probe.pn); a != nil {
		t.Fact("coalescing.different-dcid", "processed")
		t.Warn("ignored", req, fmt.Sprintf("The server acknowledged the 1-RTT PING addressed to its connection ID %x behind a packet addressed to %x in the same datagram; ignore packets whose Destination Connection ID differs from the first packet's.", spare.ConnectionID, rc.dcid), append(events(Trigger, probe), events(Response, a)...)...)
		return
	}
	if ackedBy(ps, rc.trace.id, spaceApp, later.pn) == nil || firstClose(received(ps, rc.trace.id, mark)) != nil {
		t.Inconclusive("The server acknowledged nothing after the datagram with two connection IDs, or closed.", events(Trigger, probe)...)
	}
	t.Fact("coalescing.different-dcid", "ignored")
	t.Pass("ignored", req, fmt.Sprintf("The server never acknowledged the 1-RTT PING addressed to %x behind a packet for %x, while it acknowledged the control and a later PING.", spare.ConnectionID, rc.dcid), events(Trigger, control, probe, later)...)
}

// spinOf is the spin bit of a 1-RTT packet whose first byte is known.
func spinOf(p *packet) (spin, ok bool) {
	if p.firstByte == 0 || p.ev.PacketType != "1RTT" {
		return false, false
	}
	return p.firstByte&wire.ShortSpinBit != 0, true
}

// classifySpin describes what a server did with the spin bit on one
// connection: for each server 1-RTT packet, the spin value of the
// tester's latest 1-RTT packet sent before it arrived is what a server
// that runs the spin bit reflects.
func classifySpin(ps []*packet) (kind string, reflected, total int) {
	var last, have bool
	values := map[bool]int{}
	for _, p := range ps {
		s, ok := spinOf(p)
		if !ok {
			continue
		}
		if p.sent {
			last, have = s, true
			continue
		}
		if !have {
			continue
		}
		total++
		values[s]++
		if s == last {
			reflected++
		}
	}
	switch {
	case total < 4:
		return "too few packets", reflected, total
	case len(values) == 1:
		return "constant", reflected, total
	case reflected*4 >= total*3:
		return "reflects", reflected, total
	}
	return "varies without following the tester", reflected, total
}

func runInvSpinBit(ctx context.Context, t *T) {
	var kinds []string
	for i := 0; i < 2; i++ {
		rc := t.rawEstablished(ctx, rawOptions{Label: fmt.Sprintf("spin-%d", i)}, func(rc *rawClient) { rc.Spin = true })
		// Ping-pong rounds: each ACK flips the tester's spin value.
		for r := 0; r < 12; r++ {
			p := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
			rc.receiveUntil(ctx, t.PTO(), 0, func(q *packet) bool {
				for _, f := range q.frames {
					if a, ok := f.(*wire.AckFrame); ok && q.space == spaceApp && a.Acks(p.pn) {
						return true
					}
				}
				return false
			})
		}
		var own []*packet
		for _, p := range t.rec.snapshot() {
			if p.conn == rc.trace.id {
				own = append(own, p)
			}
		}
		kind, refl, total := classifySpin(own)
		kinds = append(kinds, kind)
		t.Fact(fmt.Sprintf("spin.connection-%d", i), fmt.Sprintf("%s (%d of %d server packets carried the tester's latest spin value)", kind, refl, total))
	}
	disabled := 0
	for _, k := range kinds {
		if k != "reflects" {
			disabled++
		}
	}
	t.Fact("spin.disabled-share", fmt.Sprintf("%d of %d connections", disabled, len(kinds)))
	t.Observe("spin", fmt.Sprintf("With the tester spinning, the server's spin bit: %v.", kinds))
}

func runInvIPv4DF(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawOptions{Label: "df"})
	if !rc.peer.Addr().Unmap().Is4() {
		t.Unsupported(fmt.Sprintf("The target %v is reached over IPv6, whose header has no DF bit.", rc.peer))
	}
	obs, err := newDFObserver(rc.peer)
	if err != nil {
		t.Inconclusive(fmt.Sprintf("The tester cannot read the IPv4 headers of received datagrams (%v): a UDP socket does not expose the DF bit, and a raw socket needs CAP_NET_RAW.", err))
	}
	t.cleanup(obs.close)
	obs.watchPort(rc.local.Port())
	if err := rc.Handshake(ctx, t.Settle()+2*time.Second); err != nil {
		t.Inconclusive(fmt.Sprintf("The tester's scripted handshake did not complete: %v.", err))
	}
	rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	rc.Receive(ctx, 100*time.Millisecond, nil)
	withDF, total := obs.counts()
	if total == 0 {
		t.Inconclusive("The raw socket saw none of the server's IPv4 packets.")
	}
	t.Fact("ip.df-set", fmt.Sprintf("%d of %d IPv4 packets", withDF, total))
	// A batch sent with UDP segmentation offload reaches a raw socket on
	// loopback as one IP packet, so packets can be fewer than datagrams.
	t.Check("df", Pass, t.sc.Requirements[0], fmt.Sprintf("Don't Fragment was set on %d of the %d IPv4 packets the server sent in a handshake and a request (the requirement holds only if possible, so it is recorded).", withDF, total))
}

func runInvDatagramSizes(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	path := t.profile.SmallPath
	if t.profile.Target.LargePath != "" {
		path = t.profile.Target.LargePath
	}
	rc.Fetch(ctx, path, t.Settle())
	t.rec.mu.Lock()
	dgs := append([]datagramRec(nil), t.rec.datagrams...)
	t.rec.mu.Unlock()
	var largest datagramRec
	n, over1200 := 0, 0
	for _, d := range dgs {
		if d.sent {
			continue
		}
		n++
		if len(d.b) > 1200 {
			over1200++
		}
		if len(d.b) > len(largest.b) {
			largest = d
		}
	}
	if n == 0 {
		t.Inconclusive("The server sent no datagram.")
	}
	limit := defaultClientTP(nil).MaxUDPPayloadSize
	at := largest.at.Sub(rc.firstSent).Round(time.Millisecond)
	t.Fact("datagram.largest", len(largest.b))
	t.Fact("datagram.largest-at", at.String())
	t.Fact("datagram.over-1200", fmt.Sprintf("%d of %d", over1200, n))
	t.Fact("datagram.over-max-udp-payload", len(largest.b) > int(limit))
	t.Observe("sizes", fmt.Sprintf("The server's largest datagram was %d bytes, %v after the tester's first packet; %d of its %d datagrams exceeded 1200 bytes; the tester's max_udp_payload_size (%d) was %s.", len(largest.b), at, over1200, n, limit, map[bool]string{true: "exceeded", false: "respected"}[len(largest.b) > int(limit)]))
}
