package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Family C: packet and frame validity (catalogue §3.C).

var (
	reqFrameNotPermitted = rfc9000("12.4", Must, "An endpoint MUST treat receipt of a frame in a packet type that is not permitted as a connection error of type PROTOCOL_VIOLATION.")
	reqNoAckBeforeOpen   = rfc9000("13.1", MustNot, "A packet MUST NOT be acknowledged until packet protection has been successfully removed and all frames contained in the packet have been processed.")
	reqFixedBitDiscard   = rfc9000("17.3.1", Must, "Packets containing a zero value for this bit are not valid packets in this version and MUST be discarded.")
)

// unknownFrameType is a frame type the IANA registry lists as unassigned
// and no known extension uses (two-byte varint 0x1d6c).
const unknownFrameType = 0x1d6c

func init() {
	registerProvoked(provokedSpec{
		id: "pkt-unknown-frame-type", title: "Frame of an unknown type", family: "C", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("12.4", Must, "An endpoint MUST treat the receipt of a frame of unknown type as a connection error of type FRAME_ENCODING_ERROR.")},
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
		reqs:     []Requirement{rfc9000("19.20", Must, "A server MUST treat receipt of a HANDSHAKE_DONE frame as a connection error of type PROTOCOL_VIOLATION.")},
		codes:    transportCodes(wire.ProtocolViolation),
		describe: "a HANDSHAKE_DONE frame from the client",
		frames:   func(t *T, c *Conn) []wire.Frame { return []wire.Frame{&wire.HandshakeDoneFrame{}} },
	})
	registerProvoked(provokedSpec{
		id: "pkt-ack-negative-range", title: "ACK range below packet number 0", family: "C", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("19.3.1", Must, "If any computed packet number is negative, an endpoint MUST generate a connection error of type FRAME_ENCODING_ERROR.")},
		codes:    transportCodes(wire.FrameEncodingError),
		describe: "an ACK frame (Largest 2, Gap 5) whose second range lies below packet number 0",
		frames: func(t *T, c *Conn) []wire.Frame {
			// Type, Largest 2, Delay 0, Range Count 1, First Range 0, Gap 5, Range 0.
			return []wire.Frame{&wire.RawFrame{Bytes: []byte{0x02, 0x02, 0x00, 0x01, 0x00, 0x05, 0x00}}}
		},
	})
	registerProvoked(provokedSpec{
		id: "pkt-ack-unsent-packet", title: "ACK for a packet never sent", family: "C", needs: []string{NeedApp},
		reqs:     []Requirement{rfc9000("13.1", Should, "An endpoint SHOULD treat receipt of an acknowledgment for a packet it did not send as a connection error of type PROTOCOL_VIOLATION, if it is able to detect the condition.")},
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
		reqs:     []Requirement{rfc9000("19.6", Must, "Receipt of a frame that exceeds this limit MUST be treated as a connection error of type FRAME_ENCODING_ERROR or CRYPTO_BUFFER_EXCEEDED.")},
		codes:    transportCodes(wire.FrameEncodingError, wire.CryptoBufferExceeded),
		describe: "a 1-RTT CRYPTO frame at offset 2^62-2 with 4 bytes",
		frames: func(t *T, c *Conn) []wire.Frame {
			return []wire.Frame{&wire.CryptoFrame{Offset: wire.MaxVarint - 1, Data: []byte{1, 2, 3, 4}}}
		},
	})
	Register(&Scenario{
		ID: "pkt-crypto-large-gap", Title: "CRYPTO frame 1 MiB ahead", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("7.5", May, "it MAY discard that CRYPTO frame and all CRYPTO frames received in the future, or it MAY close the connection with a CRYPTO_BUFFER_EXCEEDED error code."),
			rfc9000("7.5", Must, "Packets containing discarded CRYPTO frames MUST be acknowledged because the packet has been received and processed by the transport even though the CRYPTO frame was discarded."),
		},
		Run: runPktCryptoLargeGap,
	})
	Register(&Scenario{
		ID: "pkt-nonminimal-frame-type", Title: "PING with a two-byte frame type", Family: "C", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("12.4", May, "An endpoint MAY treat the receipt of a frame type that uses a longer encoding than necessary as a connection error of type PROTOCOL_VIOLATION.")},
		Run:          runPktNonMinimal,
	})
	Register(&Scenario{
		ID: "pkt-reserved-bits-short", Title: "1-RTT packet with reserved bits set", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("17.3.1", Must, "An endpoint MUST treat receipt of a packet that has a non-zero value for these bits, after removing both packet and header protection, as a connection error of type PROTOCOL_VIOLATION.")},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawHandshake(ctx)
			t.rawProvoke(ctx, rc, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation), Describe: "a 1-RTT packet with its reserved bits set"}, true, func() {
				rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{ReservedBits: 3})
			})
		},
	})
	Register(&Scenario{
		ID: "pkt-reserved-bits-long", Title: "Handshake packet with reserved bits set", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("17.2", Must, "An endpoint MUST treat receipt of a packet that has a non-zero value for these bits after removing both packet and header protection as a connection error of type PROTOCOL_VIOLATION.")},
		Run: func(ctx context.Context, t *T) {
			rc := t.newRaw(ctx, rawOptions{Label: "reserved-long"})
			rc.handshakeOpts = longOpts{ReservedBits: 3}
			t.rawProvoke(ctx, rc, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation), Describe: "the Handshake packet carrying the client's Finished with its reserved bits set"}, true, func() {
				rc.Handshake(ctx, t.Settle())
			})
		},
	})
	Register(&Scenario{
		ID: "pkt-frame-not-permitted", Title: "STREAM frame in a Handshake packet", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			reqFrameNotPermitted,
			rfc9000("17.2.4", Must, "Endpoints MUST treat receipt of Handshake packets with other frames as a connection error of type PROTOCOL_VIOLATION."),
		},
		Run: func(ctx context.Context, t *T) {
			rc := t.newRaw(ctx, rawOptions{Label: "stream-in-handshake"})
			rc.handshakeExtra = []wire.Frame{&wire.StreamFrame{StreamID: 0, Data: []byte("GET /\r\n")}}
			t.rawProvoke(ctx, rc, Expectation{Check: "close", Req: reqFrameNotPermitted, Codes: transportCodes(wire.ProtocolViolation), Describe: "a STREAM frame in the Handshake packet carrying the client's Finished"}, true, func() {
				rc.Handshake(ctx, t.Settle())
			})
		},
	})
	Register(&Scenario{
		ID: "pkt-no-frames", Title: "1-RTT packet without frames", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("12.4", Must, "An endpoint MUST treat receipt of a packet containing no frames as a connection error of type PROTOCOL_VIOLATION.")},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawHandshake(ctx)
			t.rawProvoke(ctx, rc, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation), Describe: "a 1-RTT packet with an empty payload"}, true, func() {
				rc.Send1RTT(nil, shortOpts{PNLen: 4, NoPad: true})
			})
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
				return rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{ClearFixed: true})
			})
		},
	})
	Register(&Scenario{
		ID: "pkt-bad-aead-not-acked", Title: "Packet with a corrupted AEAD tag is not acknowledged", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{reqNoAckBeforeOpen,
			rfc9001("5.5", Must, "it MUST discard all packets in the same packet number space with higher packet numbers if they cannot be successfully unprotected")},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawHandshake(ctx)
			t.discardedPacket(ctx, rc, "bad-aead", reqNoAckBeforeOpen, "a 1-RTT PING with a corrupted AEAD tag", func() *packet {
				pkt, _ := rc.shortPacket([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
				pkt[len(pkt)-1] ^= 0xff
				rc.send(pkt)
				return rc.lastSent()
			})
		},
	})
	Register(&Scenario{
		ID: "pkt-too-short-for-sample", Title: "1-RTT packet too short for the header protection sample", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("5.4.2", Must, "An endpoint MUST discard packets that are not long enough to contain a complete sample.")},
		Run: func(ctx context.Context, t *T) {
			rc := t.rawHandshake(ctx)
			t.discardedPacket(ctx, rc, "short", t.sc.Requirements[0], "a 1-RTT packet too short to give a header protection sample", func() *packet {
				return rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{PNLen: 1, NoPad: true})
			})
		},
	})
	Register(&Scenario{
		ID: "pkt-duplicate-packet", Title: "Duplicated 1-RTT packet is processed once", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("12.3", Must, "A receiver MUST discard a newly unprotected packet unless it is certain that it has not processed another packet with the same packet number from the same packet number space."),
			rfc9000("8.2.2", MustNot, "An endpoint MUST NOT send more than one PATH_RESPONSE frame in response to one PATH_CHALLENGE frame"),
		},
		Run: runPktDuplicate,
	})
	Register(&Scenario{
		ID: "pkt-coalesced-bad-first", Title: "Undecryptable packet coalesced before a valid one", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("12.2", Must, "the receiver MAY either discard or buffer the packet for later processing and MUST attempt to process the remaining packets.")},
		Run:          runPktCoalescedBadFirst,
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
			rfc9000("12.5", Must, "CONNECTION_CLOSE frames signaling application errors (type 0x1d) MUST only appear in the application data packet number space."),
		},
		Run: runInvFramesPermitted,
	})
	Register(&Scenario{
		ID: "inv-initial-datagram-size", Title: "Server Initial datagrams padded to 1200 bytes", Family: "C", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{rfc9000("14.1", Must, "a server MUST expand the payload of all UDP datagrams carrying ack-eliciting Initial packets to at least the smallest allowed maximum datagram size of 1200 bytes.")},
		Run:          runInvInitialDatagramSize,
	})
	Register(&Scenario{
		ID: "inv-coalesce-same-cid", Title: "Coalesced server packets share one connection ID", Family: "C", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{rfc9000("12.2", MustNot, "Senders MUST NOT coalesce QUIC packets with different connection IDs into a single UDP datagram.")},
		Run:          runInvCoalesceSameCID,
	})
}

// rawHandshake completes a raw handshake or ends the scenario.
func (t *T) rawHandshake(ctx context.Context) *rawClient {
	rc := t.newRaw(ctx, rawOptions{Label: "raw"})
	if err := rc.Handshake(ctx, t.Settle()+2*time.Second); err != nil {
		ps := received(t.rec.snapshot(), rc.trace.id, 0)
		t.Inconclusive(fmt.Sprintf("The tester's scripted handshake did not complete: %v.", err), events(Context, lastN(ps, 3)...)...)
	}
	return rc
}

// discardedPacket sends a packet the server must discard, then normal PINGs,
// and passes when the bad packet is never acknowledged while later ones
// are and the connection stays open.
func (t *T) discardedPacket(ctx context.Context, rc *rawClient, name string, req Requirement, what string, send func() *packet) {
	mark := len(t.rec.snapshot())
	bad := send()
	var pings []*packet
	for waited := time.Duration(0); waited < t.Settle(); waited += t.PTO() {
		pings = append(pings, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{}))
		rc.Receive(ctx, t.PTO(), nil)
	}
	ps := t.rec.snapshot()
	if a := ackedBy(ps, rc.trace.id, 2, bad.pn); a != nil {
		t.Fail(name, req, fmt.Sprintf("The server acknowledged %s (packet %d) instead of discarding it.", what, bad.pn), append(events(Trigger, bad), events(Response, a)...)...)
		return
	}
	if cl := firstClose(received(ps, rc.trace.id, mark)); cl != nil {
		t.Fail(name, req, fmt.Sprintf("The server closed the connection (%s) after %s; it must discard the packet and go on.", closeCode(cl.closeFrame()), what), append(events(Trigger, bad), events(Response, cl)...)...)
		return
	}
	for _, pg := range pings {
		if a := ackedBy(ps, rc.trace.id, 2, pg.pn); a != nil {
			t.Pass(name, req, fmt.Sprintf("The server never acknowledged %s (packet %d) but acknowledged later PINGs.", what, bad.pn), append(events(Trigger, bad), events(Response, a)...)...)
			return
		}
	}
	t.Check(name, Inconclusive, req, fmt.Sprintf("After %s the server acknowledged none of the tester's later PINGs either.", what), events(Trigger, bad)...)
}

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
			t.Pass("reaction", req, "The server closed with CRYPTO_BUFFER_EXCEEDED, one of the two reactions §7.5 allows.", append(events(Trigger, trig), events(Response, cl)...)...)
		} else {
			t.Observe("reaction", fmt.Sprintf("The server closed with %s; §7.5 names CRYPTO_BUFFER_EXCEEDED.", closeCode(cc)), append(events(Trigger, trig), events(Response, cl)...)...)
		}
		return
	}
	if a := ackedBy(ps, c.ID(), spaceApp, trig.pn); a != nil {
		t.Fact("crypto.gap-reaction", "discard and acknowledge")
		t.Pass("reaction", req, "The server acknowledged the packet carrying a CRYPTO frame 1 MiB ahead and stayed open.", append(events(Trigger, trig), events(Response, a)...)...)
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
		t.Fail("reaction", req, "The server never acknowledged the packet carrying a CRYPTO frame 1 MiB ahead, yet acknowledged a later PING and stayed open.", events(Trigger, trig)...)
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
	pkt, _ := rc.shortPacket([]wire.Frame{&wire.PathChallengeFrame{Data: data}}, shortOpts{PadTo: 1200})
	trig := rc.lastSent()
	rc.send(pkt)
	sleep(ctx, 5*time.Millisecond)
	rc.send(pkt)
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
		t.Pass("once", req, "The server processed the duplicated packet once: exactly one PATH_RESPONSE came back.", append(events(Trigger, trig), events(Response, resp...)...)...)
	default:
		t.Fail("once", req, fmt.Sprintf("The server processed a duplicated packet twice: %d PATH_RESPONSE frames echo the same challenge.", len(resp)), append(events(Trigger, trig), events(Response, resp...)...)...)
	}
}

func runPktCoalescedBadFirst(ctx context.Context, t *T) {
	rc := t.rawHandshake(ctx)
	h := wire.LongHeader{Version: wire.Version(rc.version), Type: wire.PacketTypeHandshake, DCID: rc.dcid, SCID: rc.scid, LengthLen: 2, PNLen: 4}
	hdr, lengthOff, _ := h.Append(nil)
	body := randomBytes(60)
	wire.PutVarintLen(hdr[lengthOff:], uint64(4+len(body)-4), 2)
	bad := append(hdr[:len(hdr)-4], body...)
	good, pn := rc.shortPacket([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	trig := rc.lastSent()
	rc.send(bad, good)
	var pings []*packet
	for waited := time.Duration(0); waited < t.Settle(); waited += t.PTO() {
		rc.Receive(ctx, t.PTO(), nil)
		pings = append(pings, rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{}))
	}
	ps := t.rec.snapshot()
	req := t.sc.Requirements[0]
	if a := ackedBy(ps, rc.trace.id, 2, pn); a != nil {
		t.Pass("processed", req, "The server processed and acknowledged the 1-RTT packet that followed an undecryptable Handshake packet in the same datagram.", append(events(Trigger, trig), events(Response, a)...)...)
		return
	}
	for _, pg := range pings {
		if ackedBy(ps, rc.trace.id, 2, pg.pn) != nil {
			t.Fail("processed", req, "The server never acknowledged the 1-RTT packet coalesced behind an undecryptable Handshake packet, but acknowledged later packets.", events(Trigger, trig)...)
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
	rc := t.newRaw(ctx, rawOptions{Label: "raw"})
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
			t.Fail("increasing", req, fmt.Sprintf("In the %s space the server sent packet %d after packet %d.", p.ev.PacketType, p.pn, prev.pn), events(Response, prev, p)...)
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
			t.Fail("padding", t.sc.Requirements[0], fmt.Sprintf("The server sent an ack-eliciting Initial packet in a %d-byte datagram.", p.datagram), events(Response, p)...)
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
	dgs := append([]datagramRec(nil), t.rec.datagrams...)
	t.rec.mu.Unlock()
	coalesced := 0
	for _, d := range dgs {
		if d.sent {
			continue
		}
		var first []byte
		rest := d.b
		count := 0
		for len(rest) > 0 && wire.IsLongHeader(rest) {
			h, err := wire.ParseHeader(rest, 0)
			if err != nil || h.Version == 0 || h.Type == wire.PacketTypeRetry || h.PacketLen <= 0 || h.PacketLen > len(rest) {
				break
			}
			if count == 0 {
				first = append([]byte(nil), h.DCID...)
			} else if string(h.DCID) != string(first) {
				t.Fail("same-cid", t.sc.Requirements[0], fmt.Sprintf("A server datagram coalesced packets for Destination Connection IDs %x and %x.", first, h.DCID))
				return
			}
			count++
			rest = rest[h.PacketLen:]
		}
		if count > 1 || (count == 1 && len(rest) > 0) {
			coalesced++
		}
		if count >= 1 && len(rest) > 0 && !wire.IsLongHeader(rest) && len(rest) > len(first) && string(rest[1:1+len(first)]) != string(first) {
			t.Fail("same-cid", t.sc.Requirements[0], fmt.Sprintf("A server datagram coalesced a 1-RTT packet for %x behind packets for %x.", rest[1:1+len(first)], first))
			return
		}
	}
	t.Fact("coalescing.datagrams", coalesced)
	if coalesced == 0 {
		t.Pass("same-cid", t.sc.Requirements[0], "The server coalesced no packets in the connections seen, so no mixed connection IDs.")
		return
	}
	t.Pass("same-cid", t.sc.Requirements[0], fmt.Sprintf("All %d coalesced server datagrams carried one Destination Connection ID.", coalesced))
}
