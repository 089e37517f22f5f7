package conformance

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/pcap"
	"github.com/quiver-quic/quiver/quic/wire"
)

// TestRecorderBoundsDatagrams: memory keeps datagrams whole up to
// keepDatagramBytes, then of short-header ones only a compact entry (time,
// size, addresses, first bytes), while every size stays right, long-header datagrams stay
// whole, and the capture on disk keeps every byte.
func TestRecorderBoundsDatagrams(t *testing.T) {
	dir := t.TempDir()
	r := newRecorder(time.Now())
	r.startCapture(dir)
	short := bytes.Repeat([]byte{0x41}, 1400)
	long := append([]byte{0xc3, 0, 0, 0, 1}, bytes.Repeat([]byte{7}, 1395)...)
	peer := netip.MustParseAddrPort("127.0.0.1:4433")
	n := 3 * keepDatagramBytes / len(short)
	for i := 0; i < n; i++ {
		r.addDatagram(datagramRec{at: time.Now(), peer: peer, b: short})
		if i%100 == 0 {
			r.addDatagram(datagramRec{at: time.Now(), peer: peer, b: long})
		}
	}
	held, total, whole := 0, 0, 0
	for _, d := range r.datagrams {
		held += len(d.b)
		total += d.size
		if d.b[0]&0x80 != 0 && len(d.b) == len(long) {
			whole++
		}
		if d.size != 1400 && d.size != len(long) {
			t.Fatalf("a datagram's size became %d", d.size)
		}
	}
	if held > keepDatagramBytes+len(r.datagrams)*keepDatagramPrefix+whole*len(long) {
		t.Fatalf("memory holds %d bytes of %d", held, total)
	}
	if whole != (n+99)/100 {
		t.Fatalf("%d long-header datagrams kept whole, want %d", whole, (n+99)/100)
	}
	if !r.finishCapture([]byte("CLIENT_RANDOM 00 11\n")) {
		t.Fatal("capture not finished")
	}
	f, err := os.Open(filepath.Join(dir, "capture.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := pcap.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	bytesOnDisk := 0
	for _, p := range c.Packets {
		bytesOnDisk += len(p.Payload)
	}
	if len(r.datagrams) > keepDatagramBytes/len(short)+1+(n+99)/100 || r.keep.datagramsDropped == 0 {
		t.Fatalf("memory kept %d datagram records of %d (%d dropped)", len(r.datagrams), n+(n+99)/100, r.keep.datagramsDropped)
	}
	if len(c.Packets) != n+(n+99)/100 || bytesOnDisk != n*len(short)+(n+99)/100*len(long) {
		t.Fatalf("capture holds %d packets, %d bytes; want %d, %d", len(c.Packets), bytesOnDisk, n+(n+99)/100, n*len(short)+(n+99)/100*len(long))
	}
	// Every datagram is still listed, in order, with its size and first
	// bytes.
	all := r.allDatagramsLocked()
	sum := 0
	for i, d := range all {
		sum += d.size
		if i > 0 && d.at.Before(all[i-1].at) {
			t.Fatalf("datagram %d listed out of order", i)
		}
		if d.b[0] != short[0] && d.b[0] != long[0] {
			t.Fatalf("datagram %d lost its first byte", i)
		}
	}
	if len(all) != n+(n+99)/100 || sum != n*len(short)+(n+99)/100*len(long) {
		t.Fatalf("all datagrams: %d, %d bytes; want %d, %d", len(all), sum, n+(n+99)/100, n*len(short)+(n+99)/100*len(long))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("the spool file was left behind: %v", ents)
	}
}

// TestCompactFrames: recorded frames own their bytes (the payload can be
// reused), and STREAM frames far into a stream keep their length, not
// their bytes.
func TestCompactFrames(t *testing.T) {
	var payload []byte
	payload = (&wire.StreamFrame{StreamID: 0, Offset: 10, Data: []byte("head")}).Append(payload)
	payload = (&wire.StreamFrame{StreamID: 4, Offset: keepStreamOffset, Data: bytes.Repeat([]byte("x"), 900)}).Append(payload)
	payload = (&wire.AckFrame{Ranges: []wire.AckRange{{Smallest: 3, Largest: 9}}}).Append(payload)
	payload = (&wire.ConnectionCloseFrame{ErrorCode: 7, Reason: []byte("bye")}).Append(payload)
	frames, _ := decodeFrames(payload)
	frames = compactFrames(frames)
	for i := range payload {
		payload[i] = 0xee
	}
	if f := frames[0].(*wire.StreamFrame); string(f.Data) != "head" || f.Offset != 10 {
		t.Fatalf("near STREAM frame: %+v", f)
	}
	if f := frames[1].(*wire.StreamFrame); len(f.Data) != 900 || f.Data[0] != 0 || f.Offset != keepStreamOffset {
		t.Fatalf("far STREAM frame: offset %d, %d bytes", f.Offset, len(f.Data))
	}
	if f := frames[2].(*wire.AckFrame); len(f.Ranges) != 1 || f.Ranges[0].Largest != 9 {
		t.Fatalf("ACK frame: %+v", f)
	}
	if f := frames[3].(*wire.ConnectionCloseFrame); string(f.Reason) != "bye" {
		t.Fatalf("CONNECTION_CLOSE: %+v", f)
	}
	// Each frame is its own value, not the parser's.
	if frames[0] == frames[1] {
		t.Fatal("two STREAM frames share one value")
	}
}
