package quic

import (
	"net/netip"
	"testing"
	"time"
)

// FuzzDatagramDCID checks that routing never panics on any datagram.
func FuzzDatagramDCID(f *testing.F) {
	f.Add([]byte{0x40, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0xc0, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if dcid, ok := datagramDCID(b, 8); ok && len(dcid) > len(b) {
			t.Fatalf("DCID longer than the datagram")
		}
		helloRandom(b)
		findRemembered([][]byte{b})
	})
}

// FuzzRetryToken checks that token validation rejects anything the
// endpoint did not seal, and accepts what it did.
func FuzzRetryToken(f *testing.F) {
	tp, err := newTokenProtector()
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1e9, 0)
	addr := netip.MustParseAddrPort("192.0.2.1:443")
	f.Add(tp.seal(now, addr, []byte("odcid123"), []byte("rscid456")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, tok []byte) {
		tp.open(now, addr, tok)
		o, r, ok := tp.open(now, addr, tp.seal(now, addr, tok[:min(len(tok), 20)], []byte("r")))
		if !ok || string(o) != string(tok[:min(len(tok), 20)]) || string(r) != "r" {
			t.Fatalf("sealed token does not open: %x %x %v", o, r, ok)
		}
		if _, _, ok := tp.open(now, netip.MustParseAddrPort("192.0.2.2:443"), tp.seal(now, addr, nil, nil)); ok {
			t.Fatalf("token accepted from another address")
		}
	})
}

func FuzzParseECN(f *testing.F) {
	f.Add([]byte{17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if e := parseECN(b); e > 3 {
			t.Fatalf("ECN %d", e)
		}
	})
}
