package recovery

import (
	"reflect"
	"testing"
	"time"
)

// recv is one received packet in a table-driven AckTracker test.
type recv struct {
	pn           int64
	notEliciting bool
	ecn          ECN
	// wantImmediate: an ACK is due at once after this packet.
	wantImmediate bool
	// sendAck: the engine sends an ACK after this packet when one is due
	// (at once or by the timer, which these tests do not wait for).
	sendAck bool
}

func runRecv(t *testing.T, tr *AckTracker, steps []recv) {
	t.Helper()
	now := epoch
	for i, s := range steps {
		now = now.Add(time.Millisecond)
		if !tr.OnPacketReceived(s.pn, !s.notEliciting, s.ecn, now) {
			t.Fatalf("step %d: packet %d refused", i, s.pn)
		}
		if got := tr.ShouldSendAck(now); got != s.wantImmediate {
			t.Fatalf("step %d (pn %d): immediate ACK %v, want %v (deadline %v)", i, s.pn, got, s.wantImmediate, tr.AckDeadline().Sub(now))
		}
		if s.sendAck && tr.ShouldSendAck(now) {
			tr.OnAckSent(now)
		}
	}
}

func TestAckTrackerRFC9000(t *testing.T) {
	tests := []struct {
		name  string
		space Space
		steps []recv
	}{
		{
			// "An endpoint MUST acknowledge all ack-eliciting Initial and
			// Handshake packets immediately".
			name: "initial immediate", space: SpaceInitial,
			steps: []recv{{pn: 0, wantImmediate: true, sendAck: true}, {pn: 1, notEliciting: true}},
		},
		{
			// "A receiver SHOULD send an ACK frame after receiving at least
			// two ack-eliciting packets."
			name: "every second packet", space: SpaceAppData,
			steps: []recv{
				{pn: 0}, {pn: 1, wantImmediate: true, sendAck: true},
				{pn: 2}, {pn: 3, notEliciting: true}, {pn: 4, wantImmediate: true, sendAck: true},
			},
		},
		{
			// "when the received packet has a packet number less than
			// another ack-eliciting packet that has been received, or when
			// the packet has a packet number larger than the
			// highest-numbered ack-eliciting packet that has been received
			// and there are missing packets between".
			name: "out of order", space: SpaceAppData,
			steps: []recv{
				{pn: 0}, {pn: 2, wantImmediate: true, sendAck: true},
				{pn: 1, wantImmediate: true, sendAck: true},
				{pn: 3},
			},
		},
		{
			name: "gap filled by non-ack-eliciting packet", space: SpaceAppData,
			steps: []recv{{pn: 0, wantImmediate: false}, {pn: 1, notEliciting: true}, {pn: 2, wantImmediate: true}},
		},
		{
			// "packets marked with the ECN Congestion Experienced (CE)
			// codepoint in the IP header SHOULD be acknowledged immediately"
			name: "CE", space: SpaceAppData,
			steps: []recv{{pn: 0, ecn: ECT0}, {pn: 1, ecn: CE, wantImmediate: true, sendAck: true}, {pn: 2, ecn: CE, wantImmediate: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runRecv(t, NewAckTracker(tt.space, 25*ms), tt.steps)
		})
	}
}

func TestAckTrackerDelayAndFrame(t *testing.T) {
	tr := NewAckTracker(SpaceAppData, 25*ms)
	if !tr.AckDeadline().IsZero() || tr.AckPending() {
		t.Fatal("deadline without packets")
	}
	tr.OnPacketReceived(0, false, NotECT, epoch)
	if !tr.AckDeadline().IsZero() || !tr.AckPending() {
		t.Fatal("a non-ack-eliciting packet set a deadline")
	}
	tr.OnPacketReceived(1, true, ECT0, at(ms))
	// "An endpoint MUST acknowledge all ack-eliciting 0-RTT and 1-RTT
	// packets within its max_ack_delay".
	if got := tr.AckDeadline(); !got.Equal(at(26 * ms)) {
		t.Fatalf("deadline %v", got.Sub(epoch))
	}
	tr.OnPacketReceived(5, false, CE, at(2*ms))
	tr.OnPacketReceived(3, false, ECT1, at(3*ms))
	if tr.ShouldSendAck(at(25*ms)) || !tr.ShouldSendAck(at(26*ms)) {
		t.Fatal("timer")
	}
	ranges := tr.AppendRanges(nil)
	if want := []AckRange{{5, 5}, {3, 3}, {0, 1}}; !reflect.DeepEqual(ranges, want) {
		t.Fatalf("ranges %v, want %v", ranges, want)
	}
	// The delay counts from the arrival of the largest, packet 5.
	if d := tr.AckDelay(at(26 * ms)); d != 24*ms {
		t.Fatalf("ack delay %v", d)
	}
	if e0, e1, ce, ok := tr.ECNCounts(); e0 != 1 || e1 != 1 || ce != 1 || !ok {
		t.Fatalf("ECN counts %d %d %d %v", e0, e1, ce, ok)
	}
	tr.OnAckSent(at(26 * ms))
	if !tr.AckDeadline().IsZero() || tr.AckPending() {
		t.Fatal("deadline after sending an ACK")
	}
	// Duplicates.
	for _, pn := range []int64{0, 1, 3, 5} {
		if !tr.IsDuplicate(pn) || tr.OnPacketReceived(pn, true, NotECT, at(30*ms)) {
			t.Fatalf("packet %d not a duplicate", pn)
		}
	}
	if tr.IsDuplicate(2) || tr.IsDuplicate(4) || tr.IsDuplicate(6) {
		t.Fatal("false duplicate")
	}
	// Filling the gaps merges ranges.
	tr.OnPacketReceived(2, true, NotECT, at(31*ms))
	tr.OnPacketReceived(4, true, NotECT, at(32*ms))
	if ranges := tr.AppendRanges(nil); !reflect.DeepEqual(ranges, []AckRange{{0, 5}}) {
		t.Fatalf("ranges %v", ranges)
	}
	// The peer acknowledged our ACK of 0..3: stop reporting them.
	tr.OnAckAcked(3)
	if ranges := tr.AppendRanges(nil); !reflect.DeepEqual(ranges, []AckRange{{4, 5}}) {
		t.Fatalf("ranges after ack of ack %v", ranges)
	}
	if !tr.IsDuplicate(2) {
		t.Fatal("forgotten packet not treated as duplicate")
	}
}

func TestAckTrackerRangeLimit(t *testing.T) {
	tr := NewAckTracker(SpaceAppData, 25*ms)
	tr.SetMaxRanges(4)
	// Every other packet: each makes a new range.
	for pn := int64(0); pn < 20; pn += 2 {
		tr.OnPacketReceived(pn, true, NotECT, epoch)
		if len(tr.AppendRanges(nil)) > 4 {
			t.Fatal("more ranges than the limit")
		}
	}
	ranges := tr.AppendRanges(nil)
	if want := []AckRange{{18, 18}, {16, 16}, {14, 14}, {12, 12}}; !reflect.DeepEqual(ranges, want) {
		t.Fatalf("ranges %v, want %v", ranges, want)
	}
	// Anything below the oldest kept range is a duplicate now.
	if !tr.IsDuplicate(9) || tr.IsDuplicate(11) {
		t.Fatal("old packet accepted")
	}
	if tr.OnPacketReceived(3, true, NotECT, epoch) {
		t.Fatal("packet below the kept ranges recorded")
	}
	// Inside the window it still works.
	if !tr.OnPacketReceived(17, true, NotECT, epoch) {
		t.Fatal("packet 17 refused")
	}
	if ranges := tr.AppendRanges(nil); ranges[0] != (AckRange{16, 18}) {
		t.Fatalf("ranges %v", ranges)
	}
}

// TestAckFrequencyReordering replays the worked example of
// docs/ack-frequency-engine.md §3: RT = 3, every packet ack-eliciting, ACKs
// sent only for reordering.
func TestAckFrequencyReordering(t *testing.T) {
	tr := NewAckTracker(SpaceAppData, 25*ms)
	if !tr.OnAckFrequency(0, 100, 100*ms, 3, epoch) {
		t.Fatal("frame ignored")
	}
	steps := []recv{
		{pn: 0}, {pn: 1}, {pn: 2}, {pn: 4}, {pn: 5},
		{pn: 6, wantImmediate: true, sendAck: true}, // condition 1: 6 - 3 >= 3
		{pn: 7}, {pn: 8},
		{pn: 3, wantImmediate: true, sendAck: true}, // condition 2: 3 <= 6 - 3
		{pn: 10}, {pn: 11},
		{pn: 12, wantImmediate: true, sendAck: true}, // condition 1: 12 - 9 >= 3
		{pn: 13},
	}
	runRecv(t, tr, steps)
	// RT = 5: a gap is reported once five packets above it arrived, and
	// its late arrival once it lies RT below the largest reported.
	tr = NewAckTracker(SpaceAppData, 25*ms)
	tr.OnAckFrequency(0, 100, 100*ms, 5, epoch)
	runRecv(t, tr, []recv{
		{pn: 0}, {pn: 2}, {pn: 3}, {pn: 4}, {pn: 5},
		{pn: 6, wantImmediate: true, sendAck: true}, // 6 - 1 >= 5
		{pn: 7},
		{pn: 1, wantImmediate: true, sendAck: true}, // 1 <= 6 - 5
		{pn: 9}, {pn: 10},
	})
}

func TestAckFrequencyThresholds(t *testing.T) {
	t.Run("T=9", func(t *testing.T) {
		tr := NewAckTracker(SpaceAppData, 25*ms)
		tr.OnAckFrequency(0, 9, 25*ms, 1, epoch)
		steps := make([]recv, 10)
		for i := range steps {
			steps[i] = recv{pn: int64(i)}
		}
		steps[9].wantImmediate = true // more than T = 9
		runRecv(t, tr, steps)
	})
	t.Run("T=0", func(t *testing.T) {
		tr := NewAckTracker(SpaceAppData, 25*ms)
		tr.OnAckFrequency(0, 0, 25*ms, 1, epoch)
		runRecv(t, tr, []recv{{pn: 0, wantImmediate: true, sendAck: true}, {pn: 1, wantImmediate: true}})
	})
	t.Run("RT=0 ignores reordering", func(t *testing.T) {
		tr := NewAckTracker(SpaceAppData, 25*ms)
		tr.OnAckFrequency(0, 10, 25*ms, 0, epoch)
		runRecv(t, tr, []recv{{pn: 0}, {pn: 5}, {pn: 2}, {pn: 1}})
	})
	t.Run("CE transition with T>1", func(t *testing.T) {
		tr := NewAckTracker(SpaceAppData, 25*ms)
		tr.OnAckFrequency(0, 10, 25*ms, 1, epoch)
		runRecv(t, tr, []recv{
			{pn: 0}, {pn: 1, ecn: CE, wantImmediate: true, sendAck: true},
			{pn: 2, ecn: CE}, {pn: 3}, {pn: 4, ecn: CE, wantImmediate: true},
		})
	})
	t.Run("sequence numbers", func(t *testing.T) {
		tr := NewAckTracker(SpaceAppData, 25*ms)
		if !tr.OnAckFrequency(5, 3, 40*ms, 2, epoch) || tr.OnAckFrequency(5, 7, 40*ms, 2, epoch) || tr.OnAckFrequency(4, 7, 40*ms, 2, epoch) {
			t.Fatal("stale or duplicate frame applied")
		}
		if th, d, rt := tr.Policy(); th != 3 || d != 40*ms || rt != 2 {
			t.Fatalf("policy %d %v %d", th, d, rt)
		}
	})
	t.Run("new values apply to pending packets", func(t *testing.T) {
		tr := NewAckTracker(SpaceAppData, 25*ms)
		tr.OnAckFrequency(0, 10, 100*ms, 1, epoch)
		for pn := int64(0); pn < 4; pn++ {
			tr.OnPacketReceived(pn, true, NotECT, epoch)
		}
		if tr.ShouldSendAck(epoch) {
			t.Fatal("ACK due below T")
		}
		tr.OnAckFrequency(1, 2, 100*ms, 1, at(ms))
		if !tr.ShouldSendAck(at(ms)) {
			t.Fatal("pending above the new T but no ACK due")
		}
	})
	t.Run("deadline counts from the last ACK", func(t *testing.T) {
		tr := NewAckTracker(SpaceAppData, 25*ms)
		tr.OnAckFrequency(0, 10, 20*ms, 1, epoch)
		tr.OnPacketReceived(0, true, NotECT, epoch)
		tr.OnAckSent(at(ms))
		tr.OnPacketReceived(1, true, NotECT, at(15*ms))
		if got := tr.AckDeadline(); !got.Equal(at(21 * ms)) {
			t.Fatalf("deadline %v, want last ACK + D", got.Sub(epoch))
		}
		tr.OnAckSent(at(21 * ms))
		tr.OnPacketReceived(2, true, NotECT, at(60*ms))
		if !tr.ShouldSendAck(at(60 * ms)) {
			t.Fatal("D since the last ACK already passed but no ACK due")
		}
	})
	t.Run("IMMEDIATE_ACK", func(t *testing.T) {
		tr := NewAckTracker(SpaceAppData, 25*ms)
		tr.OnAckFrequency(0, 10, 25*ms, 1, epoch)
		tr.OnImmediateAck(epoch)
		tr.OnPacketReceived(0, true, NotECT, epoch)
		if !tr.ShouldSendAck(epoch) {
			t.Fatal("IMMEDIATE_ACK ignored")
		}
		tr.OnAckSent(epoch)
		tr.OnPacketReceived(1, true, NotECT, at(ms))
		if tr.ShouldSendAck(at(ms)) {
			t.Fatal("IMMEDIATE_ACK outlived the ACK it asked for")
		}
	})
}

func BenchmarkAckTrackerInOrder(b *testing.B) {
	tr := NewAckTracker(SpaceAppData, 25*ms)
	now := epoch
	var ranges []AckRange
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		now = now.Add(10 * time.Microsecond)
		tr.OnPacketReceived(int64(i), true, ECT0, now)
		if tr.ShouldSendAck(now) {
			ranges = tr.AppendRanges(ranges[:0])
			_ = tr.AckDelay(now)
			tr.OnAckSent(now)
		}
	}
}
