package conformance

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Family J, greasing of versions (catalogue §3.J): grease-version-information
// and grease-vn-unused-bits.

var reqReservedVersions = rfc9000("6.3", May, "Endpoints MAY add reserved versions to any field where unknown or unsupported versions are ignored to test that a peer correctly ignores the value.")

func init() {
	Register(&Scenario{
		ID: "grease-version-information", Title: "Reserved versions in the client's version_information", Family: "J",
		Needs: []string{NeedApp, "cvn"}, PassOnly: true,
		Requirements: []Requirement{reqReservedVersions},
		Run:          runGreaseVersionInformation,
	})
	Register(&Scenario{
		ID: "grease-vn-unused-bits", Title: "Unused bits of Version Negotiation packets", Family: "J", ObservationOnly: true,
		Requirements: []Requirement{rfc9000("17.2.1", Should, "servers SHOULD set the most significant bit of this field (0x40) to 1 so that Version Negotiation packets appear to have the Fixed Bit field.")},
		Run:          runGreaseVNUnusedBits,
	})
}

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
		t.Observe("handshake", fmt.Sprintf("Offered %s, the server closed the connection with %s, while a plain handshake succeeded.", offered, closeCode(cc.closeFrame())), events(Response, cc)...)
		return
	}
	t.Observe("handshake", fmt.Sprintf("Offered %s, the handshake stalled (%v), while a plain handshake succeeded.", offered, err), events(Context, lastN(ps, 3)...)...)
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
		t.Unsupported(fmt.Sprintf("The server sent no Version Negotiation packet to a reserved version within %v (needs a Version Negotiation reply).", t.Settle().Round(time.Millisecond)))
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
	sentence := fmt.Sprintf("The Unused bits of %d Version Negotiation replies were %v; 0x40 was set in %d of them and the value %s. The 0x40 recommendation applies only where QUIC is multiplexed with other protocols, which the tester cannot know.",
		len(firsts), vals, set, map[bool]string{true: "varied", false: "did not vary"}[varies])
	if set == len(firsts) {
		t.Pass("unused-bits", req, sentence, events(Response, last)...)
	} else {
		t.Warn("unused-bits", req, sentence, events(Response, last)...)
	}
}
