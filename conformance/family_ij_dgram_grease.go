package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family I (DATAGRAM, RFC 9221) and family J (greasing) (catalogue §3.I,
// §3.J).

const (
	tpMaxDatagramFrameSize = 0x20
	tpGreaseQUICBit        = 0x2ab2
)

func init() {
	Register(&Scenario{
		ID: "dgram-tp", Title: "max_datagram_frame_size the server advertises", Family: "I", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9221("3", Recommended, "For most uses of DATAGRAM frames, it is RECOMMENDED to send a value of 65535 in the max_datagram_frame_size transport parameter")},
		Run: func(ctx context.Context, t *T) {
			c := t.mustDial(ctx, DialOptions{Label: "dgram-65535", Config: func(cfg *quic.Config) { cfg.MaxDatagramFrameSize = 65535 }})
			tp := t.serverTP(c)
			if v, ok := rawTPVarint(tp, tpMaxDatagramFrameSize); ok {
				t.Fact("dgram.support", v)
				t.Observe("value", fmt.Sprintf("The server advertises max_datagram_frame_size = %d.", v))
				return
			}
			t.Fact("dgram.support", "none")
			t.Observe("value", "The server does not advertise max_datagram_frame_size: no DATAGRAM support.")
		},
	})
	Register(&Scenario{
		ID: "dgram-acked", Title: "Packets with DATAGRAM frames are acknowledged", Family: "I", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("13.2.1", Must, "An endpoint MUST acknowledge all ack-eliciting Initial and Handshake packets immediately and all ack-eliciting 0-RTT and 1-RTT packets within its advertised max_ack_delay"),
			rfc9221("5.2", Descriptive, "Although DATAGRAM frames are not retransmitted upon loss detection, they are ack-eliciting"),
		},
		Run: runDgramAcked,
	})
	Register(&Scenario{
		ID: "dgram-too-large", Title: "DATAGRAM frame one byte above the server's limit", Family: "I", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9221("3", Must, "an endpoint that receives a DATAGRAM frame that is larger than the value it sent in its max_datagram_frame_size transport parameter MUST terminate the connection with an error of type PROTOCOL_VIOLATION.")},
		Run:          runDgramTooLarge,
	})
	Register(&Scenario{
		ID: "dgram-unnegotiated", Title: "DATAGRAM frame to a server without DATAGRAM", Family: "I", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9221("3", Must, "An endpoint that receives a DATAGRAM frame when it has not indicated support via the transport parameter MUST terminate the connection with an error of type PROTOCOL_VIOLATION.")},
		Run: func(ctx context.Context, t *T) {
			c := t.mustDial(ctx, DialOptions{Label: "engine"})
			if v, ok := rawTPVarint(t.serverTP(c), tpMaxDatagramFrameSize); ok && v > 0 {
				t.Unsupported(fmt.Sprintf("The server advertises max_datagram_frame_size = %d.", v))
			}
			t.Provoke(ctx, c, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation, wire.FrameEncodingError),
				Describe: "a DATAGRAM frame (type 0x31) the server never agreed to"}, func() {
				c.Inject(spaceApp, &wire.DatagramFrame{Data: []byte("quiver")})
			})
		},
	})
	Register(&Scenario{
		ID: "dgram-not-sent-without-tp", Title: "No DATAGRAM to a tester without max_datagram_frame_size", Family: "I", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{rfc9221("3", MustNot, "An endpoint MUST NOT send DATAGRAM frames until it has received the max_datagram_frame_size transport parameter with a non-zero value during the handshake")},
		Run: func(ctx context.Context, t *T) {
			c := t.mustDial(ctx, DialOptions{Label: "no-dgram"})
			t.fetchSmall(ctx, c)
			t.rec.wait(ctx, t.PTO(), nil)
			req := t.sc.Requirements[0]
			if fs := framesOf[*wire.DatagramFrame](t.rec.snapshot(), -1, 0, false); len(fs) > 0 {
				t.Fail("absent", req, "The server sent a DATAGRAM frame to a tester that never advertised max_datagram_frame_size.", events(Response, fs[0].p)...)
				return
			}
			t.Pass("absent", req, "The server sent no DATAGRAM frame to a tester without max_datagram_frame_size.")
		},
	})
	Register(&Scenario{
		ID: "grease-tp-reserved", Title: "Four reserved transport parameters", Family: "J", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("7.4.2", Must, "An endpoint MUST ignore transport parameters that it does not support."),
			rfc9000("18.1", Descriptive, "These transport parameters have no semantics and can carry arbitrary values.")},
		Run: func(ctx context.Context, t *T) {
			var extra []wire.TransportParameter
			for i := 0; i < 4; i++ {
				n := uint64(randomBytes(2)[0])<<8 | uint64(randomBytes(1)[0])
				extra = append(extra, wire.TransportParameter{ID: 31*n + 27, Value: randomBytes(int(randomBytes(1)[0]) % 17)})
			}
			t.greasedHandshake(ctx, "reserved-tp", extra, "four reserved transport parameters (31 × N + 27)")
		},
	})
	Register(&Scenario{
		ID: "grease-tp-large-unknown", Title: "A 1000-byte unknown transport parameter", Family: "J", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("7.4.2", Must, "An endpoint MUST ignore transport parameters that it does not support.")},
		Run: func(ctx context.Context, t *T) {
			t.greasedHandshake(ctx, "large-unknown-tp", []wire.TransportParameter{{ID: 0x3ffe, Value: randomBytes(1000)}}, "an unknown 1000-byte transport parameter (ID 0x3ffe), so that the ClientHello spans two Initial packets")
		},
	})
	Register(&Scenario{
		ID: "grease-server-tp", Title: "Reserved transport parameters the server sends", Family: "J", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("18.1", Descriptive, "Transport parameters with an identifier of the form `31 * N + 27` for integer values of N are reserved to exercise the requirement that unknown transport parameters be ignored.")},
		Run: func(ctx context.Context, t *T) {
			c := t.mustDial(ctx, DialOptions{Label: "engine"})
			var ids []string
			for _, p := range t.serverTP(c).Raw {
				if wire.IsGreaseTransportParameter(p.ID) {
					ids = append(ids, fmt.Sprintf("0x%x (%d bytes)", p.ID, len(p.Value)))
				}
			}
			t.Fact("grease.tp", ids)
			t.Observe("reserved", fmt.Sprintf("The server sent %d reserved transport parameter(s): %v.", len(ids), ids))
		},
	})
	Register(&Scenario{
		ID: "grease-quic-bit-advertised", Title: "grease_quic_bit advertised by the server", Family: "J", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{fromKnowledge("RFC 9287", "3", May, "the grease_quic_bit transport parameter (0x2ab2), with an empty value, tells the peer that the sender accepts packets with the QUIC bit cleared.")},
		Run: func(ctx context.Context, t *T) {
			c := t.mustDial(ctx, DialOptions{Label: "engine"})
			v, ok := rawTPValue(t.serverTP(c), tpGreaseQUICBit)
			t.Fact("grease.quic-bit", ok)
			if ok {
				t.Observe("advertised", fmt.Sprintf("The server advertises grease_quic_bit (%d-byte value).", len(v)))
				return
			}
			t.Observe("advertised", "The server does not advertise grease_quic_bit.")
		},
	})
	Register(&Scenario{
		ID: "grease-quic-bit-not-without-tp", Title: "QUIC bit set towards a tester without grease_quic_bit", Family: "J", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000("17.2", Must, "Packets containing a zero value for this bit are not valid packets in this version and MUST be discarded."),
			fromKnowledge("RFC 9287", "3.1", MustNot, "a server does not remember that a client negotiated the extension on an earlier connection and clears the bit only after processing that connection's client transport parameters."),
		},
		Run: runGreaseQUICBitNotWithoutTP,
	})
	Register(&Scenario{
		ID: "grease-vn-versions", Title: "Reserved versions in Version Negotiation", Family: "J", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("6.3", May, "Endpoints MAY add reserved versions to any field where unknown or unsupported versions are ignored to test that a peer correctly ignores the value.")},
		Run:          runGreaseVNVersions,
	})
}

func runDgramAcked(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "dgram", Config: func(cfg *quic.Config) { cfg.MaxDatagramFrameSize = 65535 }})
	tp := t.serverTP(c)
	limit, ok := rawTPVarint(tp, tpMaxDatagramFrameSize)
	if !ok || limit == 0 {
		t.Unsupported("The server does not advertise max_datagram_frame_size.")
	}
	mark := t.mark()
	for i := 0; i < 10 && ctx.Err() == nil; i++ {
		if err := c.SendDatagram([]byte(fmt.Sprintf("quiver datagram %d", i))); err != nil {
			t.Errorf("SendDatagram: %v", err)
		}
		t.rec.wait(ctx, 100*time.Millisecond, nil)
	}
	t.rec.wait(ctx, t.PTO(), nil)
	ps := t.rec.snapshot()
	sent := packetsOf(framesOf[*wire.DatagramFrame](ps, c.ID(), mark, true))
	mad := time.Duration(tp.MaxAckDelay) * time.Millisecond
	limitD := 2 * (t.RTT() + mad)
	late := 0
	var lateP []*packet
	for _, p := range sent {
		a := ackedBy(ps, c.ID(), 2, p.pn)
		if a == nil || a.at.Sub(p.at) > limitD {
			late++
			lateP = append(lateP, p)
		}
	}
	req := t.sc.Requirements[0]
	if cl := firstClose(received(ps, c.ID(), mark)); cl != nil || c.Err() != nil {
		t.Fail("acked", req, "The server closed the connection while the tester sent DATAGRAM frames within its limit.", events(Response, cl)...)
		return
	}
	if len(sent) == 0 {
		t.Errorf("no DATAGRAM frame left the tester")
	}
	if late >= 3 {
		t.Fail("acked", req, fmt.Sprintf("%d of %d packets carrying DATAGRAM frames were not acknowledged within 2 × (RTT + max_ack_delay) = %v.", late, len(sent), limitD.Round(time.Millisecond)), events(Trigger, lateP...)...)
		return
	}
	t.Pass("acked", req, fmt.Sprintf("%d of %d packets carrying DATAGRAM frames were acknowledged within %v.", len(sent)-late, len(sent), limitD.Round(time.Millisecond)), events(Trigger, lastN(sent, 3)...)...)
}

func runDgramTooLarge(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "dgram", Config: func(cfg *quic.Config) { cfg.MaxDatagramFrameSize = 65535 }})
	limit, ok := rawTPVarint(t.serverTP(c), tpMaxDatagramFrameSize)
	if !ok || limit == 0 {
		t.Unsupported("The server does not advertise max_datagram_frame_size.")
	}
	// Frame size = type (1) + Length varint + data; find data for limit+1.
	n := int(limit)
	for n > 0 && 1+wire.VarintLen(uint64(n))+n > int(limit)+1 {
		n--
	}
	for 1+wire.VarintLen(uint64(n))+n < int(limit)+1 {
		n++
	}
	if 1+wire.VarintLen(uint64(n))+n > 1100 {
		t.Inconclusive(fmt.Sprintf("The server's max_datagram_frame_size (%d) is too large to exceed within one packet.", limit))
	}
	t.Provoke(ctx, c, Expectation{Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation),
		Describe: fmt.Sprintf("a %d-byte DATAGRAM frame, one byte above the server's max_datagram_frame_size of %d", limit+1, limit)}, func() {
		c.Inject(spaceApp, &wire.DatagramFrame{Data: randomBytes(n)})
	})
}

// greasedHandshake adds extra transport parameters to the tester's and
// judges the handshake: it must complete; a failure that a plain
// handshake does not show is a fail.
func (t *T) greasedHandshake(ctx context.Context, label string, extra []wire.TransportParameter, what string) {
	c, err := t.Dial(ctx, DialOptions{Label: label, Probe: quic.Probe{TransportParameters: func(tp *wire.TransportParameters) {
		tp.Unknown = append(tp.Unknown, extra...)
	}}})
	req := t.sc.Requirements[0]
	if err == nil {
		ans, detail := t.fetchSmall(ctx, c)
		t.Pass("ignored", req, fmt.Sprintf("With %s the handshake completed (%s, answered: %v).", what, detail, ans))
		return
	}
	ok, msg := t.Control(ctx)
	ps := received(t.rec.snapshot(), c.ID(), 0)
	if !ok {
		t.Inconclusive(fmt.Sprintf("The handshake with %s failed (%v), but %s.", what, err, msg))
	}
	t.Fail("ignored", req, fmt.Sprintf("The handshake with %s failed (%v) while a plain one succeeds.", what, err), events(Response, lastN(ps, 3)...)...)
}

func runGreaseQUICBitNotWithoutTP(ctx context.Context, t *T) {
	// The connections may fail (a target that clears the bit breaks its
	// own packets' authentication); the datagrams are judged anyway.
	if c, err := t.Dial(ctx, DialOptions{Label: "engine"}); err == nil {
		t.fetchSmall(ctx, c)
	}
	rc := t.newRaw(ctx, rawOptions{Label: "raw"})
	if rc.Handshake(ctx, t.Settle()) == nil {
		rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	}
	req := t.sc.Requirements[0]
	t.rec.mu.Lock()
	var bad *datagramRec
	n := 0
	for i, d := range t.rec.datagrams {
		if d.sent || len(d.b) < 5 {
			continue
		}
		if d.b[0]&0x80 != 0 && d.b[1]|d.b[2]|d.b[3]|d.b[4] == 0 {
			continue // Version Negotiation
		}
		n++
		if d.b[0]&0x40 == 0 && bad == nil {
			bad = &t.rec.datagrams[i]
		}
	}
	t.rec.mu.Unlock()
	if bad != nil {
		t.Fail("quic-bit", req, fmt.Sprintf("The server sent a %d-byte datagram with the QUIC bit cleared (first byte 0x%02x) to a tester that never advertised grease_quic_bit; the tester must discard it.", len(bad.b), bad.b[0]))
		return
	}
	if n == 0 {
		t.Inconclusive("The server sent nothing.")
	}
	t.Pass("quic-bit", req, fmt.Sprintf("All %d datagrams from the server had the QUIC bit set.", n))
}

func runGreaseVNVersions(ctx context.Context, t *T) {
	var lists []string
	var last *packet
	reserved := map[string]bool{}
	for i := 0; i < 3; i++ {
		_, vns := vnProbe(ctx, t, fmt.Sprintf("vn-%d", i+1), randomBytes(8), randomBytes(8), 1200)
		if len(vns) == 0 {
			continue
		}
		last = vns[0]
		lists = append(lists, fmt.Sprint(last.ev.Frames))
		for _, f := range last.ev.Frames {
			var v uint32
			if _, err := fmt.Sscanf(f, "version 0x%x", &v); err == nil && wire.IsGrease(wire.Version(v)) {
				reserved[fmt.Sprintf("0x%08x", v)] = true
			}
		}
	}
	if last == nil {
		t.Inconclusive("The server sent no Version Negotiation packet to an unknown version.")
	}
	t.Fact("grease.vn-versions", map[string]any{"lists": lists, "reserved": len(reserved)})
	t.Observe("versions", fmt.Sprintf("Version Negotiation lists over three replies: %v; %d distinct reserved version(s).", lists, len(reserved)), events(Response, last)...)
}
