package qpack

import (
	"fmt"
	"testing"

	"github.com/quiver-quic/quiver/internal/strcache"
	"golang.org/x/net/http2/hpack"
)

// TestStaticMatch checks the map lookup against a scan of the table: the
// exact index is the first entry with the field's name and value, the
// name index the first with its name (RFC 9204 Appendix A).
func TestStaticMatch(t *testing.T) {
	scan := func(f HeaderField) (exact, name int) {
		exact, name = -1, -1
		for i, s := range staticTable {
			if s.Name != f.Name {
				continue
			}
			if name < 0 {
				name = i
			}
			if exact < 0 && s.Value == f.Value {
				exact = i
			}
		}
		return exact, name
	}
	fields := []HeaderField{{":method", "PATCH"}, {"x-unknown", ""}, {"content-type", "application/x-rpc"}, {"", ""}}
	for _, s := range staticTable {
		fields = append(fields, s, HeaderField{s.Name, s.Value + "x"})
	}
	for _, f := range fields {
		e, n := staticMatch(f)
		we, wn := scan(f)
		if e != we || n != wn {
			t.Errorf("staticMatch(%q: %q) = %d, %d; the table's scan gives %d, %d", f.Name, f.Value, e, n, we, wn)
		}
	}
}

// TestHuffmanCache checks that strings coded through the caches read back
// the same as without them, the second time (from the caches) as the
// first, and that the caches stay bounded however many strings pass.
func TestHuffmanCache(t *testing.T) {
	for i := range 3 * maxCachedStrings {
		s := fmt.Sprintf("/rpc/Service.Method%d", i%(2*maxCachedStrings))
		if i%7 == 0 {
			s = fmt.Sprintf("%%%d~", i) // longer in Huffman code
		}
		b := appendString(nil, 7, 0, s)
		got, rest, err := readString(b, 7, 1<<10)
		if err != nil || got != s || len(rest) != 0 {
			t.Fatalf("%q coded %x read back as %q, %d bytes left, %v", s, b, got, len(rest), err)
		}
		if want := plainString(s); (b[0]&0x80 != 0) != (len(want) < len(s)) {
			t.Fatalf("%q: Huffman flag %v, but its code has %d bytes", s, b[0]&0x80 != 0, len(want))
		}
	}
	for _, c := range []*strcache.Cache{&huffmanDecoded, &huffmanEncoded} {
		if n := c.Len(); n > maxCachedStrings {
			t.Errorf("a cache holds %d strings, over its bound of %d", n, maxCachedStrings)
		}
	}
}

// plainString is s's Huffman code, coded without the caches.
func plainString(s string) []byte { return hpack.AppendHuffmanString(nil, s) }
