package conformance

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// joinInitials merges the client Initials sent to dcid into one: the
// CRYPTO frames of all, the smallest packet number, the first's header.
func joinInitials(inits []*clientInitial, dcid []byte) *clientInitial {
	var out *clientInitial
	for _, ci := range inits {
		if !bytes.Equal(ci.dcid, dcid) {
			continue
		}
		if out == nil {
			c := *ci
			c.frames = nil
			out = &c
		}
		out.pn = min(out.pn, ci.pn)
		out.frames = append(out.frames, ci.frames...)
	}
	return out
}

// sameClientHello compares the ClientHello bytes of the two attempts. A
// ClientHello larger than one datagram (hybrid post-quantum key shares)
// leaves in several Initial packets, and the tester answers the first
// with its Retry: the client may never send the rest of the first
// attempt, so only the bytes both attempts showed can be compared (RFC
// 9000 §17.2.5.3 asks for the same message; what was not sent cannot
// differ).
func sameClientHello(a, b []byte) (bool, string) {
	n := min(len(a), len(b))
	if n == 0 {
		return false, "No ClientHello bytes were seen in one of the attempts."
	}
	if !bytes.Equal(a[:n], b[:n]) {
		i := 0
		for i < n && a[i] == b[i] {
			i++
		}
		return false, fmt.Sprintf("They differ at byte %d (first attempt %d bytes, second %d).", i, len(a), len(b))
	}
	if len(a) == len(b) {
		return true, fmt.Sprintf("The client sent the same ClientHello after the Retry (%d bytes).", n)
	}
	return true, fmt.Sprintf("The client's ClientHello after the Retry is the same as the first attempt's in every byte both showed (%d bytes; the first attempt showed %d, the second %d: the rest of a multi-packet ClientHello was not sent in one of them).", n, len(a), len(b))
}

// retryPacket builds a Retry answering the client Initial d.
func retryPacket(d []byte, scid, token []byte, badTag bool) []byte {
	h, err := wire.ParseHeader(d, 0)
	if err != nil {
		return nil
	}
	r := wire.Retry{Version: h.Version, DCID: h.SCID, SCID: scid, Token: token}
	b := r.AppendWithoutTag(nil)
	out, err := protect.AppendRetryIntegrityTag(uint32(h.Version), h.DCID, b)
	if err != nil {
		return nil
	}
	if badTag {
		out[len(out)-1] ^= 0xff
	}
	return out
}

func registerClientRetry() {
	registerClient(&Scenario{
		ID: "cli-retry-handling", Revision: 2, Title: "The client follows a Retry correctly",
		Requirements: []Requirement{reqCliRetryDCID, reqCliRetryToken, reqCliRetrySameCH, reqCliRetryPN, reqCliRetrySCID},
		Run: func(ctx context.Context, t *T) {
			s, cr, ok := t.download(ctx, serveOptions{Label: "retry", Config: func(c *quic.Config) { c.RequireRetry = true }})
			var inits []*clientInitial
			var retry []byte
			t.rec.mu.Lock()
			for _, d := range t.rec.allDatagramsLocked() {
				if d.sent && retry == nil && wire.IsLongHeader(d.b) {
					if h, err := wire.ParseHeader(d.b, 0); err == nil && h.Type == wire.PacketTypeRetry {
						retry = d.b
					}
				}
			}
			t.rec.mu.Unlock()
			for _, d := range s.rawIn() {
				if ci, ok := openClientInitial(d.b); ok {
					inits = append(inits, ci)
				}
			}
			if retry == nil || len(inits) < 2 {
				t.Inconclusive(fmt.Sprintf("The exchange did not get past the Retry: %d client Initial(s) decrypted, Retry sent: %v (client: %v).", len(inits), retry != nil, cr.err))
			}
			rh, _ := wire.ParseHeader(retry, 0)
			// The ClientHello may span several Initial packets: group them
			// by attempt (original Destination Connection ID, then the
			// Retry's Source Connection ID).
			a, b := joinInitials(inits, inits[0].dcid), joinInitials(inits, rh.SCID)
			if b == nil {
				b = joinInitials(inits[1:], inits[len(inits)-1].dcid)
			}
			check := func(name string, req Requirement, good bool, passMsg, failMsg string) {
				if good {
					t.Pass(name, req, passMsg)
				} else {
					t.Fail(name, req, failMsg)
				}
			}
			check("dcid", reqCliRetryDCID, bytes.Equal(b.dcid, rh.SCID), "The client's next Initial used the Retry's Source Connection ID as Destination.", fmt.Sprintf("The client's next Initial went to %x, not to the Retry's Source Connection ID %x.", b.dcid, rh.SCID))
			check("token", reqCliRetryToken, bytes.Equal(b.token, rh.Token), fmt.Sprintf("The client repeated the %d-byte Retry token.", len(rh.Token)), fmt.Sprintf("The client's Initial after the Retry carried a %d-byte token instead of the %d-byte Retry token.", len(b.token), len(rh.Token)))
			same, sameMsg := sameClientHello(a.cryptoData(), b.cryptoData())
			check("same-clienthello", reqCliRetrySameCH, same, sameMsg, "The client's ClientHello after the Retry differs from the first one. "+sameMsg)
			check("pn", reqCliRetryPN, b.pn > a.pn, fmt.Sprintf("The client's packet numbers went on (%d, then %d).", a.pn, b.pn), fmt.Sprintf("The client reset its packet numbers after the Retry (%d, then %d).", a.pn, b.pn))
			check("scid", reqCliRetrySCID, bytes.Equal(a.scid, b.scid), "The client kept its Source Connection ID.", fmt.Sprintf("The client changed its Source Connection ID from %x to %x after the Retry.", a.scid, b.scid))
			t.Fact("retry.download", ok)
		},
	})
	// discardRetry answers the first Initial with a Retry the client must
	// discard, then serves the client's retransmitted original Initial.
	discardRetry := func(id, title string, req Requirement, what string, build func(d []byte) []byte) {
		registerClient(&Scenario{
			ID: id, Title: title, Requirements: []Requirement{req},
			Run: func(ctx context.Context, t *T) {
				var retry []byte
				var once bool
				in := func(d []byte, reply func([]byte)) bool {
					h, err := wire.ParseHeader(d, 0)
					if err != nil || h.Type != wire.PacketTypeInitial || once {
						return false
					}
					once = true
					retry = build(d)
					reply(retry)
					return true
				}
				s := t.serve(ctx, serveOptions{Label: id, In: in})
				cr := t.launch(ctx, s, smallResource)
				cr.wait(ctx, clientRunWait)
				rh, err := wire.ParseHeader(retry, 0)
				if retry == nil || err != nil {
					t.Inconclusive("The client sent no Initial to answer with a Retry.")
				}
				var later []*clientInitial
				var first *clientInitial
				for _, d := range s.rawIn() {
					ci, ok := openClientInitial(d.b)
					if !ok {
						if d.err == nil && d.header.Type == wire.PacketTypeInitial && bytes.Equal(d.header.DCID, rh.SCID) && !bytes.Equal(rh.SCID, s.originalDCID()) {
							t.Fail("discarded", req, fmt.Sprintf("The client acted on %s: it sent an Initial to the Retry's connection ID %x.", what, rh.SCID))
							return
						}
						continue
					}
					if first == nil {
						first = ci
						continue
					}
					later = append(later, ci)
				}
				for _, ci := range later {
					sameCID := bytes.Equal(ci.dcid, rh.SCID) && !bytes.Equal(rh.SCID, s.originalDCID())
					if sameCID || (len(rh.Token) > 0 && bytes.Equal(ci.token, rh.Token)) {
						t.Fail("discarded", req, fmt.Sprintf("The client acted on %s: its Initial went to %x with a %d-byte token.", what, ci.dcid, len(ci.token)))
						return
					}
				}
				if len(later) == 0 {
					t.Inconclusive(fmt.Sprintf("The client sent no further Initial after %s (client: %v).", what, cr.err))
				}
				t.Pass("discarded", req, fmt.Sprintf("The client discarded %s: its next Initial kept the original connection ID and carried no Retry token.", what))
			},
		})
	}
	discardRetry("cli-retry-bad-tag", "A Retry with a bad integrity tag is discarded", reqCliRetryBadTag, "a Retry with a wrong integrity tag",
		func(d []byte) []byte { return retryPacket(d, randomBytes(8), randomBytes(40), true) })
	discardRetry("cli-retry-empty-token", "A Retry with an empty token is discarded", reqCliRetryEmptyTok, "a Retry with a zero-length token",
		func(d []byte) []byte { return retryPacket(d, randomBytes(8), nil, false) })
	discardRetry("cli-retry-scid-equals-dcid", "A Retry whose Source Connection ID is the client's Destination is discarded", reqCliRetrySCIDEq, "a Retry whose Source Connection ID equals the client's original Destination Connection ID",
		func(d []byte) []byte {
			h, _ := wire.ParseHeader(d, 0)
			return retryPacket(d, append([]byte(nil), h.DCID...), randomBytes(40), false)
		})
	registerClient(&Scenario{
		ID: "cli-retry-token-not-reused", Title: "A Retry token is not used for a later connection", Requirements: []Requirement{reqCliRetryNotReuse},
		Run: func(ctx context.Context, t *T) {
			t.download(ctx, serveOptions{Label: "run 1 (Retry)", Config: func(c *quic.Config) { c.RequireRetry = true }})
			var tokens [][]byte
			t.rec.mu.Lock()
			for _, d := range t.rec.allDatagramsLocked() {
				if h, err := wire.ParseHeader(d.b, 0); d.sent && err == nil && h.Type == wire.PacketTypeRetry {
					tokens = append(tokens, append([]byte(nil), h.Token...))
				}
			}
			t.rec.mu.Unlock()
			if len(tokens) == 0 {
				t.Inconclusive("The first run never reached the Retry.")
			}
			s2, _, _ := t.download(ctx, serveOptions{Label: "run 2"})
			in := s2.rawIn()
			if len(in) == 0 || in[0].err != nil || in[0].header.Type != wire.PacketTypeInitial {
				t.Inconclusive("The second run sent no Initial.")
			}
			for _, tok := range tokens {
				if bytes.Equal(in[0].header.Token, tok) {
					t.Fail("token", reqCliRetryNotReuse, "The client's first Initial of a new connection carried the Retry token of the previous one.")
					return
				}
			}
			t.Pass("token", reqCliRetryNotReuse, fmt.Sprintf("The client's first Initial of the next connection carried a %d-byte token, not the earlier Retry token.", len(in[0].header.Token)))
		},
	})
}

// forgedServerInitial seals a server Initial packet outside the engine:
// protected with the server Initial keys of odcid, from scid to dcid, with
// the given token (RFC 9000 forbids one), packet number and frames, alone
// in a datagram padded to 1200 bytes.
func forgedServerInitial(version uint32, odcid, dcid, scid, token []byte, pn uint64, frames ...wire.Frame) []byte {
	_, sk, err := protect.NewInitialKeys(version, odcid)
	if err != nil {
		return nil
	}
	h := wire.LongHeader{Version: wire.Version(version), Type: wire.PacketTypeInitial, DCID: dcid, SCID: scid, Token: token, LengthLen: 2, PNLen: 4, PacketNumber: pn}
	hdr, lengthOff, pnOff := h.Append(nil)
	payload := rawquic.AppendFrames(nil, frames)
	if n := 1200 - len(hdr) - len(payload) - protect.TagSize; n > 0 {
		payload = append(payload, make([]byte, n)...)
	}
	wire.PutVarintLen(hdr[lengthOff:], uint64(h.PNLen+len(payload)+protect.TagSize), 2)
	pkt := sk.Seal(append([]byte(nil), hdr...), hdr, payload, pn)
	if _, err := sk.HeaderProtector().Apply(pkt, pnOff, true); err != nil {
		return nil
	}
	return pkt
}

// validRetry builds a Retry to the client Initial d whose integrity tag is
// computed over odcid (the client's first Destination Connection ID), so
// that only the "at most one Retry" rules make it discardable.
func validRetry(d, odcid, scid, token []byte) []byte {
	h, err := wire.ParseHeader(d, 0)
	if err != nil {
		return nil
	}
	r := wire.Retry{Version: h.Version, DCID: h.SCID, SCID: scid, Token: token}
	out, err := protect.AppendRetryIntegrityTag(uint32(h.Version), odcid, r.AppendWithoutTag(nil))
	if err != nil {
		return nil
	}
	return out
}

// actedOnRetry returns the first client datagram after the Retry that went
// to the Retry's Source Connection ID or carried its token.
func actedOnRetry(ds []rawDatagram, after time.Time, scid, token []byte) *rawDatagram {
	for i, d := range ds {
		if d.err != nil || !d.at.After(after) || !d.header.Long {
			continue
		}
		if bytes.Equal(d.header.DCID, scid) || (d.header.Type == wire.PacketTypeInitial && len(token) > 0 && bytes.Equal(d.header.Token, token)) {
			return &ds[i]
		}
	}
	return nil
}

func registerClientRetry2() {
	registerClient(&Scenario{
		ID: "cli-retry-second", Title: "A second Retry in one connection attempt is ignored", Requirements: []Requirement{reqCliRetryOnce},
		Run: func(ctx context.Context, t *T) {
			var mu sync.Mutex
			var second []byte
			var secondAt time.Time
			var s *testServer
			in := func(d []byte, reply func([]byte)) bool {
				h, err := wire.ParseHeader(d, 0)
				if err != nil || h.Type != wire.PacketTypeInitial || len(h.Token) == 0 {
					return false
				}
				mu.Lock()
				defer mu.Unlock()
				if second == nil {
					// The client followed the engine's Retry: answer its
					// token-bearing Initial with another Retry first, then
					// let the engine serve it under the first.
					second = validRetry(d, s.originalDCID(), randomBytes(8), randomBytes(32))
					secondAt = time.Now()
					reply(second)
				}
				return false
			}
			s = t.serve(ctx, serveOptions{Label: "two retries", In: in, Config: func(c *quic.Config) { c.RequireRetry = true }})
			cr := t.launch(ctx, s, smallResource)
			cr.wait(ctx, clientRunWait)
			mu.Lock()
			r2, at := second, secondAt
			mu.Unlock()
			if r2 == nil {
				t.Inconclusive(fmt.Sprintf("The client never sent an Initial with the first Retry's token, so no second Retry went out (client: %v).", cr.err))
			}
			rh, _ := wire.ParseHeader(r2, 0)
			if d := actedOnRetry(s.rawIn(), at, rh.SCID, rh.Token); d != nil {
				t.Fail("ignored", reqCliRetryOnce, fmt.Sprintf("The client processed a second Retry: a %s packet %v later went to %x with a %d-byte token (the second Retry's ID %x).",
					packetTypeName(d.header.Type), d.at.Sub(at).Round(time.Millisecond), d.header.DCID, len(d.header.Token), rh.SCID))
				return
			}
			if !cr.downloaded(smallResource) {
				t.Inconclusive(fmt.Sprintf("The client never used the second Retry, but did not complete the download either (%v).", cr.err))
			}
			t.Pass("ignored", reqCliRetryOnce, "The client ignored a second Retry (new connection ID and token) and completed the download under the first.")
		},
	})
	registerClient(&Scenario{
		ID: "cli-retry-after-initial", Title: "A Retry after the server's Initial is discarded", Requirements: []Requirement{reqCliRetryLate},
		Run: func(ctx context.Context, t *T) {
			var mu sync.Mutex
			var first []byte
			var retry []byte
			var retryAt time.Time
			var s *testServer
			in := func(d []byte, reply func([]byte)) bool {
				mu.Lock()
				defer mu.Unlock()
				if first == nil && wire.IsLongHeader(d) {
					if h, err := wire.ParseHeader(d, 0); err == nil && h.Type == wire.PacketTypeInitial {
						first = d
					}
				}
				return false
			}
			out := func(d []byte) [][]byte {
				mu.Lock()
				defer mu.Unlock()
				h, err := wire.ParseHeader(d, 0)
				if retry != nil || first == nil || err != nil || h.Type != wire.PacketTypeInitial {
					return [][]byte{d}
				}
				retry = validRetry(first, s.originalDCID(), randomBytes(8), randomBytes(32))
				retryAt = time.Now()
				return [][]byte{d, retry}
			}
			s = t.serve(ctx, serveOptions{Label: "retry after initial", In: in, Out: out})
			cr := t.launch(ctx, s, smallResource)
			cr.wait(ctx, clientRunWait)
			mu.Lock()
			r, at := retry, retryAt
			mu.Unlock()
			if r == nil {
				t.Inconclusive("The client sent no Initial, so no Retry followed the tester's Initial.")
			}
			rh, _ := wire.ParseHeader(r, 0)
			if d := actedOnRetry(s.rawIn(), at, rh.SCID, rh.Token); d != nil {
				t.Fail("discarded", reqCliRetryLate, fmt.Sprintf("The client acted on a Retry that came after the server's Initial: a %s packet went to %x with a %d-byte token.",
					packetTypeName(d.header.Type), d.header.DCID, len(d.header.Token)))
				return
			}
			if !cr.downloaded(smallResource) {
				t.Inconclusive(fmt.Sprintf("The client never used the late Retry, but did not complete the download either (%v).", cr.err))
			}
			t.Pass("discarded", reqCliRetryLate, "The client discarded a Retry that arrived right after the server's Initial and completed the download.")
		},
	})
}

// forgedPN is the packet number of the tester's forged server Initial: far
// above anything the engine sends during a handshake, so that an
// acknowledgment of it can only mean the client processed the forgery.
const forgedPN = 1000

func registerClientServerInitial() {
	// forge sends a forged server Initial (PING) next to the engine's
	// first Initial datagram: before it when before is set.
	forge := func(id, title string, req Requirement, before bool, what string, token, scid func(engineSCID []byte) []byte) {
		registerClient(&Scenario{
			ID: id, Title: title, Requirements: []Requirement{req},
			Run: func(ctx context.Context, t *T) {
				var mu sync.Mutex
				var forged, engineSCID []byte
				var s *testServer
				out := func(d []byte) [][]byte {
					mu.Lock()
					defer mu.Unlock()
					h, err := wire.ParseHeader(d, 0)
					if forged != nil || err != nil || h.Type != wire.PacketTypeInitial {
						return [][]byte{d}
					}
					engineSCID = append([]byte(nil), h.SCID...)
					forged = forgedServerInitial(uint32(h.Version), s.originalDCID(), h.DCID, scid(h.SCID), token(h.SCID), forgedPN, &wire.PingFrame{})
					if before {
						return [][]byte{forged, d}
					}
					return [][]byte{d, forged}
				}
				s = t.serve(ctx, serveOptions{Label: id, Out: out})
				cr := t.launch(ctx, s, smallResource)
				cr.wait(ctx, clientRunWait)
				mu.Lock()
				f, esc := forged, engineSCID
				mu.Unlock()
				if f == nil {
					t.Inconclusive("The client sent no Initial, so no forged Initial went out.")
				}
				fh, _ := wire.ParseHeader(f, 0)
				ps := t.rec.snapshot()
				if p := ackedBy(ps, s.trace.id, spaceInitial, forgedPN); p != nil {
					t.Fail("discarded", req, fmt.Sprintf("The client processed %s: its Initial acknowledged packet number %d, which only the forged packet used.", what, forgedPN), events(Response, p)...)
					return
				}
				if !bytes.Equal(fh.SCID, esc) {
					for _, d := range s.rawIn() {
						if d.err == nil && bytes.Equal(d.header.DCID, fh.SCID) {
							t.Fail("discarded", req, fmt.Sprintf("The client processed %s: it sent a %s packet to that packet's Source Connection ID %x.", what, packetTypeName(d.header.Type), fh.SCID))
							return
						}
					}
				}
				rcv := received(ps, s.trace.id, 0)
				if p := firstClose(rcv); p != nil {
					cc := p.closeFrame()
					if req == reqCliInitialToken && !cc.Application && cc.ErrorCode == uint64(wire.ProtocolViolation) {
						t.Pass("discarded", req, fmt.Sprintf("The client closed with PROTOCOL_VIOLATION after %s.", what), events(Response, p)...)
						return
					}
					if !cr.downloaded(smallResource) {
						t.Inconclusive(fmt.Sprintf("The client closed with %s after %s, without acknowledging it.", closeCode(cc), what), events(Response, p)...)
					}
				}
				if !cr.downloaded(smallResource) {
					t.Inconclusive(fmt.Sprintf("The client never acknowledged %s, but did not complete the download either (%v).", what, cr.err))
				}
				t.Pass("discarded", req, fmt.Sprintf("The client never acknowledged %s (packet number %d) and completed the download.", what, forgedPN))
			},
		})
	}
	// RFC 9000 §17.2.2 allows discarding or PROTOCOL_VIOLATION; the
	// token-bearing Initial comes first and a correct one follows (the
	// catalogue's variant), so a client that discards it completes.
	forge("cli-server-initial-token", "A server Initial with a non-empty Token field", reqCliInitialToken, true,
		"a server Initial (PING) carrying a 16-byte token",
		func([]byte) []byte { return randomBytes(16) }, func(scid []byte) []byte { return scid })
	forge("cli-server-scid-change", "A server Initial with another Source Connection ID", reqCliSCIDChange, false,
		"a second server Initial (PING) from another Source Connection ID",
		func([]byte) []byte { return nil }, func([]byte) []byte { return randomBytes(8) })
}

func init() {
	registerClientRetry()
	registerClientRetry2()
	registerClientServerInitial()
}
