package protect

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"testing"
)

var allSuites = []uint16{
	tls.TLS_AES_128_GCM_SHA256,
	tls.TLS_AES_256_GCM_SHA384,
	tls.TLS_CHACHA20_POLY1305_SHA256,
}

// testSecret returns a deterministic secret of the suite's hash length.
func testSecret(t testing.TB, suite uint16, seed byte) []byte {
	s, err := suiteFor(suite)
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, s.hash().Size())
	for i := range secret {
		secret[i] = seed + byte(i)
	}
	return secret
}

func mustKeys(t testing.TB, version uint32, suite uint16, secret []byte) *Keys {
	t.Helper()
	k, err := NewKeys(version, suite, secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKeyUpdateDerivation checks RFC 9001 §6.1 ("secret_<n+1> =
// HKDF-Expand-Label(secret_<n>, "quic ku", "", Hash.length)") and the v2
// label of RFC 9369 §3.3.2, two generations deep, with the A.5 secret.
func TestKeyUpdateDerivation(t *testing.T) {
	const suite = tls.TLS_CHACHA20_POLY1305_SHA256
	secret := unhex(t, rfc9001.chachaSecret)
	for _, c := range []struct {
		version uint32
		label   string
		ku      string
	}{
		{Version1, "quic ku", rfc9001.chachaKU},
		{Version2, "quicv2 ku", rfc9369.chachaKU},
	} {
		t.Run(fmt.Sprintf("0x%08x", c.version), func(t *testing.T) {
			k := mustKeys(t, c.version, suite, secret)
			k1, err := k.Next()
			if err != nil {
				t.Fatal(err)
			}
			checkBytes(t, "generation 1 secret", k1.Secret(), unhex(t, c.ku))
			k2, err := k1.Next()
			if err != nil {
				t.Fatal(err)
			}
			checkBytes(t, "generation 2 secret", k2.Secret(), ExpandLabel(sha256.New, unhex(t, c.ku), c.label, 32))
			next, _ := NextSecret(c.version, suite, k1.Secret())
			checkBytes(t, "NextSecret", next, k2.Secret())

			// RFC 9001 §6.1: "The header protection keys are not updated".
			if k1.HeaderProtector() != k.HeaderProtector() || k2.HeaderProtector() != k.HeaderProtector() {
				t.Error("key update changed the header protector")
			}
			if k1.iv == k.iv || k2.iv == k1.iv {
				t.Error("key update kept the IV")
			}
			// A packet sealed with one generation opens only with it.
			sealed := k1.Seal(nil, []byte{0x40}, []byte("ping"), 7)
			if _, err := k.Open(nil, []byte{0x40}, sealed, 7); err != ErrDecrypt {
				t.Errorf("generation 0 opened a generation 1 packet: %v", err)
			}
			peer := mustKeys(t, c.version, suite, unhex(t, c.ku))
			if plain, err := peer.Open(nil, []byte{0x40}, sealed, 7); err != nil || string(plain) != "ping" {
				t.Errorf("generation 1 keys from the ku secret: %q, %v", plain, err)
			}
		})
	}
	v1, _ := NextSecret(Version1, suite, secret)
	v2, _ := NextSecret(Version2, suite, secret)
	if bytes.Equal(v1, v2) {
		t.Error("v1 and v2 key update secrets are equal")
	}
}

// TestSealOpen round-trips packets of every suite and version, in place and
// into a separate buffer, and checks tamper detection: RFC 9001 §5.3
// requires that a flipped bit anywhere in the header (associated data),
// ciphertext or tag, or a wrong packet number, fails authentication.
func TestSealOpen(t *testing.T) {
	for _, version := range []uint32{Version1, Version2} {
		for _, suite := range allSuites {
			t.Run(fmt.Sprintf("0x%08x/%s", version, tls.CipherSuiteName(suite)), func(t *testing.T) {
				secret := testSecret(t, suite, 1)
				snd, rcv := mustKeys(t, version, suite, secret), mustKeys(t, version, suite, secret)
				if snd.Overhead() != TagSize {
					t.Fatalf("Overhead %d", snd.Overhead())
				}
				header := []byte{0x41, 1, 2, 3, 4, 0x12, 0x34}
				payload := bytes.Repeat([]byte("quiver"), 20)
				const pn = 0x3fffffff_ffff1234 // 62 bits

				buf := make([]byte, len(payload), len(payload)+TagSize)
				copy(buf, payload)
				sealed := snd.Seal(buf[:0], header, buf, pn)
				if &sealed[0] != &buf[0] || len(sealed) != len(payload)+TagSize {
					t.Fatal("Seal did not work in place")
				}
				orig := append([]byte(nil), sealed...)

				plain, err := rcv.Open(nil, header, sealed, pn)
				if err != nil || !bytes.Equal(plain, payload) {
					t.Fatalf("Open: %v", err)
				}
				for i := range (len(header) + len(sealed)) * 8 {
					h, c := append([]byte(nil), header...), append([]byte(nil), orig...)
					if j := i / 8; j < len(h) {
						h[j] ^= 1 << (i % 8)
					} else {
						c[j-len(h)] ^= 1 << (i % 8)
					}
					if _, err := rcv.Open(c[:0], h, c, pn); err != ErrDecrypt {
						t.Fatalf("bit %d flipped: %v, want ErrDecrypt", i, err)
					}
				}
				if _, err := rcv.Open(nil, header, orig, pn+1); err != ErrDecrypt {
					t.Errorf("wrong packet number: %v", err)
				}
				if _, err := rcv.Open(nil, header, orig[:TagSize-1], pn); err != ErrDecrypt {
					t.Errorf("ciphertext shorter than the tag: %v", err)
				}
				// In place.
				plain, err = rcv.Open(sealed[:0], header, sealed, pn)
				if err != nil || !bytes.Equal(plain, payload) || &plain[0] != &sealed[0] {
					t.Errorf("in-place Open: %v", err)
				}
			})
		}
	}
}

func TestNewKeysErrors(t *testing.T) {
	secret := testSecret(t, tls.TLS_AES_128_GCM_SHA256, 0)
	if _, err := NewKeys(0xff00001d, tls.TLS_AES_128_GCM_SHA256, secret); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("draft version: %v", err)
	}
	if _, err := NewKeys(Version1, 0x1305, secret); !errors.Is(err, ErrUnsupportedSuite) { // TLS_AES_128_CCM_8_SHA256
		t.Errorf("CCM_8: %v", err)
	}
	if _, err := NewKeys(Version1, tls.TLS_AES_256_GCM_SHA384, secret); err == nil {
		t.Error("a 32-byte secret for a SHA-384 suite was accepted")
	}
	if c, s := InitialSecrets(0x0a0a0a0a, []byte{1}); c != nil || s != nil {
		t.Error("InitialSecrets of an unknown version returned secrets")
	}
	if _, _, err := NewInitialKeys(0, []byte{1}); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("NewInitialKeys(0): %v", err)
	}
	if SupportedVersion(0) || !SupportedVersion(Version1) || !SupportedVersion(Version2) {
		t.Error("SupportedVersion")
	}
	salt, _ := InitialSalt(Version1)
	c1, s1 := InitialSecretsWithSalt(salt, []byte{1, 2, 3})
	c2, s2 := InitialSecrets(Version1, []byte{1, 2, 3})
	if !bytes.Equal(c1, c2) || !bytes.Equal(s1, s2) {
		t.Error("InitialSecretsWithSalt differs from InitialSecrets")
	}
}

func TestLimits(t *testing.T) {
	for _, c := range []struct {
		suite                  uint16
		confidentiality, integ uint64
	}{
		{tls.TLS_AES_128_GCM_SHA256, 1 << 23, 1 << 52},
		{tls.TLS_AES_256_GCM_SHA384, 1 << 23, 1 << 52},
		{tls.TLS_CHACHA20_POLY1305_SHA256, 1 << 62, 1 << 36},
	} {
		k := mustKeys(t, Version1, c.suite, testSecret(t, c.suite, 0))
		if k.ConfidentialityLimit() != c.confidentiality || k.IntegrityLimit() != c.integ {
			t.Errorf("%s: limits %d/%d", tls.CipherSuiteName(c.suite), k.ConfidentialityLimit(), k.IntegrityLimit())
		}
		if k.Suite() != c.suite || k.Version() != Version1 {
			t.Errorf("Suite/Version accessors")
		}
	}
}

func TestSealPacketErrors(t *testing.T) {
	k := mustKeys(t, Version1, tls.TLS_AES_128_GCM_SHA256, testSecret(t, tls.TLS_AES_128_GCM_SHA256, 0))
	// Short header, 1-byte packet number at offset 1: the packet number and
	// payload must make at least 4 bytes before the tag (RFC 9001 §5.4.2).
	if _, err := k.SealPacket([]byte{0x40, 0, 1, 2}, 1, 0); err != ErrSampleTooShort {
		t.Errorf("3 bytes after the pn offset: %v", err)
	}
	got, err := k.SealPacket([]byte{0x40, 0, 1, 2, 3}, 1, 0) // no spare capacity: grows
	if err != nil || len(got) != 5+TagSize {
		t.Errorf("4 bytes after the pn offset: %v", err)
	}
	if _, err := k.SealPacket([]byte{0x43, 0, 1}, 1, 0); err != ErrPacketNumberOffset {
		t.Errorf("packet number past the end: %v", err)
	}
	if _, err := k.SealPacket([]byte{0x40}, 0, 0); err != ErrPacketNumberOffset {
		t.Errorf("pn offset 0: %v", err)
	}
	if _, err := k.OpenPacket([]byte{0x40}, 2, 0); err != ErrPacketNumberOffset {
		t.Errorf("OpenPacket header past the end: %v", err)
	}
}

// TestZeroAlloc checks the steady-state promise: Seal, Open and header
// protection do not allocate when buffers have room.
func TestZeroAlloc(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are measured in full runs")
	}
	for _, suite := range allSuites {
		k := mustKeys(t, Version1, suite, testSecret(t, suite, 3))
		hp := k.HeaderProtector()
		buf := make([]byte, 1200+TagSize)
		header := buf[:20]
		payload := buf[20:1200]
		var pn uint64
		allocs := testing.AllocsPerRun(100, func() {
			pn++
			sealed := k.Seal(payload[:0], header, payload, pn)
			if _, err := hp.Apply(buf, 16, false); err != nil {
				t.Fatal(err)
			}
			if _, err := hp.Remove(buf, 16, false); err != nil {
				t.Fatal(err)
			}
			if _, err := k.Open(sealed[:0], header, sealed, pn); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per packet, want 0", tls.CipherSuiteName(suite), allocs)
		}
	}
}

// TestExpanderMatchesExpandLabel checks the one-HMAC derivation against
// HKDF-Expand-Label for every label and length QUIC derives, with both
// hashes.
func TestExpanderMatchesExpandLabel(t *testing.T) {
	for _, suite := range []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256} {
		s, err := suiteFor(suite)
		if err != nil {
			t.Fatal(err)
		}
		secret := testSecret(t, suite, 7)
		x := newExpander(s.hash, secret)
		for _, labels := range []versionParams{paramsV1, paramsV2} {
			for _, l := range []struct {
				label  string
				length int
			}{{labels.labels.Key, s.keyLen}, {labels.labels.IV, 12}, {labels.labels.HP, s.keyLen}, {labels.labels.KeyUpdate, len(secret)}} {
				want := ExpandLabel(s.hash, secret, l.label, l.length)
				if got := x.expandLabel(l.label, l.length); !bytes.Equal(got, want) {
					t.Errorf("suite %04x %q: got %x, want %x", suite, l.label, got, want)
				}
			}
		}
	}
}

func BenchmarkNewKeys(b *testing.B) {
	secret := testSecret(b, tls.TLS_AES_128_GCM_SHA256, 1)
	b.ReportAllocs()
	for b.Loop() {
		k, err := NewKeys(Version1, tls.TLS_AES_128_GCM_SHA256, secret)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := k.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
