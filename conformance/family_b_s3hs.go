package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family B, TLS (catalogue §3.B): tls-hello-retry-request.

func init() {
	Register(&Scenario{
		ID: "tls-hello-retry-request", Title: "HelloRetryRequest for a key share the server does not prefer", Family: "B",
		Needs: []string{NeedApp}, PassOnly: true,
		Requirements: []Requirement{rfc9001("4.7", Descriptive, "From the perspective of QUIC, HelloRetryRequest is not differentiated from other cryptographic handshake messages that are carried in Initial packets.")},
		Run:          runTLSHelloRetryRequest,
	})
}

// helloRetryRandom is the ServerHello.random that marks a
// HelloRetryRequest (RFC 8446 §4.1.3: SHA-256 of "HelloRetryRequest").
var helloRetryRandom = []byte{
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
}

const tlsServerHello = 2

// isHelloRetryRequest reports whether a TLS handshake message is a
// ServerHello carrying the HelloRetryRequest random.
func isHelloRetryRequest(m []byte) bool {
	// type(1) length(3) legacy_version(2) random(32)
	return len(m) >= 38 && m[0] == tlsServerHello && bytes.Equal(m[6:38], helloRetryRandom)
}

// helloRetryInInitial returns the server's Initial CRYPTO messages of a
// connection and whether the first ServerHello was a HelloRetryRequest.
func helloRetryInInitial(c *connTrace) (hrr bool, serverHellos int) {
	c.r.mu.Lock()
	msgs := tlsMessages(append([]byte(nil), c.cryptoIn[0].contiguous()...))
	c.r.mu.Unlock()
	for _, m := range msgs {
		if m[0] == tlsServerHello {
			serverHellos++
			if serverHellos == 1 && isHelloRetryRequest(m) {
				hrr = true
			}
		}
	}
	return hrr, serverHellos
}

func runTLSHelloRetryRequest(ctx context.Context, t *T) {
	// The catalogue asks for supported_groups secp384r1, x25519,
	// secp256r1 with a key share for secp384r1 only. crypto/tls cannot send
	// that: it ignores the order of CurvePreferences and sends a key share
	// for the first group of its own fixed order (hybrids, then X25519,
	// P-256, P-384), plus the hybrid's classical share when that group is
	// listed. The nearest it can send is a key share for the rarely
	// preferred P-384/ML-KEM-1024 hybrid alone (P-384 left out, so no
	// fallback share), with X25519 and P-256 listed: a server that does not
	// know the hybrid, or prefers a listed group, must ask again.
	c, err := t.Dial(ctx, DialOptions{Label: "SecP384r1MLKEM1024 key share", Config: func(cfg *quic.Config) {
		cfg.TLSConfig.CurvePreferences = []tls.CurveID{tls.SecP384r1MLKEM1024, tls.X25519, tls.CurveP256}
	}})
	hrr, shs := helloRetryInInitial(c.trace)
	t.Fact("tls.hrr", hrr)
	req := t.sc.Requirements[0]
	if err != nil {
		if hrr {
			t.Inconclusive(fmt.Sprintf("The server sent HelloRetryRequest in an Initial packet, but the handshake on the second ClientHello failed: %v.", err),
				events(Context, lastN(received(t.rec.snapshot(), c.ID(), 0), 3)...)...)
		}
		t.dialFailure(c, err)
	}
	group := c.ConnectionState().CurveID
	t.Fact("tls.group", group.String())
	if !hrr {
		t.Observe("hrr", fmt.Sprintf("Offered a key share for SecP384r1MLKEM1024 only (X25519 and P-256 listed), the server accepted it without HelloRetryRequest (group %s).", group))
		return
	}
	t.Pass("hrr", req, fmt.Sprintf("The server answered a SecP384r1MLKEM1024-only key share with HelloRetryRequest in an Initial packet, and the handshake completed on the second ClientHello (group %s, %d ServerHello messages).", group, shs))
}

// Family B, 0-RTT on the raw client (catalogue §3.B):
// tls-0rtt-rejected-not-processed and tls-0rtt-keys-discarded. The engine
// resends rejected 0-RTT data in 1-RTT packets, as RFC 9001 §4.6.2 has a
// client do, and drops its 0-RTT keys with the handshake; the raw client
// does neither, so a response or an acknowledgment can only come from a
// 0-RTT packet, and a 0-RTT packet can still leave after the handshake.

func init() {
	Register(&Scenario{
		ID: "tls-0rtt-rejected-not-processed", Title: "Rejected 0-RTT packets neither acknowledged nor processed", Family: "B",
		Needs:        []string{NeedApp, "0rtt"},
		Requirements: []Requirement{rfc9001("4.6.2", MustNot, "When rejecting 0-RTT, a server MUST NOT process any 0-RTT packets, even if it could.")},
		Run:          runTLS0RTTRejectedNotProcessed,
	})
	Register(&Scenario{
		ID: "tls-0rtt-keys-discarded", Title: "0-RTT keys discarded after the first 1-RTT packet", Family: "B",
		Needs:        []string{NeedApp, "0rtt"},
		Requirements: []Requirement{rfc9001("4.9.3", Recommended, "After receiving a 1-RTT packet, servers MUST discard 0-RTT keys within a short time; the RECOMMENDED time period is three times the Probe Timeout")},
		Run:          runTLS0RTTKeysDiscarded,
	})
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

func (c *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil && cs != nil {
		c.key, c.state = key, cs
	}
}

// earlyData reports whether the kept ticket allows early data.
func (c *ticketCache) earlyData() (have, early bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil {
		return false, false
	}
	_, st, err := c.state.ResumptionState()
	return true, err == nil && st != nil && st.EarlyData
}

// rawTicket runs a raw connection with ALPN alpn and waits for a session
// ticket. It ends the scenario as unsupported when none comes, or when it
// does not allow early data.
func (t *T) rawTicket(ctx context.Context, alpn string) *ticketCache {
	cache := &ticketCache{}
	rc := t.rawEstablished(ctx, rawOptions{Label: "ticket (" + alpn + ")", ALPN: []string{alpn}, Sessions: cache}, nil)
	rc.Receive(ctx, t.Settle(), func() bool { have, _ := cache.earlyData(); return have })
	have, early := cache.earlyData()
	if !have {
		t.Unsupported(fmt.Sprintf("The server sent no usable session ticket within %v of the handshake (needs resume).", t.Settle()))
	}
	if !early {
		t.Fact("tls.early-data", "tickets do not allow early data")
		t.Unsupported("The server's session ticket does not allow early data (needs 0rtt).")
	}
	return cache
}

// early0RTT is one resumed raw connection that sent 0-RTT packets.
type early0RTT struct {
	rc    *rawClient
	sent  []*packet // the tester's 0-RTT packets
	req   *rawRequest
	err   error
	label string
}

// dialEarly resumes with cache, offering alpns, and sends with the
// ClientHello a 0-RTT packet carrying a PING and a request for the small
// resource in protocol reqALPN.
func (t *T) dialEarly(ctx context.Context, label string, cache *ticketCache, alpns []string, reqALPN string) *early0RTT {
	e := &early0RTT{label: label}
	rc := t.newRaw(ctx, rawOptions{Label: label, ALPN: alpns, Sessions: cache})
	e.rc = rc
	rc.FirstFlight = func() {
		rc.sendClientHello(ctx, 1200)
		if rc.seal0RTT == nil {
			return
		}
		req, r := rc.inlineRequest(reqALPN, t.profile.SmallPath)
		e.req = r
		frames := append([]wire.Frame{&wire.PingFrame{}}, req...)
		pkt, _ := rc.longPacket(2, frames, longOpts{Type: wire.PacketType0RTT, Keys: rc.seal0RTT})
		rc.send(pkt)
		e.sent = append(e.sent, rc.lastSent())
	}
	e.err = rc.Handshake(ctx, t.Settle()+time.Second)
	return e
}

// rejected0RTT is what a server did with the 0-RTT packets of a
// connection whose early data it rejected.
type rejected0RTT struct {
	acked    *packet // a server packet acknowledging a 0-RTT packet
	answered bool    // data arrived on the 0-RTT request's stream
}

func judgeRejected0RTT(ps []*packet, conn int, sent []*packet, answered bool) rejected0RTT {
	r := rejected0RTT{answered: answered}
	for _, p := range sent {
		if a := ackedBy(ps, conn, 2, p.pn); a != nil {
			r.acked = a
			break
		}
	}
	return r
}

func runTLS0RTTRejectedNotProcessed(ctx context.Context, t *T) {
	// Ways to draw a rejection, in order: a ticket issued under one ALPN
	// offered with the other one first (RFC 8446 §4.2.10: early data is
	// accepted only with the ticket's ALPN), both ways round, then the
	// same ticket replayed twice.
	type attempt struct {
		ticketALPN string
		offer      []string
	}
	var attempts []attempt
	if t.profile.HasALPN(h3.ALPNHQInterop) && t.profile.HasALPN(h3.ALPNH3) {
		attempts = append(attempts, attempt{h3.ALPNH3, []string{h3.ALPNHQInterop, h3.ALPNH3}}, attempt{h3.ALPNHQInterop, []string{h3.ALPNH3, h3.ALPNHQInterop}})
	}
	var rej *early0RTT
	offered := 0
	tickets := map[string]*ticketCache{}
	for _, a := range attempts {
		cache := t.rawTicket(ctx, a.ticketALPN)
		tickets[a.ticketALPN] = cache
		e := t.dialEarly(ctx, fmt.Sprintf("ticket %s, offering %v", a.ticketALPN, a.offer), cache, a.offer, a.ticketALPN)
		offered += len(e.sent)
		if len(e.sent) > 0 && e.rc.earlyRejected {
			rej = e
			break
		}
	}
	if rej == nil {
		alpn := t.alpn()
		cache := tickets[alpn]
		if cache == nil {
			cache = t.rawTicket(ctx, alpn)
		}
		for i := 0; i < 2 && rej == nil && ctx.Err() == nil; i++ {
			e := t.dialEarly(ctx, fmt.Sprintf("ticket replay %d", i+1), cache, []string{alpn}, alpn)
			offered += len(e.sent)
			if len(e.sent) > 0 && e.rc.earlyRejected {
				rej = e
			}
		}
	}
	if rej == nil && offered == 0 {
		t.Inconclusive("The tester's ClientHellos offered no early data (crypto/tls offers it only with the ticket's ALPN and cipher suite), so it sent no 0-RTT packet.")
	}
	if rej == nil {
		t.Fact("tls.early-data", "accepted on every attempt")
		t.Inconclusive("The server accepted early data on every attempt (a ticket under the other ALPN, a replayed ticket), so no rejection could be provoked.")
	}
	t.Fact("tls.early-data", "rejected ("+rej.label+")")
	rc := rej.rc
	if rej.err == nil {
		// A 1-RTT PING draws an ACK frame in the application space, which
		// 0-RTT packets share: it must not name them.
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	}
	rc.Receive(ctx, t.Settle(), nil)
	answered := rej.req != nil && rc.stream(rej.req.id) != nil
	r := judgeRejected0RTT(t.rec.snapshot(), rc.trace.id, rej.sent, answered)
	req := t.sc.Requirements[0]
	trig := events(Trigger, rej.sent...)
	switch {
	case r.acked != nil:
		t.Fail("not-processed", req, fmt.Sprintf("The server rejected early data (%s) but acknowledged the tester's 0-RTT packet.", rej.label), append(trig, events(Response, r.acked)...)...)
	case r.answered:
		t.Fail("not-processed", req, fmt.Sprintf("The server rejected early data (%s) but answered the request sent only in a 0-RTT packet.", rej.label), trig...)
	case rej.err != nil:
		t.Inconclusive(fmt.Sprintf("The server rejected early data (%s), but the handshake did not complete: %v.", rej.label, rej.err), trig...)
	default:
		t.Pass("not-processed", req, fmt.Sprintf("The server rejected early data (%s) and neither acknowledged the tester's %d 0-RTT packet(s) nor answered their request within %v.", rej.label, len(rej.sent), t.Settle().Round(time.Millisecond)), trig...)
	}
}

func runTLS0RTTKeysDiscarded(ctx context.Context, t *T) {
	alpn := t.alpn()
	var e *early0RTT
	// Some servers (GnuTLS behind ngtcp2) reject early data now and then:
	// a second try, with a fresh ticket.
	for i := 0; i < 2 && ctx.Err() == nil; i++ {
		cache := t.rawTicket(ctx, alpn)
		e = t.dialEarly(ctx, fmt.Sprintf("0-RTT (try %d)", i+1), cache, []string{alpn}, alpn)
		if len(e.sent) > 0 && !e.rc.earlyRejected && e.err == nil {
			break
		}
	}
	rc := e.rc
	switch {
	case len(e.sent) == 0:
		t.Inconclusive("The tester's ClientHello offered no early data, so it sent no 0-RTT packet.")
	case rc.earlyRejected:
		t.Inconclusive("The server rejected early data, so it never used 0-RTT keys.")
	case e.err != nil:
		t.Inconclusive(fmt.Sprintf("The resumed handshake did not complete: %v.", e.err))
	}
	// The tester's first 1-RTT packet (an ACK or the PING below) marks the
	// start of the server's 3 × PTO; the late 0-RTT packet leaves 4 × PTO
	// after it.
	first := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	for _, p := range t.rec.snapshot() {
		if p.sent && p.conn == rc.trace.id && p.ev.PacketType == "1RTT" {
			first = p
			break
		}
	}
	wait := 4 * t.PTO()
	rc.Receive(ctx, time.Until(first.at.Add(wait)), nil)
	pkt, late := rc.longPacket(2, []wire.Frame{&wire.PingFrame{}}, longOpts{Type: wire.PacketType0RTT, Keys: rc.seal0RTT})
	rc.send(pkt)
	latePkt := rc.lastSent()
	after := rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
	rc.Receive(ctx, t.Settle(), func() bool { return ackedBy(t.rec.snapshot(), rc.trace.id, 2, after.pn) != nil })
	rc.Receive(ctx, t.PTO(), nil)
	ps := t.rec.snapshot()
	req := t.sc.Requirements[0]
	trig := append(events(Context, first), events(Trigger, latePkt)...)
	if a := ackedBy(ps, rc.trace.id, 2, late); a != nil {
		t.Warn("keys-discarded", req, fmt.Sprintf("The server acknowledged a 0-RTT packet sent %v after the tester's first 1-RTT packet (4 × PTO, PTO %v): it still held 0-RTT keys past the recommended 3 × PTO.", latePkt.at.Sub(first.at).Round(time.Millisecond), t.PTO().Round(time.Millisecond)), append(trig, events(Response, a)...)...)
		return
	}
	if cc := firstClose(received(ps, rc.trace.id, 0)); cc != nil && ackedBy(ps, rc.trace.id, 2, after.pn) == nil {
		// RFC 9000 §17.2.3: "A client MUST NOT send 0-RTT packets once it
		// starts processing 1-RTT packets from the server." The late
		// packet breaks that on purpose, so a close is a fair answer; but
		// a close that names the packet shows the server could still read
		// it, so neither verdict fits.
		t.Fact("tls.late-0rtt", "connection closed")
		t.Observe("keys-discarded", fmt.Sprintf("The server did not acknowledge the 0-RTT packet sent %v after the tester's first 1-RTT packet, but closed the connection on it (%s, %q), which §17.2.3 allows for a client that sends 0-RTT that late.", latePkt.at.Sub(first.at).Round(time.Millisecond), closeCode(cc.closeFrame()), cc.closeFrame().Reason),
			append(trig, events(Response, cc)...)...)
		return
	}
	if ackedBy(ps, rc.trace.id, 2, after.pn) == nil {
		t.Inconclusive("The server acknowledged neither the late 0-RTT packet nor the 1-RTT PING after it.", append(trig, events(Context, lastN(received(ps, rc.trace.id, 0), 4)...)...)...)
	}
	t.Pass("keys-discarded", req, fmt.Sprintf("The server did not acknowledge a 0-RTT packet sent %v after the tester's first 1-RTT packet, but acknowledged the 1-RTT PING after it.", latePkt.at.Sub(first.at).Round(time.Millisecond)), trig...)
}
