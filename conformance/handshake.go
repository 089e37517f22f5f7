package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

func runHSV1Basic(ctx context.Context, t *T) {
	c, err := t.Dial(ctx, DialOptions{})
	if err != nil {
		t.dialFailure(c, err)
	}
	st := c.ConnectionState()
	t.Fact("tls.cipher", tls.CipherSuiteName(st.CipherSuite))
	t.Fact("tls.group", st.CurveID.String())
	t.Fact("alpn", st.NegotiatedProtocol)
	t.Fact("retry.used", c.ConnectionInfo().Retried)
	answered, detail := t.fetchSmall(ctx, c)
	// HANDSHAKE_DONE, within the settle window of the handshake.
	hd := func(ps []*packet) bool {
		for _, p := range received(ps, c.ID(), 0) {
			if p.has(wire.FrameTypeHandshakeDone) {
				return true
			}
		}
		return false
	}
	t.rec.wait(ctx, t.Settle(), hd)
	ps := t.rec.snapshot()
	var hdPkt *packet
	scids := map[string]*packet{}
	firstFlight := 0
	var versions []uint32
	for _, p := range received(ps, c.ID(), 0) {
		if hdPkt == nil && p.has(wire.FrameTypeHandshakeDone) {
			hdPkt = p
		}
		if p.ev.PacketType == "initial" {
			if _, ok := scids[string(p.scid)]; !ok {
				scids[string(p.scid)] = p
			}
		}
		if p.space >= 0 && p.space < 2 && p.ev.Version != 0 {
			versions = append(versions, p.ev.Version)
		}
		if p.space == 0 || p.space == 1 {
			firstFlight += p.ev.Size
		}
		if len(p.scid) > 0 {
			t.Fact("cid.length", len(p.scid))
		}
	}
	t.Fact("handshake.server-bytes", firstFlight)
	t.Fact("handshake.server-ack-only-initials", serverAckOnlyInitials(ps, c.ID()))
	if tp := c.TransportParameters(); tp != nil {
		t.Fact("tp.raw", tpFacts(tp))
	}
	if len(scids) > 1 {
		var evs []*packet
		for _, p := range scids {
			evs = append(evs, p)
		}
		t.Fail(
			"single-scid",
			reqDiscardOtherSCID,
			fmt.Sprintf(
				"The server's Initial packets carried %d different Source Connection IDs; a client must discard the later ones, so the server must keep one.",
				len(scids),
			),
			events(Response, evs...)...)
	} else {
		t.Pass("single-scid", reqDiscardOtherSCID, "Every server Initial packet carried the same Source Connection ID.")
	}
	for _, v := range versions {
		if v != quic.Version1 {
			t.Observe("versions", fmt.Sprintf("A server long-header packet carried version 0x%08x on a v1 connection.", v))
			break
		}
	}
	if hdPkt != nil {
		t.Pass("handshake-done", reqHandshakeDone, "The server sent HANDSHAKE_DONE after the handshake completed.", events(Response, hdPkt)...)
	} else if c.Err() == nil {
		t.Fail("handshake-done", reqHandshakeDone, fmt.Sprintf("The handshake completed but no HANDSHAKE_DONE arrived within the %v settle window.", t.Settle().Round(time.Millisecond)))
	} else {
		t.Check("handshake-done", Inconclusive, reqHandshakeDone, fmt.Sprintf("The connection ended (%v) before HANDSHAKE_DONE arrived.", c.Err()))
	}
	if answered {
		t.Pass("fetch", Requirement{}, "The small resource was fetched: "+detail+".")
	} else {
		t.Check("fetch", Inconclusive, Requirement{}, "The handshake worked but "+detail+".")
	}
}

// tpFacts renders transport parameters as facts: name → hex value.
func tpFacts(tp *wire.TransportParameters) map[string]string {
	m := map[string]string{}
	for _, p := range tp.Raw {
		m[wire.TransportParameterID(p.ID).String()] = hex.EncodeToString(p.Value)
	}
	return m
}

func runHSInitialTooSmall(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "undersized"})
	rc.SendClientHello(ctx, 1100)
	trig := rc.LastSent()
	rc.Receive(ctx, t.Settle(), nil)
	req := t.sc.Requirements[0]
	a := classify(t.rec.snapshot(), rc.trace.id)
	if len(a.closes) > 0 {
		cc := a.closes[0].closeFrame()
		if !cc.Application && cc.ErrorCode == uint64(wire.ProtocolViolation) {
			t.Pass(
				"discard",
				req,
				"The server closed the connection with PROTOCOL_VIOLATION, as §14.1 allows for an undersized Initial.",
				evidence(events(Trigger, trig), events(Response, a.closes[0]))...)
			return
		}
		t.Observe(
			"discard",
			fmt.Sprintf("The server closed the connection with %s rather than dropping the undersized Initial; §14.1 names PROTOCOL_VIOLATION.", closeCode(cc)),
			evidence(events(Trigger, trig), events(Response, a.closes[0]))...)
		return
	}
	if len(a.handshake) > 0 {
		t.Fail(
			"discard",
			req,
			fmt.Sprintf(
				"The server processed an Initial carried in a %d-byte datagram: it answered with %d Initial/Handshake packet(s) instead of discarding it.",
				trig.ev.Size,
				len(a.handshake),
			),
			evidence(events(Trigger, trig), events(Response, lastN(a.handshake, 2)...))...)
		return
	}
	if t.datagramsReceived(rc.trace.id) > 0 {
		t.Check("discard", Inconclusive, req, "The server answered with datagrams the tester could not read.", events(Trigger, trig)...)
		return
	}
	t.requireControl(ctx, "The server stayed silent after the undersized Initial")
	t.Pass(
		"discard",
		req,
		fmt.Sprintf("The server ignored an Initial in a 1100-byte datagram for %v, while a normal handshake succeeded.", t.Settle().Round(time.Millisecond)),
		events(Trigger, trig)...)
}

func runHSDCIDTooLong(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "dcid-21", DCID: randomBytes(21)})
	rc.SendClientHello(ctx, 1200)
	trig := rc.LastSent()
	rc.Receive(ctx, t.Settle(), nil)
	req := t.sc.Requirements[0]
	a := classify(t.rec.snapshot(), rc.trace.id)
	switch {
	case len(a.handshake) > 0 || len(a.closes) > 0:
		resp := append(a.handshake, a.closes...)
		t.Fail(
			"drop",
			req,
			"The server answered a v1 Initial whose Destination Connection ID is 21 bytes long with Initial or Handshake packets instead of dropping it.",
			evidence(events(Trigger, trig), events(Response, lastN(resp, 2)...))...)
	case len(a.vn) > 0:
		t.Observe(
			"drop",
			"The server answered the 21-byte Destination Connection ID with Version Negotiation.",
			evidence(events(Trigger, trig), events(Response, a.vn[0]))...)
	case t.datagramsReceived(rc.trace.id) > 0:
		t.Check("drop", Inconclusive, req, "The server answered with datagrams the tester could not read.", events(Trigger, trig)...)
	default:
		t.requireControl(ctx, "The server stayed silent after the Initial with a 21-byte Destination Connection ID")
		t.Pass(
			"drop",
			req,
			"The server dropped a v1 Initial with a 21-byte Destination Connection ID, while a normal handshake succeeded.",
			events(Trigger, trig)...)
	}
}

// runCIDEcho runs a raw handshake with the given connection IDs and checks
// that every server packet is addressed to the tester's Source
// Connection ID.
func runCIDEcho(ctx context.Context, t *T, dcid, scid []byte, what string) {
	tp := rawquic.DefaultClientTP(scid)
	rc := t.newRaw(ctx, rawquic.Options{Label: "cids", DCID: dcid, SCID: scid, TP: tp})
	err := rc.Handshake(ctx, t.Settle()+2*time.Second)
	req := t.sc.Requirements[0]
	var wrong, right []*packet
	for _, p := range received(t.rec.snapshot(), rc.trace.id, 0) {
		if p.space < 0 {
			continue
		}
		if !bytes.Equal(p.dcid, scid) {
			wrong = append(wrong, p)
		} else {
			right = append(right, p)
		}
	}
	switch {
	case len(wrong) > 0:
		t.Fail(
			"dcid",
			req,
			fmt.Sprintf(
				"The client used %s (%x), but the server sent %d packet(s) to Destination Connection ID %x instead.",
				what,
				scid,
				len(wrong),
				wrong[0].dcid,
			),
			events(Response, lastN(wrong, 2)...)...)
	case len(right) == 0:
		if t.datagramsReceived(rc.trace.id) > 0 {
			t.Observe("dcid", fmt.Sprintf("The server answered the handshake with %s with nothing the tester could read (%v).", what, err))
			return
		}
		if bytes.Equal(scid, []byte{}) && len(scid) == 0 {
			t.Observe("dcid", fmt.Sprintf("The server refused or ignored a connection with %s: %v.", what, err))
			return
		}
		t.Inconclusive(fmt.Sprintf("The server did not answer the handshake with %s: %v.", what, err))
	case err != nil && len(scid) == 0:
		t.Pass("dcid", req, fmt.Sprintf("All %d server packets were addressed to the zero-length ID.", len(right)), events(Response, lastN(right, 2)...)...)
		t.Observe("handshake", fmt.Sprintf("The handshake with %s did not complete: %v.", what, err))
	case err != nil:
		t.Pass(
			"dcid",
			req,
			fmt.Sprintf("All %d server packets carried the tester's %d-byte ID.", len(right), len(scid)),
			events(Response, lastN(right, 2)...)...)
		t.Check("handshake", Inconclusive, Requirement{}, fmt.Sprintf("The handshake with %s did not complete: %v.", what, err))
	default:
		t.Pass(
			"dcid",
			req,
			fmt.Sprintf(
				"The handshake completed and all %d server packets were addressed to the tester's %d-byte Source Connection ID.",
				len(right),
				len(scid),
			),
			events(Response, lastN(right, 2)...)...)
	}
}

func runHSShortInitialDCID(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "dcid-4", DCID: randomBytes(4)})
	err := rc.Handshake(ctx, t.Settle())
	a := classify(t.rec.snapshot(), rc.trace.id)
	switch {
	case err == nil:
		t.Observe("answer", "The server completed a handshake whose first Initial had a 4-byte Destination Connection ID.")
	case len(a.closes) > 0:
		t.Observe("answer", "The server closed the connection: "+closeCode(a.closes[0].closeFrame())+".", events(Response, a.closes[0])...)
	case len(a.handshake) > 0:
		t.Observe("answer", fmt.Sprintf("The server answered but the handshake did not complete: %v.", err))
	default:
		t.Observe("answer", "The server dropped the Initial with a 4-byte Destination Connection ID.")
	}
}

func runHSCIDAuthentication(ctx context.Context, t *T) {
	c, err := t.Dial(ctx, DialOptions{})
	tp := c.TransportParameters()
	if tp == nil {
		if err != nil {
			t.dialFailure(c, err)
		}
		t.Inconclusive("The server's transport parameters could not be read from its EncryptedExtensions.")
	}
	ps := t.rec.snapshot()
	var firstInitial, serverInitial, retry *packet
	for _, p := range ps {
		if p.conn != c.ID() {
			continue
		}
		if p.sent && firstInitial == nil && p.ev.PacketType == "initial" {
			firstInitial = p
		}
		if !p.sent && serverInitial == nil && p.ev.PacketType == "initial" {
			serverInitial = p
		}
		if !p.sent && retry == nil && p.ev.PacketType == "retry" {
			retry = p
		}
	}
	if firstInitial == nil || serverInitial == nil {
		t.Inconclusive("The tester did not see both its first Initial and a server Initial.")
	}
	reqMatch, reqAbsent := t.sc.Requirements[0], t.sc.Requirements[1]
	ev := evidence(events(Trigger, firstInitial), events(Response, serverInitial))
	ok := true
	if !tp.HasOriginalDestinationConnectionID {
		t.Fail("odcid", reqAbsent, "The server's transport parameters lack original_destination_connection_id.", ev...)
		ok = false
	} else if !bytes.Equal(tp.OriginalDestinationConnectionID, firstInitial.dcid) {
		t.Fail("odcid", reqMatch, fmt.Sprintf("original_destination_connection_id is %x but the tester's first Initial went to %x.", tp.OriginalDestinationConnectionID, firstInitial.dcid), ev...)
		ok = false
	}
	if !tp.HasInitialSourceConnectionID {
		t.Fail("iscid", reqAbsent, "The server's transport parameters lack initial_source_connection_id.", ev...)
		ok = false
	} else if !bytes.Equal(tp.InitialSourceConnectionID, serverInitial.scid) {
		t.Fail("iscid", reqMatch, fmt.Sprintf("initial_source_connection_id is %x but the server's Initial packets carry Source Connection ID %x.", tp.InitialSourceConnectionID, serverInitial.scid), ev...)
		ok = false
	}
	switch {
	case retry != nil && !tp.HasRetrySourceConnectionID:
		t.Fail("rscid", reqMatch, "The server sent a Retry but its transport parameters lack retry_source_connection_id.", events(Response, retry)...)
		ok = false
	case retry != nil && !bytes.Equal(tp.RetrySourceConnectionID, retry.scid):
		t.Fail(
			"rscid",
			reqMatch,
			fmt.Sprintf("retry_source_connection_id is %x but the Retry came from %x.", tp.RetrySourceConnectionID, retry.scid),
			events(Response, retry)...)
		ok = false
	case retry == nil && tp.HasRetrySourceConnectionID:
		t.Fail("rscid", reqMatch, "The server sent retry_source_connection_id although it sent no Retry.", ev...)
		ok = false
	}
	t.Fact("retry.policy", map[bool]string{true: "retry on first contact", false: "no retry on first contact"}[retry != nil])
	if ok {
		t.Pass(
			"cid-authentication",
			reqMatch,
			"original_destination_connection_id, initial_source_connection_id and retry_source_connection_id match the connection IDs on the wire.",
			ev...)
	}
}

func runHSServerTPValid(ctx context.Context, t *T) {
	c, err := t.Dial(ctx, DialOptions{})
	tp, tpErr := c.trace.transportParameters()
	if tp == nil {
		if err != nil {
			t.dialFailure(c, err)
		}
		t.Inconclusive("The server's transport parameters could not be read from its EncryptedExtensions.")
	}
	var ee *packet
	for _, p := range received(t.rec.snapshot(), c.ID(), 0) {
		if p.space == 1 && p.has(wire.FrameTypeCrypto) {
			ee = p
			break
		}
	}
	ev := events(Response, ee)
	t.Fact("tp", tpFacts(tp))
	var grease []string
	for _, p := range tp.Raw {
		if wire.IsGreaseTransportParameter(p.ID) {
			grease = append(grease, fmt.Sprintf("0x%x", p.ID))
		}
	}
	if len(grease) > 0 {
		t.Fact("grease.tp", grease)
	}
	seen := map[uint64]bool{}
	dup := false
	for _, p := range tp.Raw {
		if seen[p.ID] {
			t.Fail(
				"no-duplicates",
				t.sc.Requirements[0],
				fmt.Sprintf("The server sent transport parameter %s more than once.", wire.TransportParameterID(p.ID)),
				ev...)
			dup = true
			break
		}
		seen[p.ID] = true
	}
	if !dup {
		t.Pass("no-duplicates", t.sc.Requirements[0], fmt.Sprintf("The server sent %d transport parameters, none twice.", len(tp.Raw)), ev...)
	}
	if tpErr != nil {
		var we *wire.Error
		if errors.As(tpErr, &we) && !dup {
			req := reqTPInvalid
			if bytes.Contains([]byte(we.Reason), []byte("active_connection_id_limit")) {
				req = t.sc.Requirements[1]
			} else if bytes.Contains([]byte(we.Reason), []byte("preferred_address")) {
				req = t.sc.Requirements[2]
			}
			t.Fail(
				"values",
				req,
				fmt.Sprintf("The server's transport parameters break a rule: %s; a conforming client must close with TRANSPORT_PARAMETER_ERROR.", we.Reason),
				ev...)
		}
		return
	}
	t.Pass("values", reqTPInvalid, "Every server transport parameter is well formed and in range.", ev...)
}

// tpVariant is one connection of a transport-parameter scenario.
type tpVariant struct {
	name string
	edit func(*wire.TransportParameters)
}

func (t *T) runTPVariants(ctx context.Context, vs []tpVariant, req Requirement, warnOnly bool) {
	for _, v := range vs {
		e := Expectation{Check: v.name, Req: req, Codes: []uint64{uint64(wire.TransportParameterError)},
			Describe: "client transport parameters with " + v.name, GoesOnWarns: warnOnly}
		t.ProvokeHandshake(ctx, DialOptions{Label: v.name, Probe: quic.Probe{TransportParameters: v.edit}}, e)
	}
}

func runHSClientTPInvalid(ctx context.Context, t *T) {
	t.runTPVariants(ctx, []tpVariant{
		{"max_udp_payload_size=1199", func(p *wire.TransportParameters) { p.MaxUDPPayloadSize = 1199 }},
		{"ack_delay_exponent=21", func(p *wire.TransportParameters) { p.AckDelayExponent = 21 }},
		{"max_ack_delay=16384", func(p *wire.TransportParameters) { p.MaxAckDelay = 16384 }},
	}, t.sc.Requirements[0], false)
	t.runTPVariants(ctx, []tpVariant{
		{"active_connection_id_limit=1", func(p *wire.TransportParameters) { p.ActiveConnectionIDLimit = 1 }},
	}, t.sc.Requirements[1], false)
}

func runHSClientTPServerOnly(ctx context.Context, t *T) {
	t.runTPVariants(ctx, []tpVariant{
		{"original_destination_connection_id", func(p *wire.TransportParameters) {
			p.HasOriginalDestinationConnectionID, p.OriginalDestinationConnectionID = true, randomBytes(8)
		}},
		{"preferred_address", func(p *wire.TransportParameters) {
			p.HasPreferredAddress = true
			p.PreferredAddress = wire.PreferredAddress{IPv4: [4]byte{127, 0, 0, 1}, IPv4Port: 4433, ConnectionID: randomBytes(8)}
		}},
		{"retry_source_connection_id", func(p *wire.TransportParameters) {
			p.HasRetrySourceConnectionID, p.RetrySourceConnectionID = true, randomBytes(8)
		}},
		{"stateless_reset_token", func(p *wire.TransportParameters) {
			p.HasStatelessResetToken = true
			copy(p.StatelessResetToken[:], randomBytes(16))
		}},
	}, t.sc.Requirements[0], false)
}

func runHSClientTPDuplicate(ctx context.Context, t *T) {
	t.runTPVariants(ctx, []tpVariant{
		{"initial_max_data twice", func(p *wire.TransportParameters) {
			raw, err := wire.ParseTransportParameterList(p.Marshal())
			if err != nil {
				return
			}
			raw = append(raw, wire.TransportParameter{ID: uint64(wire.TPInitialMaxData), Value: wire.AppendVarint(nil, 1000)})
			p.Raw = raw
		}},
	}, t.sc.Requirements[0], true)
}

func runHSClientTPStreamsOverLimit(ctx context.Context, t *T) {
	t.runTPVariants(ctx, []tpVariant{
		{"initial_max_streams_bidi=2^60+1", func(p *wire.TransportParameters) { p.InitialMaxStreamsBidi = wire.MaxStreams + 1 }},
		{"initial_max_streams_uni=2^60+1", func(p *wire.TransportParameters) { p.InitialMaxStreamsUni = wire.MaxStreams + 1 }},
	}, t.sc.Requirements[0], false)
}

func runHSStrayHandshake(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "stray"})
	h := wire.LongHeader{Version: wire.Version1, Type: wire.PacketTypeHandshake, DCID: rc.DCID, SCID: rc.SCID, LengthLen: 2, PNLen: 2}
	hdr, lengthOff, _ := h.Append(nil)
	body := randomBytes(200)
	wire.PutVarintLen(hdr[lengthOff:], uint64(2+len(body)-2), 2)
	pkt := append(hdr[:len(hdr)-2], body...)
	rc.Send(pkt)
	p := rc.trace.recordHeaderOnly(time.Now(), pkt, len(pkt))
	p.sent, p.ev.Direction, p.ev.PacketType = true, "sent", "handshake"
	rc.Receive(ctx, t.Settle(), nil)
	reqIgnore := t.sc.Requirements[0]
	n := t.datagramsReceived(rc.trace.id)
	rcv := received(t.rec.snapshot(), rc.trace.id, 0)
	if n == 0 {
		t.requireControl(ctx, "The server stayed silent after the stray Handshake packet")
		t.Pass(
			"ignore",
			reqIgnore,
			"The server ignored a Handshake packet that no Initial preceded, while a normal handshake succeeded.",
			events(Trigger, p)...)
		return
	}
	for _, q := range rcv {
		if q.ev.PacketType != "unparsed" || q == p {
			t.Warn(
				"ignore",
				reqIgnore,
				fmt.Sprintf("The server answered a stray Handshake packet with a %s packet instead of ignoring it.", q.ev.PacketType),
				evidence(events(Trigger, p), events(Response, q))...)
			return
		}
	}
	t.Pass(
		"ignore",
		reqIgnore,
		fmt.Sprintf("The server answered the stray Handshake packet only with %d short datagram(s), taken as stateless resets, which §10.3 allows.", n),
		events(Trigger, p)...)
}

func runHSPaddingOnly(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "padding-only"})
	pkt, _ := rc.LongPacket(0, []wire.Frame{&wire.PaddingFrame{Length: 1}}, rawquic.LongOpts{PadTo: 1200})
	rc.Send(pkt)
	trig := rc.LastSent()
	rc.Receive(ctx, t.Settle(), nil)
	a := classify(t.rec.snapshot(), rc.trace.id)
	switch {
	case len(a.closes) > 0:
		t.Observe(
			"answer",
			"The server closed the connection: "+closeCode(a.closes[0].closeFrame())+".",
			evidence(events(Trigger, trig), events(Response, a.closes[0]))...)
	case len(a.handshake) > 0:
		t.Observe(
			"answer",
			"The server answered the padding-only Initial (acknowledged it or sent handshake packets).",
			evidence(events(Trigger, trig), events(Response, a.handshake[0]))...)
	default:
		t.Observe("answer", "The server dropped the padding-only Initial.", events(Trigger, trig)...)
	}
}

// ipv6Address returns an IPv6 address and port of the target: its own when
// it is one, the host name's AAAA record, or ::1 for an IPv4 loopback
// target (the same host, which answers there when it listens on it).
func ipv6Address(ctx context.Context, target string) (netip.AddrPort, bool) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return netip.AddrPort{}, false
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	if a, err := netip.ParseAddr(host); err == nil {
		switch {
		case a.Is6() && !a.Is4In6():
			return netip.AddrPortFrom(a, uint16(pn)), true
		case a.Unmap().IsLoopback():
			return netip.AddrPortFrom(netip.IPv6Loopback(), uint16(pn)), true
		}
		return netip.AddrPort{}, false
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip6", host)
	if err != nil || len(addrs) == 0 {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addrs[0], uint16(pn)), true
}

func runHSV1IPv6(ctx context.Context, t *T) {
	orig := t.profile.Target.Address
	v6, ok := ipv6Address(ctx, orig)
	if !ok {
		t.Inconclusive(fmt.Sprintf("The target %s has no IPv6 address, so the tester has no IPv6 path to it (needs ipv6).", orig))
	}
	p := *t.profile
	p.Target.SNI = t.profile.sni()
	p.Target.Address = v6.String()
	t.profile = &p
	t.Fact("ipv6.address", v6.String())
	c, err := t.Dial(ctx, DialOptions{Label: "IPv6"})
	if err != nil {
		if len(received(t.rec.snapshot(), c.ID(), 0)) == 0 {
			t.Inconclusive(fmt.Sprintf("Nothing came back from %s (the target was given as %s): no IPv6 path to the target (needs ipv6).", v6, orig))
		}
		t.dialFailure(c, err)
	}
	c.Close(0, "")
	// The flow labels, read on a raw IPv6 socket; recorded only (§9.7's
	// SHOULD holds "unless the local API does not allow" it).
	rc := t.newRaw(ctx, rawquic.Options{Label: "IPv6 flow labels"})
	if err := rc.Handshake(ctx, t.Settle()); err == nil {
		var labels []string
		for l, n := range rc.FlowLabels {
			labels = append(labels, fmt.Sprintf("0x%05x×%d", l, n))
		}
		slices.Sort(labels)
		t.Fact("ipv6.flow-labels", labels)
		zero := rc.FlowLabels[0]
		t.Observe("flow-label", fmt.Sprintf("The server's IPv6 datagrams carried flow labels %v (%d of them zero).", labels, zero))
	}
	runHSV1Basic(ctx, t)
}

// firstReceivedWith returns the first packet from the server on conn that
// carries a frame of type ft.
func firstReceivedWith(ps []*packet, conn int, ft wire.FrameType) *packet {
	for _, p := range received(ps, conn, 0) {
		if p.has(ft) {
			return p
		}
	}
	return nil
}

func runHSHandshakeDoneNotEarly(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "Finished held back"})
	var hold time.Duration
	rc.BeforeFinished = func() {
		// Catalogue: hold the Finished for 2 × RTT, acknowledging all the
		// server sends. On loopback 2 × RTT is well under a millisecond,
		// too short for a server's timer or scheduler to show anything,
		// so the tester holds at least 200 ms.
		hold = max(2*t.RTT(), 200*time.Millisecond)
		rc.Receive(ctx, hold, nil)
	}
	err := rc.Handshake(ctx, t.Settle()+2*time.Second)
	ps := t.rec.snapshot()
	fin := finishedSent(ps, rc.trace.id)
	hd := firstReceivedWith(ps, rc.trace.id, wire.FrameTypeHandshakeDone)
	req := t.sc.Requirements[0]
	switch {
	case hd != nil && (fin == nil || hd.at.Before(fin.at)):
		evs := events(Response, hd)
		if fin != nil {
			evs = append(evs, events(Context, fin)...)
		}
		t.Fail(
			"not-early",
			req,
			fmt.Sprintf(
				"The server sent HANDSHAKE_DONE while the tester was still holding back its Finished (%v hold); it cannot have completed the handshake.",
				hold.Round(time.Millisecond),
			),
			evs...)
	case hd != nil:
		t.Pass(
			"not-early",
			req,
			fmt.Sprintf(
				"The server sent HANDSHAKE_DONE %v after the tester's Finished, which the tester held back for %v.",
				hd.at.Sub(fin.at).Round(time.Microsecond),
				hold.Round(time.Millisecond),
			),
			evidence(events(Context, fin), events(Response, hd))...)
	case fin == nil:
		t.Inconclusive(
			fmt.Sprintf("The handshake did not reach the tester's Finished: %v.", err),
			events(Context, lastN(received(ps, rc.trace.id, 0), 3)...)...)
	default:
		t.Inconclusive(fmt.Sprintf("The server sent no HANDSHAKE_DONE after the tester's Finished: %v.", err), events(Context, fin)...)
	}
}

func runHSHandshakeDoneRetransmitted(ctx context.Context, t *T) {
	var withheld *packet
	rc := t.newRaw(ctx, rawquic.Options{Label: "HANDSHAKE_DONE never acknowledged"})
	rc.NeverAck = func(sp int, p *packet) bool {
		if sp == 2 && withheld == nil && p.has(wire.FrameTypeHandshakeDone) {
			withheld = p
			return true
		}
		return false
	}
	if err := rc.Handshake(ctx, t.Settle()+2*time.Second); err != nil || withheld == nil {
		t.Inconclusive(
			fmt.Sprintf("The tester's handshake did not complete with a HANDSHAKE_DONE: %v.", err),
			events(Context, lastN(received(t.rec.snapshot(), rc.trace.id, 0), 3)...)...)
	}
	repeated := func(ps []*packet) *packet {
		for _, p := range received(ps, rc.trace.id, 0) {
			if p != withheld && p.at.After(withheld.at.Add(-time.Nanosecond)) && p.has(wire.FrameTypeHandshakeDone) && p.pn != withheld.pn {
				return p
			}
		}
		return nil
	}
	// Traffic after the handshake: a request, then a PING every PTO, all
	// acknowledged by the server's later packets, which the tester
	// acknowledges in turn, so the packet with HANDSHAKE_DONE is lost.
	rc.Request(t.profile.SmallPath)
	deadline := time.Now().Add(t.Settle())
	for time.Now().Before(deadline) && ctx.Err() == nil && repeated(t.rec.snapshot()) == nil && !rc.PeerClosed {
		rc.Receive(ctx, t.PTO(), func() bool { return repeated(t.rec.snapshot()) != nil })
		if repeated(t.rec.snapshot()) == nil {
			rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
		}
	}
	ps := t.rec.snapshot()
	req := t.sc.Requirements[0]
	if r := repeated(ps); r != nil {
		t.Pass(
			"retransmitted",
			req,
			fmt.Sprintf(
				"The tester never acknowledged packet %d, which carried HANDSHAKE_DONE; the server sent the frame again in packet %d, %v later.",
				withheld.pn,
				r.pn,
				r.at.Sub(withheld.at).Round(time.Millisecond),
			),
			evidence(events(Trigger, withheld), events(Response, r))...)
		return
	}
	var later []*packet
	for _, p := range received(ps, rc.trace.id, 0) {
		if p.space == 2 && p.pn > withheld.pn {
			later = append(later, p)
		}
	}
	if len(later) == 0 {
		t.Inconclusive(
			fmt.Sprintf("The server sent nothing after the packet carrying HANDSHAKE_DONE within %v.", t.Settle().Round(time.Millisecond)),
			events(Trigger, withheld)...)
	}
	t.Fail(
		"retransmitted",
		req,
		fmt.Sprintf(
			"The tester never acknowledged packet %d, which carried HANDSHAKE_DONE, but acknowledged the server's later packets; over %v the server sent %d more 1-RTT packets and never repeated HANDSHAKE_DONE.",
			withheld.pn,
			t.Settle().Round(time.Millisecond),
			len(later),
		),
		evidence(events(Trigger, withheld), events(Response, lastN(later, 3)...))...)
}

// scidChange is what a second Initial with another Source Connection ID
// drew from the server.
type scidChange struct {
	ackedBad  *packet // a server ACK covering the changed-ID packet
	switched  *packet // a server packet sent to the changed ID
	ackedGood *packet // a server ACK covering the later same-ID Initial
}

// judgeSCIDChange reads the server's packets on conn: the tester's Initial
// badPN carried the Source Connection ID newSCID, its Initial goodPN
// (sent after it) the original one.
func judgeSCIDChange(ps []*packet, conn int, badPN, goodPN uint64, newSCID []byte) scidChange {
	var j scidChange
	j.ackedBad = ackedBy(ps, conn, 0, badPN)
	j.ackedGood = ackedBy(ps, conn, 0, goodPN)
	for _, p := range received(ps, conn, 0) {
		if p.space >= 0 && len(newSCID) > 0 && string(p.dcid) == string(newSCID) {
			j.switched = p
			break
		}
	}
	return j
}

func runHSInitialSCIDChange(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "SCID change"})
	// Silent until the probe is out: no Handshake packet may reach the
	// server first, or it discards its Initial keys (RFC 9001 §4.9.1) and
	// drops any Initial whatever its Source Connection ID.
	rc.Silent = true
	rc.SendClientHello(ctx, 1200)
	rc.Receive(ctx, t.Settle(), func() bool { return rc.ServerSCID != nil })
	if rc.ServerSCID == nil {
		t.requireControl(ctx, "No server Initial came back")
		t.Inconclusive("The server did not answer the first Initial.")
	}
	newSCID := randomBytes(len(rc.SCID))
	for string(newSCID) == string(rc.SCID) {
		newSCID = randomBytes(len(rc.SCID))
	}
	bad, badPN := rc.LongPacket(0, []wire.Frame{rc.AckFrame(0), &wire.PingFrame{}}, rawquic.LongOpts{SCID: newSCID, PadTo: 1200})
	rc.Send(bad)
	badPkt := rc.LastSent()
	good, goodPN := rc.LongPacket(0, []wire.Frame{rc.AckFrame(0), &wire.PingFrame{}}, rawquic.LongOpts{PadTo: 1200})
	rc.Send(good)
	goodPkt := rc.LastSent()
	rc.Receive(ctx, t.Settle(), func() bool { return ackedBy(t.rec.snapshot(), rc.trace.id, 0, goodPN) != nil })
	// Then finish the handshake normally.
	rc.Silent = false
	rc.Flush()
	rc.Receive(ctx, t.Settle(), func() bool { return rc.Confirmed || rc.PeerClosed })
	j := judgeSCIDChange(t.rec.snapshot(), rc.trace.id, badPN, goodPN, newSCID)
	req := t.sc.Requirements[0]
	trig := events(Trigger, badPkt, goodPkt)
	switch {
	case j.ackedBad != nil:
		t.Fail(
			"discard",
			req,
			fmt.Sprintf(
				"The server acknowledged Initial packet %d, whose Source Connection ID %x differs from the first Initial's %x; it must discard it.",
				badPN,
				newSCID,
				rc.SCID,
			),
			append(trig, events(Response, j.ackedBad)...)...)
	case j.switched != nil:
		t.Fail(
			"discard",
			req,
			fmt.Sprintf("After an Initial with the Source Connection ID %x, the server sent to that ID instead of the first Initial's %x.", newSCID, rc.SCID),
			append(trig, events(Response, j.switched)...)...)
	case j.ackedGood != nil:
		t.Pass(
			"discard",
			req,
			fmt.Sprintf(
				"The server acknowledged the tester's later Initial %d but not Initial %d with the changed Source Connection ID, and kept sending to the original ID.",
				goodPN,
				badPN,
			),
			append(trig, events(Response, j.ackedGood)...)...)
	case rc.Confirmed:
		t.Pass(
			"discard",
			req,
			fmt.Sprintf(
				"The server never acknowledged Initial %d with the changed Source Connection ID, kept sending to the original ID and completed the handshake.",
				badPN,
			),
			trig...)
	default:
		t.Inconclusive("The server acknowledged neither of the tester's later Initial packets and the handshake did not complete.", trig...)
	}
}

// Family A, the client's flights (docs/scenarios.md): a ClientHello split
// across Initial packets that arrive out of order, and a second flight
// coalesced into one datagram. All run on the raw client, which places
// every CRYPTO byte and packet number itself.

var reqCryptoBuffer = rfc9000("7.5", Must, "Implementations MUST support buffering at least 4096 bytes of data received in out-of-order CRYPTO frames.")

// reversedClientHello returns a FirstFlight that sends the ClientHello
// split into at least n CRYPTO frames of equal size, each in its own
// Initial padded to a 1200-byte datagram, the highest packet number (the
// end of the ClientHello) first and the others each gap later. flight
// receives the packets of the latest flight, in the order sent.
func (rc *rawClient) reversedClientHello(ctx context.Context, n int, gap time.Duration, flight *[]*packet) func() {
	return func() {
		ch := rc.HelloMsg
		rc.CryptoQ[0] = nil
		rc.CryptoOff[0] = uint64(len(ch))
		// What a 1200-byte Initial holds: the header (with the token a
		// Retry gave), the CRYPTO frame header and the AEAD tag.
		room := 1200 - (1 + 4 + 1 + len(rc.DCID) + 1 + len(rc.SCID) + 2 + len(rc.Token) + 2 + 4) - 5 - 16
		n = max(n, (len(ch)+room-1)/room)
		size := (len(ch) + n - 1) / n
		base := rc.NextPN[0]
		*flight = nil
		for i := n - 1; i >= 0; i-- {
			lo, hi := i*size, min((i+1)*size, len(ch))
			rc.NextPN[0] = base + uint64(i)
			pkt, _ := rc.LongPacket(0, []wire.Frame{&wire.CryptoFrame{Offset: uint64(lo), Data: ch[lo:hi]}}, rawquic.LongOpts{PadTo: 1200})
			rc.Send(pkt)
			*flight = append(*flight, rc.LastSent())
			if i > 0 {
				sleep(ctx, gap)
			}
		}
		rc.NextPN[0] = base + uint64(n)
	}
}

// reassembly is what a server did with a ClientHello that arrived out of
// order.
type reassembly struct {
	completed bool      // the handshake completed
	answered  bool      // the server sent CRYPTO data (its ServerHello) or Handshake packets
	unacked   []*packet // the flight's packets the server never acknowledged
}

// judgeReassembly reads the server's packets on conn after the tester sent
// flight.
func judgeReassembly(ps []*packet, conn int, flight []*packet, completed bool) reassembly {
	r := reassembly{completed: completed}
	for _, p := range flight {
		if ackedBy(ps, conn, 0, p.pn) == nil {
			r.unacked = append(r.unacked, p)
		}
	}
	for _, p := range received(ps, conn, 0) {
		if p.space == 1 || (p.space == 0 && p.has(wire.FrameTypeCrypto)) {
			r.answered = true
		}
	}
	return r
}

// reportReassembly turns a reassembly into the scenario's check.
func (t *T) reportReassembly(r reassembly, flight []*packet, chLen int, err error, answers []*packet) {
	req := t.sc.Requirements[0]
	what := fmt.Sprintf("a %d-byte ClientHello in %d Initial packets sent in reverse order", chLen, len(flight))
	switch {
	case r.completed:
		t.Pass("reassembly", req, fmt.Sprintf("The server reassembled %s and completed the handshake.", what), events(Trigger, flight...)...)
	case len(r.unacked) == 0 && len(flight) > 0 && !r.answered:
		t.Fail(
			"reassembly",
			req,
			fmt.Sprintf(
				"The server acknowledged all of %s but sent no handshake within %v: it dropped out-of-order CRYPTO data instead of buffering it.",
				what,
				t.Settle().Round(time.Millisecond),
			),
			events(Trigger, flight...)...)
	default:
		t.Inconclusive(
			fmt.Sprintf("The handshake after %s did not complete (%v), and the server did not acknowledge every packet of it.", what, err),
			evidence(events(Trigger, flight...), events(Context, lastN(answers, 4)...))...)
	}
}

func runClientHelloReordered(ctx context.Context, t *T, o rawquic.Options, n int) (*rawClient, reassembly) {
	rc := t.newRaw(ctx, o)
	var flight []*packet
	rc.FirstFlight = rc.reversedClientHello(ctx, n, 10*time.Millisecond, &flight)
	err := rc.Handshake(ctx, t.Settle()+2*time.Second)
	r := judgeReassembly(t.rec.snapshot(), rc.trace.id, flight, err == nil)
	t.reportReassembly(r, flight, len(rc.HelloMsg), err, received(t.rec.snapshot(), rc.trace.id, 0))
	return rc, r
}

// greaseTP is a reserved transport parameter (RFC 9000 §18.1: 31 * N + 27)
// of n bytes, which a server must ignore.
func greaseTP(n int) []byte {
	b := wire.AppendVarint(nil, 31*1000+27)
	b = wire.AppendVarint(b, uint64(n))
	return append(b, make([]byte, n)...)
}

func runClientHelloMultiDatagram(ctx context.Context, t *T) {
	// The catalogue inflates the ClientHello with a hybrid post-quantum
	// key share and a padding extension. crypto/tls writes no padding
	// extension, so a reserved transport parameter, which every server
	// must ignore, brings it to about 3,300 bytes instead: three
	// 1200-byte datagrams (four after a Retry with a long token).
	scid := randomBytes(8)
	tp := append(rawquic.DefaultClientTP(scid).Marshal(), greaseTP(1800)...)
	rc, r := runClientHelloReordered(ctx, t, rawquic.Options{Label: "ClientHello in 3 datagrams, reversed", SCID: scid, RawTP: tp,
		Curves: []tls.CurveID{tls.X25519MLKEM768, tls.X25519}}, 3)
	t.Fact("tls.clienthello-bytes", len(rc.HelloMsg))
	t.Fact("handshake.server-ack-only-initials", serverAckOnlyInitials(t.rec.snapshot(), rc.trace.id))
	retried := rc.RetrySCID != nil
	t.Fact("retry.large-clienthello", retried)
	if r.completed {
		t.Observe(
			"retry",
			map[bool]string{true: "The server answered the large ClientHello with a Retry first, which §4.3 allows.", false: "The server answered the large ClientHello without a Retry."}[retried],
		)
	}
}

// serverAckOnlyInitials counts the server's Initial packets on conn that
// carry an ACK and nothing else (PADDING aside). RFC 9000 §13.2.1: "An
// endpoint MUST acknowledge all ack-eliciting Initial and Handshake
// packets immediately"; whether the ACK rides with the server's CRYPTO
// data or goes alone depends on timing (which piece of the ClientHello
// arrives when, and whether the server can answer it yet), so the count
// is a fact of one connection, a hint rather than a constant.
func serverAckOnlyInitials(ps []*packet, conn int) int {
	n := 0
	for _, p := range received(ps, conn, 0) {
		if p.space == 0 && !p.ackEliciting && p.has(wire.FrameTypeAck) && !p.has(wire.FrameTypeConnectionClose) {
			n++
		}
	}
	return n
}

// judgeCoalesced reads the server's packets on conn: the tester's
// Handshake packet hsPN and 1-RTT packet appPN left in one datagram, and
// later packets hsLater and appLater (nil when not sent) went alone.
func judgeCoalesced(ps []*packet, conn int, hsPN, appPN uint64, hsLater, appLater *packet, confirmed, answered bool) coalesced {
	var c coalesced
	c.hsAck = ackedBy(ps, conn, 1, hsPN)
	c.appAck = ackedBy(ps, conn, 2, appPN)
	c.hsDone = c.hsAck != nil || confirmed
	c.appDone = c.appAck != nil || answered
	if !c.hsDone && hsLater != nil {
		if a := ackedBy(ps, conn, 1, hsLater.pn); a != nil {
			c.hsLost, c.laterAck = true, a
		}
	}
	if !c.appDone && appLater != nil {
		if a := ackedBy(ps, conn, 2, appLater.pn); a != nil {
			c.appLost, c.laterAck = true, a
		}
	}
	return c
}

func runHSCoalescedClientFlight(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "coalesced second flight"})
	var req *rawquic.Request
	rc.CoalesceFinished = func() []wire.Frame {
		var frames []wire.Frame
		frames, req = rc.inlineRequest(rc.NegotiatedALPN(), t.profile.SmallPath)
		return frames
	}
	err := rc.Handshake(ctx, t.Settle()+2*time.Second)
	ps := t.rec.snapshot()
	var hsPkt, appPkt *packet
	for _, p := range ps {
		if p.sent && p.conn == rc.trace.id && p.space == 1 && p.has(wire.FrameTypeCrypto) && hsPkt == nil {
			hsPkt = p
		}
		if p.sent && p.conn == rc.trace.id && p.space == 2 && hasFrame[*wire.StreamFrame]()(p) && appPkt == nil {
			appPkt = p
		}
	}
	if hsPkt == nil || appPkt == nil || req == nil {
		t.Inconclusive(
			fmt.Sprintf("The handshake did not reach the tester's second flight: %v.", err),
			events(Context, lastN(received(ps, rc.trace.id, 0), 3)...)...)
	}
	var body []byte
	answered := false
	if err == nil {
		// No resend of the request (Await would resend it after a PTO):
		// only the coalesced copy may be answered.
		rc.Receive(ctx, t.Settle(), func() bool {
			done := rc.ResponseDone(req)
			return done || rc.PeerClosed
		})
		body, answered = rc.Body(req)
	}
	// Later packets of each space, alone, so that a packet dropped from
	// the coalesced datagram shows as dropped, not lost.
	var hsLater, appLater *packet
	if !rc.Confirmed && ackedBy(t.rec.snapshot(), rc.trace.id, 1, hsPkt.pn) == nil {
		pkt, _ := rc.LongPacket(1, []wire.Frame{&wire.PingFrame{}}, rawquic.LongOpts{})
		rc.Send(pkt)
		hsLater = rc.LastSent()
	}
	if ackedBy(t.rec.snapshot(), rc.trace.id, 2, appPkt.pn) == nil && !answered {
		appLater = rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, rawquic.ShortOpts{})
	}
	if hsLater != nil || appLater != nil {
		rc.Receive(ctx, t.Settle(), nil)
	}
	c := judgeCoalesced(t.rec.snapshot(), rc.trace.id, hsPkt.pn, appPkt.pn, hsLater, appLater, rc.Confirmed, answered)
	reqProcess, reqAck := t.sc.Requirements[0], t.sc.Requirements[1]
	trig := events(Trigger, hsPkt, appPkt)
	switch {
	case c.hsLost:
		t.Fail(
			"handshake-packet",
			reqProcess,
			fmt.Sprintf(
				"The server never processed the Handshake packet %d (the Finished) of the coalesced datagram, but acknowledged the tester's later Handshake packet %d sent alone.",
				hsPkt.pn,
				hsLater.pn,
			),
			append(trig, events(Response, c.laterAck)...)...)
	case c.hsDone:
		t.Pass(
			"handshake-packet",
			reqProcess,
			fmt.Sprintf(
				"The server processed the Handshake packet of the coalesced datagram (%s).",
				map[bool]string{true: "it acknowledged it", false: "it completed the handshake"}[c.hsAck != nil],
			),
			append(trig, events(Response, c.hsAck)...)...)
	default:
		t.Check(
			"handshake-packet",
			Inconclusive,
			reqProcess,
			fmt.Sprintf("The server neither acknowledged the Handshake packet of the coalesced datagram nor completed the handshake: %v.", err),
			trig...)
	}
	switch {
	case c.appLost:
		t.Fail(
			"1rtt-packet",
			reqAck,
			fmt.Sprintf(
				"The server never acknowledged the 1-RTT packet %d of the coalesced datagram nor answered its request, but acknowledged the tester's later 1-RTT packet %d sent alone.",
				appPkt.pn,
				appLater.pn,
			),
			append(trig, events(Response, c.laterAck)...)...)
	case c.appAck != nil:
		t.Pass(
			"1rtt-packet",
			reqAck,
			fmt.Sprintf(
				"The server acknowledged the 1-RTT packet of the coalesced datagram in a 1-RTT ACK%s.",
				map[bool]string{true: fmt.Sprintf(" and answered its request (%d bytes)", len(body)), false: ""}[answered],
			),
			append(trig, events(Response, c.appAck)...)...)
	case c.appDone:
		t.Pass(
			"1rtt-packet",
			reqAck,
			fmt.Sprintf("The server answered the request carried in the 1-RTT packet of the coalesced datagram (%d bytes).", len(body)),
			trig...)
	default:
		t.Check(
			"1rtt-packet",
			Inconclusive,
			reqAck,
			fmt.Sprintf("The server neither acknowledged nor answered the 1-RTT packet of the coalesced datagram: %v.", err),
			trig...)
	}
}

func init() {
	Register(&Scenario{
		ID: "hs-v1-basic", Title: "Basic v1 handshake and small fetch", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{reqHandshakeDone, reqDiscardOtherSCID},
		Run:          runHSV1Basic,
	})
	Register(&Scenario{
		ID: "hs-initial-too-small", Title: "First Initial in a 1100-byte datagram", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"14.1",
				Must,
				"A server MUST discard an Initial packet that is carried in a UDP datagram with a payload that is smaller than the smallest allowed maximum datagram size of 1200 bytes.",
			),
			rfc9000(
				"14.1",
				May,
				"A server MAY also immediately close the connection by sending a CONNECTION_CLOSE frame with an error code of PROTOCOL_VIOLATION",
			),
		},
		Run: runHSInitialTooSmall,
	})
	Register(&Scenario{
		ID: "hs-dcid-too-long", Title: "v1 Initial with a 21-byte Destination Connection ID", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{rfc9000("17.2", Must, "Endpoints that receive a version 1 long header with a value larger than 20 MUST drop the packet.")},
		Run:          runHSDCIDTooLong,
	})
	Register(&Scenario{
		ID: "hs-max-length-cids", Title: "20-byte connection IDs in the first Initial", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{reqDCIDFromFirst},
		Run: func(ctx context.Context, t *T) {
			runCIDEcho(ctx, t, randomBytes(20), randomBytes(20), "a 20-byte Source Connection ID")
		},
	})
	Register(&Scenario{
		ID: "hs-zero-length-scid", Title: "Zero-length client Source Connection ID", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{reqDCIDFromFirst},
		Run: func(ctx context.Context, t *T) {
			runCIDEcho(ctx, t, randomBytes(8), []byte{}, "a zero-length Source Connection ID")
		},
	})
	Register(&Scenario{
		ID: "hs-short-initial-dcid", Title: "First Initial with a 4-byte Destination Connection ID", Family: "A",
		Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("7.2", Must, "This Destination Connection ID MUST be at least 8 bytes in length.")},
		Run:          runHSShortInitialDCID,
	})
	Register(&Scenario{
		ID: "hs-cid-authentication", Title: "Connection ID authentication transport parameters", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"7.3",
				Must,
				"The values provided by a peer for these transport parameters MUST match the values that an endpoint used in the Destination and Source Connection ID fields",
			),
			rfc9000(
				"7.3",
				Must,
				"An endpoint MUST treat the absence of the initial_source_connection_id transport parameter from either endpoint or the absence of the original_destination_connection_id transport parameter from the server as a connection error",
			),
		},
		Run: runHSCIDAuthentication,
	})
	Register(&Scenario{
		ID: "hs-server-tp-valid", Title: "Server transport parameters well formed and in range", Family: "A",
		Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000("7.4", MustNot, "An endpoint MUST NOT send a parameter more than once in a given transport parameters extension."),
			rfc9000("18.2", Must, "The value of the active_connection_id_limit parameter MUST be at least 2."),
			rfc9000("18.2", MustNot, "A server that chooses a zero-length connection ID MUST NOT provide a preferred address."),
			reqTPInvalid,
		},
		Run: runHSServerTPValid,
	})
	Register(&Scenario{
		ID: "hs-client-tp-invalid", Title: "Client transport parameters with invalid values", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			reqTPInvalid,
			rfc9000("18.2", Must, "An endpoint that receives a value less than 2 MUST close the connection with an error of type TRANSPORT_PARAMETER_ERROR."),
		},
		Run: runHSClientTPInvalid,
	})
	Register(&Scenario{
		ID: "hs-client-tp-server-only", Title: "Client sends server-only transport parameters", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("18.2", Must, "A server MUST treat receipt of any of these transport parameters as a connection error of type TRANSPORT_PARAMETER_ERROR."),
		},
		Run: runHSClientTPServerOnly,
	})
	Register(&Scenario{
		ID: "hs-client-tp-duplicate", Title: "Client sends initial_max_data twice", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"7.4",
				Should,
				"An endpoint SHOULD treat receipt of duplicate transport parameters as a connection error of type TRANSPORT_PARAMETER_ERROR.",
			),
		},
		Run: runHSClientTPDuplicate,
	})
	Register(&Scenario{
		ID: "hs-client-tp-streams-over-limit", Title: "initial_max_streams above 2^60", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"4.6",
				Must,
				"the connection MUST be closed immediately with a connection error of type TRANSPORT_PARAMETER_ERROR if the offending value was received in a transport parameter",
			),
		},
		Run: runHSClientTPStreamsOverLimit,
	})
	Register(&Scenario{
		ID: "hs-stray-handshake-packet", Title: "Handshake packet before any Initial", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"5.2.2",
				Should,
				"Clients are not able to send Handshake packets prior to receiving a server response, so servers SHOULD ignore any such packets.",
			),
			rfc9000("10.3", May, "An endpoint MAY send a Stateless Reset in response to a packet with a long header."),
		},
		Run: runHSStrayHandshake,
	})
	Register(&Scenario{
		ID: "hs-padding-only-initial", Title: "Initial holding only PADDING", Family: "A",
		Needs: []string{NeedApp}, ObservationOnly: true,
		Requirements: []Requirement{rfc9000("19.1", Descriptive, "A PADDING frame (type=0x00) has no semantic value.")},
		Run:          runHSPaddingOnly,
	})
	// Family A, handshake scenarios of the s3hs set: hs-v1-ipv6,
	// hs-handshake-done-not-early, hs-handshake-done-retransmitted,
	// hs-initial-scid-change.
	Register(&Scenario{
		ID: "hs-v1-ipv6", Title: "Basic v1 handshake and small fetch over IPv6", Family: "A",
		Needs:        []string{NeedApp, "ipv6"},
		Requirements: []Requirement{reqHandshakeDone, reqDiscardOtherSCID},
		Run:          runHSV1IPv6,
	})
	Register(&Scenario{
		ID: "hs-handshake-done-not-early", Title: "No HANDSHAKE_DONE before the client's Finished", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{rfc9000("19.20", MustNot, "Servers MUST NOT send a HANDSHAKE_DONE frame before completing the handshake.")},
		Run:          runHSHandshakeDoneNotEarly,
	})
	Register(&Scenario{
		ID: "hs-handshake-done-retransmitted", Title: "HANDSHAKE_DONE retransmitted until acknowledged", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{rfc9000("13.3", Must, "The HANDSHAKE_DONE frame MUST be retransmitted until it is acknowledged.")},
		Run:          runHSHandshakeDoneRetransmitted,
	})
	Register(&Scenario{
		ID: "hs-initial-scid-change", Title: "Second Initial with a different Source Connection ID", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{rfc9000("7.2", Must, "if subsequent Initial packets include a different Source Connection ID, they MUST be discarded.")},
		Run:          runHSInitialSCIDChange,
	})
	Register(&Scenario{
		ID: "hs-clienthello-split-reordered", Title: "ClientHello in two Initial packets, second half first", Family: "A",
		Needs:        []string{NeedApp},
		Requirements: []Requirement{reqCryptoBuffer},
		Run: func(ctx context.Context, t *T) {
			runClientHelloReordered(ctx, t, rawquic.Options{Label: "ClientHello in 2 packets, reversed"}, 2)
		},
	})
	Register(&Scenario{
		ID: "hs-clienthello-multi-datagram", Title: "ClientHello of about 3,500 bytes in three Initial datagrams, reversed", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{reqCryptoBuffer,
			rfc9001("4.3", May, "servers MAY use the Retry feature … to only buffer partial ClientHello messages from clients with a validated address.")},
		Run: runClientHelloMultiDatagram,
	})
	Register(&Scenario{
		ID: "hs-coalesced-client-flight", Title: "Initial, Handshake and 1-RTT packets in one client datagram", Family: "A",
		Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("12.2", Must, "Receivers MUST be able to process coalesced packets."),
			rfc9000("12.2", Must, "The receiver of coalesced QUIC packets MUST individually process each QUIC packet and separately acknowledge them"),
		},
		Run: runHSCoalescedClientFlight,
	})
}

func (l *longHeaderLog) snapshot() []longHeaderSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]longHeaderSeen(nil), l.hdrs...)
}

func (h longHeaderSeen) String() string {
	return fmt.Sprintf("%s packet of version 0x%08x (%d bytes)", packetTypeName(h.typ), h.version, h.size)
}
