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
