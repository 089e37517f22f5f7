//go:build linux

package conformance

import (
	"net/netip"
	"testing"
)

func TestDFObserverParse(t *testing.T) {
	o := &dfObserver{target: netip.MustParseAddrPort("127.0.0.1:4433")}
	o.watchPort(5000)
	pkt := func(flags byte, src [4]byte, sport, dport uint16) []byte {
		b := make([]byte, 28)
		b[0], b[6], b[9] = 0x45, flags, 17
		copy(b[12:16], src[:])
		b[20], b[21] = byte(sport>>8), byte(sport)
		b[22], b[23] = byte(dport>>8), byte(dport)
		return b
	}
	lo := [4]byte{127, 0, 0, 1}
	for _, tc := range []struct {
		name   string
		b      []byte
		df, ok bool
	}{
		{"df set", pkt(0x40, lo, 4433, 5000), true, true},
		{"df clear", pkt(0x00, lo, 4433, 5000), false, true},
		{"other port", pkt(0x40, lo, 4433, 5001), false, false},
		{"other source", pkt(0x40, [4]byte{10, 0, 0, 1}, 4433, 5000), false, false},
		{"truncated", pkt(0x40, lo, 4433, 5000)[:24], false, false},
	} {
		df, ok := o.parse(tc.b)
		if df != tc.df || ok != tc.ok {
			t.Errorf("%s: df %v ok %v, want %v %v", tc.name, df, ok, tc.df, tc.ok)
		}
	}
}
