package pcap

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzReader checks that the reader never panics, never loops, and that
// every packet it yields is consistent.
func FuzzReader(f *testing.F) {
	f.Add(writeCapture(f, Options{}, []byte(keylogText), false))
	f.Add(writeCapture(f, Options{SecretsFirst: true, SnapLen: 60}, []byte(keylogText), true))
	b := &pcapngBuilder{o: binary.BigEndian}
	b.shb()
	b.idb(linkEthernet, 0x80|20)
	b.idb(linkNull, 3)
	b.epb(0, 99, append(make([]byte, 12), 0x81, 0, 0, 1, 0x86, 0xdd, 0x60, 0, 0, 0, 0, 8, 0, 64))
	b.epb(1, 7, []byte{2, 0, 0, 0, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 1, 0, 2, 0, 8, 0, 0})
	f.Add(b.b)
	f.Add([]byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 101, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		// Each packet consumes at least 12 bytes of input, so more packets
		// than that would mean the reader is looping without reading.
		for n := 0; n <= len(data)/12+1; n++ {
			p, err := r.Next()
			if err != nil { // io.EOF or a malformed block
				return
			}
			if len(p.Payload) > p.Length {
				t.Fatalf("payload of %d bytes exceeds the UDP length %d", len(p.Payload), p.Length)
			}
			if !p.Src.Addr().IsValid() || !p.Dst.Addr().IsValid() {
				t.Fatalf("packet without addresses: %+v", p)
			}
		}
		t.Fatal("reader yielded more packets than the input can hold")
	})
}
