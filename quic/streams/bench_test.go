package streams

import (
	"testing"
	"time"
)

const (
	benchTotal = 100 << 20 // bytes pushed per benchmark iteration
	benchFrame = 1200
)

// BenchmarkSendStream pushes 100 MB through a SendStream the way the engine
// does: the application writes while there is room, the engine cuts
// 1200-byte frames, and each frame is acknowledged.
func BenchmarkSendStream(b *testing.B) {
	src := pattern(64 << 10)
	b.ReportAllocs()
	b.SetBytes(benchTotal)
	for b.Loop() {
		s := NewSendStream(SendConfig{BufferLimit: 1 << 20, PeerMaxStreamData: benchTotal}, nil)
		written := 0
		for written < benchTotal {
			n := s.Write(src[:min(len(src), benchTotal-written)])
			written += n
			for {
				off, data, fin, ok := s.NextFrame(benchFrame, noLimit)
				if !ok {
					break
				}
				s.OnAcked(off, len(data), fin)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(benchTotal/benchFrame), "ns/frame")
}

// BenchmarkRecvStream delivers 100 MB of in-order 1200-byte frames to a
// RecvStream attached to connection flow control, reading after each frame
// and issuing credit as the engine would.
func BenchmarkRecvStream(b *testing.B) {
	src := pattern(benchFrame)
	buf := make([]byte, 64<<10)
	b.ReportAllocs()
	b.SetBytes(benchTotal)
	for b.Loop() {
		c := NewConnFlow(ConnFlowConfig{Window: 1 << 20, MaxWindow: 16 << 20})
		r := NewRecvStream(RecvConfig{Window: 1 << 20, MaxWindow: 8 << 20}, c)
		now := epoch
		var off uint64
		for off < benchTotal {
			n := min(benchFrame, benchTotal-off)
			if err := r.OnStreamFrame(off, src[:n], false); err != nil {
				b.Fatal(err)
			}
			off += n
			r.Read(buf)
			now = now.Add(time.Microsecond)
			r.NextMaxStreamData(now, time.Millisecond)
			c.NextMaxData(now, time.Millisecond)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(benchTotal/benchFrame), "ns/frame")
}

// BenchmarkRecvStreamReordered delivers frames in pairs swapped, so every
// other frame is buffered out of order before it can be read.
func BenchmarkRecvStreamReordered(b *testing.B) {
	src := pattern(benchFrame)
	buf := make([]byte, 64<<10)
	b.ReportAllocs()
	b.SetBytes(benchTotal)
	for b.Loop() {
		r := NewRecvStream(RecvConfig{Window: benchTotal + benchFrame}, nil)
		var off uint64
		for off+2*benchFrame <= benchTotal {
			r.OnStreamFrame(off+benchFrame, src, false)
			r.OnStreamFrame(off, src, false)
			off += 2 * benchFrame
			r.Read(buf)
		}
	}
}

// BenchmarkSendStreamPerFrame is BenchmarkSendStream with one frame per op,
// so that allocs/op shows the steady-state cost of a frame.
func BenchmarkSendStreamPerFrame(b *testing.B) {
	src := pattern(64 << 10)
	s := NewSendStream(SendConfig{BufferLimit: 1 << 20, PeerMaxStreamData: noLimit}, nil)
	b.ReportAllocs()
	b.SetBytes(benchFrame)
	for b.Loop() {
		if s.Writable() >= len(src) {
			s.Write(src)
		}
		off, data, fin, ok := s.NextFrame(benchFrame, noLimit)
		if !ok {
			b.Fatal("no frame")
		}
		s.OnAcked(off, len(data), fin)
	}
}

// BenchmarkRecvStreamPerFrame is BenchmarkRecvStream with one frame per op.
func BenchmarkRecvStreamPerFrame(b *testing.B) {
	src := pattern(benchFrame)
	buf := make([]byte, benchFrame)
	c := NewConnFlow(ConnFlowConfig{Window: 1 << 20, MaxWindow: 16 << 20})
	r := NewRecvStream(RecvConfig{Window: 1 << 20, MaxWindow: 8 << 20}, c)
	now := epoch
	var off uint64
	b.ReportAllocs()
	b.SetBytes(benchFrame)
	for b.Loop() {
		if err := r.OnStreamFrame(off, src, false); err != nil {
			b.Fatal(err)
		}
		off += benchFrame
		r.Read(buf)
		now = now.Add(time.Microsecond)
		r.NextMaxStreamData(now, time.Millisecond)
		c.NextMaxData(now, time.Millisecond)
	}
}
