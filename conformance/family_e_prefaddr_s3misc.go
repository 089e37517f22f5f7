package conformance

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Family E: the server's preferred address (RFC 9000 §9.6). The raw client
// opens a socket towards the address in preferred_address and sends there
// under the parameter's connection ID.

var (
	reqPrefAddrProbe   = rfc9000("9.6.2", Must, "The server MUST probe on the path toward the client from its preferred address.")
	reqPrefAddrNoEarly = rfc9000("9.6.2", Must, "MUST send non-probing packets from its original address until it receives a non-probing packet from the client at its preferred address and until the server has validated the new path.")
)

func init() {
	Register(&Scenario{
		ID: "prefaddr-migrate", Title: "Migration to the server's preferred address", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{reqPrefAddrProbe},
		Run:          runPrefAddrMigrate,
	})
	Register(&Scenario{
		ID: "prefaddr-no-early-switch", Title: "No non-probing packets from the preferred address too early", Family: "E", Needs: []string{NeedApp},
		Requirements: []Requirement{reqPrefAddrNoEarly},
		Run:          runPrefAddrNoEarlySwitch,
	})
}

// prefAddrPath is the raw client's path towards the server's preferred
// address.
type prefAddrPath struct {
	rc    *rawClient
	pa    wire.PreferredAddress
	np    int
	addr  netip.AddrPort
	probe *packet // the tester's PATH_CHALLENGE there
	resp  *packet // the server's PATH_RESPONSE from there
	mark  int
}

// preferredTarget picks the address of preferred_address in the family of
// the tester's current path.
func preferredTarget(pa wire.PreferredAddress, cur netip.AddrPort) (netip.AddrPort, bool) {
	v4 := netip.AddrPortFrom(netip.AddrFrom4(pa.IPv4), pa.IPv4Port)
	v6 := netip.AddrPortFrom(netip.AddrFrom16(pa.IPv6), pa.IPv6Port)
	if cur.Addr().Unmap().Is4() {
		if pa.IPv4Port != 0 && !v4.Addr().IsUnspecified() {
			return v4, true
		}
		return netip.AddrPort{}, false
	}
	if pa.IPv6Port != 0 && !v6.Addr().IsUnspecified() {
		return v6, true
	}
	return netip.AddrPort{}, false
}

// probePreferred completes a handshake, gives the server spare connection
// IDs (it must not use one ID from two local addresses, RFC 9000 §9.5),
// opens a socket towards the preferred address and sends a PATH_CHALLENGE
// there under the parameter's connection ID. It ends the scenario as
// unsupported without preferred_address and inconclusive when the address
// cannot be used or does not answer.
func (t *T) probePreferred(ctx context.Context) *prefAddrPath {
	rc := t.rawEstablished(ctx, rawOptions{Label: "raw"}, nil)
	tp := rc.ServerTP()
	if tp == nil || !tp.HasPreferredAddress {
		t.Unsupported("The server sent no preferred_address.")
	}
	pp := &prefAddrPath{rc: rc, pa: tp.PreferredAddress}
	addr, ok := preferredTarget(pp.pa, rc.peer)
	if !ok {
		t.Inconclusive(fmt.Sprintf("The server's preferred_address has no address in the family of the tester's path to %v.", rc.peer))
	}
	pp.addr = addr
	fam := "IPv4"
	if addr.Addr().Is6() {
		fam = "IPv6"
	}
	t.Fact("prefaddr.address", map[string]string{"address": addr.String(), "family": fam})
	rc.giveSpareCIDs()
	rc.Receive(ctx, t.PTO(), nil)
	np, err := rc.newPathTo(netip.Addr{}, addr)
	if err != nil {
		t.Inconclusive(err.Error())
	}
	pp.np = np
	pp.mark = t.mark()
	data := [8]byte(randomBytes(8))
	for try := 0; try < 3 && pp.resp == nil && ctx.Err() == nil; try++ {
		p := rc.Send1RTTOn(np, []wire.Frame{&wire.PathChallengeFrame{Data: data}}, shortOpts{PadTo: 1200, DCID: pp.pa.ConnectionID})
		if pp.probe == nil {
			pp.probe = p
		}
		pp.resp = rc.receiveUntil(ctx, max(t.PTO(), 300*time.Millisecond), pp.mark, func(p *packet) bool {
			for _, f := range p.frames {
				if r, ok := f.(*wire.PathResponseFrame); ok && r.Data == data {
					return true
				}
			}
			return false
		})
	}
	if pp.resp == nil {
		t.Inconclusive(fmt.Sprintf("The server's preferred address %v did not answer three PATH_CHALLENGEs sent to it under the parameter's connection ID.", addr), events(Trigger, pp.probe)...)
	}
	return pp
}

func runPrefAddrMigrate(ctx context.Context, t *T) {
	pp := t.probePreferred(ctx)
	rc := pp.rc
	rc.migrate(pp.np)
	rc.dcid = append([]byte(nil), pp.pa.ConnectionID...)
	body, ferr := rc.Fetch(ctx, t.profile.SmallPath, t.Settle())
	rc.Receive(ctx, t.PTO(), func() bool { return pp.challenge(t) != nil })
	req := t.sc.Requirements[0]
	if ch := pp.challenge(t); ch != nil {
		t.Pass("probed", req, fmt.Sprintf("After the tester moved to the preferred address %v, the server probed the path towards it from there (fetch: %d bytes, %v).", pp.addr, len(body), errText(ferr)),
			append(events(Trigger, pp.probe), events(Response, pp.resp, ch)...)...)
		return
	}
	t.Fail("probed", req, fmt.Sprintf("The tester validated the preferred address %v and moved its traffic there, but the server never sent a PATH_CHALLENGE from it (fetch: %d bytes, %v).", pp.addr, len(body), errText(ferr)),
		append(events(Trigger, pp.probe), events(Response, pp.resp)...)...)
}

func errText(err error) string {
	if err == nil {
		return "complete"
	}
	return err.Error()
}

// challenge returns the first PATH_CHALLENGE the server sent from its
// preferred address.
func (pp *prefAddrPath) challenge(t *T) *packet {
	for _, p := range received(t.rec.snapshot(), pp.rc.trace.id, pp.mark) {
		if p.path == pp.np && p.has(wire.FrameTypePathChallenge) {
			return p
		}
	}
	return nil
}

// firstNonProbing returns the first packet of ps that carries a frame
// other than PATH_CHALLENGE, PATH_RESPONSE, NEW_CONNECTION_ID or PADDING.
func firstNonProbing(ps []*packet) *packet {
	for _, p := range ps {
		if p.space == 2 && !isProbingOnly(p) {
			return p
		}
	}
	return nil
}

func runPrefAddrNoEarlySwitch(ctx context.Context, t *T) {
	pp := t.probePreferred(ctx)
	rc := pp.rc
	// Non-probing traffic stays on the original path; the new one only
	// carries the tester's probes and its answers to the server's.
	start := time.Now()
	for time.Since(start) < t.Settle() && ctx.Err() == nil && !rc.peerClosed {
		rc.Send1RTT([]wire.Frame{&wire.PingFrame{}}, shortOpts{})
		rc.Send1RTTOn(pp.np, []wire.Frame{&wire.PathChallengeFrame{Data: [8]byte(randomBytes(8))}}, shortOpts{PadTo: 1200, DCID: pp.pa.ConnectionID})
		rc.Receive(ctx, t.PTO(), nil)
	}
	var onPref, onOrig []*packet
	for _, p := range received(t.rec.snapshot(), rc.trace.id, pp.mark) {
		if p.path == pp.np {
			onPref = append(onPref, p)
		} else if p.space == 2 && !isProbingOnly(p) {
			onOrig = append(onOrig, p)
		}
	}
	t.Fact("prefaddr.early", map[string]int{"from-preferred": len(onPref), "non-probing-from-original": len(onOrig)})
	req := t.sc.Requirements[0]
	if bad := firstNonProbing(onPref); bad != nil {
		t.Fail("original", req, fmt.Sprintf("The server sent a non-probing packet (%v) from its preferred address %v although the tester had sent only probing packets there.", bad.ev.Frames, pp.addr),
			append(events(Trigger, pp.probe), events(Response, bad)...)...)
		return
	}
	t.Pass("original", req, fmt.Sprintf("For %v of probing only, the server sent %d probing-only packet(s) from its preferred address %v and its %d non-probing packet(s) from the original address.", t.Settle().Round(time.Millisecond), len(onPref), pp.addr, len(onOrig)),
		append(events(Trigger, pp.probe), events(Response, pp.resp)...)...)
}
