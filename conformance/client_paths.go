package conformance

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/protect"
	"github.com/quiver-quic/quiver/quic/wire"
)

// serverAppKeys returns the tester's server 1-RTT keys (key phase 0) for
// the connection, from the key log and the negotiated cipher suite.
func (s *testServer) serverAppKeys(version uint32, suite uint16) *protect.Keys {
	s.t.rec.mu.Lock()
	log := s.t.rec.keylog.String()
	s.t.rec.mu.Unlock()
	var k *protect.Keys
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "SERVER_TRAFFIC_SECRET_0" {
			continue
		}
		secret, err := hexDecode(f[2])
		if err != nil {
			continue
		}
		if kk, err := protect.NewKeys(version, suite, secret); err == nil {
			k = kk
		}
	}
	return k
}

func registerClientUnknownAddress() {
	registerClient(&Scenario{
		ID: "cli-unknown-server-address", Title: "A packet from an unknown server address is discarded", Requirements: []Requirement{reqCliUnknownAddr},
		Run: func(ctx context.Context, t *T) {
			s, c := t.holdOpen(ctx, serveOptions{Label: "unknown address"})
			ps := t.rec.snapshot()
			var last *packet
			for _, p := range ps {
				if p.sent && p.conn == s.trace.id && p.space == spaceApp {
					last = p
				}
			}
			if last == nil {
				t.Inconclusive("The tester's server sent no 1-RTT packet to take the client's connection ID from.")
			}
			k := s.serverAppKeys(c.ConnectionInfo().Version, c.ConnectionState().CipherSuite)
			if k == nil {
				t.Inconclusive("The tester found no 1-RTT secret of its server in its key log.")
			}
			peer := s.trace.peerAddr()
			other, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Inconclusive(fmt.Sprintf("The tester cannot open a second UDP socket: %v.", err))
			}
			defer other.Close()
			// A packet number far beyond the engine's, so that only this
			// packet can be acknowledged under it; a PING and response data
			// on the request stream the client has not seen.
			pn := last.pn + 100000
			h := wire.ShortHeader{DCID: last.dcid, PNLen: 4, PacketNumber: pn}
			hdr, pnOff := h.Append(nil)
			payload := rawquic.AppendFrames(nil, []wire.Frame{&wire.PingFrame{}, &wire.StreamFrame{StreamID: requestStream(t, s), Data: []byte("data from an unknown server address\n")}})
			pkt := k.Seal(append([]byte(nil), hdr...), hdr, payload, pn)
			if _, err := k.HeaderProtector().Apply(pkt, pnOff, false); err != nil {
				t.Errorf("header protection: %v", err)
			}
			mark := t.mark()
			at := time.Now()
			if _, err := other.WriteToUDPAddrPort(pkt, peer); err != nil {
				t.Inconclusive(fmt.Sprintf("The tester could not send from its second socket: %v.", err))
			}
			t.rec.addDatagram(datagramRec{at: at, sent: true, local: other.LocalAddr().(*net.UDPAddr).AddrPort(), peer: peer, b: pkt})
			t.Fact("unknown-address.from", other.LocalAddr().String())
			// The connection goes on: PINGs on the real path every PTO.
			e := Expectation{Check: "discarded", Req: reqCliUnknownAddr, Describe: "a 1-RTT packet from an unknown server address"}
			acked := func(ps []*packet) bool { return ackedBy(ps[min(mark, len(ps)):], s.trace.id, spaceApp, pn) != nil }
			for waited := time.Duration(0); waited < t.Settle(); waited += t.PTO() {
				c.Ping()
				if t.rec.wait(ctx, t.PTO(), acked) {
					break
				}
			}
			ps = t.rec.snapshot()
			if p := ackedBy(ps[mark:], s.trace.id, spaceApp, pn); p != nil {
				t.Fail(e.Check, e.Req, fmt.Sprintf("The client acknowledged packet %d, which came from %s, an address the server never used.", pn, other.LocalAddr()), events(Response, p)...)
				return
			}
			var pings int
			for _, p := range ps[mark:] {
				if p.sent && p.conn == s.trace.id && p.has(wire.FrameTypePing) && ackedBy(ps[mark:], s.trace.id, spaceApp, p.pn) != nil {
					pings++
				}
			}
			if pings == 0 {
				t.Inconclusive("The client acknowledged neither the packet from the unknown address nor the tester's later PINGs.")
			}
			t.Pass(e.Check, e.Req, fmt.Sprintf("The client never acknowledged the packet from the unknown address %s, and acknowledged %d later PING(s) on the real path.", other.LocalAddr(), pings))
		},
	})
}

// Family M, the server's preferred address (docs/scenarios.md, Client-facing): the tester's
// server offers a second local port and serves there too.

var (
	reqCliPrefSelect   = rfc9000("9.6.1", Should, "Once the handshake is confirmed, the client SHOULD select one of the two addresses provided by the server and initiate path validation")
	reqCliPrefNoProbe  = rfc9000("21.5.3", MustNot, "A client MUST NOT send non-probing frames to a preferred address prior to validating that address")
	reqCliPrefValidate = rfc9000("9.6.2", Must, "A client that migrates to a preferred address MUST validate the address it chooses before migrating")
)

// runPreferred holds a request open with a preferred address offered and
// PINGs the client every PTO for one settle window, so that a client that
// moved has a reason to send there.
func (t *T) runPreferred(ctx context.Context) *prefRun {
	s, c := t.holdOpen(ctx, serveOptions{Label: "preferred address", Preferred: true})
	r := &prefRun{s: s}
	scan := func() {
		r.datagrams = r.datagrams[:0]
		for _, d := range s.rawIn() {
			if d.local != s.prefAddr {
				continue
			}
			pd := prefDatagram{d: d, probing: true}
			s.openRaw(d.b, func(_ wire.Header, _ int, _ uint64, _ []byte, frames []wire.Frame) {
				for _, f := range frames {
					pd.frames = append(pd.frames, frameString(f))
					switch f.Type() {
					case wire.FrameTypePathChallenge, wire.FrameTypePathResponse, wire.FrameTypeNewConnectionID, wire.FrameTypePadding:
					default:
						pd.probing = false
					}
				}
			})
			r.datagrams = append(r.datagrams, pd)
		}
	}
	for waited := time.Duration(0); waited < t.Settle(); waited += t.PTO() {
		c.Ping()
		t.rec.wait(ctx, t.PTO(), nil)
		scan()
		if r.moved() != nil {
			break
		}
	}
	answers := 0
	t.rec.mu.Lock()
	for _, d := range t.rec.allDatagramsLocked() {
		if d.sent && d.local == s.prefAddr {
			if answers == 0 {
				r.firstAnswer = d.at
			}
			answers++
		}
	}
	t.rec.mu.Unlock()
	t.Fact("preferred.server-datagrams", answers)
	t.Fact("preferred.address", s.prefAddr.String())
	t.Fact("preferred.client-datagrams", len(r.datagrams))
	return r
}

func registerClientPreferred() {
	registerClient(&Scenario{
		ID: "cli-preferred-address-used", Title: "The client validates and moves to the server's preferred address", Requirements: []Requirement{reqCliPrefSelect},
		Run: func(ctx context.Context, t *T) {
			r := t.runPreferred(ctx)
			if len(r.datagrams) == 0 {
				t.Warn("select", reqCliPrefSelect, fmt.Sprintf("The client never sent to the preferred address %s within %v of the handshake.", r.s.prefAddr, t.Settle().Round(time.Millisecond)))
				return
			}
			if m := r.moved(); m != nil {
				t.Pass("select", reqCliPrefSelect, fmt.Sprintf("The client validated the preferred address %s and moved there (its first non-probing datagram there carried %v).", r.s.prefAddr, m.frames))
				return
			}
			t.Pass("select", reqCliPrefSelect, fmt.Sprintf("The client started path validation to the preferred address %s (%d probing datagram(s)) but sent no non-probing packet there within %v.", r.s.prefAddr, len(r.datagrams), t.Settle().Round(time.Millisecond)))
		},
	})
	registerClient(&Scenario{
		ID: "cli-preferred-address-validated", Title: "The client sends only probing frames to the preferred address until it is validated", Requirements: []Requirement{reqCliPrefNoProbe, reqCliPrefValidate},
		Run: func(ctx context.Context, t *T) {
			r := t.runPreferred(ctx)
			if len(r.datagrams) == 0 {
				t.Unsupported("The client does not use the server's preferred address.")
			}
			for _, pd := range r.datagrams {
				if pd.probing || (!r.firstAnswer.IsZero() && pd.d.at.After(r.firstAnswer)) {
					continue
				}
				t.Fail("probing-only", reqCliPrefNoProbe, fmt.Sprintf("The client sent non-probing frames %v to the preferred address before the tester's server had answered from it, so before any validation.", pd.frames))
				t.Fail("validate", reqCliPrefValidate, "The client moved to the preferred address without validating it first.")
				return
			}
			t.Pass("probing-only", reqCliPrefNoProbe, fmt.Sprintf("Every datagram the client sent to the preferred address before the tester's PATH_RESPONSE carried only probing frames (%d datagram(s) in all).", len(r.datagrams)))
			if r.moved() != nil {
				t.Pass("validate", reqCliPrefValidate, "The client moved to the preferred address only after the tester answered its path validation.")
			} else {
				t.Pass("validate", reqCliPrefValidate, "The client validated the preferred address and did not migrate unvalidated.")
			}
		},
	})
}

func init() {
	registerClientUnknownAddress()
	registerClientPreferred()
}
