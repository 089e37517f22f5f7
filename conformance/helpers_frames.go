package conformance

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// frameAt is a frame with the packet that carried it.
type frameAt struct {
	p *packet
	f wire.Frame
}

// framesOf returns the frames of type T in the packets of conn (any when
// conn < 0) recorded from index from, sent by the tester when sent is
// true, else received.
func framesOf[F wire.Frame](ps []*packet, conn, from int, sent bool) []frameAt {
	var out []frameAt
	for i, p := range ps {
		if i < from || p.sent != sent || (conn >= 0 && p.conn != conn) {
			continue
		}
		for _, f := range p.frames {
			if _, ok := f.(F); ok {
				out = append(out, frameAt{p, f})
			}
		}
	}
	return out
}

// packetsOf returns the packets of frameAt values, in order, without
// repeats.
func packetsOf(fs []frameAt) []*packet {
	var out []*packet
	for _, fa := range fs {
		if len(out) == 0 || out[len(out)-1] != fa.p {
			out = append(out, fa.p)
		}
	}
	return out
}

// rawEstablished runs the raw client's handshake with options o, or ends
// the scenario as inconclusive.
func (t *T) rawEstablished(ctx context.Context, o rawquic.Options, setup func(rc *rawClient)) *rawClient {
	rc := t.newRaw(ctx, o)
	if setup != nil {
		setup(rc)
	}
	if err := rc.Handshake(ctx, t.Settle()+2*time.Second); err != nil {
		ps := received(t.rec.snapshot(), rc.trace.id, 0)
		t.Inconclusive(fmt.Sprintf("The tester's scripted handshake (%s) did not complete: %v.", o.Label, err), events(Context, lastN(ps, 3)...)...)
	}
	return rc
}

// receiveUntil lets the raw client receive for up to d until a packet
// recorded from index from satisfies cond; it returns that packet.
func (rc *rawClient) receiveUntil(ctx context.Context, d time.Duration, from int, cond func(p *packet) bool) *packet {
	var hit *packet
	check := func() bool {
		for _, p := range received(rc.t.rec.snapshot(), rc.trace.id, from) {
			if cond(p) {
				hit = p
				return true
			}
		}
		return false
	}
	rc.Receive(ctx, d, check)
	if hit == nil {
		check()
	}
	return hit
}

// hasFrame returns a predicate for packets carrying a frame of type F.
func hasFrame[F wire.Frame]() func(p *packet) bool {
	return func(p *packet) bool {
		for _, f := range p.frames {
			if _, ok := f.(F); ok {
				return true
			}
		}
		return false
	}
}

// mark is the index of the next packet the recorder will hold.
func (t *T) mark() int { return len(t.rec.snapshot()) }

// isProbingOnly reports whether a packet carries only probing frames
// (RFC 9000 §9.1: PATH_CHALLENGE, PATH_RESPONSE, NEW_CONNECTION_ID,
// PADDING).
func isProbingOnly(p *packet) bool {
	for _, f := range p.frames {
		switch f.(type) {
		case *wire.PathChallengeFrame, *wire.PathResponseFrame, *wire.NewConnectionIDFrame, *wire.PaddingFrame:
		default:
			return false
		}
	}
	return len(p.frames) > 0
}

// datagramBytes sums the sizes of the datagrams on the tester's socket
// with local address local (any when invalid), received (sent false) or
// sent, up to time until (all when zero).
func (t *T) datagramBytes(local func(d datagramRec) bool, sent bool, until time.Time) (n, count int) {
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	for _, d := range t.rec.allDatagramsLocked() {
		if d.sent != sent || !local(d) || (!until.IsZero() && d.at.After(until)) {
			continue
		}
		n += d.size
		count++
	}
	return n, count
}

// onPath selects the datagrams of one raw client path.
func (rc *rawClient) onPath(i int) func(d datagramRec) bool {
	local := rc.Paths[i].Local
	return func(d datagramRec) bool { return d.local == local }
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
