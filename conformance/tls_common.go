package conformance

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// acks returns a predicate for server packets of space sp acknowledging pn.
func acks(sp int, pn uint64) func(p *packet) bool {
	return func(p *packet) bool {
		if p.space != sp {
			return false
		}
		for _, f := range p.frames {
			if a, ok := f.(*wire.AckFrame); ok && a.Acks(pn) {
				return true
			}
		}
		return false
	}
}

// phaseLog is the 1-RTT packets of one connection with their Key Phase
// bits, as the hooks saw them (the engine's goroutine writes, the scenario
// reads).
type phaseLog struct {
	mu   sync.Mutex
	sent map[uint64]bool // packet number -> key phase bit
	recv []recvPhase
}

type recvPhase struct {
	pn    uint64
	phase bool
	acks  []*wire.AckFrame
}

// judgedPacket names the server packet a verdict rests on.
type judgedPacket struct {
	pn       uint64
	afterAck bool // an old-phase packet sent after the first acknowledgment
	ok       bool
}

// judge looks at the server packets received since mark: the first one
// that acknowledges a tester packet of the new phase must carry the new
// phase, and so must every packet after it. serverUpdated says that the
// server started key updates of its own meanwhile (the tester's engine
// followed them, RFC 9001 §6: "an endpoint MAY initiate a key update"):
// the new phase is then the flip of the tester's phase before the update,
// and once the server has sent in the new phase a later flip is its own
// next update, not a return to the old keys, and ends the judgement.
func (l *phaseLog) judge(mark int, fromPN uint64, serverUpdated bool) (Verdict, string, judgedPacket) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// The new phase is the phase of the tester's last 1-RTT packet; the
	// packets of this update are those from fromPN on with that phase.
	var newPhase bool
	var largest, before uint64
	found, foundBefore := false, false
	var oldPhase bool
	for pn, ph := range l.sent {
		if pn >= fromPN && (!found || pn > largest) {
			largest, newPhase, found = pn, ph, true
		}
		if pn < fromPN && (!foundBefore || pn > before) {
			before, oldPhase, foundBefore = pn, ph, true
		}
	}
	if !found {
		return Inconclusive, "the tester sent no 1-RTT packet after the update.", judgedPacket{}
	}
	if serverUpdated && foundBefore {
		newPhase = !oldPhase
	}
	switched := false
	var fresh []uint64
	for pn, ph := range l.sent {
		if pn >= fromPN && ph == newPhase {
			fresh = append(fresh, pn)
		}
	}
	acked := false
	for _, r := range l.recv[mark:] {
		if !acked {
			for _, a := range r.acks {
				for _, pn := range fresh {
					if a.Acks(pn) {
						acked = true
						break
					}
				}
			}
			if acked && r.phase != newPhase {
				return Fail, fmt.Sprintf(
						"the server acknowledged a packet protected with the new keys in packet %d, which still carries the old key phase.",
						r.pn,
					), judgedPacket{
						pn: r.pn,
						ok: true,
					}
			}
			switched = acked
			continue
		}
		if r.phase == newPhase {
			switched = true
			continue
		}
		if serverUpdated && switched {
			break
		}
		if r.phase != newPhase {
			return Fail, fmt.Sprintf(
					"after acknowledging the tester's new-phase packets, the server still sent packet %d in the old key phase.",
					r.pn,
				), judgedPacket{
					pn:       r.pn,
					afterAck: true,
					ok:       true,
				}
		}
	}
	if !acked {
		return Inconclusive, "no packet of the server acknowledged a packet sent with the new keys.", judgedPacket{}
	}
	return Pass, "", judgedPacket{}
}

// dialAgainIfSilent dials with o and, when nothing at all came back (a
// first flight lost on a busy host or target), dials once more, as
// mustDial does; the caller judges the failure itself.
func (t *T) dialAgainIfSilent(ctx context.Context, o DialOptions) (*Conn, error) {
	c, err := t.Dial(ctx, o)
	if err != nil && ctx.Err() == nil && len(received(t.rec.snapshot(), c.trace.id, 0)) == 0 {
		o.Label += " (again)"
		c, err = t.Dial(ctx, o)
	}
	return c, err
}

// withSuites runs f with the engine connections it dials offering exactly
// suites as TLS 1.3 cipher suites, in their own ClientHello
// (quic.Config.TLS13Suites); other scenarios run beside it unaffected.
func (t *T) withSuites(suites []uint16, f func()) {
	t.mu.Lock()
	t.suites = suites
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.suites = nil
		t.mu.Unlock()
	}()
	f()
}

// Family B, session resumption and 0-RTT (docs/scenarios.md), and the
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

// serverMessages returns the server's complete TLS messages of conn in a
// packet number space (1 Handshake, 2 1-RTT).
func (c *connTrace) serverMessages(space int) [][]byte {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return tlsMessages(append([]byte(nil), c.cryptoIn[space].Contiguous()...))
}

func hasMessage(msgs [][]byte, typ byte) bool {
	for _, m := range msgs {
		if m[0] == typ {
			return true
		}
	}
	return false
}

// earlyAccepted reports whether the server's EncryptedExtensions carried
// early_data (RFC 8446 §4.2.10: the server accepted the early data), and
// whether EncryptedExtensions was seen at all.
func earlyAccepted(c *connTrace) (accepted, seen bool) {
	for _, m := range c.serverMessages(1) {
		if m[0] == tlsEncryptedExtensions {
			_, ok := rawquic.Extensions(m[4:])[extEarlyData]
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
	ext := rawquic.Extensions(b[2+tl:])
	v, ok := ext[extEarlyData]
	if !ok || len(v) < 4 {
		return 0, ok
	}
	return binary.BigEndian.Uint32(v), true
}

// resumption is what connection 1 left for the next: the client's session
// cache, the tickets the server sent and its transport parameters.
type resumption struct {
	cache tls.ClientSessionCache
	// tokens keeps the NEW_TOKEN tokens of connection 1 for connection 2,
	// as a client SHOULD (RFC 9000 §8.1.3): with it a server that
	// validates addresses by Retry lets the 0-RTT packets through.
	tokens  quic.TokenStore
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
func sessionConfig(cache tls.ClientSessionCache, tokens quic.TokenStore) func(*quic.Config) {
	return func(c *quic.Config) {
		c.TLSConfig.ClientSessionCache = cache
		c.TokenStore = tokens
		c.Allow0RTT = true
		// The tester offers its tickets in any QUIC version, so that
		// v2-cross-version-ticket can see what the server does with one.
		if p, ok := c.Probe.(*quic.Probe); ok && p != nil {
			p.AnyVersionTickets = true
		}
	}
}

// ticket runs connection 1: a normal connection and a fetch, then waits
// one settle window for a NewSessionTicket. With need0RTT, a server whose
// tickets never allow early data makes the scenario unsupported.
func (t *T) ticket(ctx context.Context, need0RTT bool, o DialOptions) *resumption {
	r := &resumption{cache: tls.NewLRUClientSessionCache(4), tokens: quic.NewTokenStore()}
	o.Label = "ticket"
	o.Config = sessionConfig(r.cache, r.tokens)
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

// early runs connection 2 with DialEarly. The frames leave in its first
// 0-RTT packet (and again in one after a Retry, which discards the
// packets before it), however fast the handshake completes; before runs
// once the dial returns. It waits for the server's EncryptedExtensions
// (or a close) and reports whether the server accepted early data.
func (t *T) early(ctx context.Context, r *resumption, label string, versions []uint32, frames []wire.Frame, before func(c *Conn)) (*Conn, bool) {
	c, err := t.Dial(ctx, DialOptions{Label: label, Early: true, Versions: versions, Config: sessionConfig(r.cache, r.tokens),
		Probe: quic.Probe{EarlyFrames: frames}})
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

// afterRetry keeps the 0-RTT packets sent after the last Retry the server
// sent on conn, and reports whether there was one. A server that sends a
// Retry keeps no state for the connection (RFC 9000 §17.2.5), so the 0-RTT
// packets before it were never processed; a client may send 0-RTT again
// after it (§17.2.5.3: "A client MAY attempt 0-RTT after receiving a Retry
// packet by sending 0-RTT packets to the connection ID provided by the
// server").
func afterRetry(ps []*packet, conn int, early []*packet) ([]*packet, bool) {
	var last *packet
	for _, p := range received(ps, conn, 0) {
		if p.ev.PacketType == "retry" {
			last = p
		}
	}
	if last == nil {
		return early, false
	}
	var out []*packet
	for _, p := range early {
		if p.at.After(last.at) {
			out = append(out, p)
		}
	}
	return out, true
}

// earlyTP runs a 0-RTT connection and returns the remembered and the new
// transport parameters, or ends the scenario as unsupported when early
// data is rejected.
func (t *T) earlyTP(ctx context.Context) (old, cur *wire.TransportParameters) {
	r := t.ticket(ctx, true, DialOptions{})
	c, acc := t.early(ctx, r, "0-RTT", nil, []wire.Frame{&wire.PingFrame{}}, nil)
	if !acc {
		t.Unsupported("The server rejected early data on the resumed connection, so the remembered limits need not hold.")
	}
	cur = c.TransportParameters()
	if r.tp == nil || cur == nil {
		t.Inconclusive("The server's transport parameters could not be read on both connections.")
	}
	return r.tp, cur
}

// provoke0RTT is the provoked-error pattern with the offence in a 0-RTT
// packet of a resumed connection; build makes the offending frame and the
// expectation from what connection 1 left. A server that rejects early
// data never processes the frame, which makes the scenario inconclusive.
func (t *T) provoke0RTT(ctx context.Context, build func(r *resumption) (wire.Frame, Expectation)) {
	r := t.ticket(ctx, true, DialOptions{})
	f, e := build(r)
	c, acc := t.early(ctx, r, "0-RTT offence", nil, []wire.Frame{f}, nil)
	carried, beforeRetry := false, false
	ps := t.rec.snapshot()
	all := sent0RTT(ps, c.ID())
	early, retried := afterRetry(ps, c.ID(), all)
	var trigger *packet
	for _, p := range all {
		if p.has(f.Type()) {
			carried = carried || slices.Contains(early, p)
			beforeRetry = beforeRetry || !slices.Contains(early, p)
			if trigger == nil && slices.Contains(early, p) {
				trigger = p
			}
		}
	}
	// The judgement starts at the 0-RTT packet that carried the offence
	// (after any Retry): it is the trigger, and only it.
	mark := slices.Index(ps, trigger)
	if !carried && retried && beforeRetry {
		t.Inconclusive(
			fmt.Sprintf(
				"The server answered with a Retry, which keeps no state, so the 0-RTT packet carrying %s before it was never processed, and the tester sent it no more.",
				e.Describe,
			),
		)
	}
	if !carried {
		t.Inconclusive(fmt.Sprintf("The tester could not send %s (the resumed connection sent no 0-RTT packet).", e.Describe))
	}
	if !acc && firstClose(received(t.rec.snapshot(), c.ID(), mark)) == nil {
		t.Inconclusive(fmt.Sprintf("The server rejected early data, so %s was never processed.", e.Describe))
	}
	t.watchAfter(ctx, c, mark, e, true)
}

// serverPhases records the Key Phase bit of the server's 1-RTT packets as
// the engine opened them (its goroutine writes, the scenario reads).
type serverPhases struct {
	mu   sync.Mutex
	recv []phaseSeen
}

type phaseSeen struct {
	pn    uint64
	phase bool
	at    time.Time
}

func (l *serverPhases) snapshot() []phaseSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]phaseSeen(nil), l.recv...)
}

// ticketCache is a client session cache that keeps the first ticket the
// server sends and ignores later ones, so that the same ticket can be
// offered more than once (a replay).
type ticketCache struct {
	mu    sync.Mutex
	key   string
	state *tls.ClientSessionState
}

func (c *ticketCache) Get(key string) (*tls.ClientSessionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil || key != c.key {
		return nil, false
	}
	return c.state, true
}
