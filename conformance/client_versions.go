package conformance

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// clientWentOn judges a "must discard" scenario: the deviation came first,
// and the client must act as if it never arrived.
func registerClientVN() {
	vn := func(versions ...wire.Version) func(d []byte, reply func([]byte)) []byte {
		return func(d []byte, reply func([]byte)) []byte {
			h, err := wire.ParseHeader(d, 0)
			if err != nil {
				return nil
			}
			return wire.AppendVersionNegotiation(nil, 0x80|0x40, h.SCID, h.DCID, versions...)
		}
	}
	// answerFirst answers the first client Initial with b(d) instead of
	// passing it on; later ones go to the engine unless dropAll.
	answerFirst := func(build func(d []byte, reply func([]byte)) []byte, dropAll bool) func(d []byte, reply func([]byte)) bool {
		var done bool
		return func(d []byte, reply func([]byte)) bool {
			h, err := wire.ParseHeader(d, 0)
			if err != nil || h.Type != wire.PacketTypeInitial {
				return dropAll
			}
			if !done {
				done = true
				if b := build(d, reply); b != nil {
					reply(b)
				}
				return true
			}
			return dropAll
		}
	}
	registerClient(&Scenario{
		ID: "cli-vn-no-common-version", Title: "Version Negotiation with no common version ends the attempt", Requirements: []Requirement{reqCliVNAbandon},
		Run: func(ctx context.Context, t *T) {
			s := t.serve(ctx, serveOptions{Label: "vn", In: answerFirst(vn(0x1a2a3a4a, 0x5a6a7a8a), true)})
			t.launch(ctx, s, smallResource)
			if !t.rec.wait(ctx, clientHandshakeWait, func([]*packet) bool { return len(s.rawIn()) > 0 }) {
				t.Inconclusive("The client sent nothing to the tester's server.")
			}
			first := s.rawIn()[0]
			t.rec.wait(ctx, t.Settle()+time.Second, nil)
			later := 0
			for _, d := range s.rawIn()[1:] {
				if d.err == nil && d.header.Type == wire.PacketTypeInitial && bytes.Equal(d.header.DCID, first.header.DCID) && d.at.Sub(first.at) > t.PTO() {
					later++
				}
			}
			if later > 0 {
				t.Fail("abandon", reqCliVNAbandon, fmt.Sprintf("The client sent %d more Initial packet(s) to the same connection ID more than one PTO after a Version Negotiation packet listing only reserved versions.", later))
				return
			}
			t.Pass("abandon", reqCliVNAbandon, "The client abandoned the attempt after a Version Negotiation packet listing only reserved versions.")
		},
	})
	discard := func(id, title string, req Requirement, what string, in func() func(d []byte, reply func([]byte)) bool, out func() func(d []byte) [][]byte) {
		registerClient(&Scenario{
			ID: id, Title: title, Requirements: []Requirement{req},
			Run: func(ctx context.Context, t *T) {
				o := serveOptions{Label: id}
				if in != nil {
					o.In = in()
				}
				if out != nil {
					o.Out = out()
				}
				_, cr, ok := t.download(ctx, o)
				if ok {
					t.Pass("discarded", req, fmt.Sprintf("The client ignored %s and downloaded the file.", what))
					return
				}
				_, _, control := t.download(ctx, serveOptions{Label: "control"})
				if control {
					t.Fail("discarded", req, fmt.Sprintf("The client did not download the file after %s, while a control run without it did (%v).", what, cr.err))
					return
				}
				t.Inconclusive(fmt.Sprintf("The client did not download the file, with or without %s.", what))
			},
		})
	}
	discard("cli-vn-lists-chosen-version", "Version Negotiation listing the client's version is discarded", reqCliVNChosen,
		"a Version Negotiation packet that lists its own version (v1)",
		func() func(d []byte, reply func([]byte)) bool {
			return answerFirst(vn(0x0a0a0a0a, wire.Version(quic.Version1)), false)
		}, nil)
	discard("cli-vn-empty", "Version Negotiation without any version is ignored", reqCliVNEmpty,
		"a Version Negotiation packet with no version",
		func() func(d []byte, reply func([]byte)) bool {
			return answerFirst(vn(), false)
		}, nil)
	discard("cli-vn-after-initial", "Version Negotiation after the server's Initial is discarded", reqCliVNLate,
		"a Version Negotiation packet sent right after the server's first Initial",
		nil, func() func(d []byte) [][]byte {
			var done bool
			return func(d []byte) [][]byte {
				h, err := wire.ParseHeader(d, 0)
				if done || err != nil || h.Type != wire.PacketTypeInitial {
					return [][]byte{d}
				}
				done = true
				return [][]byte{d, wire.AppendVersionNegotiation(nil, 0xc0, h.DCID, h.SCID, 0x0a0a0a0a)}
			}
		})
}

// Family M, QUIC versions (docs/scenarios.md, Client-facing, needs c-v2): compatible version
// negotiation from v1 to v2, and a downgrade by a forged Version
// Negotiation packet.

var (
	reqCliV2Negotiated = rfc("RFC 9369", "4.1", Must, "Both endpoints MUST send Handshake and 1-RTT packets using the negotiated version.")
	reqCliV2No0RTT     = rfc("RFC 9369", "4.1", MustNot, "The client MUST NOT send 0-RTT packets using the negotiated version, even after processing a packet of that version from the server.")
	// RFC 9368 is not in the specs folder; the catalogue gives this one
	// from knowledge.
	reqCliDowngrade = fromKnowledge("RFC 9368", "4", Must, "after incompatible version negotiation, a client that finds in the server's version_information a version it would have preferred over the one negotiated closes the connection with a version negotiation error.")
)

func registerClientVersions() {
	registerClient(&Scenario{
		ID: "cli-v2-compatible-upgrade", Title: "The client follows a compatible upgrade from v1 to v2", Requirements: []Requirement{reqCliV2Negotiated, reqCliV2No0RTT},
		Needs: []string{NeedCAny, "c-v2"},
		Run: func(ctx context.Context, t *T) {
			// The tester's server prefers v2: a v1 client that lists v2 in
			// its version_information is moved to v2 (RFC 9368 §2.3).
			s, cr, ok := t.download(ctx, serveOptions{Label: "v1 to v2", Config: func(c *quic.Config) { c.Versions = []uint32{quic.Version2, quic.Version1} }})
			in := s.rawIn()
			if len(in) == 0 || in[0].err != nil {
				t.Inconclusive(fmt.Sprintf("The client sent nothing the tester could read (%v).", cr.err))
			}
			if first := uint32(in[0].header.Version); first != quic.Version1 {
				t.Unsupported(fmt.Sprintf("The client started in version %#x, not v1.", first))
			}
			tp := s.clientTP()
			if tp == nil || !tp.HasVersionInformation || !slices.Contains(tp.VersionInformation.Available, wire.Version(quic.Version2)) {
				t.Inconclusive("The client does not list v2 in its version_information, so no compatible upgrade can happen.")
			}
			var hs, hsV1, early2 int
			for _, d := range in {
				for rest := d.b; len(rest) > 0; {
					h, err := wire.ParseHeader(rest, 8)
					if err != nil || !h.Long {
						break
					}
					switch {
					case h.Type == wire.PacketTypeHandshake:
						hs++
						if uint32(h.Version) != quic.Version2 {
							hsV1++
						}
					case h.Type == wire.PacketType0RTT && uint32(h.Version) == quic.Version2:
						early2++
					}
					rest = rest[h.PacketLen:]
				}
			}
			t.Fact("v2.download", ok)
			if hs == 0 {
				t.Inconclusive(fmt.Sprintf("The client sent no Handshake packet after the upgrade (%v).", cr.err))
			}
			if hsV1 > 0 {
				t.Fail("negotiated", reqCliV2Negotiated, fmt.Sprintf("%d of the client's %d Handshake packets were not in v2, the negotiated version.", hsV1, hs))
			} else {
				t.Pass("negotiated", reqCliV2Negotiated, fmt.Sprintf("All %d of the client's Handshake packets used v2, and its 1-RTT packets opened with v2 keys.", hs))
			}
			if early2 > 0 {
				t.Fail("no-0rtt-v2", reqCliV2No0RTT, fmt.Sprintf("The client sent %d 0-RTT packet(s) in v2, the negotiated version.", early2))
			} else {
				t.Pass("no-0rtt-v2", reqCliV2No0RTT, "The client sent no 0-RTT packet in v2.")
			}
		},
	})
	registerClient(&Scenario{
		ID: "cli-version-downgrade", Title: "A forged Version Negotiation that downgrades v2 to v1", Requirements: []Requirement{reqCliDowngrade},
		Needs: []string{NeedCAny, "c-v2"},
		Run: func(ctx context.Context, t *T) {
			var mu sync.Mutex
			var first *wire.Header
			// The client's first Initial (v2) is answered by a Version
			// Negotiation packet listing only v1; the engine then serves v1
			// with its version_information listing v1 and v2.
			in := func(d []byte, reply func([]byte)) bool {
				h, err := wire.ParseHeader(d, 0)
				if err != nil || h.Type != wire.PacketTypeInitial {
					return false
				}
				mu.Lock()
				defer mu.Unlock()
				if first == nil {
					first = &h
					if uint32(h.Version) == quic.Version2 {
						reply(wire.AppendVersionNegotiation(nil, 0xc0, h.SCID, h.DCID, wire.Version(quic.Version1)))
						return true
					}
				}
				return uint32(h.Version) == quic.Version2
			}
			mark := t.mark()
			s := t.serve(ctx, serveOptions{Label: "downgrade", In: in})
			cr := t.launch(ctx, s, smallResource)
			closed := func(ps []*packet) bool { return firstClose(received(ps, s.trace.id, mark)) != nil }
			t.rec.wait(ctx, clientRunWait, func(ps []*packet) bool { return closed(ps) || cr.exited() })
			// A client that exits right after sending its close may leave
			// the datagram unread in the tester's socket for a moment.
			t.rec.wait(ctx, 200*time.Millisecond, closed)
			mu.Lock()
			f := first
			mu.Unlock()
			if f == nil {
				t.Inconclusive("The client sent no Initial to the tester's server.")
			}
			if uint32(f.Version) != quic.Version2 {
				t.Unsupported(fmt.Sprintf("The client started in version %#x, not v2.", uint32(f.Version)))
			}
			rcv := received(t.rec.snapshot(), s.trace.id, mark)
			if p := firstClose(rcv); p != nil {
				cc := p.closeFrame()
				if !cc.Application && cc.ErrorCode == uint64(wire.VersionNegotiationError) {
					t.Pass("close", reqCliDowngrade, "The client closed with VERSION_NEGOTIATION_ERROR when the server's version_information listed v2 after a Version Negotiation packet offering only v1.", events(Response, p)...)
					return
				}
				t.Warn("close", reqMostAppropriate, fmt.Sprintf("The client closed after the downgrade, but with %s instead of VERSION_NEGOTIATION_ERROR.", closeCode(cc)), events(Response, p)...)
				return
			}
			cr.wait(ctx, clientRunWait)
			if cr.downloaded(smallResource) {
				t.Fail("close", reqCliDowngrade, "The client accepted a downgrade from v2 to v1: it completed the download although the server's version_information listed v2.")
				return
			}
			if len(rcv) == 0 {
				t.Inconclusive(fmt.Sprintf("The client did not retry in v1 after the Version Negotiation packet (%v).", cr.err))
			}
			t.Inconclusive(fmt.Sprintf("The client neither closed with a CONNECTION_CLOSE the tester could read nor downloaded after the downgrade (datagrams: %s; client: %v).", datagramSummary(s.rawIn()), cr.err))
		},
	})
}

func init() {
	registerClientVN()
	registerClientVersions()
}
