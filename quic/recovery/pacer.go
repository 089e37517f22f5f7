package recovery

import (
	"math/bits"
	"time"
)

// DefaultBurstPackets is the pacer's default burst allowance in packets: a
// sender may send this many full-sized packets back to back, at the start
// or after an idle period. "Senders SHOULD limit bursts to the initial
// congestion window", which is about ten packets.
const DefaultBurstPackets = 10

// Pacer spreads in-flight packets over the RTT (RFC 9002 §7.7): "A sender
// SHOULD pace sending of all in-flight packets based on input from the
// congestion controller." It is the leaky bucket the RFC suggests: "the
// capacity of the "bucket" is limited to the maximum burst size and the rate
// the "bucket" fills is determined by the above function", with rate = N *
// congestion_window / smoothed_rtt and N = 5/4. The arithmetic is integer.
//
// Before sending an in-flight packet the engine calls NextSendTime; if the
// result is after now it arms a timer for it instead of sending. After
// sending it calls OnSent. "packets containing only ACK frames SHOULD
// therefore not be paced": the engine does not ask the pacer for those.
type Pacer struct {
	// BurstPackets is the bucket capacity in full-sized packets;
	// DefaultBurstPackets when zero.
	BurstPackets int

	mds    int
	cap    int // bucket capacity for the current rate
	budget int // bytes that may be sent at last
	last   time.Time
	cwnd   int
	srtt   time.Duration
}

// NewPacer returns a pacer for maxDatagramSize with a full bucket.
func NewPacer(maxDatagramSize int) Pacer {
	return Pacer{mds: max(maxDatagramSize, MinMaxDatagramSize)}
}

// SetMaxDatagramSize changes the size of a full packet.
func (p *Pacer) SetMaxDatagramSize(size int) { p.mds = max(size, MinMaxDatagramSize) }

func (p *Pacer) capacity() int {
	n := p.BurstPackets
	if n <= 0 {
		n = DefaultBurstPackets
	}
	c := n * p.mds
	if p.srtt > 0 {
		// Never smaller than what the rate brings in one timer
		// granularity, so that a timer that fires late loses nothing.
		c = max(c, p.refill(Granularity))
	}
	return c
}

// refill returns the bytes the rate brings in elapsed:
// elapsed * 5/4 * cwnd / srtt, computed in 128 bits.
func (p *Pacer) refill(elapsed time.Duration) int {
	if elapsed <= 0 || p.srtt <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(elapsed), uint64(p.cwnd)*5)
	div := uint64(p.srtt) * 4
	if hi >= div {
		return 1 << 40 // overflow: far more than any bucket
	}
	q, _ := bits.Div64(hi, lo, div)
	return int(min(q, 1<<40))
}

// update brings the bucket to now with the rate of cwnd and srtt.
func (p *Pacer) update(now time.Time) {
	if p.mds == 0 {
		p.mds = MinMaxDatagramSize
	}
	p.cap = p.capacity()
	if p.last.IsZero() {
		// The burst allowance at start.
		p.last = now
		p.budget = p.cap
		return
	}
	elapsed := now.Sub(p.last)
	if elapsed <= 0 {
		return
	}
	p.last = now
	p.budget = min(p.budget+p.refill(elapsed), p.cap)
}

// NextSendTime returns when the next full-sized in-flight packet may be
// sent: now when the bucket holds a packet's worth, later otherwise. cwnd is
// the congestion window in bytes and srtt the smoothed RTT; with either
// zero, pacing is off.
func (p *Pacer) NextSendTime(now time.Time, cwnd int, srtt time.Duration) time.Time {
	p.cwnd, p.srtt = cwnd, srtt
	p.update(now)
	if cwnd <= 0 || srtt <= 0 || p.budget >= p.mds {
		return now
	}
	// interval = (smoothed_rtt * packet_size / congestion_window) / N for
	// the bytes still missing, rounded up.
	need := uint64(p.mds - p.budget)
	hi, lo := bits.Mul64(need, uint64(srtt)*4)
	div := uint64(cwnd) * 5
	if hi >= div {
		return now.Add(srtt)
	}
	q, r := bits.Div64(hi, lo, div)
	if r != 0 {
		q++
	}
	return now.Add(time.Duration(min(q, uint64(srtt))))
}

// OnSent takes bytes of an in-flight packet sent at now out of the bucket.
func (p *Pacer) OnSent(now time.Time, bytes int) {
	p.update(now)
	// The budget may go negative when a packet is larger than what was
	// left; the debt delays the next packet accordingly.
	p.budget = max(p.budget-bytes, -p.cap)
}

// Budget returns the bytes that may be sent at once as of the last call.
func (p *Pacer) Budget() int { return p.budget }
