package netem

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

func TestStreamLinkDelayRateFIFO(t *testing.T) {
	t0 := time.Unix(0, 0)
	s := newStreamLink(Link{Delay: 10 * time.Millisecond, Rate: 8e6}, time.Second, 1, 1)
	// 1,000 bytes at 8 Mbit/s take 1 ms on the wire.
	if got := s.deliverAt(t0, 1000).Sub(t0); got != 11*time.Millisecond {
		t.Fatalf("first chunk at %v, want 11ms", got)
	}
	// A second chunk at the same instant waits for the serialiser.
	if got := s.deliverAt(t0, 1000).Sub(t0); got != 12*time.Millisecond {
		t.Fatalf("second chunk at %v, want 12ms", got)
	}
}

func TestStreamLinkLossStallsLaterBytes(t *testing.T) {
	t0 := time.Unix(0, 0)
	s := newStreamLink(Link{Delay: 10 * time.Millisecond, Loss: 1}, 100*time.Millisecond, 1, 1)
	if got := s.deliverAt(t0, 10).Sub(t0); got != 110*time.Millisecond {
		t.Fatalf("lost chunk at %v, want 110ms", got)
	}
	s.link.Loss = 0
	// Head-of-line blocking: a later chunk is not delivered before it.
	if got := s.deliverAt(t0.Add(time.Millisecond), 10).Sub(t0); got != 110*time.Millisecond {
		t.Fatalf("chunk behind the loss at %v, want 110ms", got)
	}
	// Loss is drawn per segment: with p=0.5, big chunks are stalled far
	// more often than one-byte ones.
	stalls := func(n int) int {
		s := newStreamLink(Link{Loss: 0.05}, time.Second, 7, 7)
		k := 0
		for i := range 2000 {
			now := t0.Add(time.Duration(i) * time.Hour)
			if s.deliverAt(now, n).Sub(now) > 0 {
				k++
			}
		}
		return k
	}
	if small, big := stalls(1), stalls(20*segmentSize); big < 3*small {
		t.Fatalf("stalls: %d for 1-byte chunks, %d for 20-segment chunks", small, big)
	}
}

func TestStreamRelayCarriesBytesWithDelay(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c)
		c.Close()
	}()
	r, err := NewStreamRelay(StreamRelayConfig{Server: l.Addr().String(),
		ToServer: Link{Delay: 20 * time.Millisecond}, ToClient: Link{Delay: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := bytes.Repeat([]byte("quiver"), 50000)
	start := time.Now()
	go c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Errorf("echo through 2×20 ms took %v", el)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("bytes changed on the way")
	}
}
