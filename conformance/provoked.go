package conformance

import (
	"context"
	"fmt"

	"github.com/quiver-quic/quiver/quic/wire"
)

// variant is one connection of a provoked-error scenario: its trigger runs
// on an established tester connection.
type variant struct {
	name    string
	trigger func(ctx context.Context, t *T, c *Conn)
}

// provokedSpec describes a scenario that follows the provoked-error
// pattern (docs/conformance-model.md, Provoked errors) on established engine connections.
type provokedSpec struct {
	id, title, family string
	needs             []string
	reqs              []Requirement // reqs[0] is the requirement the close rests on
	codes             []uint64
	application       bool
	anyCode           bool
	warnOnly          bool // the requirement is a SHOULD: going on is warn
	streamErrors      bool
	describe          string
	// frames, when set, are injected in a 1-RTT packet as the trigger.
	frames func(t *T, c *Conn) []wire.Frame
	// variants, when set, replace frames: one connection each.
	variants []variant
}

func transportCodes(cs ...wire.TransportErrorCode) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = uint64(c)
	}
	return out
}

func registerProvoked(s provokedSpec) {
	Register(&Scenario{
		ID: s.id, Title: s.title, Family: s.family, Needs: s.needs, Requirements: s.reqs,
		Run: func(ctx context.Context, t *T) {
			vs := s.variants
			if vs == nil {
				vs = []variant{{name: s.id, trigger: func(ctx context.Context, t *T, c *Conn) {
					c.Inject(spaceApp, s.frames(t, c)...)
				}}}
			}
			for _, v := range vs {
				c := t.mustDial(ctx, DialOptions{Label: v.name})
				name := v.name
				if len(vs) == 1 {
					name = "close"
				}
				e := Expectation{Check: name, Req: s.reqs[0], Codes: s.codes, Application: s.application,
					Describe: s.describe, GoesOnWarns: s.warnOnly, AnyCode: s.anyCode, StreamErrors: s.streamErrors}
				if len(vs) > 1 {
					e.Describe = fmt.Sprintf("%s (%s)", s.describe, v.name)
				}
				t.Provoke(ctx, c, e, func() { v.trigger(ctx, t, c) })
			}
		},
	})
}

// injectVariant makes a variant that injects frames in a 1-RTT packet.
func injectVariant(name string, frames func(t *T, c *Conn) []wire.Frame) variant {
	return variant{name: name, trigger: func(ctx context.Context, t *T, c *Conn) {
		c.Inject(spaceApp, frames(t, c)...)
	}}
}

// serverTP returns the connection's server transport parameters or ends
// the scenario as inconclusive.
func (t *T) serverTP(c *Conn) *wire.TransportParameters {
	tp := c.TransportParameters()
	if tp == nil {
		t.Inconclusive("The server's transport parameters could not be read.")
	}
	return tp
}
