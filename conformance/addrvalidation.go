package conformance

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family F: amplification and address validation, Retry and tokens
// (docs/scenarios.md). Every scenario here uses the raw client, which can
// stay silent and so never completes address validation.

var (
	reqAmpHandshake = rfc9000(
		"8.1",
		MustNot,
		"Prior to validating the client address, servers MUST NOT send more than three times as many bytes as the number of bytes they have received.",
	)
	reqTokenProceed = rfc9000("8.1.3", Should, "If the validation succeeds, the server SHOULD then allow the handshake to proceed.")
)

// silentWindow is how long the silent-client scenarios listen. The
// catalogue says 10 s; 4 s covers the first flight and two PTO resends
// (about 1 s and 2 s later) that the limit is about, and keeps the suite
// within its one-minute budget.
const silentWindow = 4 * time.Second

// silentClient sends one 1200-byte Initial with the ClientHello and then
// nothing at all for d: no acknowledgment, no Finished, no answer to a
// Retry. It returns the client.
func (t *T) silentClient(ctx context.Context, o rawquic.Options, d time.Duration) *rawClient {
	rc := t.newRaw(ctx, o)
	rc.Silent, rc.FollowRetry = true, false
	rc.SendClientHello(ctx, 1200)
	rc.Receive(ctx, d, nil)
	return rc
}

// ampOverrun walks the datagrams of rc's first path in time order and
// returns the first received one that takes the cumulative received total
// above three times what the tester had sent by then.
func (t *T) ampOverrun(rc *rawClient) (at time.Time, sent, recv int, over bool) {
	pick := rc.onPath(0)
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	for _, d := range t.rec.allDatagramsLocked() {
		if !pick(d) {
			continue
		}
		if d.sent {
			sent += d.size
			continue
		}
		recv += d.size
		if recv > 3*sent {
			return d.at, sent, recv, true
		}
	}
	return time.Time{}, sent, recv, false
}

func runAmpHandshakeLimit(ctx context.Context, t *T) {
	rc := t.silentClient(ctx, rawquic.Options{Label: "silent"}, silentWindow)
	sent, recv, n := t.ampCounts(rc)
	req := t.sc.Requirements[0]
	rs := received(t.rec.snapshot(), rc.trace.id, 0)
	if n == 0 {
		t.requireControl(ctx, "The server sent nothing to the silent client")
		t.Inconclusive(
			fmt.Sprintf("The server sent nothing in %v to a client whose first Initial it never answered, although a normal handshake works.", silentWindow),
			events(Context, rc.LastSent())...)
	}
	t.Fact("amplification.factor", fmt.Sprintf("%.2f", float64(recv)/float64(sent)))
	t.Fact("amplification.datagrams", n)
	t.Fact("pto.schedule", firstFlightSchedule(t.rec.snapshot(), rc.trace.id))
	if recv > 3*sent {
		t.Fail(
			"limit",
			req,
			fmt.Sprintf(
				"The server sent %d bytes in %d datagrams to an unvalidated address after receiving %d (%.2f×); the limit is 3×.",
				recv,
				n,
				sent,
				float64(recv)/float64(sent),
			),
			events(Response, lastN(rs, 4)...)...)
		return
	}
	t.Pass(
		"limit",
		req,
		fmt.Sprintf(
			"Over %v the server sent %d bytes in %d datagrams to a client that had sent %d and never validated its address (%.2f×).",
			silentWindow,
			recv,
			n,
			sent,
			float64(recv)/float64(sent),
		),
		events(Response, lastN(rs, 4)...)...)
}

func runAmpTracksClientBytes(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "ack-only-initials"})
	rc.Silent, rc.FollowRetry = true, false
	rc.SendClientHello(ctx, 1200)
	resumed := 0
	for i := 0; i < 5 && ctx.Err() == nil; i++ {
		rc.Receive(ctx, 500*time.Millisecond, nil)
		if rc.Recvd[0].Empty() {
			continue
		}
		before := t.datagramsReceived(rc.trace.id)
		// ACK of the server's Initials plus PADDING, to the tester's
		// original Destination Connection ID: using the server's ID would
		// let it count the address as validated (RFC 9000 §8.1).
		pkt, _ := rc.LongPacket(0, []wire.Frame{rc.AckFrame(0)}, rawquic.LongOpts{DCID: rc.ODCID, PadTo: 1200})
		rc.Send(pkt)
		rc.Receive(ctx, 100*time.Millisecond, nil)
		if t.datagramsReceived(rc.trace.id) > before {
			resumed++
		}
	}
	rc.Receive(ctx, 500*time.Millisecond, nil)
	at, sent, recv, over := t.ampOverrun(rc)
	t.Fact("amplification.resumed-after-ack", resumed)
	req := t.sc.Requirements[1]
	if recv == 0 {
		t.Inconclusive("The server sent nothing to the client.")
	}
	if over {
		var evs []*packet
		for _, p := range received(t.rec.snapshot(), rc.trace.id, 0) {
			if !p.at.After(at) {
				evs = append(evs, p)
			}
		}
		t.Fail(
			"cumulative",
			req,
			fmt.Sprintf(
				"By %v the server had sent %d bytes after receiving %d (%.2f×) from a client that never validated its address.",
				at.Sub(t.started).Round(time.Millisecond),
				recv,
				sent,
				float64(recv)/float64(sent),
			),
			events(Response, lastN(evs, 4)...)...)
		return
	}
	t.Pass(
		"cumulative",
		req,
		fmt.Sprintf(
			"The server's cumulative total (%d bytes) never exceeded three times the client's (%d bytes); it resumed sending after %d of the client's extra Initials.",
			recv,
			sent,
			resumed,
		),
	)
}

func runAmpClosingState(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "unknown-alpn", ALPN: []string{"quiver-unknown-alpn"}})
	rc.Silent, rc.FollowRetry = true, false
	rc.SendClientHello(ctx, 1200)
	for waited := time.Duration(0); waited < t.Settle() && ctx.Err() == nil; waited += 200 * time.Millisecond {
		rc.Receive(ctx, 200*time.Millisecond, nil)
		pkt, _ := rc.LongPacket(0, []wire.Frame{&wire.PingFrame{}}, rawquic.LongOpts{DCID: rc.ODCID, PadTo: 1200})
		rc.Send(pkt)
	}
	rc.Receive(ctx, 200*time.Millisecond, nil)
	at, sent, recv, over := t.ampOverrun(rc)
	req := t.sc.Requirements[0]
	rs := received(t.rec.snapshot(), rc.trace.id, 0)
	if recv == 0 {
		t.requireControl(ctx, "The server sent nothing")
		t.Pass("limit", req, fmt.Sprintf("The server discarded all %d bytes from the unvalidated address after refusing the ALPN.", sent))
		return
	}
	if over {
		t.Fail(
			"limit",
			req,
			fmt.Sprintf(
				"While closing, the server had sent %d bytes by %v after receiving %d from an unvalidated address (%.2f×).",
				recv,
				at.Sub(t.started).Round(time.Millisecond),
				sent,
				float64(recv)/float64(sent),
			),
			events(Response, lastN(rs, 4)...)...)
		return
	}
	t.Pass(
		"limit",
		req,
		fmt.Sprintf("While closing, the server sent %d bytes in answer to %d (%.2f×).", recv, sent, float64(recv)/float64(sent)),
		events(Response, lastN(rs, 3)...)...)
}

// retries returns the Retry packets received on rc's first path, raw.
func (t *T) retries(rc *rawClient) (raw [][]byte, at []time.Time) {
	pick := rc.onPath(0)
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	for _, d := range t.rec.allDatagramsLocked() {
		if d.sent || !pick(d) || !wire.IsLongHeader(d.b) {
			continue
		}
		if h, err := wire.ParseHeader(d.b, 0); err == nil && h.Type == wire.PacketTypeRetry {
			raw = append(raw, d.b)
			at = append(at, d.at)
		}
	}
	return raw, at
}

func runRetryFormat(ctx context.Context, t *T) {
	rc := t.silentClient(ctx, rawquic.Options{Label: "first-initial"}, max(t.Settle(), time.Second))
	raw, _ := t.retries(rc)
	if len(raw) == 0 {
		t.Fact("retry.policy", "never on first contact")
		t.Unsupported("The server answered the first Initial without a Retry.")
	}
	t.Fact("retry.policy", "always on first contact")
	reqs := t.sc.Requirements
	var rets []*packet
	for _, p := range received(t.rec.snapshot(), rc.trace.id, 0) {
		if p.ev.PacketType == "retry" {
			rets = append(rets, p)
		}
	}
	r, err := wire.ParseRetry(raw[0])
	if err != nil {
		t.Fail("tag", reqs[0], fmt.Sprintf("The server's Retry does not parse: %v.", err), events(Response, rets...)...)
		return
	}
	t.Fact("retry.token-length", len(r.Token))
	t.Fact("retry.scid-length", len(r.SCID))
	ok := true
	if protect.VerifyRetry(uint32(r.Version), rc.ODCID, raw[0]) != nil {
		t.Fail(
			"tag",
			reqs[0],
			"The server's Retry Integrity Tag does not validate against the client's original Destination Connection ID; a client must discard it.",
			events(Response, rets...)...)
		ok = false
	}
	if len(r.Token) == 0 {
		t.Fail("token", reqs[1], "The server's Retry carries an empty token; a client must discard it.", events(Response, rets...)...)
		ok = false
	}
	if bytes.Equal(r.SCID, rc.ODCID) {
		t.Fail(
			"scid",
			reqs[2],
			fmt.Sprintf("The Retry's Source Connection ID %x equals the client's Destination Connection ID.", r.SCID),
			events(Response, rets...)...)
		ok = false
	}
	if len(raw) > 1 {
		t.Fail(
			"once",
			reqs[3],
			fmt.Sprintf("The server sent %d Retry packets in answer to the client's single datagram.", len(raw)),
			events(Response, rets...)...)
		ok = false
	}
	if ok {
		t.Pass(
			"format",
			reqs[0],
			fmt.Sprintf(
				"One Retry with a valid tag, a %d-byte token and a %d-byte Source Connection ID different from the client's.",
				len(r.Token),
				len(r.SCID),
			),
			events(Response, rets...)...)
	}
}

func runRetryHandshake(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "after-retry"})
	err := rc.Handshake(ctx, t.Settle()+2*time.Second)
	if rc.RetrySCID == nil {
		t.Unsupported("The server answered the first Initial without a Retry.")
	}
	reqs := t.sc.Requirements
	if err != nil {
		t.Inconclusive(fmt.Sprintf("The handshake stalled after the client echoed the Retry token: %v.", err))
	}
	tp := rc.ServerTP()
	if tp == nil {
		t.Inconclusive("The server's transport parameters could not be read.")
	}
	raw, _ := t.retries(rc)
	t.Fact("retry.count", len(raw))
	if !tp.HasRetrySourceConnectionID {
		t.Fail("retry-scid", reqs[0], "After a Retry the server's transport parameters carry no retry_source_connection_id.")
		return
	}
	if !bytes.Equal(tp.RetrySourceConnectionID, rc.RetrySCID) {
		t.Fail(
			"retry-scid",
			reqs[1],
			fmt.Sprintf("retry_source_connection_id is %x, but the Retry's Source Connection ID was %x.", tp.RetrySourceConnectionID, rc.RetrySCID),
		)
		return
	}
	if !bytes.Equal(tp.OriginalDestinationConnectionID, rc.ODCID) {
		t.Fail(
			"odcid",
			reqs[1],
			fmt.Sprintf(
				"original_destination_connection_id is %x, but the client's first Destination Connection ID was %x.",
				tp.OriginalDestinationConnectionID,
				rc.ODCID,
			),
		)
		return
	}
	body, ferr := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	t.Pass(
		"parameters",
		reqs[1],
		fmt.Sprintf(
			"After the Retry the handshake completed with matching original_destination_connection_id and retry_source_connection_id; the fetch gave %d bytes (%v).",
			len(body),
			ferr,
		),
	)
}

func runRetryTokenCorrupted(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "bad-token"})
	rc.RetryToken = func(tok []byte) []byte {
		b := append([]byte(nil), tok...)
		if len(b) > 0 {
			b[len(b)/2] ^= 0x5a
		}
		return b
	}
	herr := rc.Handshake(ctx, t.Settle())
	if rc.RetrySCID == nil {
		t.Unsupported("The server answered the first Initial without a Retry.")
	}
	req := t.sc.Requirements[0]
	ps := received(t.rec.snapshot(), rc.trace.id, 0)
	raw, _ := t.retries(rc)
	if cl := firstClose(ps); cl != nil {
		if cc := cl.closeFrame(); !cc.Application && cc.ErrorCode == uint64(wire.InvalidToken) {
			t.Pass("invalid-token", req, "The server closed with INVALID_TOKEN when the client echoed a corrupted Retry token.", events(Response, cl)...)
			return
		}
		t.Warn(
			"invalid-token",
			req,
			fmt.Sprintf("The server closed with %s instead of INVALID_TOKEN on a corrupted Retry token.", closeCode(cl.closeFrame())),
			events(Response, cl)...)
		return
	}
	if herr == nil || rc.ServerSCID != nil {
		t.Observe(
			"invalid-token",
			"The handshake went on with the corrupted Retry token; the server may count the address as validated by the Retry's connection ID alone (RFC 9000 §8.1).",
		)
		return
	}
	if len(raw) > 1 {
		t.Warn(
			"invalid-token",
			req,
			"The server answered a corrupted Retry token with a second Retry instead of closing with INVALID_TOKEN.",
			events(Response, lastN(ps, 2)...)...)
		return
	}
	t.Warn(
		"invalid-token",
		req,
		fmt.Sprintf("The server went silent on a corrupted Retry token for %v instead of closing with INVALID_TOKEN.", t.Settle().Round(time.Millisecond)),
	)
}

// newTokenConn runs a full handshake on the raw client (following any
// Retry) and waits for a NEW_TOKEN; it returns the client and the token,
// nil when none came.
func (t *T) newTokenConn(ctx context.Context, label string, o rawquic.Options) (*rawClient, []byte) {
	o.Label = label
	rc := t.rawEstablished(ctx, o, nil)
	rc.receiveUntil(ctx, t.Settle(), 0, hasFrame[*wire.NewTokenFrame]())
	fs := framesOf[*wire.NewTokenFrame](t.rec.snapshot(), rc.trace.id, 0, false)
	if len(fs) == 0 {
		return rc, nil
	}
	return rc, fs[0].f.(*wire.NewTokenFrame).Token
}

func (t *T) requireNewToken(ctx context.Context) (*rawClient, []byte) {
	rc, tok := t.newTokenConn(ctx, "collect-token", rawquic.Options{})
	if tok == nil {
		t.Fact("token.new-token", "none")
		t.Unsupported(fmt.Sprintf("The server sent no NEW_TOKEN within %v of the handshake.", t.Settle().Round(time.Millisecond)))
	}
	return rc, tok
}

func runTokenFormat(ctx context.Context, t *T) {
	_, _ = t.requireNewToken(ctx)
	fs := framesOf[*wire.NewTokenFrame](t.rec.snapshot(), -1, 0, false)
	t.Fact("token.new-token", map[string]int{"count": len(fs), "size": len(fs[0].f.(*wire.NewTokenFrame).Token)})
	for _, fa := range fs {
		if len(fa.f.(*wire.NewTokenFrame).Token) == 0 {
			t.Fail(
				"not-empty",
				t.sc.Requirements[0],
				"The server sent a NEW_TOKEN frame with an empty token; the client would be bound to close with FRAME_ENCODING_ERROR.",
				events(Response, fa.p)...)
			return
		}
	}
	t.Pass(
		"not-empty",
		t.sc.Requirements[0],
		fmt.Sprintf("The server's %d NEW_TOKEN frame(s) carry non-empty tokens.", len(fs)),
		events(Response, packetsOf(fs)...)...)
}

func runTokenUnique(ctx context.Context, t *T) {
	rc1, tok1 := t.requireNewToken(ctx)
	rc2, tok2 := t.newTokenConn(ctx, "second", rawquic.Options{})
	if tok2 == nil {
		t.Inconclusive("The second connection received no NEW_TOKEN.")
	}
	req := t.sc.Requirements[0]
	p1 := framesOf[*wire.NewTokenFrame](t.rec.snapshot(), rc1.trace.id, 0, false)[0].p
	p2 := framesOf[*wire.NewTokenFrame](t.rec.snapshot(), rc2.trace.id, 0, false)[0].p
	if bytes.Equal(tok1, tok2) {
		t.Fail("unique", req, "Two connections in a row received the same NEW_TOKEN value.", events(Response, p1, p2)...)
		return
	}
	t.Pass("unique", req, "Two connections received different NEW_TOKEN values.", events(Response, p1, p2)...)
}

// tokenAcceptance presents tok in a single silent Initial and tells
// whether the server treated the address as validated: no Retry from a
// server that always sends one, or more than three times the Initial's
// bytes in answer to it. seen is false when neither can show.
func (t *T) tokenAcceptance(
	ctx context.Context,
	label string,
	tok []byte,
	alwaysRetry bool,
	o rawquic.Options,
) (accepted, seen bool, why string, rc *rawClient) {
	o.Label, o.Token = label, tok
	rc = t.silentClient(ctx, o, 2*time.Second)
	raw, _ := t.retries(rc)
	sent, recv, _ := t.ampCounts(rc)
	switch {
	case len(raw) > 0:
		return false, alwaysRetry, "the server answered with a Retry", rc
	case recv > 3*sent:
		return true, true, fmt.Sprintf("the server sent %d bytes in answer to a single %d-byte Initial", recv, sent), rc
	case alwaysRetry:
		return true, true, "the server, which always sends Retry, sent none", rc
	}
	return false, false, fmt.Sprintf("the server sent %d bytes in answer to %d, within the 3× limit", recv, sent), rc
}

func runTokenAccepted(ctx context.Context, t *T) {
	rc1, tok := t.requireNewToken(ctx)
	always := rc1.RetrySCID != nil
	acc, seen, why, rc := t.tokenAcceptance(ctx, "with-token", tok, always, rawquic.Options{})
	req := t.sc.Requirements[0]
	first := rc.LastSent()
	switch {
	case acc:
		t.Fact("token.new-token", "accepted")
		t.Pass("accepted", req, fmt.Sprintf("With the NEW_TOKEN token %s: the address counted as validated.", why), events(Trigger, first)...)
	case always && seen:
		t.Warn(
			"accepted",
			req,
			"The server, which always sends Retry, sent one for a fresh NEW_TOKEN token; accept valid tokens and let the handshake proceed.",
			events(Trigger, first)...)
	default:
		t.Observe("accepted", fmt.Sprintf("Acceptance of the NEW_TOKEN token cannot be seen: %s.", why), events(Trigger, first)...)
	}
}

func runTokenUnknown(ctx context.Context, t *T) {
	tok := randomBytes(32)
	rc := t.newRaw(ctx, rawquic.Options{Label: "unknown-token", Token: tok})
	err := rc.Handshake(ctx, t.Settle()+time.Second)
	req := t.sc.Requirements[0]
	ps := received(t.rec.snapshot(), rc.trace.id, 0)
	switch {
	case err == nil:
		t.Pass("proceeds", req, "With a token it never issued, the server carried on with the handshake.")
	case rc.RetrySCID != nil:
		t.Pass("proceeds", req, "With a token it never issued, the server answered with a Retry.")
	default:
		if cl := firstClose(ps); cl != nil {
			t.Fact("token.unknown", closeCode(cl.closeFrame()))
			t.Observe(
				"proceeds",
				fmt.Sprintf("The server closed with %s on an unknown token (it took it for a Retry token).", closeCode(cl.closeFrame())),
				events(Response, cl)...)
			return
		}
		if len(ps) > 0 {
			t.Inconclusive(fmt.Sprintf("The handshake with an unknown token did not complete: %v.", err), events(Context, lastN(ps, 3)...)...)
		}
		t.requireControl(ctx, "The server did not answer an Initial carrying an unknown token")
		t.Warn(
			"proceeds",
			req,
			"The server silently dropped an Initial carrying a token it never issued, while a normal handshake works; proceed as if there were no token.",
		)
	}
}

func runTokenReplay(ctx context.Context, t *T) {
	rc1, tok := t.requireNewToken(ctx)
	always := rc1.RetrySCID != nil
	acc2, seen2, why2, _ := t.tokenAcceptance(ctx, "use-1", tok, always, rawquic.Options{})
	if !seen2 || !acc2 {
		t.Inconclusive(fmt.Sprintf("Acceptance of the token cannot be seen on its first use (%s), so a replay cannot be judged.", why2))
	}
	acc3, _, why3, _ := t.tokenAcceptance(ctx, "use-2", tok, always, rawquic.Options{})
	req := t.sc.Requirements[0]
	if acc3 {
		t.Warn("once", req, fmt.Sprintf("The same NEW_TOKEN token was accepted twice (second use: %s); accept each token at most once.", why3))
		return
	}
	t.Pass("once", req, fmt.Sprintf("The token was accepted on first use (%s) and not on the second (%s).", why2, why3))
}

func runTokenOtherAddress(ctx context.Context, t *T) {
	rc1, tok := t.requireNewToken(ctx)
	ip, ok := rc1.SecondLocalAddr()
	if !ok {
		t.Inconclusive("The tester has no second local IP address from which it can reach the target.")
	}
	_, _, why, rc := t.tokenAcceptance(ctx, "other-address", tok, false, rawquic.Options{LocalIP: ip})
	sent, recv, _ := t.ampCounts(rc)
	req := t.sc.Requirements[0]
	if recv > 3*sent {
		t.Fail(
			"limit",
			req,
			fmt.Sprintf(
				"From %v, with a token issued to another address, the server sent %d bytes after receiving %d (%.2f×).",
				ip,
				recv,
				sent,
				float64(recv)/float64(sent),
			),
		)
		return
	}
	t.Pass("limit", req, fmt.Sprintf("From %v, with a token issued to another address, %s.", ip, why))
}

// retryStaleAfter is how long the tester holds a Retry token before it
// replays it. The catalogue asks for 60 s, which no scenario budget
// allows; clients return Retry tokens within one round trip, so 15 s is
// already a thousand times that on any path the suite runs over, and
// longer than the 10 s that Quiver, quic-go and ngtcp2's servers accept.
const retryStaleAfter = 15 * time.Second

func runRetryTokenStale(ctx context.Context, t *T) {
	rc := t.newRaw(ctx, rawquic.Options{Label: "stale-retry-token"})
	rc.FollowRetry = false
	rc.SendClientHello(ctx, 1200)
	var retry *wire.Retry
	var retryP *packet
	rc.Receive(ctx, t.Settle(), func() bool {
		retry, retryP = t.retryOf(rc)
		return retry != nil || rc.ServerSCID != nil
	})
	if retry == nil {
		if rc.ServerSCID == nil {
			t.requireControl(ctx, "The server answered the first Initial with nothing")
		}
		t.Unsupported("The server answered the first Initial without a Retry, so it issued no Retry token to replay.")
	}
	t.Fact("retry.token-length", len(retry.Token))
	sleep(ctx, time.Until(retryP.at.Add(retryStaleAfter)))
	if ctx.Err() != nil {
		t.Inconclusive("The scenario ran out of time before the token was replayed.")
	}
	// The Initial the tester would have sent next: the token, the
	// Retry's Source Connection ID as Destination, the same ClientHello.
	rc.Token = append([]byte(nil), retry.Token...)
	rc.DCID = append([]byte(nil), retry.SCID...)
	rc.InitialKeys(rc.DCID)
	mark := t.mark()
	pkt, _ := rc.LongPacket(0, []wire.Frame{&wire.CryptoFrame{Data: rc.HelloMsg}}, rawquic.LongOpts{PadTo: 1200})
	trig := rc.LastSent()
	rc.Send(pkt)
	rc.Receive(ctx, t.Settle(), func() bool { return rc.ServerSCID != nil || rc.PeerClosed || len(t.retriesSince(rc, mark)) > 0 })
	req := t.sc.Requirements[0]
	ps := received(t.rec.snapshot(), rc.trace.id, mark)
	after := fmt.Sprintf("%v after the Retry", trig.at.Sub(retryP.at).Round(time.Millisecond))
	if rs := t.retriesSince(rc, mark); len(rs) > 0 {
		t.Pass(
			"refused",
			req,
			fmt.Sprintf("Replayed %s, the token drew another Retry instead of the handshake.", after),
			evidence(events(Trigger, trig), events(Response, rs[0]))...)
		return
	}
	if cl := firstClose(ps); cl != nil {
		cc := cl.closeFrame()
		t.Pass(
			"refused",
			req,
			fmt.Sprintf("Replayed %s, the token was refused with %s.", after, closeCode(cc)),
			evidence(events(Trigger, trig), events(Response, cl))...)
		return
	}
	if rc.ServerSCID != nil {
		t.Warn(
			"refused",
			req,
			fmt.Sprintf(
				"Replayed %s, the Retry token was still accepted: the server went on with the handshake; accept Retry tokens only for a short time.",
				after,
			),
			evidence(events(Trigger, trig), events(Response, lastN(ps, 2)...))...)
		return
	}
	t.requireControl(ctx, fmt.Sprintf("Nothing came back to the token replayed %s", after))
	t.Pass(
		"refused",
		req,
		fmt.Sprintf("Replayed %s, the token drew no answer: the server dropped the Initial (a normal handshake works).", after),
		events(Trigger, trig)...)
}

// retryOf returns the first Retry the raw client received, parsed.
func (t *T) retryOf(rc *rawClient) (*wire.Retry, *packet) {
	rs := t.retriesSince(rc, 0)
	if len(rs) == 0 {
		return nil, nil
	}
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	for _, d := range t.rec.allDatagramsLocked() {
		if d.sent || d.local != rc.Paths[0].Local || d.size == 0 || d.b[0]&0x80 == 0 {
			continue
		}
		if r, err := wire.ParseRetry(d.b); err == nil {
			return &r, rs[0]
		}
	}
	return nil, nil
}

// retriesSince returns the Retry packets the raw client received from
// index mark.
func (t *T) retriesSince(rc *rawClient, mark int) []*packet {
	var out []*packet
	for _, p := range received(t.rec.snapshot(), rc.trace.id, mark) {
		if p.ev.PacketType == "retry" {
			out = append(out, p)
		}
	}
	return out
}

func init() {
	Register(&Scenario{
		ID: "amp-handshake-limit", Title: "3× limit towards a client that never validates its address", Family: "F", Needs: []string{NeedApp},
		Requirements: []Requirement{reqAmpHandshake},
		Run:          runAmpHandshakeLimit,
	})
	Register(&Scenario{
		ID: "amp-limit-tracks-client-bytes", Title: "3× limit grows with each client datagram", Family: "F", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("8.1", Must, "servers MUST count all of the payload bytes received in datagrams that are uniquely attributed to a single connection."),
			reqAmpHandshake,
			rfc9000(
				"8.1",
				May,
				"an endpoint MAY consider the peer address validated if the peer uses a connection ID chosen by the endpoint and the connection ID contains at least 64 bits of entropy.",
			),
		},
		Run: runAmpTracksClientBytes,
	})
	Register(&Scenario{
		ID: "amp-closing-state-limit", Title: "3× limit while closing towards an unvalidated address", Family: "F", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"10.2.1",
				Must,
				"MUST either discard packets received from an unvalidated address or limit … to three times the size of packets it receives from that address.",
			),
		},
		Run: runAmpClosingState,
	})
	Register(&Scenario{
		ID: "retry-format", Title: "Retry packet format", Family: "F", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("17.2.5.2", Must, "Clients MUST discard Retry packets that have a Retry Integrity Tag that cannot be validated"),
			rfc9000("17.2.5.2", Must, "A client MUST discard a Retry packet with a zero-length Retry Token field."),
			rfc9000("17.2.5.1", MustNot, "This value MUST NOT be equal to the Destination Connection ID field of the packet sent by the client."),
			rfc9000("17.2.5.1", MustNot, "A server MUST NOT send more than one Retry packet in response to a single UDP datagram."),
		},
		Run: runRetryFormat,
	})
	Register(&Scenario{
		ID: "retry-handshake", Title: "Handshake after a Retry", Family: "F", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"7.3",
				Must,
				"An endpoint MUST treat the following as a connection error of type TRANSPORT_PARAMETER_ERROR or PROTOCOL_VIOLATION … absence of the retry_source_connection_id transport parameter from the server after receiving a Retry packet",
			),
			rfc9000(
				"7.3",
				Must,
				"The values provided by a peer for these transport parameters MUST match the values that an endpoint used in the Destination and Source Connection ID fields",
			),
		},
		Run: runRetryHandshake,
	})
	Register(&Scenario{
		ID: "retry-token-corrupted", Title: "Corrupted Retry token", Family: "F", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000("8.1.2", Should, "Instead, the server SHOULD immediately close … the connection with an INVALID_TOKEN error."),
			rfc9000(
				"8.1",
				May,
				"an endpoint MAY consider the peer address validated if the peer uses a connection ID chosen by the endpoint and the connection ID contains at least 64 bits of entropy.",
			),
		},
		Run: runRetryTokenCorrupted,
	})
	Register(&Scenario{
		ID: "token-new-token-format", Title: "NEW_TOKEN tokens are not empty", Family: "F", Needs: []string{NeedApp}, Passive: true,
		Requirements: []Requirement{
			rfc9000("19.7", MustNot, "The token MUST NOT be empty."),
			rfc9000(
				"19.7",
				Must,
				"A client MUST treat receipt of a NEW_TOKEN frame with an empty Token field as a connection error of type FRAME_ENCODING_ERROR.",
			),
		},
		Run: runTokenFormat,
	})
	Register(&Scenario{
		ID: "token-new-token-unique", Title: "NEW_TOKEN values differ between connections", Family: "F", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"8.1.3",
				Must,
				"A server MUST ensure that every NEW_TOKEN frame it sends is unique across all clients, with the exception of those sent to repair losses of previously sent NEW_TOKEN frames.",
			),
		},
		Run: runTokenUnique,
	})
	Register(&Scenario{
		ID: "token-new-token-accepted", Title: "A NEW_TOKEN token validates the address", Family: "F", Needs: []string{NeedApp},
		Requirements: []Requirement{reqTokenProceed},
		Run:          runTokenAccepted,
	})
	Register(&Scenario{
		ID: "token-unknown-token", Title: "Initial with a token the server never issued", Family: "F", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"8.1.3",
				Should,
				"If the token is invalid, then the server SHOULD proceed as if the client did not have a validated address, including potentially sending a Retry packet.",
			),
		},
		Run: runTokenUnknown,
	})
	Register(&Scenario{
		ID: "token-new-token-replay", Title: "A NEW_TOKEN token used twice", Family: "F", Needs: []string{NeedApp},
		Requirements: []Requirement{
			rfc9000(
				"8.1.4",
				ShouldNot,
				"Tokens that are provided in NEW_TOKEN frames … need to be valid for longer but SHOULD NOT be accepted multiple times.",
			),
		},
		Run: runTokenReplay,
	})
	Register(&Scenario{
		ID: "token-new-token-other-address", Title: "A NEW_TOKEN token from another address", Family: "F", Needs: []string{NeedApp},
		Requirements: []Requirement{rfc9000("8.1.4", Must, "If the client IP address has changed, the server MUST adhere to the anti-amplification limit")},
		Run:          runTokenOtherAddress,
	})
	Register(&Scenario{
		ID: "retry-token-stale", Title: "A Retry token replayed 15 s later", Family: "F", Needs: []string{NeedApp}, Long: true,
		Requirements: []Requirement{reqRetryTokenShort},
		Run:          runRetryTokenStale,
	})
}
