package interop

import (
	"testing"
	"time"

	"github.com/quiver-quic/quiver/interop/analyze"
	"github.com/quiver-quic/quiver/quic/wire"
)

// afTrace builds a server trace of an ackfrequency run: the client
// advertises min_ack_delay 1 ms, the server sends ACK_FREQUENCY (T 9, 20
// ms, reordering 3) in 1-RTT packet 5, the client acknowledges it, then
// 100 server STREAM packets follow with a client ACK every `every` of them.
func afTrace(every int, mutate func(cn *analyze.Conn)) *analyze.Trace {
	t0 := time.Unix(1_800_000_000, 0)
	at := 0
	pkt := func(dir analyze.Direction, pn uint64, frames ...analyze.Frame) *analyze.Packet {
		at++
		return &analyze.Packet{Time: t0.Add(time.Duration(at) * time.Millisecond), Dir: dir, Type: wire.PacketType1RTT, PN: pn, Decrypted: true, Frames: frames}
	}
	ack := func(largest uint64) analyze.Frame {
		return analyze.Frame{Type: wire.FrameTypeAck, Largest: largest, Ranges: []wire.AckRange{{Smallest: 0, Largest: largest}}}
	}
	stream := analyze.Frame{Type: wire.FrameTypeStream}
	cn := &analyze.Conn{ClientHandshakePackets: 1, AppKeys: true, HandshakeDone: true,
		ClientHello: &analyze.ClientHello{TransportParameters: &wire.TransportParameters{MaxAckDelay: 25, HasMinAckDelay: true, MinAckDelay: 1000}}}
	cn.Packets = append(cn.Packets,
		pkt(analyze.FromServer, 5, stream, analyze.Frame{Type: wire.FrameTypeAckFrequency,
			AckFrequency: &analyze.AckFrequencyFields{Threshold: 9, MaxAckDelay: 20_000, Reordering: 3}}),
		pkt(analyze.FromClient, 1, ack(5)))
	pn := uint64(6)
	for i := 1; i <= 100; i++ {
		cn.Packets = append(cn.Packets, pkt(analyze.FromServer, pn, stream))
		if i%every == 0 {
			cn.Packets = append(cn.Packets, pkt(analyze.FromClient, pn, ack(pn)))
		}
		pn++
	}
	if mutate != nil {
		mutate(cn)
	}
	return &analyze.Trace{Conns: []*analyze.Conn{cn}}
}

// TestJudgeAckFrequency checks §5.24's judgement on a run that follows it
// and on runs broken in one way each: a capture without ACK_FREQUENCY
// fails, and so does a client that keeps acknowledging every 2 packets.
func TestJudgeAckFrequency(t *testing.T) {
	tc := testCase(t, "ackfrequency")
	for _, x := range []struct {
		name    string
		every   int
		mutate  func(cn *analyze.Conn)
		failed  []string
		skipped []string
	}{
		{"follows", 10, nil, nil, nil},
		{"no-frame", 10, func(cn *analyze.Conn) { cn.Packets[0].Frames = cn.Packets[0].Frames[:1] },
			[]string{"ack-frequency-sent"}, []string{"ack-frequency-values", "ack-ratio"}},
		{"client-ignores", 2, nil, []string{"ack-ratio"}, nil},
		{"wrong-values", 10, func(cn *analyze.Conn) { cn.Packets[0].Frames[1].AckFrequency.Threshold = 1 }, []string{"ack-frequency-values"}, nil},
		{"in-handshake-packet", 10, func(cn *analyze.Conn) {
			hs := *cn.Packets[0]
			hs.Type, hs.Frames = wire.PacketTypeHandshake, hs.Frames[1:]
			cn.Packets = append([]*analyze.Packet{&hs}, cn.Packets...)
		}, []string{"ack-frequency-sent"}, nil},
		{"never-acknowledged", 10, func(cn *analyze.Conn) {
			// Packet 5 (the frame's) is lost: no client ACK covers it.
			for _, p := range cn.Packets {
				for i := range p.Frames {
					for j := range p.Frames[i].Ranges {
						p.Frames[i].Ranges[j].Smallest = 6
					}
				}
			}
		}, []string{"ack-ratio"}, nil},
		{"no-min-ack-delay", 10, func(cn *analyze.Conn) { cn.ClientHello.TransportParameters.HasMinAckDelay = false }, []string{"min-ack-delay"}, nil},
	} {
		t.Run(x.name, func(t *testing.T) {
			c := &Cell{Test: tc, ServerTrace: afTrace(x.every, x.mutate), Downloads: t.TempDir()}
			judgeAckFrequency(c)
			want := map[string]string{}
			for _, id := range x.failed {
				want[id] = Failed
			}
			for _, id := range x.skipped {
				want[id] = Skipped
			}
			seen := map[string]bool{}
			for _, ch := range c.Checks {
				seen[ch.ID] = true
				if ch.ID == "handshakes" || ch.ID == "files" {
					continue // not built into these traces
				}
				w, ok := want[ch.ID]
				if !ok {
					w = Passed
				}
				if ch.Status != w {
					t.Errorf("%s: %s (%s), want %s", ch.ID, ch.Status, ch.Detail, w)
				}
			}
			for _, id := range []string{"min-ack-delay", "ack-frequency-sent", "ack-frequency-values", "ack-ratio"} {
				if !seen[id] {
					t.Errorf("check %s not made", id)
				}
			}
		})
	}
}
