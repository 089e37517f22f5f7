package protect

import (
	"crypto/tls"
	"testing"
)

// FuzzOpen feeds arbitrary packets through the receive path: header
// protection removal at an arbitrary packet number offset, then AEAD
// opening with Initial (AES-128-GCM) keys, 1-RTT ChaCha20 keys and a
// KeyPhase. Nothing may panic, and random bytes must not authenticate.
func FuzzOpen(f *testing.F) {
	for _, v := range rfcVectors {
		f.Add(unhex(f, v.clientPacket), uint8(18), true, uint64(2))
		f.Add(unhex(f, v.serverPacket), uint8(18), true, uint64(1))
		f.Add(unhex(f, v.chachaPacket), uint8(1), false, uint64(vectorChaChaPN))
	}
	f.Add([]byte{}, uint8(0), false, uint64(0))
	f.Add(make([]byte, 21), uint8(1), false, uint64(1<<62-1))

	initial, _, err := NewInitialKeys(Version1, unhex(f, vectorDCID))
	if err != nil {
		f.Fatal(err)
	}
	chacha := mustKeys(f, Version2, tls.TLS_CHACHA20_POLY1305_SHA256, unhex(f, rfc9369.chachaSecret))
	var phase KeyPhase
	if err := phase.InstallRead(Version1, tls.TLS_AES_256_GCM_SHA384, testSecret(f, tls.TLS_AES_256_GCM_SHA384, 1)); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, pkt []byte, pnOffset uint8, long bool, pn uint64) {
		for _, k := range []*Keys{initial, chacha} {
			buf := append([]byte(nil), pkt...)
			n, err := k.HeaderProtector().Remove(buf, int(pnOffset), long)
			if err != nil {
				if len(pkt) >= int(pnOffset)+4+SampleSize && pnOffset > 0 {
					t.Fatalf("Remove rejected a long enough packet: %v", err)
				}
				continue
			}
			if n < 1 || n > 4 {
				t.Fatalf("packet number length %d", n)
			}
			if plain, err := k.OpenPacket(buf, int(pnOffset)+n, pn); err == nil {
				// Only the RFC's own packets are expected to open.
				t.Logf("opened %d bytes", len(plain))
			}
			hdr := int(pnOffset) + n
			if _, _, err := phase.Open(buf[hdr:hdr], buf[:hdr], buf[hdr:], pn, buf[0]>>2&1); err == nil {
				t.Fatal("a random packet authenticated with 1-RTT keys")
			}
		}
		_ = VerifyRetry(Version1, pkt[:min(len(pkt), 20)], pkt)
	})
}
