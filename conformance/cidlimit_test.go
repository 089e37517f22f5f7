package conformance

import (
	"testing"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// TestJudgeCIDLimit: an ID the tester retired (as a client that moved to
// the preferred address does) no longer counts against its limit, so its
// replacement is no violation; an extra ID beyond the limit still is.
func TestJudgeCIDLimit(t *testing.T) {
	t0 := time.Now()
	at := func(ms int, sent bool, f wire.Frame) frameAt {
		return frameAt{p: &packet{at: t0.Add(time.Duration(ms) * time.Millisecond), sent: sent}, f: f}
	}
	ncid := func(seq uint64) *wire.NewConnectionIDFrame { return &wire.NewConnectionIDFrame{SequenceNumber: seq} }
	// limit 2, preferred address: 0 and 1 active; the client retires 0,
	// then the server issues 2.
	ncids := []frameAt{at(20, false, ncid(2))}
	retires := []frameAt{at(10, true, &wire.RetireConnectionIDFrame{SequenceNumber: 0})}
	if bad, n := judgeCIDLimit(true, 2, ncids, retires); bad != nil {
		t.Fatalf("replacement of a retired ID blamed: %d active after %d", n, bad.SequenceNumber)
	}
	// Without the retirement the same frame exceeds the limit.
	if bad, n := judgeCIDLimit(true, 2, ncids, nil); bad == nil || n != 3 {
		t.Fatalf("third ID with limit 2 not caught: %v %d", bad, n)
	}
	// A retirement sent after the new ID does not excuse it.
	late := []frameAt{at(30, true, &wire.RetireConnectionIDFrame{SequenceNumber: 0})}
	if bad, _ := judgeCIDLimit(true, 2, ncids, late); bad == nil {
		t.Fatal("a later retirement excused an earlier excess")
	}
}

// TestProvenReceived: only the trigger and the tester datagrams the server
// acknowledged before its PATH_CHALLENGE count as received on the path.
func TestProvenReceived(t *testing.T) {
	t0 := time.Now()
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	trig := &packet{at: ms(0), sent: true, path: 1, space: 2, pn: 10, datagram: 100}
	acked := &packet{at: ms(1), sent: true, path: 1, space: 2, pn: 11, datagram: 300}
	queued := &packet{at: ms(2), sent: true, path: 1, space: 2, pn: 12, datagram: 500}
	old := &packet{at: ms(2), sent: true, path: 0, space: 2, pn: 13, datagram: 700}
	ack := &packet{at: ms(3), space: 2, frames: []wire.Frame{&wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 11, Largest: 11}}}}}
	ps := []*packet{trig, acked, queued, old, ack}
	if got := provenReceived(ps, 0, 0, 1, trig, ms(4)); got != 400 {
		t.Fatalf("proven %d bytes, want 400 (trigger and the acknowledged datagram)", got)
	}
	if got := provenReceived(ps, 0, 0, 1, trig, ms(3)); got != 100 {
		t.Fatalf("before the ACK arrived: %d bytes, want 100", got)
	}
}
