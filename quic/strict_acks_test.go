package quic

import (
	"testing"
	"time"

	"github.com/quiver-quic/quiver/netem"
)

// TestStrictAcks downloads over a link without a rate limit, so that the
// server's flights arrive in bursts: by default the receiver acknowledges
// once per burst it takes in (RFC 9000 §13.2.2 allows it), with
// Config.StrictAcks once per two ack-eliciting packets, RFC 9000's
// baseline ("A receiver SHOULD send an ACK frame after
// receiving at least two ack-eliciting packets", §13.2.2).
func TestStrictAcks(t *testing.T) {
	l := netem.Link{Delay: 10 * time.Millisecond}
	const size = 1 << 20
	batched := ackGoodputDownload(t, l, AckFrequencyPolicy{}, size)
	strict := ackGoodputDownload(t, l, AckFrequencyPolicy{}, size, func(c *Config) { c.StrictAcks = true })
	per := func(r ackGoodputRun) float64 { return float64(r.data) / float64(max(r.acks, 1)) }
	t.Logf("1 MiB over 10 ms, no rate limit: batched %d server packets, %d ACK packets (one per %.1f); strict %d, %d (one per %.1f)",
		batched.data, batched.acks, per(batched), strict.data, strict.acks, per(strict))
	if p := per(strict); p > 2.2 || p < 1.5 {
		t.Errorf("strict receiver: one ACK per %.2f server packets, want about 2", p)
	}
	// Without StrictAcks the same download is acknowledged less often
	// whenever datagrams queue up behind one another (here one ACK per
	// 2.6): strict never sends fewer ACKs.
	if strict.acks < batched.acks {
		t.Errorf("strict receiver sent %d ACK packets, fewer than the batched receiver's %d", strict.acks, batched.acks)
	}
}
