package pcap

import (
	"bytes"
	"encoding/binary"
	"io"
	"runtime"
	"testing"
)

// TestReaderMalformedLengthAllocation checks that a block or record that
// claims the largest allowed length but is cut short costs memory in
// proportion to the bytes present, not to the length it claims.
func TestReaderMalformedLengthAllocation(t *testing.T) {
	b := &pcapngBuilder{o: binary.LittleEndian}
	b.shb()
	ng := append(b.b, 6, 0, 0, 0) // an EPB...
	ng = binary.LittleEndian.AppendUint32(ng, maxBlockLen)
	ng = append(ng, make([]byte, 100)...) // ...of 16 MiB, with 100 bytes
	classic := []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 101, 0, 0, 0}
	classic = append(classic, make([]byte, 8)...)
	classic = binary.LittleEndian.AppendUint32(classic, maxBlockLen)
	classic = binary.LittleEndian.AppendUint32(classic, maxBlockLen)
	classic = append(classic, make([]byte, 100)...)
	for name, in := range map[string][]byte{"pcapng": ng, "pcap": classic} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const rounds = 4
		for range rounds {
			r, err := NewReader(bytes.NewReader(in))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if _, err := r.Next(); err == nil || err == io.EOF {
				t.Fatalf("%s: truncated block read without error (%v)", name, err)
			}
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / rounds; per > 1<<20 {
			t.Errorf("%s: a truncated %d-byte block allocated %d bytes per read", name, maxBlockLen, per)
		}
	}
}
