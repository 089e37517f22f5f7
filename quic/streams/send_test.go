package streams

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

const noLimit = ^uint64(0)

func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*31 + i>>8)
	}
	return p
}

type frame struct {
	off  uint64
	n    int
	fin  bool
	data []byte
}

func nextFrame(t *testing.T, s *SendStream, maxLen int, flow uint64) (frame, bool) {
	t.Helper()
	off, data, fin, ok := s.NextFrame(maxLen, flow)
	if !ok {
		return frame{}, false
	}
	if len(data) > maxLen {
		t.Fatalf("NextFrame(%d) returned %d bytes", maxLen, len(data))
	}
	return frame{off, len(data), fin, bytes.Clone(data)}, true
}

func TestSendStreamFraming(t *testing.T) {
	tests := []struct {
		name     string
		write    int
		close    bool
		maxData  uint64
		maxLen   int
		flow     uint64
		want     []frame // data not compared here
		wantSt   SendState
		wantMore bool // HasFrame after draining
	}{
		{"empty FIN", 0, true, 100, 1200, noLimit, []frame{{0, 0, true, nil}}, SendDataSent, false},
		{"one frame with FIN", 500, true, 1000, 1200, noLimit, []frame{{0, 500, true, nil}}, SendDataSent, false},
		{"split by maxLen", 2500, true, 10000, 1200, noLimit,
			[]frame{{0, 1200, false, nil}, {1200, 1200, false, nil}, {2400, 100, true, nil}}, SendDataSent, false},
		{"no FIN yet", 100, false, 1000, 1200, noLimit, []frame{{0, 100, false, nil}}, SendSend, false},
		{"stream limit", 1000, true, 300, 1200, noLimit, []frame{{0, 300, false, nil}}, SendSend, true},
		{"connection credit", 1000, true, 5000, 1200, 250, []frame{{0, 250, false, nil}}, SendSend, true},
		{"limit exactly at end sends FIN", 300, true, 300, 1200, noLimit, []frame{{0, 300, true, nil}}, SendDataSent, false},
		{"FIN after flow-limited data", 300, true, 300, 200, noLimit,
			[]frame{{0, 200, false, nil}, {200, 100, true, nil}}, SendDataSent, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSendStream(SendConfig{BufferLimit: 1 << 20, PeerMaxStreamData: tt.maxData}, nil)
			if s.State() != SendReady {
				t.Fatalf("new stream in %v", s.State())
			}
			src := pattern(tt.write)
			if n := s.Write(src); n != tt.write {
				t.Fatalf("Write took %d of %d", n, tt.write)
			}
			if tt.close {
				s.CloseWrite()
			}
			var got []frame
			flow := tt.flow
			for {
				f, ok := nextFrame(t, s, tt.maxLen, flow)
				if !ok {
					break
				}
				if flow != noLimit {
					flow -= uint64(f.n)
				}
				if !bytes.Equal(f.data, src[f.off:f.off+uint64(f.n)]) {
					t.Fatalf("frame at %d carries wrong bytes", f.off)
				}
				got = append(got, frame{f.off, f.n, f.fin, nil})
			}
			if len(got) != len(tt.want) {
				t.Fatalf("frames %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i].off != tt.want[i].off || got[i].n != tt.want[i].n || got[i].fin != tt.want[i].fin {
					t.Fatalf("frame %d = %v, want %v", i, got[i], tt.want[i])
				}
			}
			if s.State() != tt.wantSt {
				t.Errorf("state %v, want %v", s.State(), tt.wantSt)
			}
			if s.HasFrame() != tt.wantMore {
				t.Errorf("HasFrame = %v, want %v", s.HasFrame(), tt.wantMore)
			}
		})
	}
}

func TestSendStreamFrameAcrossChunks(t *testing.T) {
	s := NewSendStream(SendConfig{BufferLimit: 1 << 20, PeerMaxStreamData: noLimit}, nil)
	src := pattern(3 * chunkSize)
	s.Write(src)
	for {
		f, ok := nextFrame(t, s, 1200, noLimit)
		if !ok {
			break
		}
		if f.n != min(1200, len(src)-int(f.off)) {
			t.Fatalf("frame at %d has %d bytes; frames must not be cut at chunk boundaries", f.off, f.n)
		}
		if !bytes.Equal(f.data, src[f.off:f.off+uint64(f.n)]) {
			t.Fatalf("frame at %d carries wrong bytes", f.off)
		}
	}
}

func TestSendStreamWritableAndMemory(t *testing.T) {
	s := NewSendStream(SendConfig{BufferLimit: 3 * chunkSize, PeerMaxStreamData: noLimit}, nil)
	if n := s.Write(pattern(4 * chunkSize)); n != 3*chunkSize {
		t.Fatalf("Write took %d, want the buffer limit %d", n, 3*chunkSize)
	}
	if s.Writable() != 0 {
		t.Fatalf("Writable = %d at the limit", s.Writable())
	}
	off, data, _, _ := s.NextFrame(2*chunkSize, noLimit)
	s.NextFrame(chunkSize, noLimit)
	// Acknowledging a later range frees nothing: the prefix is not acked.
	s.OnAcked(2*chunkSize, chunkSize, false)
	if s.Writable() != 0 || s.Buffered() != 3*chunkSize {
		t.Fatalf("after out-of-order ack: Writable %d Buffered %d", s.Writable(), s.Buffered())
	}
	s.OnAcked(off, len(data), false)
	if s.Writable() != 3*chunkSize || s.Buffered() != 0 {
		t.Fatalf("after full ack: Writable %d Buffered %d", s.Writable(), s.Buffered())
	}
	s.CloseWrite()
	if s.Writable() != 0 || s.Write([]byte("x")) != 0 {
		t.Fatal("Write accepted data after CloseWrite")
	}
}

func TestSendStreamLifecycle(t *testing.T) {
	s := NewSendStream(SendConfig{BufferLimit: 1000, PeerMaxStreamData: 1000}, nil)
	s.Write(pattern(100))
	s.CloseWrite()
	f, _ := nextFrame(t, s, 60, noLimit)
	g, _ := nextFrame(t, s, 60, noLimit)
	if !g.fin || s.State() != SendDataSent {
		t.Fatalf("second frame %v state %v", g, s.State())
	}
	s.OnAcked(g.off, g.n, g.fin)
	if s.AllAcked() || s.Done() {
		t.Fatal("done before the first frame was acked")
	}
	s.OnLost(f.off, f.n, f.fin)
	r, ok := nextFrame(t, s, 1200, 0) // retransmissions need no credit
	if !ok || r.off != 0 || r.n != 60 || r.fin {
		t.Fatalf("retransmission %v %v", r, ok)
	}
	s.OnAcked(r.off, r.n, r.fin)
	if !s.AllAcked() || !s.Done() || s.State() != SendDataRecvd {
		t.Fatalf("state %v after all acked", s.State())
	}
	if s.Buffered() != 0 {
		t.Fatalf("Buffered %d after Data Recvd", s.Buffered())
	}
	s.Reset(7)
	if _, _, ok := s.NextReset(); ok {
		t.Fatal("reset queued from Data Recvd")
	}
}

func TestSendStreamLostFIN(t *testing.T) {
	s := NewSendStream(SendConfig{BufferLimit: 1000, PeerMaxStreamData: 1000}, nil)
	s.Write(pattern(10))
	f, _ := nextFrame(t, s, 100, noLimit)
	s.CloseWrite()
	fin, _ := nextFrame(t, s, 100, noLimit)
	if fin.off != 10 || fin.n != 0 || !fin.fin {
		t.Fatalf("FIN-only frame %v", fin)
	}
	s.OnAcked(f.off, f.n, f.fin)
	s.OnLost(fin.off, fin.n, fin.fin)
	again, ok := nextFrame(t, s, 100, noLimit)
	if !ok || again.off != fin.off || again.n != 0 || !again.fin {
		t.Fatalf("FIN retransmission %v %v, want %v", again, ok, fin)
	}
	// A FIN lost together with data rides on the data's retransmission.
	s2 := NewSendStream(SendConfig{BufferLimit: 1000, PeerMaxStreamData: 1000}, nil)
	s2.Write(pattern(10))
	s2.CloseWrite()
	f2, _ := nextFrame(t, s2, 100, noLimit)
	s2.OnLost(f2.off, f2.n, f2.fin)
	again2, _ := nextFrame(t, s2, 100, noLimit)
	if again2.off != 0 || again2.n != 10 || !again2.fin {
		t.Fatalf("retransmission %v, want data with FIN", again2)
	}
	if _, ok := nextFrame(t, s2, 100, noLimit); ok {
		t.Fatal("FIN sent twice")
	}
}

func TestSendStreamBlocked(t *testing.T) {
	s := NewSendStream(SendConfig{BufferLimit: 1000, PeerMaxStreamData: 100}, nil)
	if _, ok := s.NextBlocked(); ok {
		t.Fatal("blocked with nothing written")
	}
	s.Write(pattern(300))
	nextFrame(t, s, 1200, noLimit)
	lim, ok := s.NextBlocked()
	if !ok || lim != 100 {
		t.Fatalf("NextBlocked = %d, %v; want 100", lim, ok)
	}
	if _, ok := s.NextBlocked(); ok {
		t.Fatal("STREAM_DATA_BLOCKED repeated for the same limit")
	}
	s.OnBlockedLost(100)
	if lim, ok := s.NextBlocked(); !ok || lim != 100 {
		t.Fatal("lost STREAM_DATA_BLOCKED not repeated")
	}
	if s.OnMaxStreamData(50) || s.PeerMaxStreamData() != 100 {
		t.Fatal("MAX_STREAM_DATA decreased the limit")
	}
	if !s.OnMaxStreamData(200) {
		t.Fatal("MAX_STREAM_DATA increase ignored")
	}
	s.OnBlockedLost(100) // stale: no effect at the new limit
	if _, ok := s.NextBlocked(); ok {
		t.Fatal("blocked after credit")
	}
	f, _ := nextFrame(t, s, 1200, noLimit)
	if f.off != 100 || f.n != 100 {
		t.Fatalf("frame %v after MAX_STREAM_DATA 200", f)
	}
	if lim, ok := s.NextBlocked(); !ok || lim != 200 {
		t.Fatalf("NextBlocked = %d, %v at the new limit", lim, ok)
	}
}

func TestSendStreamReset(t *testing.T) {
	s := NewSendStream(SendConfig{BufferLimit: 1 << 20, PeerMaxStreamData: noLimit}, nil)
	s.Write(pattern(5000))
	f, _ := nextFrame(t, s, 1200, noLimit)
	nextFrame(t, s, 1200, noLimit)
	s.OnLost(f.off, f.n, f.fin)
	s.Reset(42)
	if s.State() != SendResetSent || s.Writable() != 0 || s.Buffered() != 0 {
		t.Fatalf("after Reset: state %v writable %d buffered %d", s.State(), s.Writable(), s.Buffered())
	}
	if _, ok := nextFrame(t, s, 1200, noLimit); ok {
		t.Fatal("STREAM frame after RESET_STREAM (RFC 9000 §3.5 forbids it)")
	}
	code, size, ok := s.NextReset()
	if !ok || code != 42 || size != 2400 {
		t.Fatalf("NextReset = %d, %d, %v; want 42, 2400 (bytes sent)", code, size, ok)
	}
	if _, _, ok := s.NextReset(); ok {
		t.Fatal("RESET_STREAM queued twice")
	}
	s.OnResetLost()
	if _, _, ok := s.NextReset(); !ok {
		t.Fatal("lost RESET_STREAM not repeated")
	}
	s.Reset(43) // a second reset changes nothing
	s.OnResetAcked()
	if s.State() != SendResetRecvd || !s.Done() {
		t.Fatalf("state %v after reset acked", s.State())
	}
	if c, ok := s.ResetCode(); !ok || c != 42 {
		t.Fatalf("ResetCode = %d, %v", c, ok)
	}
}

func TestSendStreamStopSending(t *testing.T) {
	for _, st := range []string{"Ready", "Send", "Data Sent"} {
		t.Run(st, func(t *testing.T) {
			s := NewSendStream(SendConfig{BufferLimit: 1000, PeerMaxStreamData: 1000}, nil)
			if st != "Ready" {
				s.Write(pattern(10))
				if st == "Data Sent" {
					s.CloseWrite()
				}
				nextFrame(t, s, 100, noLimit)
			}
			if s.State().String() != st {
				t.Fatalf("set-up reached %v", s.State())
			}
			s.OnStopSending(9)
			code, size, ok := s.NextReset()
			if !ok || code != 9 {
				t.Fatalf("RFC 9000 §3.5: STOP_SENDING in %s must cause RESET_STREAM with its code; got %d, %v", st, code, ok)
			}
			if want := s.SentOffset(); size != want {
				t.Fatalf("final size %d, want %d", size, want)
			}
		})
	}
}

func TestSendStreamConnFlow(t *testing.T) {
	c := NewConnFlow(ConnFlowConfig{Window: 1000, PeerMaxData: 1500})
	a := NewSendStream(SendConfig{BufferLimit: 10000, PeerMaxStreamData: 10000}, c)
	b := NewSendStream(SendConfig{BufferLimit: 10000, PeerMaxStreamData: 10000}, c)
	a.Write(pattern(1000))
	b.Write(pattern(1000))
	for _, s := range []*SendStream{a, b} {
		for {
			if _, ok := nextFrame(t, s, 1200, noLimit); !ok {
				break
			}
		}
	}
	if a.SentOffset()+b.SentOffset() != 1500 || c.Sent() != 1500 || c.SendWindow() != 0 {
		t.Fatalf("sent %d+%d, conn %d window %d; want 1500 in total", a.SentOffset(), b.SentOffset(), c.Sent(), c.SendWindow())
	}
	if lim, ok := c.NextDataBlocked(); !ok || lim != 1500 {
		t.Fatalf("NextDataBlocked = %d, %v", lim, ok)
	}
	if _, ok := c.NextDataBlocked(); ok {
		t.Fatal("DATA_BLOCKED repeated for the same limit")
	}
	c.OnDataBlockedLost(1500)
	if _, ok := c.NextDataBlocked(); !ok {
		t.Fatal("lost DATA_BLOCKED not repeated")
	}
	// Retransmissions need no connection credit.
	a.OnLost(0, 100, false)
	if f, ok := nextFrame(t, a, 1200, noLimit); !ok || f.off != 0 || f.n != 100 {
		t.Fatalf("retransmission blocked by connection credit: %v %v", f, ok)
	}
	if c.OnMaxData(1000) {
		t.Fatal("MAX_DATA decrease applied")
	}
	c.OnMaxData(2000)
	if f, ok := nextFrame(t, b, 1200, noLimit); !ok || f.off != b.SentOffset()-uint64(f.n) || c.Sent() != 1500+uint64(f.n) {
		t.Fatalf("after MAX_DATA: frame %v %v sent %d", f, ok, c.Sent())
	}
}

// TestSendStreamRetransmitsExactlyLost sends a stream through a random
// network that loses, acknowledges, reorders and delays frames, and checks
// that every retransmission covers only bytes that were lost and not
// acknowledged since, that every such byte is retransmitted, and that the
// receiver reassembles the exact stream.
func TestSendStreamRetransmitsExactlyLost(t *testing.T) {
	for seed := uint64(0); seed < 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		size := 1 + rng.IntN(200000)
		src := pattern(size)
		s := NewSendStream(SendConfig{BufferLimit: 1 << 16, PeerMaxStreamData: noLimit}, nil)
		r := NewRecvStream(RecvConfig{Window: uint64(size) + 1}, nil)

		acked := make([]bool, size)
		needRetx := make([]bool, size) // lost and not acked since
		finAcked, finNeedRetx := false, false
		var inflight []frame
		written := 0
		var out bytes.Buffer
		buf := make([]byte, 4096)

		for steps := 0; ; steps++ {
			if steps > 1e6 {
				t.Fatalf("seed %d: no progress", seed)
			}
			if written < size {
				written += s.Write(src[written:min(size, written+rng.IntN(50000))])
				if written == size {
					s.CloseWrite()
				}
			}
			// Send a few frames.
			for k := rng.IntN(8); k > 0; k-- {
				before := s.SentOffset()
				f, ok := nextFrame(t, s, 1+rng.IntN(1500), noLimit)
				if !ok {
					break
				}
				end := f.off + uint64(f.n)
				if f.off < before {
					if end > before {
						t.Fatalf("seed %d: frame [%d,%d) mixes retransmitted and new data", seed, f.off, end)
					}
					for i := f.off; i < end; i++ {
						if !needRetx[i] {
							t.Fatalf("seed %d: byte %d retransmitted but not lost (or already acked)", seed, i)
						}
						needRetx[i] = false
					}
				}
				if f.fin {
					finNeedRetx = false
				}
				inflight = append(inflight, f)
			}
			// Resolve some frames in random order: lost or acked.
			for k := rng.IntN(6); k > 0 && len(inflight) > 0; k-- {
				i := rng.IntN(len(inflight))
				f := inflight[i]
				inflight[i] = inflight[len(inflight)-1]
				inflight = inflight[:len(inflight)-1]
				end := f.off + uint64(f.n)
				if rng.IntN(3) == 0 {
					s.OnLost(f.off, f.n, f.fin)
					for j := f.off; j < end; j++ {
						if !acked[j] {
							needRetx[j] = true
						}
					}
					if f.fin && !finAcked {
						finNeedRetx = true
					}
					if rng.IntN(4) == 0 {
						// Spuriously declared lost: it arrives and is
						// acknowledged later.
						inflight = append(inflight, f)
					}
					continue
				}
				if err := r.OnStreamFrame(f.off, f.data, f.fin); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				s.OnAcked(f.off, f.n, f.fin)
				for j := f.off; j < end; j++ {
					acked[j], needRetx[j] = true, false
				}
				if f.fin {
					finAcked, finNeedRetx = true, false
				}
			}
			for {
				n, _ := r.Read(buf[:rng.IntN(len(buf))+1])
				if n == 0 {
					break
				}
				out.Write(buf[:n])
			}
			if s.AllAcked() {
				break
			}
			if len(inflight) == 0 && written == size && !s.HasFrame() {
				for i, b := range needRetx {
					if b {
						t.Fatalf("seed %d: lost byte %d never retransmitted", seed, i)
					}
				}
				if finNeedRetx {
					t.Fatalf("seed %d: lost FIN never retransmitted", seed)
				}
				t.Fatalf("seed %d: stalled in %v", seed, s.State())
			}
		}
		if n, fin := r.Read(buf); n != 0 || !fin {
			t.Fatalf("seed %d: final Read = %d, %v", seed, n, fin)
		}
		if !bytes.Equal(out.Bytes(), src) {
			t.Fatalf("seed %d: received stream differs (%d of %d bytes)", seed, out.Len(), size)
		}
		if s.Buffered() != 0 || r.Buffered() != 0 {
			t.Fatalf("seed %d: memory held after completion: send %d recv %d", seed, s.Buffered(), r.Buffered())
		}
	}
}
