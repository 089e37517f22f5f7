package protect

import (
	"crypto/tls"
	"fmt"
	"testing"
)

// The packet sizes benchmarked: the 1200-byte minimum datagram size of
// RFC 9000 §14, and 1452 bytes, the UDP payload of a 1500-byte IPv6 path
// (1500 - 40 - 8).
var benchSizes = []int{1200, 1452}

// benchPacket returns a 1-RTT packet buffer of size bytes, tag included,
// with an 11-byte short header: first byte, 8-byte connection ID and a
// 2-byte packet number at offset 9.
func benchPacket(size int) (buf []byte, hdrLen int) {
	buf = make([]byte, size)
	buf[0] = 0x41 // short header, 2-byte packet number
	return buf, 11
}

// benchAEAD runs body for every suite and packet size with fresh keys and
// a packet split into header and payload (the tag's room after payload).
func benchAEAD(b *testing.B, body func(b *testing.B, k *Keys, header, payload []byte)) {
	for _, suite := range allSuites {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", tls.CipherSuiteName(suite), size), func(b *testing.B) {
				k := mustKeys(b, Version1, suite, testSecret(b, suite, 1))
				buf, hdrLen := benchPacket(size)
				header, payload := buf[:hdrLen], buf[hdrLen:size-TagSize]
				b.SetBytes(int64(len(payload)))
				b.ReportAllocs()
				body(b, k, header, payload)
			})
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	benchAEAD(b, func(b *testing.B, k *Keys, header, payload []byte) {
		var pn uint64
		for b.Loop() {
			pn++
			k.Seal(payload[:0], header, payload, pn)
		}
	})
}

func BenchmarkOpen(b *testing.B) {
	benchAEAD(b, func(b *testing.B, k *Keys, header, payload []byte) {
		const pn = 42
		sealed := k.Seal(payload[:0], header, payload, pn)
		// Opening in place would destroy the ciphertext, so each round
		// opens the same ciphertext into a scratch buffer.
		plain := make([]byte, 0, len(sealed))
		for b.Loop() {
			if _, err := k.Open(plain, header, sealed, pn); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkHeaderProtection(b *testing.B) {
	for _, suite := range allSuites {
		hp := mustKeys(b, Version1, suite, testSecret(b, suite, 1)).HeaderProtector()
		buf, _ := benchPacket(1200)
		b.Run("Apply/"+tls.CipherSuiteName(suite), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := hp.Apply(buf, 9, false); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Remove/"+tls.CipherSuiteName(suite), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := hp.Remove(buf, 9, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
