package protect

import (
	"bytes"
	"crypto/tls"
	"testing"

	"golang.org/x/crypto/chacha20"
)

// TestHeaderSampleLength checks the boundary of RFC 9001 §5.4.2: the sample
// is 16 bytes at pn_offset + 4, and "An endpoint MUST discard packets that
// are not long enough to contain a complete sample".
func TestHeaderSampleLength(t *testing.T) {
	for _, suite := range allSuites {
		hp := mustKeys(t, Version1, suite, testSecret(t, suite, 9)).HeaderProtector()
		for _, pnOffset := range []int{1, 5, 18} {
			short := make([]byte, pnOffset+4+SampleSize-1)
			short[0] = 0xc3
			orig := append([]byte(nil), short...)
			if _, err := hp.Apply(short, pnOffset, true); err != ErrSampleTooShort {
				t.Errorf("%s Apply, pn offset %d, one byte short: %v", tls.CipherSuiteName(suite), pnOffset, err)
			}
			if _, err := hp.Remove(short, pnOffset, true); err != ErrSampleTooShort {
				t.Errorf("%s Remove, pn offset %d, one byte short: %v", tls.CipherSuiteName(suite), pnOffset, err)
			}
			if !bytes.Equal(short, orig) {
				t.Error("a rejected packet was modified")
			}
			exact := append(short, 0)
			if _, err := hp.Apply(exact, pnOffset, true); err != nil {
				t.Errorf("%s Apply, exact length: %v", tls.CipherSuiteName(suite), err)
			}
		}
		for _, pnOffset := range []int{-1, 0, 100} {
			if _, err := hp.Remove(make([]byte, 40), pnOffset, false); err != ErrPacketNumberOffset && err != ErrSampleTooShort {
				t.Errorf("pn offset %d: %v", pnOffset, err)
			}
		}
		if _, err := hp.Mask(make([]byte, SampleSize-1)); err != ErrSampleTooShort {
			t.Errorf("Mask of a short sample: %v", err)
		}
	}
}

// TestHeaderProtectionBits checks which bits are masked (RFC 9001 §5.4.1:
// "Long header: 4 bits masked ... Short header: 5 bits masked"), that the
// header form bit and the other header bytes never change, and that Remove
// undoes Apply for every packet number length.
func TestHeaderProtectionBits(t *testing.T) {
	for _, suite := range allSuites {
		hp := mustKeys(t, Version2, suite, testSecret(t, suite, 5)).HeaderProtector()
		for _, long := range []bool{true, false} {
			keep := byte(0xe0)
			first := byte(0x40)
			if long {
				keep, first = 0xf0, 0xc0
			}
			for pnLen := 1; pnLen <= 4; pnLen++ {
				for seed := range 64 {
					pkt := make([]byte, 60)
					for i := range pkt {
						pkt[i] = byte(seed*7 + i*13)
					}
					pkt[0] = first | byte(seed)&0x3c | byte(pnLen-1)
					const pnOffset = 9
					orig := append([]byte(nil), pkt...)
					n, err := hp.Apply(pkt, pnOffset, long)
					if err != nil || n != pnLen {
						t.Fatalf("Apply: %d, %v", n, err)
					}
					if pkt[0]&keep != orig[0]&keep {
						t.Fatalf("long=%v: unmasked bits of the first byte changed: %08b -> %08b", long, orig[0], pkt[0])
					}
					if !bytes.Equal(pkt[1:pnOffset], orig[1:pnOffset]) || !bytes.Equal(pkt[pnOffset+pnLen:], orig[pnOffset+pnLen:]) {
						t.Fatal("bytes outside the first byte and packet number changed")
					}
					n, err = hp.Remove(pkt, pnOffset, long)
					if err != nil || n != pnLen || !bytes.Equal(pkt, orig) {
						t.Fatalf("Remove: %d, %v, %x != %x", n, err, pkt, orig)
					}
				}
			}
		}
	}
}

// TestChaChaMaskCounter checks RFC 9001 §5.4.4 against a keystream computed
// independently: "The first 4 bytes of the sampled ciphertext are the block
// counter ... interpreted as a little-endian value", including the counter
// values 0, 1 and the last one, 0xffffffff, which must not overflow.
func TestChaChaMaskCounter(t *testing.T) {
	key := testSecret(t, tls.TLS_CHACHA20_POLY1305_SHA256, 0x42)
	hp, err := NewHeaderProtector(key, true)
	if err != nil {
		t.Fatal(err)
	}
	nonce := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	for _, counter := range []uint32{0, 1, 0x01000000, 0xfffffffe, 0xffffffff} {
		// Reference: start one block earlier where possible and skip it.
		start, skip := counter, 0
		if counter > 0 {
			start, skip = counter-1, 64
		}
		c, err := chacha20.NewUnauthenticatedCipher(key, nonce)
		if err != nil {
			t.Fatal(err)
		}
		c.SetCounter(start)
		stream := make([]byte, skip+5)
		c.XORKeyStream(stream, stream)

		sample := append([]byte{byte(counter), byte(counter >> 8), byte(counter >> 16), byte(counter >> 24)}, nonce...)
		mask, err := hp.Mask(sample)
		if err != nil {
			t.Fatal(err)
		}
		checkBytes(t, "mask", mask[:], stream[skip:])
	}
	if _, err := NewHeaderProtector(key[:16], true); err == nil {
		t.Error("16-byte ChaCha20 key accepted")
	}
	if _, err := NewHeaderProtector(key[:15], false); err == nil {
		t.Error("15-byte AES key accepted")
	}
}
