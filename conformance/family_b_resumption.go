package conformance

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family B, session resumption and 0-RTT (catalogue §3.B), and the
// scenarios of other families that need a resumed connection. Connection
// 1 leaves a session ticket in a tls.ClientSessionCache; connection 2
// resumes with it through the engine (quic.DialEarly for 0-RTT), and the
// judgement reads the server's TLS messages from the recorded CRYPTO
// streams: no Certificate means resumed, an early_data extension in
// EncryptedExtensions means early data accepted.

// TLS message and extension types (RFC 8446 §4, §4.2).
const (
	tlsCertificate = 11
	extEarlyData   = 42
)

func init() {
	Register(&Scenario{
		ID: "tls-resumption", Title: "Session resumption", Family: "B", Needs: []string{NeedApp}, PassOnly: true,
		Requirements: []Requirement{rfc9001("4.5", Descriptive, "QUIC can use the session resumption feature of TLS 1.3.")},
		Run:          runTLSResumption,
	})
	Register(&Scenario{
		ID: "tls-ticket-max-early-data", Title: "max_early_data_size is 0xffffffff", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("4.6.1", MustNot, "Servers MUST NOT send the early_data extension with a max_early_data_size field set to any value other than 0xffffffff.")},
		Run:          runTLSTicketMaxEarlyData,
	})
	Register(&Scenario{
		ID: "tls-0rtt-accepted", Title: "0-RTT request accepted and acknowledged in 1-RTT", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("13.2.6", Must, "Packets that a client sends with 0-RTT packet protection MUST be acknowledged by the server in packets protected by 1-RTT keys."),
			rfc9001("5.6", MustNot, "A server MUST NOT use 0-RTT keys to protect packets"),
		},
		Run: runTLS0RTTAccepted,
	})
	Register(&Scenario{
		ID: "tls-0rtt-tp-not-reduced", Title: "Remembered limits not reduced when 0-RTT is accepted", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("7.4.1", MustNot, "If 0-RTT data is accepted by the server, the server MUST NOT reduce any limits or alter any values that might be violated by the client with its 0-RTT data.")},
		Run:          runTLS0RTTTPNotReduced,
	})
	Register(&Scenario{
		ID: "dgram-0rtt-limit-kept", Title: "max_datagram_frame_size kept when 0-RTT is accepted", Family: "I", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9221("3", Must, "When servers decide to accept 0-RTT data, they MUST send a max_datagram_frame_size transport parameter greater than or equal to the value they sent to the client")},
		Run:          runDgram0RTTLimitKept,
	})
	Register(&Scenario{
		ID: "tls-crypto-in-0rtt", Title: "CRYPTO frame in a 0-RTT packet", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9001("8.3", Must, "A server MUST treat receipt of a CRYPTO frame in a 0-RTT packet as a connection error of type PROTOCOL_VIOLATION.")},
		Run: func(ctx context.Context, t *T) {
			t.provoke0RTT(ctx, func(*resumption) (wire.Frame, Expectation) {
				return &wire.CryptoFrame{Offset: 0, Data: []byte{tlsKeyUpdate, 0, 0, 1, 0}}, Expectation{
					Check: "close", Req: t.sc.Requirements[0], Codes: transportCodes(wire.ProtocolViolation),
					Describe: "a CRYPTO frame in a 0-RTT packet"}
			})
		},
	})
	Register(&Scenario{
		ID: "pkt-ack-in-0rtt", Title: "ACK frame in a 0-RTT packet", Family: "C", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("12.4", Must, "An endpoint MUST treat receipt of a frame in a packet type that is not permitted as a connection error of type PROTOCOL_VIOLATION."),
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
	Register(&Scenario{
		ID: "tls-0rtt-limit-violation", Title: "0-RTT data beyond the remembered stream limit", Family: "B", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("17.2.3", Should, "A server SHOULD treat a violation of remembered limits … as a connection error of an appropriate type")},
		Run:          runTLS0RTTLimitViolation,
	})
	Register(&Scenario{
		ID: "v2-cross-version-ticket", Title: "A v1 ticket is not accepted in v2", Family: "A", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc("RFC 9369", "5", Must, "Servers MUST validate the originating version of any session ticket or token and not accept one issued from a different version.")},
		Run:          runV2CrossVersionTicket,
	})
}

// serverMessages returns the server's complete TLS messages of conn in a
// packet number space (1 Handshake, 2 1-RTT).
func (c *connTrace) serverMessages(space int) [][]byte {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return tlsMessages(append([]byte(nil), c.cryptoIn[space].contiguous()...))
}

func hasMessage(msgs [][]byte, typ byte) bool {
	for _, m := range msgs {
		if m[0] == typ {
			return true
		}
	}
	return false
}

// extensionsOf walks a TLS extension block (2-byte length, then type,
// length, data) and returns the data of each extension by type.
func extensionsOf(b []byte) map[uint16][]byte {
	out := map[uint16][]byte{}
	if len(b) < 2 {
		return out
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n < len(b) {
		b = b[:n]
	}
	for len(b) >= 4 {
		typ, l := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+l {
			break
		}
		out[typ] = b[4 : 4+l]
		b = b[4+l:]
	}
	return out
}

// earlyAccepted reports whether the server's EncryptedExtensions carried
// early_data (RFC 8446 §4.2.10: the server accepted the early data), and
// whether EncryptedExtensions was seen at all.
func earlyAccepted(c *connTrace) (accepted, seen bool) {
	for _, m := range c.serverMessages(1) {
		if m[0] == tlsEncryptedExtensions {
			_, ok := extensionsOf(m[4:])[extEarlyData]
			return ok, true
		}
	}
	return false, false
}

// ticketEarlyData returns the max_early_data_size of a NewSessionTicket
// message, and whether it has the early_data extension (RFC 8446 §4.6.1).
func ticketEarlyData(m []byte) (uint32, bool) {
	b := m[4:]
	if len(b) < 9 {
		return 0, false
	}
	b = b[8:] // ticket_lifetime, ticket_age_add
	nl := int(b[0])
	if len(b) < 1+nl+2 {
		return 0, false
	}
	b = b[1+nl:]
	tl := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+tl {
		return 0, false
	}
	ext := extensionsOf(b[2+tl:])
	v, ok := ext[extEarlyData]
	if !ok || len(v) < 4 {
		return 0, ok
	}
	return binary.BigEndian.Uint32(v), true
}

// resumption is what connection 1 left for the next: the client's session
// cache, the tickets the server sent and its transport parameters.
type resumption struct {
	cache   tls.ClientSessionCache
	tickets [][]byte
	tp      *wire.TransportParameters
	first   *Conn
}

// earlyAllowed reports whether a ticket allows early data.
func (r *resumption) earlyAllowed() bool {
	for _, m := range r.tickets {
		if _, ok := ticketEarlyData(m); ok {
			return true
		}
	}
	return false
}

// sessionConfig makes the engine keep tickets in cache and use 0-RTT.
func sessionConfig(cache tls.ClientSessionCache) func(*quic.Config) {
	return func(c *quic.Config) {
		c.TLSConfig.ClientSessionCache = cache
		c.Allow0RTT = true
		// The tester offers its tickets in any QUIC version, so that
		// v2-cross-version-ticket can see what the server does with one.
		if c.Probe != nil {
			c.Probe.AnyVersionTickets = true
		}
	}
}

// ticket runs connection 1: a normal connection and a fetch, then waits
// one settle window for a NewSessionTicket. With need0RTT, a server whose
// tickets never allow early data makes the scenario unsupported.
func (t *T) ticket(ctx context.Context, need0RTT bool, o DialOptions) *resumption {
	r := &resumption{cache: tls.NewLRUClientSessionCache(4)}
	o.Label = "ticket"
	o.Config = sessionConfig(r.cache)
	c := t.mustDial(ctx, o)
	r.first = c
	t.fetchSmall(ctx, c)
	t.rec.wait(ctx, t.Settle(), func([]*packet) bool { return hasMessage(c.trace.serverMessages(2), tlsNewSessionTicket) })
	// A ticket may come in more than one message; give the rest a moment.
	t.rec.wait(ctx, 50*time.Millisecond, nil)
	for _, m := range c.trace.serverMessages(2) {
		if m[0] == tlsNewSessionTicket {
			r.tickets = append(r.tickets, m)
		}
	}
	r.tp = c.TransportParameters()
	t.Fact("tls.tickets", len(r.tickets))
	c.Close(0, "")
	if len(r.tickets) == 0 {
		t.Unsupported(fmt.Sprintf("The server sent no NewSessionTicket within %v of the handshake (needs resume).", t.Settle()))
	}
	if need0RTT && !r.earlyAllowed() {
		t.Fact("tls.early-data", "tickets do not allow early data")
		t.Unsupported("The server's session tickets carry no early_data extension, so it does not offer 0-RTT (needs 0rtt).")
	}
	return r
}

func runTLSResumption(ctx context.Context, t *T) {
	r := t.ticket(ctx, false, DialOptions{})
	c := t.mustDial(ctx, DialOptions{Label: "resumed", Config: func(cfg *quic.Config) { cfg.TLSConfig.ClientSessionCache = r.cache }})
	full := hasMessage(c.trace.serverMessages(1), tlsCertificate)
	t.Fact("tls.resumed", !full)
	if full {
		t.Observe("resumed", "The server answered the offered ticket with a full handshake (it sent a Certificate message).")
		return
	}
	t.Pass("resumed", t.sc.Requirements[0], "Offered the ticket of the first connection, the server resumed the session: its Handshake flight carries no Certificate message.")
}

func runTLSTicketMaxEarlyData(ctx context.Context, t *T) {
	r := t.ticket(ctx, true, DialOptions{})
	req := t.sc.Requirements[0]
	for _, m := range r.tickets {
		if v, ok := ticketEarlyData(m); ok && v != 0xffffffff {
			t.Fail("max-early-data", req, fmt.Sprintf("A NewSessionTicket carries early_data with max_early_data_size 0x%x.", v))
			return
		}
	}
	t.Pass("max-early-data", req, fmt.Sprintf("Every early_data extension in the server's %d NewSessionTicket messages has max_early_data_size 0xffffffff.", len(r.tickets)))
}

// early runs connection 2 with DialEarly; until before returns, frames
// injected go in 0-RTT packets. It waits for the server's
// EncryptedExtensions (or a close) and reports whether the server
// accepted early data.
func (t *T) early(ctx context.Context, r *resumption, label string, versions []uint32, before func(c *Conn)) (*Conn, bool) {
	c, err := t.Dial(ctx, DialOptions{Label: label, Early: true, Versions: versions, Config: sessionConfig(r.cache)})
	if err != nil {
		t.Inconclusive(fmt.Sprintf("The resumed connection failed: %v.", err), events(Context, lastN(received(t.rec.snapshot(), c.trace.id, 0), 3)...)...)
	}
	if before != nil {
		before(c)
	}
	t.rec.wait(ctx, t.Settle(), func([]*packet) bool {
		_, seen := earlyAccepted(c.trace)
		return seen
	})
	acc, seen := earlyAccepted(c.trace)
	if !seen && firstClose(received(t.rec.snapshot(), c.ID(), 0)) == nil {
		t.Inconclusive("The server's EncryptedExtensions did not arrive on the resumed connection.")
	}
	t.Fact("tls.early-data", acc)
	return c, acc
}

// sent0RTT returns the tester's 0-RTT packets on conn.
func sent0RTT(ps []*packet, conn int) []*packet {
	var out []*packet
	for _, p := range ps {
		if p.sent && p.conn == conn && p.ev.PacketType == "0RTT" {
			out = append(out, p)
		}
	}
	return out
}

func runTLS0RTTAccepted(ctx context.Context, t *T) {
	r := t.ticket(ctx, true, DialOptions{})
	var body []byte
	var ferr error
	done := make(chan struct{})
	c, acc := t.early(ctx, r, "0-RTT", nil, func(c *Conn) {
		// The PING is queued at once, so it leaves in 0-RTT however fast
		// the handshake completes; the request may come too late for
		// 0-RTT on loopback.
		c.Ping()
		go func() {
			defer close(done)
			body, ferr = c.Fetch(ctx, t.profile.SmallPath)
		}()
	})
	<-done
	t.rec.wait(ctx, t.PTO(), nil)
	ps := t.rec.snapshot()
	early := sent0RTT(ps, c.ID())
	if len(early) == 0 {
		t.Inconclusive("The tester sent no 0-RTT packet, although the ticket allows early data.")
	}
	if !acc {
		t.Observe("accepted", fmt.Sprintf("The server rejected the early data of %d 0-RTT packets (no early_data in EncryptedExtensions).", len(early)))
		return
	}
	for _, p := range received(ps, c.ID(), 0) {
		if p.ev.PacketType == "0RTT" {
			t.Fail("no-0rtt-from-server", t.sc.Requirements[1], "The server sent a packet with 0-RTT protection.", events(Response, p)...)
			return
		}
	}
	t.Pass("no-0rtt-from-server", t.sc.Requirements[1], "The server sent no 0-RTT packet.")
	unacked := 0
	for _, p := range early {
		if ackedBy(ps, c.ID(), 2, p.pn) == nil {
			unacked++
		}
	}
	if unacked == len(early) {
		t.Fail("ack-in-1rtt", t.sc.Requirements[0], fmt.Sprintf("The server accepted early data but acknowledged none of the tester's %d 0-RTT packets in 1-RTT packets.", len(early)), events(Trigger, early...)...)
		return
	}
	detail := "the request was answered"
	if ferr != nil {
		detail = fmt.Sprintf("the request failed: %v", ferr)
	}
	t.Pass("ack-in-1rtt", t.sc.Requirements[0], fmt.Sprintf("The server accepted early data and acknowledged %d of the tester's %d 0-RTT packets in 1-RTT packets; %s (%d bytes).", len(early)-unacked, len(early), detail, len(body)))
}

// earlyTP runs a 0-RTT connection and returns the remembered and the new
// transport parameters, or ends the scenario as unsupported when early
// data is rejected.
func (t *T) earlyTP(ctx context.Context) (old, cur *wire.TransportParameters) {
	r := t.ticket(ctx, true, DialOptions{})
	c, acc := t.early(ctx, r, "0-RTT", nil, func(c *Conn) { c.Ping() })
	if !acc {
		t.Unsupported("The server rejected early data on the resumed connection, so the remembered limits need not hold.")
	}
	cur = c.TransportParameters()
	if r.tp == nil || cur == nil {
		t.Inconclusive("The server's transport parameters could not be read on both connections.")
	}
	return r.tp, cur
}

func runTLS0RTTTPNotReduced(ctx context.Context, t *T) {
	old, cur := t.earlyTP(ctx)
	type lim struct {
		name     string
		old, cur uint64
	}
	ls := []lim{
		{"initial_max_data", old.InitialMaxData, cur.InitialMaxData},
		{"initial_max_stream_data_bidi_local", old.InitialMaxStreamDataBidiLocal, cur.InitialMaxStreamDataBidiLocal},
		{"initial_max_stream_data_bidi_remote", old.InitialMaxStreamDataBidiRemote, cur.InitialMaxStreamDataBidiRemote},
		{"initial_max_stream_data_uni", old.InitialMaxStreamDataUni, cur.InitialMaxStreamDataUni},
		{"initial_max_streams_bidi", old.InitialMaxStreamsBidi, cur.InitialMaxStreamsBidi},
		{"initial_max_streams_uni", old.InitialMaxStreamsUni, cur.InitialMaxStreamsUni},
		{"active_connection_id_limit", old.ActiveConnectionIDLimit, cur.ActiveConnectionIDLimit},
	}
	req := t.sc.Requirements[0]
	for _, l := range ls {
		if l.cur < l.old {
			t.Fail("limits", req, fmt.Sprintf("With early data accepted, the server's %s fell from %d (remembered with the ticket) to %d.", l.name, l.old, l.cur))
			return
		}
	}
	t.Pass("limits", req, "With early data accepted, none of the server's flow-control, stream and connection ID limits is smaller than on the connection that issued the ticket.")
}

func runDgram0RTTLimitKept(ctx context.Context, t *T) {
	c := t.mustDial(ctx, DialOptions{Label: "dgram-check"})
	if tp := t.serverTP(c); !tp.HasMaxDatagramFrameSize || tp.MaxDatagramFrameSize == 0 {
		t.Unsupported("The server did not advertise max_datagram_frame_size (needs dgram).")
	}
	c.Close(0, "")
	old, cur := t.earlyTP(ctx)
	req := t.sc.Requirements[0]
	if cur.MaxDatagramFrameSize < old.MaxDatagramFrameSize || !cur.HasMaxDatagramFrameSize {
		t.Fail("dgram-limit", req, fmt.Sprintf("With early data accepted, the server's max_datagram_frame_size fell from %d to %d.", old.MaxDatagramFrameSize, cur.MaxDatagramFrameSize))
		return
	}
	t.Pass("dgram-limit", req, fmt.Sprintf("With early data accepted, the server's max_datagram_frame_size is %d (remembered: %d).", cur.MaxDatagramFrameSize, old.MaxDatagramFrameSize))
}

// provoke0RTT is the provoked-error pattern with the offence in a 0-RTT
// packet of a resumed connection; build makes the offending frame and the
// expectation from what connection 1 left. A server that rejects early
// data never processes the frame, which makes the scenario inconclusive.
func (t *T) provoke0RTT(ctx context.Context, build func(r *resumption) (wire.Frame, Expectation)) {
	r := t.ticket(ctx, true, DialOptions{})
	f, e := build(r)
	mark := 0
	c, acc := t.early(ctx, r, "0-RTT offence", nil, func(c *Conn) {
		mark = t.mark()
		c.Inject(spaceApp, f)
	})
	carried := false
	for _, p := range sent0RTT(t.rec.snapshot(), c.ID()) {
		if p.has(f.Type()) {
			carried = true
		}
	}
	if !carried {
		t.Inconclusive(fmt.Sprintf("The tester could not send %s (the resumed connection did not use 0-RTT in time).", e.Describe))
	}
	if !acc && firstClose(received(t.rec.snapshot(), c.ID(), mark)) == nil {
		t.Inconclusive(fmt.Sprintf("The server rejected early data, so %s was never processed.", e.Describe))
	}
	t.watchAfter(ctx, c, mark, e, true)
}

func runTLS0RTTLimitViolation(ctx context.Context, t *T) {
	t.provoke0RTT(ctx, func(r *resumption) (wire.Frame, Expectation) {
		if r.tp == nil {
			t.Inconclusive("The server's transport parameters could not be read.")
		}
		lim := r.tp.InitialMaxStreamDataBidiRemote
		return &wire.StreamFrame{StreamID: 0, Offset: lim, Data: []byte("x")}, Expectation{Check: "close", Req: t.sc.Requirements[0],
			Codes: transportCodes(wire.FlowControlError), GoesOnWarns: true,
			Describe: fmt.Sprintf("a 0-RTT STREAM frame ending at offset %d, one byte beyond the remembered initial_max_stream_data_bidi_remote", lim+1)}
	})
}

func runV2CrossVersionTicket(ctx context.Context, t *T) {
	// v2 support first, so that a v1-only server is unsupported, not
	// judged on a handshake it cannot make.
	probe, err := t.Dial(ctx, DialOptions{Label: "v2-check", Versions: []uint32{protect.Version2}})
	if err != nil || probe.ConnectionInfo().Version != protect.Version2 {
		t.Unsupported("The server does not complete a handshake in QUIC version 2 (needs v2).")
	}
	probe.Close(0, "")
	r := t.ticket(ctx, false, DialOptions{Versions: []uint32{protect.Version1}})
	c, acc := t.early(ctx, r, "v2 with v1 ticket", []uint32{protect.Version2}, nil)
	// The server's long-header packets tell the version the connection
	// ran in (the engine's ConnectionInfo is complete only once its
	// handshake is).
	for _, p := range received(t.rec.snapshot(), c.ID(), 0) {
		if p.ev.Version != 0 && p.ev.Version != protect.Version2 {
			t.Inconclusive(fmt.Sprintf("The server answered the version 2 connection in version 0x%08x.", p.ev.Version), events(Response, p)...)
		}
	}
	resumed := !hasMessage(c.trace.serverMessages(1), tlsCertificate)
	t.Fact("tls.resumed", resumed)
	req := t.sc.Requirements[0]
	switch {
	case acc:
		t.Fail("cross-version", req, "In QUIC version 2 the server accepted early data under a ticket issued on a version 1 connection.")
	case resumed:
		t.Fail("cross-version", req, "In QUIC version 2 the server resumed a session whose ticket was issued on a version 1 connection (no Certificate message).")
	default:
		t.Pass("cross-version", req, "In QUIC version 2 the server answered a ticket issued on a version 1 connection with a full handshake, and did not accept early data.")
	}
}
