package netem

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestWriteBatchJoinsSegments checks the relay's segmented sends: the
// datagrams of one buffer, of one size and a shorter last, leave as one
// UDP_SEGMENT send and arrive as one coalesced read at a UDP_GRO socket
// and as separate datagrams, in order, at a plain one; datagrams from
// separate buffers, of a larger size after a smaller, or with another ECN
// mark are not joined.
func TestWriteBatchJoinsSegments(t *testing.T) {
	lo := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)
	open := func(gro bool) *batchConn {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(lo))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		bc, err := newBatchConn(c, false, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if gro {
			bc.enableGRO()
			if !bc.gro {
				t.Skip("no UDP_GRO here")
			}
		}
		return bc
	}
	snd, withGRO, plain := open(false), open(true), open(false)
	buf := make([]byte, 4*1200+300)
	for i := range buf {
		buf[i] = byte(i / 7)
	}
	segs := [][]byte{buf[:1200], buf[1200:2400], buf[2400:3600], buf[3600:4800], buf[4800:]}
	for _, rcv := range []*batchConn{withGRO, plain} {
		dst := net.UDPAddrFromAddrPort(rcv.c.LocalAddr().(*net.UDPAddr).AddrPort())
		var w writeBatch
		for _, s := range segs {
			w.out = append(w.out, outgoing{conn: snd, dst: dst, payload: s, ecn: ECT0})
		}
		if failed := w.flush(&bufPool{}); failed != 0 {
			t.Fatalf("%d datagrams not written", failed)
		}
		if snd.noGSO {
			t.Skip("the kernel refused a segmented send on loopback")
		}
		rcv.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		rb := newReadBatch()
		var got [][]byte
		for len(got) < len(segs) {
			n, err := rcv.read(rb)
			if err != nil {
				t.Fatalf("after %d datagrams: %v", len(got), err)
			}
			for i := range n {
				p, _, ecn, size := rb.segments(i)
				if ecn != ECT0 {
					t.Errorf("ECN %d, want ECT(0)", ecn)
				}
				if rcv == withGRO && (n != 1 || size != 1200 || len(p) != len(buf)) {
					t.Errorf("GRO socket read %d messages, this one %d bytes in segments of %d; want 1 of %d in 1200", n, len(p), size, len(buf))
				}
				for off := 0; off < len(p); off += size {
					got = append(got, bytes.Clone(p[off:min(off+size, len(p))]))
				}
			}
		}
		for i := range segs {
			if i >= len(got) || !bytes.Equal(got[i], segs[i]) {
				t.Fatalf("datagram %d differs or is missing (%d received)", i, len(got))
			}
		}
	}

	// What must not be joined: the segments stay separate messages.
	other := make([]byte, 1200)
	dst := net.UDPAddrFromAddrPort(plain.c.LocalAddr().(*net.UDPAddr).AddrPort())
	var w writeBatch
	w.out = []outgoing{
		{conn: snd, dst: dst, payload: buf[:1200]},
		{conn: snd, dst: dst, payload: other},                     // another buffer
		{conn: snd, dst: dst, payload: buf[1200:1500]},            // not adjacent to other
		{conn: snd, dst: dst, payload: buf[1500:2700]},            // larger than the 300 before
		{conn: snd, dst: dst, payload: buf[2700:3900], ecn: ECT1}, // another mark
	}
	msgs := 0
	w.flushHook = func(segs []int) { msgs += len(segs) }
	w.flush(&bufPool{})
	if msgs != 5 {
		t.Errorf("%d messages, want 5 (nothing joinable)", msgs)
	}
}
