package interop

import (
	"time"

	"github.com/quiver-quic/quiver/interop/analyze"
	"github.com/quiver-quic/quiver/quic/wire"
)

// The values §5.24 asks of the data sender's ACK_FREQUENCY frame: an ACK
// every 10 packets, a Requested Max Ack Delay of max(20 ms, the client's
// min_ack_delay), the default packet reordering threshold.
const (
	afThreshold  = 9
	afMinDelay   = 20 * time.Millisecond
	afReordering = 3
	// afMinRatio is the least ack-eliciting server packets per client ACK
	// frame once the frame is in force; 1:10 asked, batching and the
	// delay timer allowed for.
	afMinRatio = 5
)

// judgeAckFrequency is §5.24 (ackfrequency, a project test case): the
// client advertises min_ack_delay, the server as data sender asks for an
// ACK every 10 packets with ACK_FREQUENCY, in 1-RTT packets only, and the
// client's ACK ratio follows it. Everything is read from the server's
// decrypted capture.
func judgeAckFrequency(c *Cell) {
	c.checkHS(1)
	c.checkFiles()
	cn := firstCompleted(c.ServerTrace)
	if cn == nil || cn.ClientHello == nil || cn.ClientHello.TransportParameters == nil {
		c.add("min-ack-delay", Base, false, "client transport parameters not read")
		return
	}
	tp := cn.ClientHello.TransportParameters
	// draft-ietf-quic-ack-frequency-14 §3: "An endpoint's min_ack_delay
	// MUST NOT be greater than its max_ack_delay."
	c.add("min-ack-delay", Base, tp.HasMinAckDelay && tp.MinAckDelay <= tp.MaxAckDelay*1000,
		"client min_ack_delay %v %dus, max_ack_delay %dms", tp.HasMinAckDelay, tp.MinAckDelay, tp.MaxAckDelay)
	judgeAckFrequencyFrames(c, cn, time.Duration(tp.MinAckDelay)*time.Microsecond)
}

// judgeAckFrequencyFrames checks the server's ACK_FREQUENCY frames and the
// client's ACK ratio that follows the first of them.
func judgeAckFrequencyFrames(c *Cell, cn *analyze.Conn, clientMin time.Duration) {
	var first *analyze.Packet
	var fields *analyze.AckFrequencyFields
	n, outside := 0, 0
	for _, p := range cn.Packets {
		if p.Dir != analyze.FromServer {
			continue
		}
		for _, f := range p.Frames {
			if f.Type != wire.FrameTypeAckFrequency {
				continue
			}
			n++
			// draft-ietf-quic-ack-frequency-14 §4: "ACK_FREQUENCY frames
			// are only sent in 1-RTT packets" (0-RTT excluded: only
			// a data sender asks, and §5.24 wants them after
			// confirmation).
			if p.Type != wire.PacketType1RTT {
				outside++
			}
			if first == nil && p.Type == wire.PacketType1RTT && f.AckFrequency != nil {
				first, fields = p, f.AckFrequency
			}
		}
	}
	c.add("ack-frequency-sent", Base, first != nil && outside == 0, "server sent %d ACK_FREQUENCY frames, %d outside 1-RTT packets", n, outside)
	if first == nil {
		c.skip("ack-frequency-values", Base, "no ACK_FREQUENCY frame")
		c.skip("ack-ratio", Base, "no ACK_FREQUENCY frame")
		return
	}
	wantDelay := max(afMinDelay, clientMin)
	c.add("ack-frequency-values", Base,
		fields.Threshold == afThreshold && fields.MaxAckDelay == uint64(wantDelay.Microseconds()) && fields.Reordering == afReordering,
		"threshold %d (want %d), requested max ack delay %dus (want %dus), reordering threshold %d (want %d)",
		fields.Threshold, afThreshold, fields.MaxAckDelay, wantDelay.Microseconds(), fields.Reordering, afReordering)
	w := ackRatioAfter(cn, first)
	if !w.acked {
		c.add("ack-ratio", Base, false, "no client ACK acknowledges the ACK_FREQUENCY packet %d", first.PN)
		return
	}
	ratio := 0.0
	if w.acks > 0 {
		ratio = float64(w.elicit) / float64(w.acks)
	}
	c.add("ack-ratio", Base, w.acks > 0 && ratio >= afMinRatio,
		"after the client acknowledged ACK_FREQUENCY (packet %d) until the last STREAM frame: "+
			"%d ack-eliciting server packets per %d client ACK frames (ratio %.1f, want %d+)",
		first.PN, w.elicit, w.acks, ratio, afMinRatio)
}

// ackWindow counts, on the server's trace, the ack-eliciting 1-RTT packets
// the server sent and the ACK frames the client sent from the first client
// ACK that acknowledges the ACK_FREQUENCY packet (so the frame had reached
// the client and was in force) until the server's last STREAM frame.
type ackWindow struct {
	acked        bool
	elicit, acks int
}

func ackRatioAfter(cn *analyze.Conn, af *analyze.Packet) ackWindow {
	var w ackWindow
	last := -1
	for i, p := range cn.Packets {
		if p.Dir == analyze.FromServer && p.Type == wire.PacketType1RTT && p.Has(wire.FrameTypeStream) {
			last = i
		}
	}
	for i, p := range cn.Packets {
		if i > last {
			break
		}
		if p.Type != wire.PacketType1RTT || !p.Decrypted {
			continue
		}
		if p.Dir == analyze.FromClient {
			for _, f := range p.Frames {
				if f.Type != wire.FrameTypeAck && f.Type != wire.FrameTypeAckECN {
					continue
				}
				if w.acked {
					w.acks++
				} else if acks(f.Ranges, af.PN) {
					w.acked = true
				}
			}
			continue
		}
		if w.acked && p.AckEliciting() {
			w.elicit++
		}
	}
	return w
}

// acks reports whether an ACK frame's ranges contain pn.
func acks(ranges []wire.AckRange, pn uint64) bool {
	for _, r := range ranges {
		if r.Smallest <= pn && pn <= r.Largest {
			return true
		}
	}
	return false
}
