package conformance

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// greaseSuites returns two distinct reserved GREASE cipher-suite values
// (RFC 8701 §2).
func greaseSuites() [2]uint16 {
	var b [2]byte
	rand.Read(b[:])
	i, j := uint16(b[0]&0x0f), uint16(b[1]&0x0f)
	if i == j {
		j = (j + 1) & 0x0f
	}
	g := func(n uint16) uint16 { return n<<12 | 0x0a00 | n<<4 | 0x0a }
	return [2]uint16{g(i), g(j)}
}

func runGreaseTLSCipherSuites(ctx context.Context, t *T) {
	req := t.sc.Requirements[0]
	gs := greaseSuites()
	t.withSuites([]uint16{gs[0], gs[1], tls.TLS_AES_128_GCM_SHA256}, func() {
		label := fmt.Sprintf("GREASE %#04x, %#04x, then AES-128-GCM", gs[0], gs[1])
		c, err := t.dialAgainIfSilent(ctx, DialOptions{Label: label})
		ps := received(t.rec.snapshot(), c.trace.id, 0)
		if err != nil {
			if cl := firstClose(ps); cl != nil {
				t.Fail(
					"accepted",
					req,
					fmt.Sprintf(
						"The server closed the handshake (%s) when the ClientHello offered the reserved cipher suites %#04x and %#04x ahead of TLS_AES_128_GCM_SHA256.",
						closeCode(cl.closeFrame()),
						gs[0],
						gs[1],
					),
					events(Response, cl)...)
				return
			}
			t.dialFailure(c, err)
			return
		}
		defer c.Close(0, "")
		got := c.ConnectionState().CipherSuite
		if got != tls.TLS_AES_128_GCM_SHA256 {
			t.Errorf("the handshake completed with %s although only TLS_AES_128_GCM_SHA256 could be selected", tls.CipherSuiteName(got))
			return
		}
		t.Fact("tls.cipher-suite", tls.CipherSuiteName(got))
		t.Pass(
			"accepted",
			req,
			fmt.Sprintf("The server ignored the reserved cipher suites %#04x and %#04x and completed the handshake with TLS_AES_128_GCM_SHA256.", gs[0], gs[1]),
			events(Response, lastN(ps, 1)...)...)
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
	rc := t.newRaw(ctx, rawquic.Options{Label: "raw"})
	if rc.Handshake(ctx, t.Settle()) == nil {
		rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	}
	req := t.sc.Requirements[0]
	t.rec.mu.Lock()
	var bad *datagramRec
	n := 0
	dgs := t.rec.allDatagramsLocked()
	for i, d := range dgs {
		if d.sent || d.size < 5 {
			continue
		}
		if d.b[0]&0x80 != 0 && d.b[1]|d.b[2]|d.b[3]|d.b[4] == 0 {
			continue // Version Negotiation
		}
		n++
		if d.b[0]&0x40 == 0 && bad == nil {
			bad = &dgs[i]
		}
	}
	t.rec.mu.Unlock()
	if bad != nil {
		t.Fail(
			"quic-bit",
			req,
			fmt.Sprintf(
				"The server sent a %d-byte datagram with the QUIC bit cleared (first byte 0x%02x) to a tester that never advertised grease_quic_bit; the tester must discard it.",
				bad.size,
				bad.b[0],
			),
		)
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
		lists = append(lists, fmt.Sprint(last.frameNames()))
		for _, f := range last.frameNames() {
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
	t.Observe(
		"versions",
		fmt.Sprintf("Version Negotiation lists over three replies: %v; %d distinct reserved version(s).", lists, len(reserved)),
		events(Response, last)...)
}

// requireGreaseQUICBit ends the scenario as unsupported when the server
// does not advertise grease_quic_bit (the gqb need).
func (t *T) requireGreaseQUICBit(ctx context.Context) {
	c := t.mustDial(ctx, DialOptions{Label: "gqb-check"})
	_, ok := rawTPValue(t.serverTP(c), tpGreaseQUICBit)
	t.Fact("grease.quic-bit", ok)
	c.Close(0, "")
	if !ok {
		t.Unsupported("The server does not advertise grease_quic_bit (0x2ab2).")
	}
}

func runGreaseQUICBitAccepted(ctx context.Context, t *T) {
	t.requireGreaseQUICBit(ctx)
	try := func(label string, clear bool) (*rawClient, []byte, error) {
		scid := randomBytes(8)
		tp := rawquic.DefaultClientTP(scid)
		tp.GreaseQUICBit = true
		rc := t.newRaw(ctx, rawquic.Options{Label: label, SCID: scid, TP: tp})
		rc.ClearQUICBit = clear
		if err := rc.Handshake(ctx, t.Settle()+time.Second); err != nil {
			return rc, nil, fmt.Errorf("handshake: %w", err)
		}
		body, err := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
		return rc, body, err
	}
	rc, body, err := try("quic-bit-cleared", true)
	cleared := 0
	t.rec.mu.Lock()
	for _, d := range t.rec.allDatagramsLocked() {
		if d.sent && d.local == rc.Local && d.size > 0 && d.b[0]&0x40 == 0 {
			cleared++
		}
	}
	t.rec.mu.Unlock()
	sent := packetsOf(framesOf[*wire.StreamFrame](t.rec.snapshot(), rc.trace.id, 0, true))
	if err == nil {
		t.Pass(
			"accepted",
			reqGreaseBitAccept,
			fmt.Sprintf(
				"With the QUIC bit cleared on %d datagram(s) (every Handshake and 1-RTT packet), the tester completed the handshake and fetched %s (%d bytes).",
				cleared,
				t.profile.SmallPath,
				len(body),
			),
			events(Trigger, sent...)...)
		return
	}
	_, _, cerr := try("quic-bit-set", false)
	if cerr != nil {
		t.Inconclusive(fmt.Sprintf("With the QUIC bit cleared the exchange failed (%v), but with it set it failed as well (%v).", err, cerr))
	}
	t.Fail(
		"accepted",
		reqGreaseBitAccept,
		fmt.Sprintf(
			"The server advertises grease_quic_bit, but with the QUIC bit cleared on every Handshake and 1-RTT packet the exchange failed (%v) while the same exchange with the bit set succeeds.",
			err,
		),
		events(Trigger, lastN(sent, 3)...)...)
}

func runGreaseQUICBitServerGreases(ctx context.Context, t *T) {
	t.judgesUnsummarised() // it judges datagrams, every one of which is listed
	t.requireGreaseQUICBit(ctx)
	c := t.mustDial(ctx, DialOptions{Label: "gqb", Config: func(cfg *quic.Config) { cfg.DisableGreaseQUICBit = false }})
	t.fetchPath(ctx, c, t.profile.Target.LargePath)
	set, cleared := 0, 0
	local := c.trace.localAddr()
	t.rec.mu.Lock()
	for _, d := range t.rec.allDatagramsLocked() {
		// Short-header datagrams only: every 1-RTT packet leaves after
		// the server processed the tester's transport parameters.
		if d.sent || d.local != local || d.size == 0 || d.b[0]&0x80 != 0 {
			continue
		}
		if d.b[0]&0x40 == 0 {
			cleared++
		} else {
			set++
		}
	}
	t.rec.mu.Unlock()
	t.Fact("grease.quic-bit-server", map[string]int{"set": set, "cleared": cleared})
	switch v, sentence := judgeQUICBitGrease(set, cleared); v {
	case Inconclusive:
		t.Inconclusive(sentence)
	case Warn:
		t.Warn("varies", reqGreaseBitVaries, sentence)
	default:
		t.Pass("varies", reqGreaseBitVaries, sentence)
	}
}

// judgeQUICBitGrease judges the QUIC bit of the server's short-header
// datagrams to a tester that advertised grease_quic_bit: it should be
// unpredictable, so both values should appear over a transfer.
func judgeQUICBitGrease(set, cleared int) (Verdict, string) {
	switch {
	case set+cleared < 20:
		return Inconclusive, fmt.Sprintf("The server sent only %d short-header datagram(s), too few to judge its QUIC bit.", set+cleared)
	case cleared == 0:
		return Warn, fmt.Sprintf(
			"The QUIC bit was set on all %d of the server's short-header datagrams although the tester advertised grease_quic_bit; set it to an unpredictable value.",
			set,
		)
	case set == 0:
		return Warn, fmt.Sprintf(
			"The QUIC bit was cleared on all %d of the server's short-header datagrams: a constant value, not an unpredictable one.",
			cleared,
		)
	}
	return Pass, fmt.Sprintf("The server cleared the QUIC bit on %d and set it on %d of its short-header datagrams.", cleared, set)
}

// Family J, greasing of versions (docs/scenarios.md): grease-version-information
// and grease-vn-unused-bits.

var reqReservedVersions = rfc9000(
	"6.3",
	May,
	"Endpoints MAY add reserved versions to any field where unknown or unsupported versions are ignored to test that a peer correctly ignores the value.",
)

// greaseVersion returns a random reserved version of the form 0x?a?a?a?a
// (RFC 9000 §15) other than avoid.
func greaseVersion(avoid ...wire.Version) wire.Version {
	for {
		var b [4]byte
		rand.Read(b[:])
		v := wire.Version(binary.BigEndian.Uint32(b[:])&0xf0f0f0f0 | 0x0a0a0a0a)
		dup := false
		for _, a := range avoid {
			dup = dup || a == v
		}
		if !dup {
			return v
		}
	}
}

func runGreaseVersionInformation(ctx context.Context, t *T) {
	g1 := greaseVersion()
	g2 := greaseVersion(g1)
	avail := []wire.Version{wire.Version(quic.Version1), g1, g2}
	c, err := t.Dial(ctx, DialOptions{Label: "greased version_information", Probe: quic.Probe{TransportParameters: func(p *wire.TransportParameters) {
		p.HasVersionInformation = true
		p.VersionInformation = wire.VersionInformation{Chosen: wire.Version(quic.Version1), Available: avail}
	}}})
	req := t.sc.Requirements[0]
	offered := fmt.Sprintf("Available Versions 0x%08x, 0x%08x, 0x%08x", uint32(avail[0]), uint32(g1), uint32(g2))
	if err == nil {
		tp := c.TransportParameters()
		if tp != nil && !tp.HasVersionInformation {
			t.Unsupported("The server sent no version_information, so it does not take part in compatible version negotiation (needs cvn).")
		}
		v := c.ConnectionInfo().Version
		if v == uint32(g1) || v == uint32(g2) {
			t.Errorf("the engine reports reserved version 0x%08x in use", v)
		}
		t.Pass("handshake", req, fmt.Sprintf("Offered %s, the server ignored the reserved versions and completed the handshake in 0x%08x.", offered, v))
		return
	}
	// The handshake failed: is it the greasing, or does the server not
	// negotiate versions at all?
	ctl, cerr := t.Dial(ctx, DialOptions{Label: "control"})
	if cerr != nil {
		t.Inconclusive(fmt.Sprintf("The greased handshake failed (%v) and so did a plain one (%v).", err, cerr))
	}
	if tp := ctl.TransportParameters(); tp != nil && !tp.HasVersionInformation {
		t.Unsupported("The server sent no version_information on a plain connection (needs cvn).")
	}
	ps := received(t.rec.snapshot(), c.ID(), 0)
	if cc := firstClose(ps); cc != nil {
		t.Observe(
			"handshake",
			fmt.Sprintf("Offered %s, the server closed the connection with %s, while a plain handshake succeeded.", offered, closeCode(cc.closeFrame())),
			events(Response, cc)...)
		return
	}
	t.Observe(
		"handshake",
		fmt.Sprintf("Offered %s, the handshake stalled (%v), while a plain handshake succeeded.", offered, err),
		events(Context, lastN(ps, 3)...)...)
}

// unusedBits are the seven bits after the header form bit of a Version
// Negotiation packet (RFC 9000 §17.2.1, "Unused").
func unusedBits(first byte) byte { return first & 0x7f }

func runGreaseVNUnusedBits(ctx context.Context, t *T) {
	var firsts []byte
	var last *packet
	for i := 0; i < 3 && ctx.Err() == nil; i++ {
		_, vns := vnProbe(ctx, t, fmt.Sprintf("vn-%d", i+1), randomBytes(8), randomBytes(8), 1200)
		if len(vns) == 0 {
			continue
		}
		last = vns[0]
		firsts = append(firsts, vns[0].firstByte)
	}
	if last == nil {
		t.requireControl(ctx, "No Version Negotiation came back")
		t.Unsupported(
			fmt.Sprintf(
				"The server sent no Version Negotiation packet to a reserved version within %v (needs a Version Negotiation reply).",
				t.Settle().Round(time.Millisecond),
			),
		)
	}
	var vals []string
	set, varies := 0, false
	for _, b := range firsts {
		vals = append(vals, fmt.Sprintf("0x%02x", unusedBits(b)))
		if b&0x40 != 0 {
			set++
		}
		if unusedBits(b) != unusedBits(firsts[0]) {
			varies = true
		}
	}
	t.Fact("grease.vn-unused-bits", map[string]any{"values": vals, "bit-0x40-set": set, "replies": len(firsts), "varies": varies})
	req := t.sc.Requirements[0]
	sentence := fmt.Sprintf(
		"The Unused bits of %d Version Negotiation replies were %v; 0x40 was set in %d of them and the value %s. The 0x40 recommendation applies only where QUIC is multiplexed with other protocols, which the tester cannot know.",
		len(firsts),
		vals,
		set,
		map[bool]string{true: "varied", false: "did not vary"}[varies],
	)
	if set == len(firsts) {
		t.Pass("unused-bits", req, sentence, events(Response, last)...)
	} else {
		t.Warn("unused-bits", req, sentence, events(Response, last)...)
	}
}

func init() {
	Register(&Scenario{
		ID: "grease-tls-cipher-suites", Title: "Reserved GREASE cipher suites offered first", Family: "J", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9001(
				"5.3",
				MustNot,
				"An endpoint MUST NOT reject a ClientHello that offers a cipher suite that it does not support, or it would be impossible to deploy a new cipher suite.",
			),
		},
		Run: runGreaseTLSCipherSuites,
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
			t.greasedHandshake(
				ctx,
				"large-unknown-tp",
				[]wire.TransportParameter{{ID: 0x3ffe, Value: randomBytes(1000)}},
				"an unknown 1000-byte transport parameter (ID 0x3ffe), so that the ClientHello spans two Initial packets",
			)
		},
	})
	Register(&Scenario{
		ID: "grease-server-tp", Title: "Reserved transport parameters the server sends", Family: "J", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{
			rfc9000(
				"18.1",
				Descriptive,
				"Transport parameters with an identifier of the form `31 * N + 27` for integer values of N are reserved to exercise the requirement that unknown transport parameters be ignored.",
			),
		},
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
		Requirements: []Requirement{
			fromKnowledge(
				"RFC 9287",
				"3",
				May,
				"the grease_quic_bit transport parameter (0x2ab2), with an empty value, tells the peer that the sender accepts packets with the QUIC bit cleared.",
			),
		},
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
			fromKnowledge(
				"RFC 9287",
				"3.1",
				MustNot,
				"a server does not remember that a client negotiated the extension on an earlier connection and clears the bit only after processing that connection's client transport parameters.",
			),
		},
		Run: runGreaseQUICBitNotWithoutTP,
	})
	Register(&Scenario{
		ID: "grease-vn-versions", Title: "Reserved versions in Version Negotiation", Family: "J", Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{
			rfc9000(
				"6.3",
				May,
				"Endpoints MAY add reserved versions to any field where unknown or unsupported versions are ignored to test that a peer correctly ignores the value.",
			),
		},
		Run: runGreaseVNVersions,
	})
	Register(&Scenario{
		ID: "grease-quic-bit-accepted", Title: "Packets with the QUIC bit cleared are accepted", Family: "J", Needs: []string{NeedApp},
		Requirements: []Requirement{reqGreaseBitAccept},
		Run:          runGreaseQUICBitAccepted,
	})
	Register(&Scenario{
		ID: "grease-quic-bit-tp-nonempty", Title: "grease_quic_bit with a one-byte value", Family: "J", Needs: []string{NeedApp},
		Requirements: []Requirement{reqGreaseBitEmpty},
		Run: func(ctx context.Context, t *T) {
			t.requireGreaseQUICBit(ctx)
			t.ProvokeHandshake(ctx, DialOptions{Label: "gqb-one-byte", Probe: quic.Probe{TransportParameters: func(tp *wire.TransportParameters) {
				tp.GreaseQUICBit = false
				tp.Unknown = append(tp.Unknown, wire.TransportParameter{ID: tpGreaseQUICBit, Value: []byte{0x01}})
			}}}, Expectation{Check: "close", Req: reqGreaseBitEmpty, Codes: transportCodes(wire.TransportParameterError),
				Describe: "transport parameters carrying grease_quic_bit (0x2ab2) with a one-byte value"})
		},
	})
	Register(&Scenario{
		ID: "grease-quic-bit-server-greases", Title: "The server greases the QUIC bit", Family: "J", Needs: []string{NeedApp, NeedLarge},
		Requirements: []Requirement{reqGreaseBitVaries},
		Run:          runGreaseQUICBitServerGreases,
	})
	Register(&Scenario{
		ID: "grease-version-information", Title: "Reserved versions in the client's version_information", Family: "J",
		Needs: []string{NeedApp, "cvn"}, PassOnly: true,
		Requirements: []Requirement{reqReservedVersions},
		Run:          runGreaseVersionInformation,
	})
	Register(&Scenario{
		ID: "grease-vn-unused-bits", Title: "Unused bits of Version Negotiation packets", Family: "J", ObservationOnly: true,
		Requirements: []Requirement{
			rfc9000(
				"17.2.1",
				Should,
				"servers SHOULD set the most significant bit of this field (0x40) to 1 so that Version Negotiation packets appear to have the Fixed Bit field.",
			),
		},
		Run: runGreaseVNUnusedBits,
	})
}
