package qpack

import "testing"

// BenchmarkHuffmanStrings codes and reads back the strings of a typical
// RPC's header section, from the Huffman caches.
func BenchmarkHuffmanStrings(b *testing.B) {
	strs := []string{"/rpc/Service.Method", "application/json", "127.0.0.1:4433", "quiver-rpc/1", "200"}
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		for _, s := range strs {
			buf = appendString(buf[:0], 7, 0, s)
			if _, _, err := readString(buf, 7, 1<<10); err != nil {
				b.Fatal(err)
			}
		}
	}
}
