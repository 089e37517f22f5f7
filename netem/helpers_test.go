package netem

import (
	"math/rand/v2"
	"time"
)

func newTestRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// randomLink draws a valid Link that exercises every stage, for property
// tests.
func randomLink(r *rand.Rand) Link {
	prob := func() float64 {
		if r.IntN(3) == 0 {
			return 0
		}
		return r.Float64() * 0.5
	}
	l := Link{
		Rate:         []int64{0, 1e5, 1e6, 1e7, 1e9}[r.IntN(5)],
		Overhead:     r.IntN(60),
		QueuePackets: r.IntN(30),
		QueueBytes:   r.IntN(40000),
		Delay:        time.Duration(r.IntN(50)) * time.Millisecond,
		Jitter:       time.Duration(r.IntN(5)) * time.Millisecond,
		Loss:         prob(),
		MaxRun:       r.IntN(5),
		Corrupt:      prob(),
		Reorder:      prob(),
		ReorderDelay: time.Duration(r.IntN(20)) * time.Millisecond,
		Duplicate:    prob(),
	}
	if r.IntN(4) == 0 {
		l.Burst = &GilbertElliott{P: r.Float64() * 0.1, R: r.Float64(), LossGood: prob() / 10, LossBad: r.Float64()}
	}
	if r.IntN(4) == 0 {
		from := time.Duration(r.IntN(500)) * time.Millisecond
		l.Blackholes = []Window{{from, from + time.Duration(r.IntN(300))*time.Millisecond}}
		if r.IntN(2) == 0 {
			l.BlackholePeriod = time.Second
		}
	}
	if r.IntN(4) == 0 {
		l.DropList = []int{1 + r.IntN(10), 1 + r.IntN(100)}
	}
	return l
}
