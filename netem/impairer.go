package netem

import (
	"math/rand/v2"
	"time"
)

// A DropCause says why a datagram did not reach its destination.
type DropCause uint8

// Drop causes; NotDropped is the zero value, for a datagram delivered.
const (
	NotDropped    DropCause = iota
	DropLoss                // random or Gilbert-Elliott loss
	DropQueue               // tail drop at a full queue
	DropBlackhole           // inside a blackhole window
	DropList                // listed in Link.DropList
	DropNAT                 // sent to a NAT mapping that a rebinding retired
	DropNoRoute             // nobody listens at the destination
	DropReceiver            // the receiving endpoint's buffer is full, or it failed
)

var dropCauseNames = [...]string{"delivered", "loss", "queue", "blackhole", "droplist", "nat", "noroute", "receiver"}

// String names the cause, e.g. "loss" or "queue".
func (c DropCause) String() string {
	if int(c) < len(dropCauseNames) {
		return dropCauseNames[c]
	}
	return "unknown"
}

// A Verdict is the Impairer's decision for one datagram.
type Verdict struct {
	// Drop is NotDropped unless the datagram is lost; then Copies is 0.
	Drop DropCause
	// Copies is 1, or 2 for a duplicated datagram; At holds the delivery
	// time of each copy, in order.
	Copies int
	At     [2]time.Time
	// Corrupt asks for the byte at CorruptOffset to be XORed with
	// CorruptXOR, which is never zero, so the byte really changes. Apply
	// does it.
	Corrupt       bool
	CorruptOffset int
	CorruptXOR    byte
	// Reordered says that the first copy was held back by ReorderDelay.
	Reordered bool
}

// Apply corrupts p in place if the verdict says so. p must be the datagram
// (or a copy of it) that the verdict was made for.
func (v *Verdict) Apply(p []byte) {
	if v.Corrupt && v.CorruptOffset < len(p) {
		p[v.CorruptOffset] ^= v.CorruptXOR
	}
}

// Stats counts what happened to the datagrams of one direction. The
// Impairer fills the ingress counters; the Network and the Relay add
// delivery and the drops that happen after the link (NAT, routing).
type Stats struct {
	Offered      uint64 `json:"offered"` // datagrams that reached the link
	OfferedBytes uint64 `json:"offered_bytes"`

	Delivered      uint64 `json:"delivered"` // copies handed to the receiver
	DeliveredBytes uint64 `json:"delivered_bytes"`

	LostRandom    uint64 `json:"lost_random"`
	LostQueue     uint64 `json:"lost_queue"`
	LostBlackhole uint64 `json:"lost_blackhole"`
	LostDropList  uint64 `json:"lost_droplist"`
	LostNAT       uint64 `json:"lost_nat"`
	LostNoRoute   uint64 `json:"lost_noroute"`
	LostReceiver  uint64 `json:"lost_receiver"`

	Corrupted  uint64 `json:"corrupted"`
	Duplicated uint64 `json:"duplicated"`
	Reordered  uint64 `json:"reordered"`

	// ECN counts the offered datagrams by IP ECN codepoint, indexed by
	// NotECT, ECT1, ECT0 and CE (the Relay reads them; the in-process
	// Network does not).
	ECN [4]uint64 `json:"ecn"`
}

func (s *Stats) countECN(ecn uint8) { s.ECN[ecn&3]++ }

// Dropped returns the number of datagrams dropped for any cause.
func (s Stats) Dropped() uint64 {
	return s.LostRandom + s.LostQueue + s.LostBlackhole + s.LostDropList + s.LostNAT + s.LostNoRoute + s.LostReceiver
}

func (s *Stats) drop(c DropCause) {
	switch c {
	case DropLoss:
		s.LostRandom++
	case DropQueue:
		s.LostQueue++
	case DropBlackhole:
		s.LostBlackhole++
	case DropList:
		s.LostDropList++
	case DropNAT:
		s.LostNAT++
	case DropNoRoute:
		s.LostNoRoute++
	case DropReceiver:
		s.LostReceiver++
	}
}

// An Impairer applies a Link to the datagrams of one direction. It is a
// pure state machine: it never reads the clock, so the caller passes the
// arrival time, and all randomness comes from its seed, so the same
// datagrams at the same times get the same verdicts. It is not safe for
// concurrent use.
type Impairer struct {
	link     Link
	rng      *rand.Rand
	epoch    time.Time
	hasEpoch bool
	stats    Stats

	arrivals   int
	dropList   map[int]bool
	lossRun    int
	corruptRun int
	geBad      bool

	// The serialiser: busyUntil is when the last admitted datagram has
	// left, carry the fraction of a nanosecond it still owes, so that a
	// long back-to-back train keeps the exact rate.
	busyUntil time.Time
	carry     int64
	// queue holds the start of serialisation and the size of admitted
	// datagrams; those starting after now are the ones waiting.
	queue       []queued
	queueHead   int
	queuedBytes int
	// lastAt is the latest delivery of a datagram that was not reordered;
	// jitter never delivers before it.
	lastAt time.Time
}

type queued struct {
	start time.Time
	size  int
}

// NewImpairer returns an Impairer for l whose random choices come from
// seed.
func NewImpairer(l Link, seed uint64) (*Impairer, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	im := &Impairer{
		link: l,
		// PCG's second word is a fixed constant so that one number is
		// enough to replay a run.
		rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
	}
	if len(l.DropList) > 0 {
		im.dropList = make(map[int]bool, len(l.DropList))
		for _, n := range l.DropList {
			im.dropList[n] = true
		}
	}
	return im, nil
}

// Link returns the configuration the Impairer applies.
func (im *Impairer) Link() Link { return im.link }

// SetEpoch sets t0, from which blackhole windows are measured. Without it,
// the first datagram's arrival is the epoch.
func (im *Impairer) SetEpoch(t time.Time) { im.epoch, im.hasEpoch = t, true }

// Epoch returns t0, or the zero time before any datagram and SetEpoch.
func (im *Impairer) Epoch() time.Time { return im.epoch }

// Stats returns the counters so far.
func (im *Impairer) Stats() Stats { return im.stats }

// Process decides the fate of datagram p arriving at the link at now.
// Arrival times must not go backwards. p is read (to spare Version
// Negotiation packets from corruption) but never modified.
func (im *Impairer) Process(now time.Time, p []byte) Verdict {
	if !im.hasEpoch {
		im.SetEpoch(now)
	}
	var v Verdict
	im.arrivals++
	im.stats.Offered++
	im.stats.OfferedBytes += uint64(len(p))
	switch {
	case im.inBlackhole(now.Sub(im.epoch)):
		v.Drop = DropBlackhole
	case im.dropList[im.arrivals]:
		v.Drop = DropList
	case im.lose():
		v.Drop = DropLoss
	}
	if v.Drop != NotDropped {
		im.stats.drop(v.Drop)
		return v
	}
	im.corrupt(p, &v)

	wire := len(p) + im.link.Overhead
	im.drain(now)
	if !im.admit(wire) {
		v.Drop, v.Corrupt = DropQueue, false
		im.stats.drop(DropQueue)
		return v
	}
	if v.Corrupt {
		im.stats.Corrupted++
	}
	v.Reordered = im.link.Reorder > 0 && im.rng.Float64() < im.link.Reorder
	if v.Reordered {
		im.stats.Reordered++
	}
	v.At[0] = im.deliverAt(im.serialise(now, wire), v.Reordered)
	v.Copies = 1
	if im.link.Duplicate > 0 && im.rng.Float64() < im.link.Duplicate {
		im.drain(now)
		if im.admit(wire) {
			v.At[1] = im.deliverAt(im.serialise(now, wire), false)
			v.Copies = 2
			im.stats.Duplicated++
		}
	}
	return v
}

func (im *Impairer) inBlackhole(since time.Duration) bool {
	if len(im.link.Blackholes) == 0 || since < 0 {
		return false
	}
	if p := im.link.BlackholePeriod; p > 0 {
		since %= p
	}
	for _, w := range im.link.Blackholes {
		if since >= w.From && since < w.To {
			return true
		}
	}
	return false
}

// lose draws the random loss of one datagram, with the run cap.
func (im *Impairer) lose() bool {
	var lost bool
	if b := im.link.Burst; b != nil {
		if im.geBad {
			if b.R > 0 && im.rng.Float64() < b.R {
				im.geBad = false
			}
		} else if b.P > 0 && im.rng.Float64() < b.P {
			im.geBad = true
		}
		pl := b.LossGood
		if im.geBad {
			pl = b.LossBad
		}
		lost = pl > 0 && im.rng.Float64() < pl
	} else {
		lost = im.link.Loss > 0 && im.rng.Float64() < im.link.Loss
	}
	if lost && im.link.MaxRun > 0 && im.lossRun >= im.link.MaxRun {
		lost = false
	}
	if lost {
		im.lossRun++
	} else {
		im.lossRun = 0
	}
	return lost
}

// corrupt draws the corruption of one datagram, with the run cap.
func (im *Impairer) corrupt(p []byte, v *Verdict) {
	if im.link.Corrupt == 0 || len(p) == 0 || isVersionNegotiation(p) {
		return
	}
	hit := im.rng.Float64() < im.link.Corrupt
	if hit && im.link.MaxRun > 0 && im.corruptRun >= im.link.MaxRun {
		hit = false
	}
	if !hit {
		im.corruptRun = 0
		return
	}
	im.corruptRun++
	within := im.link.CorruptWithin
	if within == 0 {
		within = defaultCorruptWithin
	}
	within = min(within, len(p))
	v.Corrupt = true
	v.CorruptOffset = im.rng.IntN(within)
	v.CorruptXOR = byte(1 + im.rng.IntN(255))
}

// isVersionNegotiation recognises a QUIC Version Negotiation packet: a long
// header whose version is 0 (RFC 8999 §6, RFC 9000 §17.2.1).
func isVersionNegotiation(p []byte) bool {
	return len(p) >= 5 && p[0]&0x80 != 0 && p[1]|p[2]|p[3]|p[4] == 0
}

// drain forgets queued datagrams whose serialisation has started by now:
// they no longer take a place in the queue.
func (im *Impairer) drain(now time.Time) {
	for im.queueHead < len(im.queue) && !im.queue[im.queueHead].start.After(now) {
		im.queuedBytes -= im.queue[im.queueHead].size
		im.queueHead++
	}
	if im.queueHead == len(im.queue) {
		im.queue, im.queueHead = im.queue[:0], 0
	} else if im.queueHead > 1024 && im.queueHead > len(im.queue)/2 {
		n := copy(im.queue, im.queue[im.queueHead:])
		im.queue, im.queueHead = im.queue[:n], 0
	}
}

// admit reports whether a datagram of wire bytes finds room in the queue.
func (im *Impairer) admit(wire int) bool {
	if im.link.Rate == 0 {
		return true // no serialiser, so nothing ever waits
	}
	waiting := len(im.queue) - im.queueHead
	if im.link.QueuePackets > 0 && waiting >= im.link.QueuePackets {
		return false
	}
	if im.link.QueueBytes > 0 && im.queuedBytes+wire > im.link.QueueBytes {
		return false
	}
	return true
}

// serialise puts a datagram of wire bytes on the link and returns when its
// last bit has left.
func (im *Impairer) serialise(now time.Time, wire int) time.Time {
	if im.link.Rate == 0 {
		return now
	}
	start := im.busyUntil
	if !start.After(now) {
		start, im.carry = now, 0
	}
	num := int64(wire)*8*int64(time.Second) + im.carry
	im.busyUntil = start.Add(time.Duration(num / im.link.Rate))
	im.carry = num % im.link.Rate
	if start.After(now) {
		im.queue = append(im.queue, queued{start, wire})
		im.queuedBytes += wire
	}
	return im.busyUntil
}

// deliverAt adds the propagation delay to a departure time.
func (im *Impairer) deliverAt(depart time.Time, reordered bool) time.Time {
	d := im.link.Delay
	if j := im.link.Jitter; j > 0 {
		d = max(0, d+time.Duration(im.rng.Int64N(2*int64(j)+1))-j)
	}
	at := depart.Add(d)
	if reordered {
		extra := im.link.ReorderDelay
		if extra == 0 {
			extra = defaultReorderDelay
		}
		return at.Add(extra)
	}
	if at.Before(im.lastAt) {
		at = im.lastAt
	}
	im.lastAt = at
	return at
}
