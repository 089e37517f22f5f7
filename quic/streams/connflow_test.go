package streams

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestConnFlowReceive(t *testing.T) {
	c := NewConnFlow(ConnFlowConfig{Window: 1000})
	a := NewRecvStream(RecvConfig{Window: 800}, c)
	b := NewRecvStream(RecvConfig{Window: 800}, c)
	steps := []struct {
		s    *RecvStream
		off  uint64
		n    int
		code uint64
		recv uint64 // c.Received() afterwards
	}{
		{a, 0, 400, 0, 400},
		{b, 500, 100, 0, 1000}, // largest offset counts, not bytes: §4.1
		{a, 100, 200, 0, 1000}, // no new largest offset
		{a, 400, 1, FlowControlError, 1000},
		{b, 0, 600, 0, 1000},
	}
	for i, st := range steps {
		err := st.s.OnStreamFrame(st.off, pattern(st.n), false)
		wantCode(t, err, st.code)
		if c.Received() != st.recv {
			t.Fatalf("step %d: Received %d, want %d", i, c.Received(), st.recv)
		}
	}
	if c.WantsMaxData() {
		t.Fatal("MAX_DATA due before anything was read")
	}
	buf := make([]byte, 1000)
	a.Read(buf)
	if c.WantsMaxData() {
		t.Fatal("MAX_DATA due with 600 of 1000 bytes of credit left")
	}
	b.Read(buf)
	if !c.WantsMaxData() {
		t.Fatal("MAX_DATA not due after half the window was read")
	}
	lim, ok := c.NextMaxData(epoch, 10*time.Millisecond)
	if !ok || lim != 2000 {
		t.Fatalf("NextMaxData = %d, %v; want 2000", lim, ok)
	}
	c.OnMaxDataLost(lim)
	if again, ok := c.NextMaxData(epoch, 10*time.Millisecond); !ok || again != lim {
		t.Fatalf("resend = %d, %v", again, ok)
	}
	if err := a.OnStreamFrame(400, pattern(400), false); err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.OnReceived(2000-c.Received()+1), FlowControlError)
	if err := c.OnReceived(2000 - c.Received()); err != nil {
		t.Fatal(err)
	}
}

func TestConnFlowSendLimits(t *testing.T) {
	c := NewConnFlow(ConnFlowConfig{})
	if c.SendWindow() != 0 {
		t.Fatal("credit before the peer's transport parameters")
	}
	if !c.OnMaxData(100) || c.OnMaxData(100) || c.OnMaxData(50) {
		t.Fatal("MAX_DATA must only increase the limit (RFC 9000 §4.1)")
	}
	c.OnSent(60)
	if c.SendWindow() != 40 || c.PeerMaxData() != 100 {
		t.Fatalf("window %d", c.SendWindow())
	}
	if _, ok := c.NextDataBlocked(); ok {
		t.Fatal("DATA_BLOCKED while credit remains")
	}
}

// TestFlowControlEnforcedProperty sends random frames on random streams and
// checks that exactly those that push a stream past its MAX_STREAM_DATA or
// the connection past its MAX_DATA fail, with FLOW_CONTROL_ERROR, and that a
// failed frame changes nothing.
func TestFlowControlEnforcedProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 200; iter++ {
		connWin := uint64(1 + rng.IntN(20000))
		c := NewConnFlow(ConnFlowConfig{Window: connWin})
		var rs [4]*RecvStream
		var wins [4]uint64
		for i := range rs {
			wins[i] = uint64(1 + rng.IntN(8000))
			rs[i] = NewRecvStream(RecvConfig{Window: wins[i]}, c)
		}
		for step := 0; step < 50; step++ {
			i := rng.IntN(len(rs))
			r := rs[i]
			off := rng.Uint64N(wins[i] + 100)
			n := rng.IntN(1500)
			end := off + uint64(n)
			growth := uint64(0)
			if end > r.HighestOffset() {
				growth = end - r.HighestOffset()
			}
			wantErr := end > wins[i] || c.Received()+growth > connWin
			before := c.Received()
			err := r.OnStreamFrame(off, pattern(n), false)
			if wantErr {
				wantCode(t, err, FlowControlError)
				if c.Received() != before {
					t.Fatal("a rejected frame was counted")
				}
			} else if err != nil {
				t.Fatalf("frame [%d,%d) on window %d, connection %d/%d: %v", off, end, wins[i], before, connWin, err)
			}
		}
	}
}
