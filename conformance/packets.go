package conformance

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

func runPktCryptoLargeGap(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{})
	mark := len(t.rec.snapshot())
	c.Inject(spaceApp, &wire.CryptoFrame{Offset: 1 << 20, Data: make([]byte, 100)}, &wire.PingFrame{})
	t.rec.wait(ctx, t.Settle(), func(ps []*packet) bool { return firstClose(received(ps, c.ID(), mark)) != nil })
	c.trace.noteRemoteClose(c.Err())
	ps := t.rec.snapshot()
	var trig *packet
	for _, p := range ps[mark:] {
		if p.sent && p.conn == c.ID() && p.has(wire.FrameTypeCrypto) {
			trig = p
			break
		}
	}
	if trig == nil {
		t.Errorf("the CRYPTO frame was never sent")
	}
	req := t.sc.Requirements[1]
	if cl := firstClose(received(ps, c.ID(), mark)); cl != nil {
		cc := cl.closeFrame()
		t.Fact("crypto.gap-reaction", "close "+closeCode(cc))
		if !cc.Application && cc.ErrorCode == uint64(wire.CryptoBufferExceeded) {
			t.Pass(
				"reaction",
				req,
				"The server closed with CRYPTO_BUFFER_EXCEEDED, one of the two reactions §7.5 allows.",
				evidence(events(Trigger, trig), events(Response, cl))...)
		} else {
			t.Observe("reaction", fmt.Sprintf("The server closed with %s; §7.5 names CRYPTO_BUFFER_EXCEEDED.", closeCode(cc)), evidence(events(Trigger, trig), events(Response, cl))...)
		}
		return
	}
	if a := ackedBy(ps, c.ID(), spaceApp, trig.pn); a != nil {
		t.Fact("crypto.gap-reaction", "discard and acknowledge")
		t.Pass(
			"reaction",
			req,
			"The server acknowledged the packet carrying a CRYPTO frame 1 MiB ahead and stayed open.",
			evidence(events(Trigger, trig), events(Response, a))...)
		return
	}
	// Still open? A later PING tells.
	m2 := len(t.rec.snapshot())
	c.Ping()
	if t.rec.wait(ctx, t.Settle(), func(ps []*packet) bool {
		for _, p := range ps[m2:] {
			if p.sent && p.conn == c.ID() && p.has(wire.FrameTypePing) && ackedBy(ps, c.ID(), spaceApp, p.pn) != nil {
				return true
			}
		}
		return false
	}) {
		t.Fail(
			"reaction",
			req,
			"The server never acknowledged the packet carrying a CRYPTO frame 1 MiB ahead, yet acknowledged a later PING and stayed open.",
			events(Trigger, trig)...)
		return
	}
	t.Check("reaction", Inconclusive, req, "The server acknowledged neither the CRYPTO packet nor a later PING, and did not close.", events(Trigger, trig)...)
}

func runPktNonMinimal(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{})
	mark := len(t.rec.snapshot())
	c.Inject(spaceApp, &wire.RawFrame{Bytes: []byte{0x40, 0x01}})
	t.rec.wait(ctx, t.Settle(), func(ps []*packet) bool { return firstClose(received(ps, c.ID(), mark)) != nil })
	c.trace.noteRemoteClose(c.Err())
	if cl := firstClose(received(t.rec.snapshot(), c.ID(), mark)); cl != nil {
		t.Observe("reaction", "The server closed on a two-byte PING type: "+closeCode(cl.closeFrame())+".", events(Response, cl)...)
		return
	}
	t.Observe("reaction", "The server accepted a PING whose type used two bytes.")
}

func runPktDuplicate(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	var data [8]byte
	copy(data[:], randomBytes(8))
	pkt, _ := rc.ShortPacket([]wire.Frame{&wire.PathChallengeFrame{Data: data}}, rawquic.ShortOpts{PadTo: 1200})
	trig := rc.LastSent()
	rc.Send(pkt)
	sleep(ctx, 5*time.Millisecond)
	rc.Send(pkt)
	rc.Receive(ctx, t.Settle(), nil)
	var resp []*packet
	for _, p := range received(t.rec.snapshot(), rc.trace.id, 0) {
		for _, f := range p.frames {
			if pr, ok := f.(*wire.PathResponseFrame); ok && pr.Data == data {
				resp = append(resp, p)
			}
		}
	}
	req := t.sc.Requirements[0]
	switch len(resp) {
	case 0:
		t.Check("once", Inconclusive, req, "No PATH_RESPONSE came back for the PATH_CHALLENGE sent twice.", events(Trigger, trig)...)
	case 1:
		t.Pass(
			"once",
			req,
			"The server processed the duplicated packet once: exactly one PATH_RESPONSE came back.",
			evidence(events(Trigger, trig), events(Response, resp...))...)
	default:
		t.Fail(
			"once",
			req,
			fmt.Sprintf("The server processed a duplicated packet twice: %d PATH_RESPONSE frames echo the same challenge.", len(resp)),
			evidence(events(Trigger, trig), events(Response, resp...))...)
	}
}

func runPktCoalescedBadFirst(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	h := wire.LongHeader{Version: wire.Version(rc.Version), Type: wire.PacketTypeHandshake, DCID: rc.DCID, SCID: rc.SCID, LengthLen: 2, PNLen: 4}
	hdr, lengthOff, _ := h.Append(nil)
	body := randomBytes(60)
	wire.PutVarintLen(hdr[lengthOff:], uint64(4+len(body)-4), 2)
	bad := append(hdr[:len(hdr)-4], body...)
	good, pn := rc.ShortPacket([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	trig := rc.LastSent()
	rc.Send(bad, good)
	var pings []*packet
	for waited := time.Duration(0); waited < t.Settle(); waited += t.PTO() {
		rc.Receive(ctx, t.PTO(), nil)
		pings = append(pings, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{}))
	}
	ps := t.rec.snapshot()
	req := t.sc.Requirements[0]
	if a := ackedBy(ps, rc.trace.id, 2, pn); a != nil {
		t.Pass(
			"processed",
			req,
			"The server processed and acknowledged the 1-RTT packet that followed an undecryptable Handshake packet in the same datagram.",
			evidence(events(Trigger, trig), events(Response, a))...)
		return
	}
	for _, pg := range pings {
		if ackedBy(ps, rc.trace.id, 2, pg.pn) != nil {
			t.Fail(
				"processed",
				req,
				"The server never acknowledged the 1-RTT packet coalesced behind an undecryptable Handshake packet, but acknowledged later packets.",
				events(Trigger, trig)...)
			return
		}
	}
	t.Check("processed", Inconclusive, req, "The server acknowledged nothing after the coalesced datagram.", events(Trigger, trig)...)
}

// passiveTraffic runs a normal connection with a fetch and a raw handshake,
// so the passive checks have traffic to judge.
func (t *T) passiveTraffic(ctx context.Context) {
	c := t.mustDial(ctx, DialOptions{Label: "engine"})
	t.fetchSmall(ctx, c)
	rc := t.newRaw(ctx, rawquic.Options{Label: "raw"})
	rc.Handshake(ctx, t.Settle()+time.Second)
	rc.Receive(ctx, 2*t.PTO(), nil)
}

func runInvPNMonotonic(ctx context.Context, t *T) {
	t.passiveTraffic(ctx)
	type key struct{ conn, space int }
	last := map[key]*packet{}
	n := 0
	for _, p := range received(t.rec.snapshot(), -1, 0) {
		if p.space < 0 || p.ev.PacketType == "unknown" {
			continue
		}
		k := key{p.conn, p.space}
		if prev, ok := last[k]; ok && p.pn <= prev.pn {
			if p.pn == prev.pn && p.closeFrame() != nil && prev.closeFrame() != nil {
				continue // an identical repeat of a closing packet
			}
			req := t.sc.Requirements[0]
			if p.pn == prev.pn {
				req = t.sc.Requirements[1]
			}
			t.Fail(
				"increasing",
				req,
				fmt.Sprintf("In the %s space the server sent packet %d after packet %d.", p.ev.PacketType, p.pn, prev.pn),
				events(Response, prev, p)...)
			return
		}
		last[k] = p
		n++
	}
	t.Pass("increasing", t.sc.Requirements[0], fmt.Sprintf("All %d server packets arrived with increasing packet numbers in each space.", n))
}

func runInvFramesPermitted(ctx context.Context, t *T) {
	t.passiveTraffic(ctx)
	n := 0
	for _, p := range received(t.rec.snapshot(), -1, 0) {
		if p.space < 0 || p.ev.PacketType == "unknown" {
			continue
		}
		pt := map[int]wire.PacketType{0: wire.PacketTypeInitial, 1: wire.PacketTypeHandshake, 2: wire.PacketType1RTT}[p.space]
		for _, f := range p.frames {
			n++
			ft := f.Type()
			if !ft.Known() || ft.AllowedIn(pt) {
				continue
			}
			req := t.sc.Requirements[0]
			if ft == wire.FrameTypeConnectionCloseApplication {
				req = t.sc.Requirements[1]
			}
			t.Fail("placement", req, fmt.Sprintf("The server sent a %s frame in a %s packet.", ft, p.ev.PacketType), events(Response, p)...)
			return
		}
	}
	t.Pass("placement", t.sc.Requirements[0], fmt.Sprintf("All %d server frames travelled in packet types that allow them.", n))
}

func runInvInitialDatagramSize(ctx context.Context, t *T) {
	t.passiveTraffic(ctx)
	n := 0
	for _, p := range received(t.rec.snapshot(), -1, 0) {
		if p.ev.PacketType != "initial" || !p.ackEliciting || p.datagram == 0 {
			continue
		}
		n++
		if p.datagram < 1200 {
			t.Fail(
				"padding",
				t.sc.Requirements[0],
				fmt.Sprintf("The server sent an ack-eliciting Initial packet in a %d-byte datagram.", p.datagram),
				events(Response, p)...)
			return
		}
	}
	if n == 0 {
		t.Inconclusive("The tester saw no ack-eliciting server Initial packet.")
	}
	t.Pass("padding", t.sc.Requirements[0], fmt.Sprintf("All %d datagrams with ack-eliciting server Initial packets were at least 1200 bytes.", n))
}

func runInvCoalesceSameCID(ctx context.Context, t *T) {
	t.passiveTraffic(ctx)
	t.rec.mu.Lock()
	dgs := append([]datagramRec(nil), t.rec.allDatagramsLocked()...)
	t.rec.mu.Unlock()
	coalesced, bad := judgeCoalesceSameCID(dgs)
	if bad != "" {
		t.Fail("same-cid", t.sc.Requirements[0], bad)
		return
	}
	t.Fact("coalescing.datagrams", coalesced)
	if coalesced == 0 {
		t.Pass("same-cid", t.sc.Requirements[0], "The server coalesced no packets in the connections seen, so no mixed connection IDs.")
		return
	}
	t.Pass("same-cid", t.sc.Requirements[0], fmt.Sprintf("All %d coalesced server datagrams carried one Destination Connection ID.", coalesced))
}

// judgeCoalesceSameCID reads the server's datagrams: how many coalesced
// packets, and a sentence when two packets of one datagram carry different
// Destination Connection IDs. Bytes after the last long-header packet are
// a packet only when their Fixed Bit is set: RFC 9000 §17.2 "Packets
// containing a zero value for this bit are not valid packets in this
// version and MUST be discarded", so zero padding after the last packet
// (which a sender may add to fill a datagram) is not a coalesced packet.
func judgeCoalesceSameCID(dgs []datagramRec) (coalesced int, bad string) {
	for _, d := range dgs {
		if d.sent {
			continue
		}
		var first []byte
		rest := d.b
		count := 0
		for len(rest) > 0 && wire.IsLongHeader(rest) && rest[0]&0x40 != 0 {
			h, err := wire.ParseHeader(rest, 0)
			if err != nil || h.Version == 0 || h.Type == wire.PacketTypeRetry || h.PacketLen <= 0 || h.PacketLen > len(rest) {
				break
			}
			if count == 0 {
				first = append([]byte(nil), h.DCID...)
			} else if string(h.DCID) != string(first) {
				return coalesced, fmt.Sprintf("A server datagram coalesced packets for Destination Connection IDs %x and %x.", first, h.DCID)
			}
			count++
			rest = rest[h.PacketLen:]
		}
		// A short-header packet: Header Form 0, Fixed Bit 1 (RFC 9000 §17.3).
		trailing := count >= 1 && len(rest) > 0 && rest[0]&0xc0 == 0x40
		if count > 1 || trailing {
			coalesced++
		}
		if trailing && len(rest) > len(first) && string(rest[1:1+len(first)]) != string(first) {
			return coalesced, fmt.Sprintf("A server datagram coalesced a 1-RTT packet for %x behind packets for %x.", rest[1:1+len(first)], first)
		}
	}
	return coalesced, ""
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
	var sentence string
	var cited *packet
	c.walk(func(v pktView) bool {
		space := v.space()
		if space < 0 || space > 2 {
			return true
		}
		if v.sent() {
			if v.p == nil {
				if v.e.hasAck {
					acked[space] = max(acked[space], v.e.ackLargest)
					hasAck[space] = true
				}
				return true
			}
			for _, f := range v.p.frames {
				if a, ok := f.(*wire.AckFrame); ok && len(a.Ranges) > 0 {
					acked[space] = max(acked[space], largestIn(a))
					hasAck[space] = true
				}
			}
			return true
		}
		p := v.packet()
		n := pnLenOf(p)
		if n == 0 {
			return true
		}
		rng := uint64(1) << (8 * n)
		switch {
		case !hasAck[space] && p.pn >= rng:
			sentence = fmt.Sprintf(
				"before the tester acknowledged anything in the %s space, the server encoded packet number %d in %d bytes, which cannot hold it in full.",
				p.ev.PacketType,
				p.pn,
				n,
			)
		case hasAck[space] && p.pn > acked[space] && rng < 2*(p.pn-acked[space]):
			sentence = fmt.Sprintf(
				"the server encoded packet number %d in %d bytes (a range of %d) while the largest it could have seen acknowledged was %d, a distance of %d that needs a range of at least %d.",
				p.pn,
				n,
				rng,
				acked[space],
				p.pn-acked[space],
				2*(p.pn-acked[space]),
			)
		default:
			return true
		}
		cited = p
		return false
	})
	if sentence == "" {
		return "", nil
	}
	return sentence, []*packet{cited}
}

// judgeAckOnlyReceived checks that every packet number the server's ACK
// frames cover in a space is one the tester sent in that space. Every
// packet the tester sends is recorded before it leaves, so an ACK can
// only cover recorded numbers.
func judgeAckOnlyReceived(c connRecord) (string, []*packet) {
	var sent [3]rawquic.PNSet
	var count [3]int
	var missing []uint64
	var sentence string
	var cited *packet
	c.walk(func(v pktView) bool {
		space := v.space()
		if space < 0 || space > 2 {
			return true
		}
		if v.sent() {
			if sent[space].Add(v.pn()) {
				count[space]++
			}
			return true
		}
		if v.p == nil {
			return true // a ledger entry of a received packet keeps no ACK ranges
		}
		p := v.p
		for _, f := range p.frames {
			a, ok := f.(*wire.AckFrame)
			if !ok {
				continue
			}
			for _, r := range a.Ranges {
				if r.Largest < r.Smallest {
					continue
				}
				if r.Largest-r.Smallest > uint64(count[space]) {
					sentence, cited = fmt.Sprintf(
						"a server ACK frame in the %s space covers %d-%d, more packet numbers than the tester ever sent in that space (%d).",
						p.ev.PacketType,
						r.Smallest,
						r.Largest,
						count[space],
					), p
					return false
				}
				missing = missing[:0]
				for pn := r.Smallest; pn <= r.Largest; pn++ {
					if !sent[space].Contains(pn) {
						missing = append(missing, pn)
					}
				}
				if len(missing) > 0 {
					sentence, cited = fmt.Sprintf(
						"a server ACK frame in the %s space covers packet numbers %v that the tester never sent in that space (skipped on purpose, or sent in another space).",
						p.ev.PacketType,
						lastNums(missing, 5),
					), p
					return false
				}
			}
		}
		return true
	})
	if sentence == "" {
		return "", nil
	}
	return sentence, []*packet{cited}
}

func lastNums(xs []uint64, n int) []uint64 {
	if len(xs) > n {
		return xs[:n]
	}
	return xs
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
	t.judgeOwn(
		"length",
		t.sc.Requirements[0],
		judgePNLength,
		"every server packet number was encoded long enough for the largest number the tester had acknowledged",
	)
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
		rc.NextPN[2]++ // a number never sent
		p := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
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
	t.judgeOwn(
		"only-received",
		t.sc.Requirements[0],
		judgeAckOnlyReceived,
		fmt.Sprintf("every number the server's ACK frames covered was one the tester sent in that space (%d gaps skipped on purpose)", gaps),
	)
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
		hs, _ := rc.LongPacket(1, []wire.Frame{&wire.PingFrame{}}, rawquic.LongOpts{})
		one, _ := rc.ShortPacket([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{DCID: dcid})
		p := rc.LastSent()
		rc.Send(hs, one)
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
	control := coalesced(rc.DCID)
	if acked(control) == nil {
		t.Inconclusive(
			"The server did not acknowledge a 1-RTT PING coalesced behind a Handshake packet with the same connection ID (the control), so it cannot show whether a different one is ignored.",
			events(Trigger, control)...)
	}
	mark := t.mark()
	probe := coalesced(spare.ConnectionID)
	later := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	acked(later)
	rc.Receive(ctx, t.PTO(), nil)
	ps := t.rec.snapshot()
	if a := ackedBy(ps, rc.trace.id, spaceApp, probe.pn); a != nil {
		t.Fact("coalescing.different-dcid", "processed")
		t.Warn(
			"ignored",
			req,
			fmt.Sprintf(
				"The server acknowledged the 1-RTT PING addressed to its connection ID %x behind a packet addressed to %x in the same datagram; ignore packets whose Destination Connection ID differs from the first packet's.",
				spare.ConnectionID,
				rc.DCID,
			),
			evidence(events(Trigger, probe), events(Response, a))...)
		return
	}
	if ackedBy(ps, rc.trace.id, spaceApp, later.pn) == nil || firstClose(received(ps, rc.trace.id, mark)) != nil {
		t.Inconclusive("The server acknowledged nothing after the datagram with two connection IDs, or closed.", events(Trigger, probe)...)
	}
	t.Fact("coalescing.different-dcid", "ignored")
	t.Pass(
		"ignored",
		req,
		fmt.Sprintf(
			"The server never acknowledged the 1-RTT PING addressed to %x behind a packet for %x, while it acknowledged the control and a later PING.",
			spare.ConnectionID,
			rc.DCID,
		),
		events(Trigger, control, probe, later)...)
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
		rc := t.rawEstablished(ctx, rawquic.Options{Label: fmt.Sprintf("spin-%d", i)}, func(rc *rawClient) { rc.Spin = true })
		// Ping-pong rounds: each ACK flips the tester's spin value.
		for r := 0; r < 12; r++ {
			p := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
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
	rc := t.newRaw(ctx, rawquic.Options{Label: "df"})
	if !rc.Peer.Addr().Unmap().Is4() {
		t.Unsupported(fmt.Sprintf("The target %v is reached over IPv6, whose header has no DF bit.", rc.Peer))
	}
	obs, err := newDFObserver(rc.Peer)
	if err != nil {
		t.Inconclusive(
			fmt.Sprintf(
				"The tester cannot read the IPv4 headers of received datagrams (%v): a UDP socket does not expose the DF bit, and a raw socket needs CAP_NET_RAW.",
				err,
			),
		)
	}
	t.cleanup(obs.close)
	obs.watchPort(rc.Local.Port())
	if err := rc.Handshake(ctx, t.Settle()+2*time.Second); err != nil {
		t.Inconclusive(fmt.Sprintf("The tester's scripted handshake did not complete: %v.", err))
	}
	rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	rc.Receive(ctx, 100*time.Millisecond, nil)
	withDF, total := obs.counts()
	if total == 0 {
		t.Inconclusive("The raw socket saw none of the server's IPv4 packets.")
	}
	t.Fact("ip.df-set", fmt.Sprintf("%d of %d IPv4 packets", withDF, total))
	// A batch sent with UDP segmentation offload reaches a raw socket on
	// loopback as one IP packet, so packets can be fewer than datagrams.
	t.Check(
		"df",
		Pass,
		t.sc.Requirements[0],
		fmt.Sprintf(
			"Don't Fragment was set on %d of the %d IPv4 packets the server sent in a handshake and a request (the requirement holds only if possible, so it is recorded).",
			withDF,
			total,
		),
	)
}

func runInvDatagramSizes(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	path := t.profile.SmallPath
	if t.profile.Target.LargePath != "" {
		path = t.profile.Target.LargePath
	}
	rc.Fetch(ctx, path, t.Settle())
	t.rec.mu.Lock()
	dgs := append([]datagramRec(nil), t.rec.allDatagramsLocked()...)
	t.rec.mu.Unlock()
	var largest datagramRec
	n, over1200 := 0, 0
	for _, d := range dgs {
		if d.sent {
			continue
		}
		n++
		if d.size > 1200 {
			over1200++
		}
		if d.size > largest.size {
			largest = d
		}
	}
	if n == 0 {
		t.Inconclusive("The server sent no datagram.")
	}
	limit := rawquic.DefaultClientTP(nil).MaxUDPPayloadSize
	at := largest.at.Sub(rc.FirstSent).Round(time.Millisecond)
	t.Fact("datagram.largest", largest.size)
	t.Fact("datagram.largest-at", at.String())
	t.Fact("datagram.over-1200", fmt.Sprintf("%d of %d", over1200, n))
	t.Fact("datagram.over-max-udp-payload", largest.size > int(limit))
	t.Observe(
		"sizes",
		fmt.Sprintf(
			"The server's largest datagram was %d bytes, %v after the tester's first packet; %d of its %d datagrams exceeded 1200 bytes; the tester's max_udp_payload_size (%d) was %s.",
			largest.size,
			at,
			over1200,
			n,
			limit,
			map[bool]string{true: "exceeded", false: "respected"}[largest.size > int(limit)],
		),
	)
}

func judgePNMonotonic(c connRecord) (string, []*packet) {
	// Order is judged per path: the raw client reads each of its
	// sockets in its own goroutine, so packets on different paths can
	// reach the record out of their sending order. Reuse is judged
	// across paths.
	type key struct{ space, path int }
	last := map[key]pktView{}
	seen := map[key]pktView{} // space and packet number
	var scid []byte
	var sentence string
	var cited []*packet
	c.walk(func(v pktView) bool {
		if v.sent() || v.space() < 0 || v.p != nil && v.p.ev.PacketType == "unknown" {
			return true
		}
		// A new server connection ID on a long header means a new
		// server connection (a scenario that restarts its handshake on
		// the same socket): its numbers start again.
		if v.p != nil && len(v.p.scid) > 0 && !bytes.Equal(v.p.scid, scid) {
			if scid != nil {
				clear(last)
				clear(seen)
			}
			scid = v.p.scid
		}
		repeat := func(prev pktView) bool {
			return prev.p != nil && v.p != nil && prev.p.closeFrame() != nil && v.p.closeFrame() != nil
		}
		space, pn := v.space(), v.pn()
		if prev, ok := seen[key{space, int(pn)}]; ok && !repeat(prev) {
			p := v.packet()
			sentence, cited = fmt.Sprintf("in the %s space the server sent packet number %d twice.", p.ev.PacketType, pn), []*packet{prev.packet(), p}
			return false
		}
		seen[key{space, int(pn)}] = v
		k := key{space, v.path()}
		if prev, ok := last[k]; ok && pn < prev.pn() {
			p := v.packet()
			sentence, cited = fmt.Sprintf(
				"in the %s space the server sent packet %d after packet %d on the same path.",
				p.ev.PacketType,
				pn,
				prev.pn(),
			), []*packet{
				prev.packet(),
				p,
			}
			return false
		}
		last[k] = v
		return true
	})
	return sentence, cited
}

func judgeFramesPermitted(c connRecord) (string, []*packet) {
	for _, p := range c.packets {
		if p.sent || p.space < 0 || p.ev.PacketType == "unknown" {
			continue
		}
		pt := map[int]wire.PacketType{0: wire.PacketTypeInitial, 1: wire.PacketTypeHandshake, 2: wire.PacketType1RTT}[p.space]
		for _, f := range p.frames {
			if ft := f.Type(); ft.Known() && !ft.AllowedIn(pt) {
				return fmt.Sprintf("the server sent a %s frame in a %s packet.", ft, p.ev.PacketType), []*packet{p}
			}
		}
	}
	return "", nil
}

func init() {
	Register(&Scenario{
		ID: "pkt-ack-in-0rtt", Title: "ACK frame in a 0-RTT packet", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"12.4",
				Must,
				"An endpoint MUST treat receipt of a frame in a packet type that is not permitted as a connection error of type PROTOCOL_VIOLATION.",
			),
			rfc9000("12.5", Descriptive, "0-RTT packets cannot contain ACK frames."),
		},
		Run: func(ctx context.Context, t *T) {
			t.provoke0RTT(ctx, func(*resumption) (wire.Frame, Expectation) {
				return &wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 0, Largest: 0}}}, Expectation{
					Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation),
					Describe: "an ACK frame in a 0-RTT packet"}
			})
		},
	})
	registerProvoked(provokedSpec{
		id: "pkt-unknown-frame-type", title: "Frame of an unknown type", family: "C", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000("12.4", Must, "An endpoint MUST treat the receipt of a frame of unknown type as a connection error of type FRAME_ENCODING_ERROR."),
		},
		codes:    transportCodes(wire.FrameEncodingError),
		describe: fmt.Sprintf("a frame of unassigned type 0x%x", unknownFrameType),
		frames: func(t *T, c *Conn) []wire.Frame {
			t.Fact("frame.unknown-type-used", fmt.Sprintf("0x%x", unknownFrameType))
			return []wire.Frame{&wire.RawFrame{Bytes: wire.AppendVarint(nil, unknownFrameType)}}
		},
	})
	registerProvoked(provokedSpec{
		id: "pkt-new-token-from-client", title: "NEW_TOKEN sent by a client", family: "C", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("19.7", Must, "A server MUST treat receipt of a NEW_TOKEN frame as a connection error of type PROTOCOL_VIOLATION.")},
		codes:    transportCodes(wire.ProtocolViolation),
		describe: "a NEW_TOKEN frame from the client",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.NewTokenFrame{Token: randomBytes(16)}}
		},
	})
	registerProvoked(provokedSpec{
		id: "pkt-handshake-done-from-client", title: "HANDSHAKE_DONE sent by a client", family: "C", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000("19.20", Must, "A server MUST treat receipt of a HANDSHAKE_DONE frame as a connection error of type PROTOCOL_VIOLATION."),
		},
		codes:    transportCodes(wire.ProtocolViolation),
		describe: "a HANDSHAKE_DONE frame from the client",
		frames:   func(t *T, c *Conn) []wire.Frame { return []wire.Frame{&wire.HandshakeDoneFrame{}} },
	})
	registerProvoked(provokedSpec{
		id: "pkt-ack-negative-range", title: "ACK range below packet number 0", family: "C", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000("19.3.1", Must, "If any computed packet number is negative, an endpoint MUST generate a connection error of type FRAME_ENCODING_ERROR."),
		},
		codes:    transportCodes(wire.FrameEncodingError),
		describe: "an ACK frame (Largest 2, Gap 5) whose second range lies below packet number 0",
		frames: func(t *T, c *Conn) []wire.Frame {
			// Type, Largest 2, Delay 0, Range Count 1, First Range 0, Gap 5, Range 0.
			return []wire.Frame{&wire.RawFrame{Bytes: []byte{0x02, 0x02, 0x00, 0x01, 0x00, 0x05, 0x00}}}
		},
	})
	registerProvoked(provokedSpec{
		id: "pkt-ack-unsent-packet", title: "ACK for a packet never sent", family: "C", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"13.1",
				Should,
				"An endpoint SHOULD treat receipt of an acknowledgment for a packet it did not send as a connection error of type PROTOCOL_VIOLATION, if it is able to detect the condition.",
			),
		},
		codes:    transportCodes(wire.ProtocolViolation),
		anyCode:  true,
		warnOnly: true,
		describe: "an ACK frame for a packet number 1000 above the largest the server sent",
		frames: func(t *T, c *Conn) []wire.Frame {
			var largest uint64
			for _, p := range received(t.rec.snapshot(), c.ID(), 0) {
				if p.space == spaceApp && p.pn > largest {
					largest = p.pn
				}
			}
			return []wire.Frame{&wire.AckFrame{Ranges: []wire.AckRange{{Smallest: largest + 1000, Largest: largest + 1000}}}}
		},
	})
	registerProvoked(provokedSpec{
		id: "pkt-crypto-offset-overflow", title: "CRYPTO frame beyond 2^62-1", family: "C", needs: []string{NeedApp},
		reqs: []Requirement{
			rfc9000(
				"19.6",
				Must,
				"Receipt of a frame that exceeds this limit MUST be treated as a connection error of type FRAME_ENCODING_ERROR or CRYPTO_BUFFER_EXCEEDED.",
			),
		},
		codes:    transportCodes(wire.FrameEncodingError, wire.CryptoBufferExceeded),
		describe: "a 1-RTT CRYPTO frame at offset 2^62-2 with 4 bytes",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.CryptoFrame{Offset: wire.MaxVarint - 1, Data: []byte{1, 2, 3, 4}}}
		},
	})
	Register(&Scenario{
		ID: "pkt-crypto-large-gap", Title: "CRYPTO frame 1 MiB ahead", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"7.5",
				May,
				"it MAY discard that CRYPTO frame and all CRYPTO frames received in the future, or it MAY close the connection with a CRYPTO_BUFFER_EXCEEDED error code.",
			),
			rfc9000(
				"7.5",
				Must,
				"Packets containing discarded CRYPTO frames MUST be acknowledged because the packet has been received and processed by the transport even though the CRYPTO frame was discarded.",
			),
		},
		Run: runPktCryptoLargeGap,
	})
	Register(&Scenario{
		ID: "pkt-nonminimal-frame-type", Title: "PING with a two-byte frame type", Family: "C", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{
			rfc9000(
				"12.4",
				May,
				"An endpoint MAY treat the receipt of a frame type that uses a longer encoding than necessary as a connection error of type PROTOCOL_VIOLATION.",
			),
		},
		Run: runPktNonMinimal,
	})
	Register(&Scenario{
		ID: "pkt-reserved-bits-short", Title: "1-RTT packet with reserved bits set", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"17.3.1",
				Must,
				"An endpoint MUST treat receipt of a packet that has a non-zero value for these bits, after removing both packet and header protection, as a connection error of type PROTOCOL_VIOLATION.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawHandshake(ctx)
			t.rawProvoke(
				ctx,
				rc,
				Expectation{
					Check:    "close",
					Req:      t.sc.Requirements[0],
					Codes:    transportCodes(wire.ProtocolViolation),
					Describe: "a 1-RTT packet with its reserved bits set",
				},
				true,
				func() {
					rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{ReservedBits: 3})
				},
			)
		},
	})
	Register(&Scenario{
		ID: "pkt-reserved-bits-long", Title: "Handshake packet with reserved bits set", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"17.2",
				Must,
				"An endpoint MUST treat receipt of a packet that has a non-zero value for these bits after removing both packet and header protection as a connection error of type PROTOCOL_VIOLATION.",
			),
		},
		Run: func(ctx context.Context, t *T) {
			rc := t.newRaw(ctx, rawquic.Options{Label: "reserved-long"})
			rc.HandshakeOpts = rawquic.LongOpts{ReservedBits: 3}
			t.rawProvoke(
				ctx,
				rc,
				Expectation{
					Check:    "close",
					Req:      t.sc.Requirements[0],
					Codes:    transportCodes(wire.ProtocolViolation),
					Describe: "the Handshake packet carrying the client's Finished with its reserved bits set",
				},
				true,
				func() {
					rc.Handshake(ctx, t.Settle())
				},
			)
		},
	})
	Register(&Scenario{
		ID: "pkt-frame-not-permitted", Title: "STREAM frame in a Handshake packet", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			reqFrameNotPermitted,
			rfc9000("17.2.4", Must, "Endpoints MUST treat receipt of Handshake packets with other frames as a connection error of type PROTOCOL_VIOLATION."),
		},
		Run: func(ctx context.Context, t *T) {
			rc := t.newRaw(ctx, rawquic.Options{Label: "stream-in-handshake"})
			rc.HandshakeExtra = []wire.Frame{&wire.StreamFrame{StreamID: 0, Data: []byte("GET /\r\n")}}
			t.rawProvoke(
				ctx,
				rc,
				Expectation{
					Check:    "close",
					Req:      reqFrameNotPermitted,
					Codes:    transportCodes(wire.ProtocolViolation),
					Describe: "a STREAM frame in the Handshake packet carrying the client's Finished",
				},
				true,
				func() {
					rc.Handshake(ctx, t.Settle())
				},
			)
		},
	})
	Register(&Scenario{
		ID: "pkt-no-frames", Title: "1-RTT packet without frames", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("12.4", Must, "An endpoint MUST treat receipt of a packet containing no frames as a connection error of type PROTOCOL_VIOLATION."),
		},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawHandshake(ctx)
			t.rawProvoke(
				ctx,
				rc,
				Expectation{
					Check:    "close",
					Req:      t.sc.Requirements[0],
					Codes:    transportCodes(wire.ProtocolViolation),
					Describe: "a 1-RTT packet with an empty payload",
				},
				true,
				func() {
					rc.Send1RTT(nil, rawquic.ShortOpts{PNLen: 4, NoPad: true})
				},
			)
		},
	})
	Register(&Scenario{
		ID: "pkt-fixed-bit-zero", Title: "1-RTT packet with the fixed bit cleared", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{reqFixedBitDiscard},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawHandshake(ctx)
			if tp := rc.ServerTP(); tp != nil && tp.GreaseQUICBit {
				t.Unsupported("The server advertised grease_quic_bit, so it may accept packets with the fixed bit cleared (family J).")
			}
			t.discardedPacket(ctx, rc, "fixed-bit", reqFixedBitDiscard, "a 1-RTT PING with the fixed bit cleared", func() *packet {
				return rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{ClearFixed: true})
			})
		},
	})
	Register(&Scenario{
		ID: "pkt-bad-aead-not-acked", Title: "Packet with a corrupted AEAD tag is not acknowledged", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{reqNoAckBeforeOpen,
			rfc9001(
				"5.5",
				Must,
				"it MUST discard all packets in the same packet number space with higher packet numbers if they cannot be successfully unprotected",
			)},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawHandshake(ctx)
			t.discardedPacket(ctx, rc, "bad-aead", reqNoAckBeforeOpen, "a 1-RTT PING with a corrupted AEAD tag", func() *packet {
				pkt, _ := rc.ShortPacket([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
				pkt[len(pkt)-1] ^= 0xff
				rc.Send(pkt)
				return rc.LastSent()
			})
		},
	})
	Register(&Scenario{
		ID: "pkt-too-short-for-sample", Title: "1-RTT packet too short for the header protection sample", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("5.4.2", Must, "An endpoint MUST discard packets that are not long enough to contain a complete sample.")},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawHandshake(ctx)
			t.discardedPacket(ctx, rc, "short", t.sc.Requirements[0], "a 1-RTT packet too short to give a header protection sample", func() *packet {
				return rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{PNLen: 1, NoPad: true})
			})
		},
	})
	Register(&Scenario{
		ID: "pkt-duplicate-packet", Title: "Duplicated 1-RTT packet is processed once", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"12.3",
				Must,
				"A receiver MUST discard a newly unprotected packet unless it is certain that it has not processed another packet with the same packet number from the same packet number space.",
			),
			rfc9000("8.2.2", MustNot, "An endpoint MUST NOT send more than one PATH_RESPONSE frame in response to one PATH_CHALLENGE frame"),
		},
		Run: runPktDuplicate,
	})
	Register(&Scenario{
		ID: "pkt-coalesced-bad-first", Title: "Undecryptable packet coalesced before a valid one", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"12.2",
				Must,
				"the receiver MAY either discard or buffer the packet for later processing and MUST attempt to process the remaining packets.",
			),
		},
		Run: runPktCoalescedBadFirst,
	})
	Register(&Scenario{
		ID: "inv-pn-monotonic", Title: "Server packet numbers increase", Family: "C", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000("12.3", Must, "Subsequent packets sent in the same packet number space MUST increase the packet number by at least one."),
			rfc9000("12.3", MustNot, "A QUIC endpoint MUST NOT reuse a packet number within the same packet number space in one connection."),
		},
		Run: runInvPNMonotonic,
	})
	Register(&Scenario{
		ID: "inv-frames-permitted", Title: "Server frames only in permitted packet types", Family: "C", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000("12.5", Must, "All other frame types MUST only be sent in the application data packet number space."),
			rfc9000(
				"12.5",
				Must,
				"CONNECTION_CLOSE frames signaling application errors (type 0x1d) MUST only appear in the application data packet number space.",
			),
		},
		Run: runInvFramesPermitted,
	})
	Register(&Scenario{
		ID: "inv-initial-datagram-size", Title: "Server Initial datagrams padded to 1200 bytes", Family: "C", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000(
				"14.1",
				Must,
				"a server MUST expand the payload of all UDP datagrams carrying ack-eliciting Initial packets to at least the smallest allowed maximum datagram size of 1200 bytes.",
			),
		},
		Run: runInvInitialDatagramSize,
	})
	Register(&Scenario{
		ID: "inv-coalesce-same-cid", Title: "Coalesced server packets share one connection ID", Family: "C", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000("12.2", MustNot, "Senders MUST NOT coalesce QUIC packets with different connection IDs into a single UDP datagram."),
		},
		Run: runInvCoalesceSameCID,
	})
	// Family C: packet-level invariants judged over what the server sends
	// (docs/scenarios.md): packet number encoding length, what ACK frames cover,
	// the spin bit, the IPv4 DF bit and datagram sizes; and the one
	// coalescing rule on the receiving side.
	Register(&Scenario{
		ID: "pkt-coalesced-different-dcid", Title: "Coalesced packet for another connection ID is ignored", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"12.2",
				Should,
				"Receivers SHOULD ignore any subsequent packets with a different Destination Connection ID than the first packet in the datagram.",
			),
		},
		Run: runPktCoalescedDifferentDCID,
	})
	Register(&Scenario{
		ID: "inv-pn-length-sufficient", Title: "Server packet numbers are encoded long enough", Family: "C", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000(
				"17.1",
				Must,
				"the sender MUST use a packet number size able to represent more than twice as large a range as the difference between the largest acknowledged packet number and the packet number being sent",
			),
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
		Requirements: []Requirement{
			rfc9000("17.4", May, "When the spin bit is disabled, endpoints MAY set the spin bit to any value and MUST ignore any incoming value."),
		},
		Run: runInvSpinBit,
	})
	Register(&Scenario{
		ID: "inv-ipv4-df", Title: "Don't Fragment on the server's IPv4 datagrams", Family: "C", Needs: []string{NeedApp}, Passive: true, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("14", Must, "In IPv4, the Don't Fragment (DF) bit MUST be set if possible, to prevent fragmentation on the path.")},
		Run:          runInvIPv4DF,
	})
	Register(&Scenario{
		ID: "inv-datagram-sizes", Title: "The largest datagrams the server sends", Family: "C", Needs: []string{NeedApp}, Passive: true, ObservationOnly: true,
		Requirements: []Requirement{
			rfc9000(
				"14.2",
				ShouldNot,
				"In the absence of these mechanisms, QUIC endpoints SHOULD NOT send datagrams larger than the smallest allowed maximum datagram size.",
			),
		},
		Run: runInvDatagramSizes,
	})
	runWideChecks = append(runWideChecks,
		passiveCheck{id: "inv-pn-length-sufficient", judge: judgePNLength},
		passiveCheck{id: "inv-ack-only-received", judge: judgeAckOnlyReceived},
	)
}
