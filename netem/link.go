package netem

import (
	"errors"
	"fmt"
	"time"
)

// A Link describes one direction of an emulated path. The zero Link is a
// perfect link: no rate limit, no delay, no loss.
//
// A datagram goes through the stages in this order: impairments at ingress (blackhole, drop list, loss, corruption), a
// drop-tail queue, a serialiser at Rate, then the one-way Delay with Jitter
// and Reorder, and delivery. Duplicates are made after the queue check and
// occupy the serialiser like any packet.
type Link struct {
	// Rate is the serialisation rate in bit/s; 0 means unlimited. A datagram
	// occupies the link for (size+Overhead)*8/Rate.
	Rate int64
	// Overhead is added to each datagram's size for the serialiser and the
	// byte queue limit, e.g. 28 for the IPv4 and UDP headers that a
	// datagram-level emulator never sees. The default of 0 makes the
	// arithmetic of tests exact.
	Overhead int
	// QueuePackets and QueueBytes limit the drop-tail queue in front of the
	// serialiser; 0 means unlimited. The datagram being serialised does not
	// count, as in the established simulator.
	QueuePackets int
	QueueBytes   int

	// Delay is the one-way propagation delay.
	Delay time.Duration
	// Jitter adds a uniform random delay in [-Jitter, +Jitter] to Delay
	// (never below zero). Jitter alone never reorders: a datagram is not
	// delivered before one that entered the link earlier, because real
	// paths mostly keep FIFO order and reordering has its own knob.
	Jitter time.Duration

	// Loss is the probability that a datagram is lost, independently of the
	// others, unless Burst is set.
	Loss float64
	// Burst, when non-nil, replaces Loss with a Gilbert-Elliott model, which
	// produces the clustered losses of real wireless and congested paths.
	Burst *GilbertElliott
	// MaxRun caps runs of random losses, and separately runs of corrupted
	// datagrams: after MaxRun in a row, the next datagram passes untouched.
	// It keeps lossy test cases from ending in idle timeouts (the interop
	// scenarios use 3). 0 means no cap.
	MaxRun int
	// DropList drops the n-th datagram (1-based) that reaches the link,
	// counted from the epoch, whatever else happens to it.
	DropList []int
	// Blackholes drop every datagram that arrives within a window, measured
	// from the epoch.
	Blackholes []Window
	// BlackholePeriod, if positive, repeats the Blackholes windows with this
	// period (the "repeat" of the blackhole pattern).
	BlackholePeriod time.Duration

	// Corrupt is the probability that one byte of a datagram is replaced by
	// a different value. Version Negotiation packets are never corrupted,
	// so that a test of corruption does not turn into a test of version
	// negotiation.
	Corrupt float64
	// CorruptWithin limits the corrupted byte to the first CorruptWithin
	// bytes, where QUIC keeps its header and the start of the protected
	// payload; 0 means 50.
	CorruptWithin int

	// Reorder is the probability that a datagram is held back by an extra
	// ReorderDelay, so that the datagrams after it overtake it.
	Reorder float64
	// ReorderDelay is the extra delay of reordered datagrams; 0 means 10 ms.
	ReorderDelay time.Duration

	// Duplicate is the probability that a datagram is delivered twice.
	Duplicate float64
}

// GilbertElliott is a two-state Markov loss model. Each datagram first moves
// the chain (good to bad with probability P, bad to good with probability
// R), then is lost with the loss probability of the state it is in. The
// stationary loss rate is (R*LossGood + P*LossBad)/(P+R).
type GilbertElliott struct {
	P, R     float64
	LossGood float64
	LossBad  float64
}

// A Window is a span of time [From, To) measured from a link's epoch.
type Window struct {
	From, To time.Duration
}

const (
	defaultCorruptWithin = 50
	defaultReorderDelay  = 10 * time.Millisecond
)

// Validate reports a configuration that cannot be emulated.
func (l *Link) Validate() error {
	var errs []error
	prob := func(name string, p float64) {
		if !(p >= 0 && p <= 1) { // also rejects NaN
			errs = append(errs, fmt.Errorf("%s %v is not a probability in [0, 1]", name, p))
		}
	}
	prob("Loss", l.Loss)
	prob("Corrupt", l.Corrupt)
	prob("Reorder", l.Reorder)
	prob("Duplicate", l.Duplicate)
	if b := l.Burst; b != nil {
		prob("Burst.P", b.P)
		prob("Burst.R", b.R)
		prob("Burst.LossGood", b.LossGood)
		prob("Burst.LossBad", b.LossBad)
	}
	for name, v := range map[string]int64{
		"Rate": l.Rate, "Overhead": int64(l.Overhead), "QueuePackets": int64(l.QueuePackets),
		"QueueBytes": int64(l.QueueBytes), "Delay": int64(l.Delay), "Jitter": int64(l.Jitter),
		"MaxRun": int64(l.MaxRun), "CorruptWithin": int64(l.CorruptWithin),
		"ReorderDelay": int64(l.ReorderDelay), "BlackholePeriod": int64(l.BlackholePeriod),
	} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s %d is negative", name, v))
		}
	}
	for _, n := range l.DropList {
		if n < 1 {
			errs = append(errs, fmt.Errorf("DropList index %d: indices start at 1", n))
		}
	}
	for _, w := range l.Blackholes {
		if w.From < 0 || w.To < w.From {
			errs = append(errs, fmt.Errorf("blackhole window [%v, %v) is not a forward span from the epoch", w.From, w.To))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("netem: invalid link: %w", err)
	}
	return nil
}

// EffectiveLoss returns the long-run fraction of datagrams lost when each is
// lost with probability p but never more than maxRun in a row (0: no cap).
// The run length is a Markov chain whose stationary weights are p^k for k
// losses in a row, so the rate is (p + … + p^n)/(1 + p + … + p^n). For p=0.3
// and n=3 that is 29.4 %, as §3.3 states.
func EffectiveLoss(p float64, maxRun int) float64 {
	if maxRun <= 0 {
		return p
	}
	num, den, pk := 0.0, 1.0, 1.0
	for k := 1; k <= maxRun; k++ {
		pk *= p
		num += pk
		den += pk
	}
	return num / den
}
