package recovery

import "testing"

// TestPMTUProbeLossIsNoCongestion: a lost DPLPMTUD probe leaves bytes in
// flight like any packet but does not shrink the window (RFC 9000 §14.4),
// while the loss of an ordinary packet does.
func TestPMTUProbeLossIsNoCongestion(t *testing.T) {
	for _, probe := range []bool{true, false} {
		l, cc := newTestLD(t)
		l.OnPacketSent(SpaceAppData, SentPacket{PacketNumber: 0, Size: 1400, AckEliciting: true, InFlight: true, PMTUProbe: probe}, epoch)
		if l.BytesInFlight() != 1400 {
			t.Fatalf("probe=%v: bytes in flight %d, want 1400", probe, l.BytesInFlight())
		}
		for pn := int64(1); pn <= 3; pn++ {
			sendData(l, SpaceAppData, pn, at(ms))
		}
		before := cc.CongestionWindow()
		res, err := l.OnAckReceived(SpaceAppData, ack(AckRange{1, 3}), at(50*ms))
		if err != nil {
			t.Fatal(err)
		}
		if !equalPNs(res.Lost, 0) {
			t.Fatalf("probe=%v: lost %v, want [0]", probe, pns(res.Lost))
		}
		after := cc.CongestionWindow()
		if probe && after < before {
			t.Errorf("a lost PMTU probe shrank the window from %d to %d", before, after)
		}
		if !probe && after >= before {
			t.Errorf("a lost packet left the window at %d (was %d)", after, before)
		}
		if l.BytesInFlight() != 0 {
			t.Errorf("probe=%v: bytes in flight %d after the ACK", probe, l.BytesInFlight())
		}
	}
}
