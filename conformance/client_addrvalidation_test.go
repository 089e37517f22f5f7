package conformance

import "testing"

// TestSameClientHello: the ClientHello of the two attempts around a Retry
// is judged on the bytes both showed; a difference there fails, a missing
// tail (a multi-packet ClientHello cut short by the Retry) does not.
func TestSameClientHello(t *testing.T) {
	hello := []byte("\x01\x00\x00\x08abcdefgh")
	for _, tc := range []struct {
		name string
		a, b []byte
		want bool
	}{
		{"identical", hello, hello, true},
		{"first attempt cut short", hello[:6], hello, true},
		{"second attempt cut short", hello, hello[:7], true},
		{"changed byte", hello, []byte("\x01\x00\x00\x08abcXefgh"), false},
		{"changed within the shorter", hello[:9], []byte("\x01\x00\x00\x08abcXefgh"), false},
		{"nothing seen", nil, hello, false},
	} {
		if got, msg := sameClientHello(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: same %v (%s), want %v", tc.name, got, msg, tc.want)
		}
	}
}
