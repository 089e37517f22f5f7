package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// Family M, the server's preferred address (catalogue §4): the tester's
// server offers a second local port and serves there too.

var (
	reqCliPrefSelect   = rfc9000("9.6.1", Should, "Once the handshake is confirmed, the client SHOULD select one of the two addresses provided by the server and initiate path validation")
	reqCliPrefNoProbe  = rfc9000("21.5.3", MustNot, "A client MUST NOT send non-probing frames to a preferred address prior to validating that address")
	reqCliPrefValidate = rfc9000("9.6.2", Must, "A client that migrates to a preferred address MUST validate the address it chooses before migrating")
)

func init() { registerClientPreferred() }

// prefDatagram is a client datagram that reached the preferred address,
// with whether its packets carried only probing frames (RFC 9000 §9.1:
// PATH_CHALLENGE, PATH_RESPONSE, NEW_CONNECTION_ID, PADDING).
type prefDatagram struct {
	d       rawDatagram
	probing bool
	frames  []string
}

// prefRun is what the client did with the tester's preferred address.
type prefRun struct {
	s         *testServer
	datagrams []prefDatagram
	// firstAnswer is when the tester's server first sent from the
	// preferred address (its PATH_RESPONSE): before that the client cannot
	// have validated the address.
	firstAnswer time.Time
}

func (r *prefRun) moved() *prefDatagram {
	for i := range r.datagrams {
		if !r.datagrams[i].probing {
			return &r.datagrams[i]
		}
	}
	return nil
}

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
	for _, d := range t.rec.datagrams {
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
