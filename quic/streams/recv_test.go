package streams

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// epoch is the fixed start time of every test clock.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func wantCode(t *testing.T, err error, code uint64) {
	t.Helper()
	if code == 0 {
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		return
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want %s", err, codeName(code))
	}
	if e.Code != code {
		t.Fatalf("got %v, want %s", err, codeName(code))
	}
	if e.Reason == "" {
		t.Fatal("error without a reason")
	}
}

type streamFrame struct {
	off  uint64
	n    int
	fin  bool
	want uint64 // 0: no error, else the transport error code
}

type resetFrame struct {
	code, size uint64
	want       uint64
}

func TestRecvStreamErrors(t *testing.T) {
	tests := []struct {
		name   string
		window uint64
		conn   uint64 // connection window; 0 for none
		frames []any  // streamFrame or resetFrame; the last one is checked
	}{
		{"within window", 100, 0, []any{streamFrame{0, 100, false, 0}}},
		{"beyond window", 100, 0, []any{streamFrame{50, 51, false, FlowControlError}}},
		{"empty frame beyond window", 100, 0, []any{streamFrame{101, 0, false, FlowControlError}}},
		{"offset overflow", 100, 0, []any{streamFrame{maxVarint, 1, false, FlowControlError}}},
		{"beyond connection window", 1000, 150, []any{streamFrame{0, 151, false, FlowControlError}}},
		{"FIN then more data", 1000, 0, []any{streamFrame{0, 10, true, 0}, streamFrame{10, 1, false, FinalSizeError}}},
		{"FIN then empty frame past end", 1000, 0, []any{streamFrame{0, 10, true, 0}, streamFrame{11, 0, false, FinalSizeError}}},
		{"FIN moves down", 1000, 0, []any{streamFrame{0, 10, true, 0}, streamFrame{0, 5, true, FinalSizeError}}},
		{"FIN moves up", 1000, 0, []any{streamFrame{0, 10, true, 0}, streamFrame{10, 5, true, FinalSizeError}}},
		{"FIN repeated", 1000, 0, []any{streamFrame{0, 10, true, 0}, streamFrame{5, 5, true, 0}}},
		{"FIN below received data", 1000, 0, []any{streamFrame{100, 10, false, 0}, streamFrame{0, 50, true, FinalSizeError}}},
		{"FIN at received end", 1000, 0, []any{streamFrame{100, 10, false, 0}, streamFrame{0, 110, true, 0}}},
		{"old data after FIN", 1000, 0, []any{streamFrame{0, 10, true, 0}, streamFrame{0, 5, false, 0}}},
		{"reset ok", 1000, 0, []any{streamFrame{0, 10, false, 0}, resetFrame{1, 10, 0}}},
		{"reset below received", 1000, 0, []any{streamFrame{0, 10, false, 0}, resetFrame{1, 9, FinalSizeError}}},
		{"reset changes final size", 1000, 0, []any{streamFrame{0, 10, true, 0}, resetFrame{1, 11, FinalSizeError}}},
		{"reset beyond window", 1000, 0, []any{resetFrame{1, 1001, FlowControlError}}},
		{"reset beyond connection window", 1000, 500, []any{resetFrame{1, 501, FlowControlError}}},
		{"reset twice, other size", 1000, 0, []any{resetFrame{1, 10, 0}, resetFrame{1, 12, FinalSizeError}}},
		{"data after reset beyond final size", 1000, 0, []any{resetFrame{1, 10, 0}, streamFrame{5, 10, false, FinalSizeError}}},
		{"data after reset within final size", 1000, 0, []any{resetFrame{1, 10, 0}, streamFrame{5, 5, false, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c *ConnFlow
			if tt.conn > 0 {
				c = NewConnFlow(ConnFlowConfig{Window: tt.conn})
			}
			r := NewRecvStream(RecvConfig{Window: tt.window}, c)
			for i, f := range tt.frames {
				var err error
				var want uint64
				switch f := f.(type) {
				case streamFrame:
					err = r.OnStreamFrame(f.off, pattern(f.n), f.fin)
					want = f.want
				case resetFrame:
					err = r.OnResetStream(f.code, f.size)
					want = f.want
				}
				if i < len(tt.frames)-1 && err != nil {
					t.Fatalf("set-up frame %d: %v", i, err)
				}
				if i == len(tt.frames)-1 {
					hi := r.HighestOffset()
					wantCode(t, err, want)
					if err != nil && r.HighestOffset() != hi {
						t.Fatal("a rejected frame changed the stream")
					}
				}
			}
		})
	}
}

func TestRecvStreamStates(t *testing.T) {
	r := NewRecvStream(RecvConfig{Window: 1000}, nil)
	src := pattern(30)
	buf := make([]byte, 100)
	mustFrame := func(off, end uint64, fin bool) {
		t.Helper()
		if err := r.OnStreamFrame(off, src[off:end], fin); err != nil {
			t.Fatal(err)
		}
	}
	mustFrame(20, 30, true)
	if r.State() != RecvSizeKnown {
		t.Fatalf("state %v after FIN with a gap", r.State())
	}
	if n, fin := r.Read(buf); n != 0 || fin {
		t.Fatalf("Read = %d, %v before the gap is filled", n, fin)
	}
	mustFrame(0, 10, false)
	if n, fin := r.Read(buf[:4]); n != 4 || fin || !bytes.Equal(buf[:4], src[:4]) {
		t.Fatalf("Read = %d, %v", n, fin)
	}
	mustFrame(5, 25, false) // overlaps both neighbours
	if r.State() != RecvDataRecvd {
		t.Fatalf("state %v after all data arrived", r.State())
	}
	if r.Readable() != 26 {
		t.Fatalf("Readable %d, want 26", r.Readable())
	}
	n, fin := r.Read(buf)
	if n != 26 || !fin || !bytes.Equal(buf[:n], src[4:]) {
		t.Fatalf("Read = %d, %v", n, fin)
	}
	if r.State() != RecvDataRead || !r.Done() || r.Buffered() != 0 {
		t.Fatalf("state %v done %v buffered %d", r.State(), r.Done(), r.Buffered())
	}
	if n, fin := r.Read(buf); n != 0 || !fin {
		t.Fatalf("Read after the end = %d, %v", n, fin)
	}
	// A reset after all data was read is ignored.
	if err := r.OnResetStream(3, 30); err != nil || r.State() != RecvDataRead {
		t.Fatalf("late reset: %v, state %v", err, r.State())
	}
}

func TestRecvStreamReset(t *testing.T) {
	c := NewConnFlow(ConnFlowConfig{Window: 10000})
	r := NewRecvStream(RecvConfig{Window: 5000}, c)
	r.OnStreamFrame(0, pattern(100), false)
	r.OnStreamFrame(1000, pattern(100), false)
	r.Read(make([]byte, 50))
	if err := r.OnResetStream(7, 4000); err != nil {
		t.Fatal(err)
	}
	if r.State() != RecvResetRecvd || r.Buffered() != 0 {
		t.Fatalf("state %v buffered %d", r.State(), r.Buffered())
	}
	// §4.5: the final size counts in connection flow control, and the
	// unread bytes no longer hold credit.
	if c.Received() != 4000 || c.recv.consumed != 4000 {
		t.Fatalf("connection received %d consumed %d, want 4000", c.Received(), c.recv.consumed)
	}
	if n, fin := r.Read(make([]byte, 10)); n != 0 || fin {
		t.Fatal("Read returned data after reset")
	}
	if r.Done() {
		t.Fatal("done before the application saw the reset")
	}
	if code, ok := r.ResetReceived(); !ok || code != 7 {
		t.Fatalf("ResetReceived = %d, %v", code, ok)
	}
	if r.State() != RecvResetRead || !r.Done() {
		t.Fatalf("state %v", r.State())
	}
	if _, ok := r.NextMaxStreamData(epoch, time.Millisecond); ok {
		t.Fatal("MAX_STREAM_DATA after reset")
	}
}

func TestRecvStreamStopSending(t *testing.T) {
	c := NewConnFlow(ConnFlowConfig{Window: 10000})
	r := NewRecvStream(RecvConfig{Window: 1000}, c)
	r.OnStreamFrame(0, pattern(100), false)
	r.OnStreamFrame(200, pattern(100), false)
	r.StopSending(5)
	if r.Buffered() != 0 || r.Readable() != 0 {
		t.Fatalf("buffered %d readable %d after StopSending", r.Buffered(), r.Readable())
	}
	if code, ok := r.NextStopSending(); !ok || code != 5 {
		t.Fatalf("NextStopSending = %d, %v", code, ok)
	}
	if _, ok := r.NextStopSending(); ok {
		t.Fatal("STOP_SENDING queued twice")
	}
	r.OnStopSendingLost()
	if _, ok := r.NextStopSending(); !ok {
		t.Fatal("lost STOP_SENDING not repeated")
	}
	// §3.5: later frames still count toward flow control.
	wantCode(t, r.OnStreamFrame(900, pattern(101), false), FlowControlError)
	if err := r.OnStreamFrame(500, pattern(100), false); err != nil {
		t.Fatal(err)
	}
	if r.Buffered() != 0 || c.Received() != 600 || c.recv.consumed != 600 {
		t.Fatalf("buffered %d conn received %d consumed %d", r.Buffered(), c.Received(), c.recv.consumed)
	}
	r.OnStopSendingLost()
	if err := r.OnResetStream(5, 700); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.NextStopSending(); ok {
		t.Fatal("§3.5: STOP_SENDING is unnecessary after RESET_STREAM")
	}
	if !r.Done() {
		t.Fatal("stopped and reset stream not done")
	}
}

func TestRecvStreamStopSendingThenAllData(t *testing.T) {
	r := NewRecvStream(RecvConfig{Window: 1000}, nil)
	r.OnStreamFrame(10, pattern(10), true)
	r.StopSending(1)
	r.OnStreamFrame(0, pattern(10), false)
	if r.State() != RecvDataRecvd || !r.Done() {
		t.Fatalf("state %v done %v", r.State(), r.Done())
	}
	if _, ok := r.NextStopSending(); ok {
		t.Fatal("§3.5: STOP_SENDING is unnecessary once all data was received")
	}
}

func TestRecvStreamCredit(t *testing.T) {
	r := NewRecvStream(RecvConfig{Window: 1000, MaxWindow: 1000}, nil)
	buf := make([]byte, 1000)
	r.OnStreamFrame(0, pattern(1000), false)
	r.Read(buf[:499])
	if r.WantsMaxStreamData() {
		t.Fatal("update due before half the window was read")
	}
	r.Read(buf[:1])
	lim, ok := r.NextMaxStreamData(epoch, 0)
	if !ok || lim != 1500 {
		t.Fatalf("NextMaxStreamData = %d, %v; want 1500", lim, ok)
	}
	if _, ok := r.NextMaxStreamData(epoch, 0); ok {
		t.Fatal("update repeated")
	}
	r.OnMaxStreamDataLost(1400) // stale
	if r.WantsMaxStreamData() {
		t.Fatal("stale loss queued an update")
	}
	r.OnMaxStreamDataLost(1500)
	if lim, ok := r.NextMaxStreamData(epoch, 0); !ok || lim != 1500 {
		t.Fatalf("resend = %d, %v", lim, ok)
	}
	// Data up to the new limit is accepted; beyond it is not.
	if err := r.OnStreamFrame(1000, pattern(500), true); err != nil {
		t.Fatal(err)
	}
	r.Read(buf)
	if r.WantsMaxStreamData() {
		t.Fatal("§3.2: MAX_STREAM_DATA is only sent in the Recv state")
	}
}

func TestRecvStreamAutoTune(t *testing.T) {
	const rtt = 50 * time.Millisecond
	tests := []struct {
		name       string
		perHalf    time.Duration // time to consume half a window
		wantWindow uint64        // after 6 updates
	}{
		{"fast reader grows to max", rtt / 4, 1 << 16},
		{"slow reader keeps window", 2 * rtt, 1 << 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewConnFlow(ConnFlowConfig{Window: 1 << 12, MaxWindow: 1 << 20})
			r := NewRecvStream(RecvConfig{Window: 1 << 12, MaxWindow: 1 << 16}, c)
			now := epoch
			buf := make([]byte, 1<<16)
			var off uint64
			for i := 0; i < 6; i++ {
				// The peer fills the window; the application reads until
				// an update is due.
				n := min(r.MaxStreamData()-off, c.MaxData()-c.Received())
				if err := r.OnStreamFrame(off, buf[:n], false); err != nil {
					t.Fatal(err)
				}
				off += n
				for !r.WantsMaxStreamData() {
					r.Read(buf[:256])
				}
				now = now.Add(tt.perHalf)
				if _, ok := r.NextMaxStreamData(now, rtt); !ok {
					t.Fatal("no update")
				}
				c.NextMaxData(now, rtt)
			}
			if r.Window() != tt.wantWindow {
				t.Fatalf("window %d, want %d", r.Window(), tt.wantWindow)
			}
			if tt.wantWindow > 1<<12 && c.Window() < r.Window()*3/2 {
				t.Fatalf("connection window %d did not follow the stream window %d", c.Window(), r.Window())
			}
		})
	}
}

// TestRecvStreamReassemblyProperty delivers a stream as random frames,
// shuffled, duplicated and overlapping, interleaved with reads, and checks
// that the exact bytes come out, that memory stays within the window, and
// that flow-control credit keeps the transfer going.
func TestRecvStreamReassemblyProperty(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		size := rng.IntN(300000)
		src := pattern(size)
		window := uint64(1000 + rng.IntN(100000))
		r := NewRecvStream(RecvConfig{Window: window}, nil)
		var out bytes.Buffer
		buf := make([]byte, 1+rng.IntN(5000))
		var pending []frame
		cut := uint64(0) // frames are generated up to the current limit
		now := epoch
		for steps := 0; ; steps++ {
			if steps > 1e6 {
				t.Fatalf("seed %d: no progress", seed)
			}
			// Cut new frames up to the flow-control limit, plus
			// overlapping copies of old ranges.
			for limit := min(r.MaxStreamData(), uint64(size)); cut < limit; {
				n := min(uint64(1+rng.IntN(3000)), limit-cut)
				pending = append(pending, frame{off: cut, n: int(n)})
				cut += n
			}
			if cut == uint64(size) && rng.IntN(4) == 0 {
				pending = append(pending, frame{off: uint64(size), fin: true})
			}
			if size > 0 && rng.IntN(3) == 0 {
				a := rng.Uint64N(cut + 1)
				b := min(a+rng.Uint64N(5000), cut)
				pending = append(pending, frame{off: a, n: int(b - a), fin: b == uint64(size) && cut == uint64(size)})
			}
			// Deliver some in random order.
			for k := rng.IntN(10); k > 0 && len(pending) > 0; k-- {
				i := rng.IntN(len(pending))
				f := pending[i]
				if rng.IntN(5) != 0 { // sometimes keep it for a duplicate
					pending[i] = pending[len(pending)-1]
					pending = pending[:len(pending)-1]
				}
				end := f.off + uint64(f.n)
				if err := r.OnStreamFrame(f.off, src[f.off:end], f.fin); err != nil {
					t.Fatalf("seed %d: frame [%d,%d) fin=%v: %v", seed, f.off, end, f.fin, err)
				}
				if held := uint64(r.Buffered()); held > window+2*chunkSize && held > r.MaxStreamData()-r.ReadOffset()+2*chunkSize {
					t.Fatalf("seed %d: %d bytes buffered for a window of %d", seed, held, r.MaxStreamData()-r.ReadOffset())
				}
			}
			n, fin := r.Read(buf[:1+rng.IntN(len(buf))])
			out.Write(buf[:n])
			now = now.Add(time.Millisecond)
			r.NextMaxStreamData(now, 10*time.Millisecond)
			if fin {
				break
			}
			if len(pending) == 0 && cut == uint64(size) {
				pending = append(pending, frame{off: uint64(size), fin: true})
			}
		}
		if !bytes.Equal(out.Bytes(), src) {
			t.Fatalf("seed %d: reassembled %d bytes, want %d (or contents differ)", seed, out.Len(), size)
		}
		if r.Buffered() != 0 {
			t.Fatalf("seed %d: %d bytes held after the end", seed, r.Buffered())
		}
	}
}
