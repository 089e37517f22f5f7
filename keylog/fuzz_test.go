package keylog

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzParse checks that Parse never panics and that whatever it accepts
// survives Format and Parse unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte("# c\nCLIENT_TRAFFIC_SECRET_0 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f aabb\n"))
	f.Add([]byte("CLIENT_RANDOM 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f 00\r\n\n"))
	f.Add([]byte("X y z"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Parse(bytes.NewReader(data))
		if err != nil {
			return
		}
		again, err := Parse(bytes.NewReader(Format(entries)))
		if err != nil {
			t.Fatalf("formatted entries do not parse: %v", err)
		}
		if len(entries) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(entries, again) {
			t.Fatalf("round trip changed entries:\n%+v\n%+v", entries, again)
		}
	})
}
