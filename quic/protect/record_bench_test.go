package protect

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

// BenchmarkRecordSeal seals with the AEADs directly at the size of a full
// TLS 1.3 record (16 KiB) and at a QUIC packet's payload, so that the cost
// of a cipher per byte can be compared between TCP+TLS (large records) and
// QUIC (one AEAD call per packet). Run it twice, once with
// GODEBUG=cpu.aes=off,cpu.pclmulqdq=off, to see what Go's software AES-GCM
// costs against AES-NI (docs/highway.md, "AES-NI masked").
func BenchmarkRecordSeal(b *testing.B) {
	key16, key32 := make([]byte, 16), make([]byte, 32)
	block, err := aes.NewCipher(key16)
	if err != nil {
		b.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		b.Fatal(err)
	}
	chacha, err := chacha20poly1305.New(key32)
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range []struct {
		name string
		aead cipher.AEAD
	}{{"AES-128-GCM", gcm}, {"ChaCha20-Poly1305", chacha}} {
		for _, size := range []int{1200, 16384} {
			b.Run(fmt.Sprintf("%s/%d", a.name, size), func(b *testing.B) {
				nonce := make([]byte, a.aead.NonceSize())
				buf := make([]byte, size, size+a.aead.Overhead())
				ad := make([]byte, 13)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					a.aead.Seal(buf[:0], nonce, buf, ad)
				}
			})
		}
	}
}
