package quic

import (
	"time"

	"github.com/quiver-quic/quiver/quic/recovery"
)

// pacerBurst is the pacer's bucket in full-sized packets: enough for one
// GSO batch.
const pacerBurst = 32

// pacer spreads in-flight packets over the RTT (RFC 9002 §7.7) with
// recovery.Pacer.
type pacer struct {
	p    recovery.Pacer
	next time.Time // when the pacer allows the next in-flight packet; zero if now
}

func (p *pacer) init() {
	p.p = recovery.NewPacer(maxDatagramSize)
	p.p.BurstPackets = pacerBurst
}

// allow reports whether an in-flight packet may leave now.
func (l *lossState) pacerAllows(now time.Time) bool {
	if l.noPacing {
		// Config.DisablePacing: RFC 9002 §7.7 "Senders MUST either use
		// pacing or limit such bursts"; the congestion window limits them.
		return true
	}
	t := l.pacer.p.NextSendTime(now, l.cc.CongestionWindow(), l.ld.RTT().Smoothed())
	if t.After(now) {
		l.pacer.next = t
		return false
	}
	l.pacer.next = time.Time{}
	return true
}

func (l *lossState) pacerDeadline(now time.Time, c *Conn) time.Time { return l.pacer.next }
