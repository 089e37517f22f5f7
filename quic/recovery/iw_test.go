package recovery

import (
	"testing"
	"time"
)

// TestInitialWindowPackets: SetInitialWindowPackets sets the starting
// window, and a reset after a migration (RFC 9000 §9.4) returns to it, not
// to RFC 9002's default.
func TestInitialWindowPackets(t *testing.T) {
	for _, cc := range []interface {
		CongestionController
		SetInitialWindowPackets(int)
		Reset()
	}{NewNewReno(1200), NewCubic(1200)} {
		if got, want := cc.CongestionWindow(), InitialWindow(1200); got != want {
			t.Errorf("%T default: window %d, want %d", cc, got, want)
		}
		cc.SetInitialWindowPackets(32)
		if got := cc.CongestionWindow(); got != 32*1200 {
			t.Errorf("%T: window %d, want %d", cc, got, 32*1200)
		}
		now := time.Unix(1000, 0)
		cc.OnCongestionEvent(now.Add(time.Second), now, 0)
		cc.Reset()
		if got := cc.CongestionWindow(); got != 32*1200 {
			t.Errorf("%T after Reset: window %d, want %d", cc, got, 32*1200)
		}
	}
}
