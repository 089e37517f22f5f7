package conformance

import "testing"

// TestJudgeLossRounds: the window after a loss is judged against the
// growth before it, not against the last flight.
func TestJudgeLossRounds(t *testing.T) {
	for _, c := range []struct {
		name    string
		rounds  []int
		lr      int
		running bool
		want    lossReaction
	}{
		// Slow start: halving a window that would have doubled leaves
		// the next flight as large as the last one.
		{"slow-start-halved", []int{12000, 24000, 48000, 96000, 96000, 97200}, 3, true, lossReduced},
		{"congestion-avoidance-cut", []int{100000, 101200, 102400, 60000, 61200}, 2, true, lossReduced},
		{"reduced-a-round-late", []int{12000, 24000, 48000, 96000, 192000, 190000}, 3, true, lossReduced},
		{"kept-doubling", []int{12000, 24000, 48000, 96000, 192000, 384000}, 3, true, lossNoAction},
		{"kept-doubling-but-done", []int{12000, 24000, 48000, 96000, 192000}, 3, false, lossUnknown},
		{"flat-before", []int{30000, 30000, 30000, 30000, 30000}, 2, true, lossUnknown},
		{"no-round-before", []int{30000, 60000}, 0, true, lossUnknown},
	} {
		if got, why := judgeLossRounds(c.rounds, c.lr, c.running); got != c.want {
			t.Errorf("%s: got %d (%s), want %d", c.name, got, why, c.want)
		}
	}
}
