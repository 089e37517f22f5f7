package protect

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"strings"
	"testing"
)

// unhex decodes hex pasted from an RFC, ignoring spaces and line breaks.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad test vector hex: %v", err)
	}
	return b
}

func checkBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n got %x\nwant %x", what, got, want)
	}
}

var rfcVectors = []rfcVector{rfc9001, rfc9369}

// TestVectorKeys checks Appendix A.1 ("Keys") of RFC 9001 and RFC 9369: the
// HkdfLabel encodings, the initial secret, both Initial secrets and the key,
// IV and header protection key of each side.
func TestVectorKeys(t *testing.T) {
	for _, v := range rfcVectors {
		t.Run(v.name, func(t *testing.T) {
			lengths := map[string]int{"client in": 32, "server in": 32}
			labels, err := KeyLabels(v.version)
			if err != nil {
				t.Fatal(err)
			}
			lengths[labels.Key], lengths[labels.IV], lengths[labels.HP] = 16, 12, 16
			for label, want := range v.labels {
				n, ok := lengths[label]
				if !ok {
					t.Fatalf("label %q is not one of the version's labels %+v", label, labels)
				}
				checkBytes(t, "HkdfLabel "+label, hkdfLabel(label, n), unhex(t, want))
			}

			dcid := unhex(t, vectorDCID)
			salt, err := InitialSalt(v.version)
			if err != nil {
				t.Fatal(err)
			}
			initial, err := hkdf.Extract(sha256.New, dcid, salt)
			if err != nil {
				t.Fatal(err)
			}
			checkBytes(t, "initial_secret", initial, unhex(t, v.initialSecret))

			client, server := InitialSecrets(v.version, dcid)
			checkBytes(t, "client_initial_secret", client, unhex(t, v.clientSecret))
			checkBytes(t, "server_initial_secret", server, unhex(t, v.serverSecret))

			for _, side := range []struct {
				name         string
				secret       []byte
				key, iv, hp  string
				sample, mask string
			}{
				{"client", client, v.clientKey, v.clientIV, v.clientHP, v.clientSample, v.clientMask},
				{"server", server, v.serverKey, v.serverIV, v.serverHP, v.serverSample, v.serverMask},
			} {
				checkBytes(t, side.name+" key", ExpandLabel(sha256.New, side.secret, labels.Key, 16), unhex(t, side.key))
				checkBytes(t, side.name+" iv", ExpandLabel(sha256.New, side.secret, labels.IV, 12), unhex(t, side.iv))
				checkBytes(t, side.name+" hp", ExpandLabel(sha256.New, side.secret, labels.HP, 16), unhex(t, side.hp))

				// The keys NewKeys builds carry the same IV and header
				// protection key (the AEAD key is checked by the packets).
				k, err := NewKeys(v.version, InitialSuite, side.secret)
				if err != nil {
					t.Fatal(err)
				}
				checkBytes(t, side.name+" Keys.iv", k.iv[:], unhex(t, side.iv))
				mask, err := k.HeaderProtector().Mask(unhex(t, side.sample))
				if err != nil {
					t.Fatal(err)
				}
				checkBytes(t, side.name+" mask", mask[:], unhex(t, side.mask))
				checkBytes(t, side.name+" Secret", k.Secret(), side.secret)
			}
		})
	}
}

// clientInitialPayload rebuilds the plaintext of Appendix A.2: "the
// following CRYPTO frame, plus enough PADDING frames to make a 1162-byte
// payload". A PADDING frame is a single 0x00 byte.
func clientInitialPayload(t testing.TB, v rfcVector) []byte {
	payload := make([]byte, 1162)
	crypto := unhex(t, v.clientCrypto)
	if copy(payload, crypto) != len(crypto) {
		t.Fatal("CRYPTO frame longer than the payload")
	}
	return payload
}

// TestVectorInitials protects the client Initial (Appendix A.2) and the
// server Initial (Appendix A.3) exactly as the RFCs show, compares the whole
// protected packet, then removes the protection again.
func TestVectorInitials(t *testing.T) {
	for _, v := range rfcVectors {
		client, server, err := NewInitialKeys(v.version, unhex(t, vectorDCID))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name                    string
			keys                    *Keys
			header, payload         []byte
			pn                      uint64
			sample, protectedHeader string
			packet                  string
		}{
			// A.2: "The header includes the connection ID and a packet
			// number of 2".
			{"client", client, unhex(t, v.clientHeader), clientInitialPayload(t, v), 2, v.clientSample, v.clientProtectedHeader, v.clientPacket},
			// A.3: "a 2-byte packet number encoding for a packet number
			// of 1".
			{"server", server, unhex(t, v.serverHeader), unhex(t, v.serverPayload), 1, v.serverSample, v.serverProtectedHeader, v.serverPacket},
		} {
			t.Run(v.name+"/"+c.name, func(t *testing.T) {
				pnLen := int(c.header[0]&0x03) + 1
				pnOffset := len(c.header) - pnLen
				want := unhex(t, c.packet)

				pkt := make([]byte, 0, len(c.header)+len(c.payload)+TagSize)
				pkt = append(append(pkt, c.header...), c.payload...)
				got, err := c.keys.SealPacket(pkt, pnOffset, c.pn)
				if err != nil {
					t.Fatal(err)
				}
				if &got[0] != &pkt[0] {
					t.Error("SealPacket did not protect in place")
				}
				checkBytes(t, "sample", got[pnOffset+4:pnOffset+4+SampleSize], unhex(t, c.sample))
				checkBytes(t, "protected header", got[:len(c.header)], unhex(t, c.protectedHeader))
				checkBytes(t, "protected packet", got, want)

				// The reverse: the peer removes header protection, learns
				// the packet number length, and opens the payload.
				rcv := append([]byte(nil), want...)
				n, err := c.keys.HeaderProtector().Remove(rcv, pnOffset, true)
				if err != nil {
					t.Fatal(err)
				}
				if n != pnLen {
					t.Errorf("packet number length %d, want %d", n, pnLen)
				}
				checkBytes(t, "unprotected header", rcv[:len(c.header)], c.header)
				plain, err := c.keys.OpenPacket(rcv, pnOffset+n, c.pn)
				if err != nil {
					t.Fatal(err)
				}
				checkBytes(t, "payload", plain, c.payload)
			})
		}
	}
}

// TestVectorRetry checks the Retry packet of Appendix A.4 (RFC 9001 §5.8,
// RFC 9369 §3.3.3).
func TestVectorRetry(t *testing.T) {
	for _, v := range rfcVectors {
		t.Run(v.name, func(t *testing.T) {
			odcid := unhex(t, vectorDCID)
			retry := unhex(t, v.retry)
			body := retry[:len(retry)-RetryTagSize]

			tag, err := RetryIntegrityTag(v.version, odcid, body)
			if err != nil {
				t.Fatal(err)
			}
			checkBytes(t, "Retry Integrity Tag", tag[:], retry[len(body):])
			full, err := AppendRetryIntegrityTag(v.version, odcid, append([]byte(nil), body...))
			if err != nil {
				t.Fatal(err)
			}
			checkBytes(t, "Retry packet", full, retry)
			if err := VerifyRetry(v.version, odcid, retry); err != nil {
				t.Errorf("VerifyRetry: %v", err)
			}

			// The other version's key, another ODCID, or any flipped bit
			// must fail.
			other := Version2
			if v.version == Version2 {
				other = Version1
			}
			if err := VerifyRetry(other, odcid, retry); err != ErrInvalidRetry {
				t.Errorf("VerifyRetry with version 0x%08x: %v, want ErrInvalidRetry", other, err)
			}
			if err := VerifyRetry(v.version, odcid[1:], retry); err != ErrInvalidRetry {
				t.Errorf("VerifyRetry with a shorter ODCID: %v, want ErrInvalidRetry", err)
			}
			for i := range len(retry) * 8 {
				bad := append([]byte(nil), retry...)
				bad[i/8] ^= 1 << (i % 8)
				if err := VerifyRetry(v.version, odcid, bad); err != ErrInvalidRetry {
					t.Fatalf("VerifyRetry with bit %d flipped: %v, want ErrInvalidRetry", i, err)
				}
			}
			if err := VerifyRetry(v.version, odcid, retry[:RetryTagSize-1]); err != ErrInvalidRetry {
				t.Errorf("VerifyRetry of a truncated packet: %v", err)
			}
		})
	}
}

// TestVectorChaCha20 checks Appendix A.5, the ChaCha20-Poly1305 short header
// packet: key material, nonce, ciphertext, mask and the 21-byte packet.
func TestVectorChaCha20(t *testing.T) {
	const suite = tls.TLS_CHACHA20_POLY1305_SHA256
	for _, v := range rfcVectors {
		t.Run(v.name, func(t *testing.T) {
			secret := unhex(t, v.chachaSecret)
			labels, _ := KeyLabels(v.version)
			checkBytes(t, "key", ExpandLabel(sha256.New, secret, labels.Key, 32), unhex(t, v.chachaKey))
			checkBytes(t, "iv", ExpandLabel(sha256.New, secret, labels.IV, 12), unhex(t, v.chachaIV))
			checkBytes(t, "hp", ExpandLabel(sha256.New, secret, labels.HP, 32), unhex(t, v.chachaHP))
			ku, err := NextSecret(v.version, suite, secret)
			if err != nil {
				t.Fatal(err)
			}
			checkBytes(t, "ku", ku, unhex(t, v.chachaKU))

			k, err := NewKeys(v.version, suite, secret)
			if err != nil {
				t.Fatal(err)
			}
			k.setNonce(vectorChaChaPN)
			checkBytes(t, "nonce", k.nonce[:], unhex(t, v.chachaNonce))

			header, payload := unhex(t, v.chachaHeader), unhex(t, v.chachaPayload)
			checkBytes(t, "payload ciphertext", k.Seal(nil, header, payload, vectorChaChaPN), unhex(t, v.chachaCiphertext))

			// "One byte is skipped to produce the sample": the packet
			// number is 3 bytes at offset 1, so the sample starts at 5.
			const pnOffset = 1
			want := unhex(t, v.chachaPacket)
			mask, err := k.HeaderProtector().Mask(want[pnOffset+4:])
			if err != nil {
				t.Fatal(err)
			}
			checkBytes(t, "sample", want[pnOffset+4:], unhex(t, v.chachaSample))
			checkBytes(t, "mask", mask[:], unhex(t, v.chachaMask))

			pkt := append(append(make([]byte, 0, 64), header...), payload...)
			got, err := k.SealPacket(pkt, pnOffset, vectorChaChaPN)
			if err != nil {
				t.Fatal(err)
			}
			checkBytes(t, "protected header", got[:len(header)], unhex(t, v.chachaProtectedHeader))
			checkBytes(t, "packet", got, want)
			if len(got) != 21 {
				t.Errorf("packet of %d bytes, RFC: \"the smallest possible packet size of 21 bytes\"", len(got))
			}

			rcv := append([]byte(nil), want...)
			n, err := k.HeaderProtector().Remove(rcv, pnOffset, false)
			if err != nil {
				t.Fatal(err)
			}
			if n != 3 {
				t.Errorf("packet number length %d, want 3", n)
			}
			checkBytes(t, "unprotected header", rcv[:len(header)], header)
			// "49140 is encoded": the truncated packet number on the wire.
			if tr := uint64(rcv[1])<<16 | uint64(rcv[2])<<8 | uint64(rcv[3]); tr != 49140 || vectorChaChaPN&0xffffff != 49140 {
				t.Errorf("truncated packet number %d, want 49140", tr)
			}
			plain, err := k.OpenPacket(rcv, pnOffset+n, vectorChaChaPN)
			if err != nil {
				t.Fatal(err)
			}
			checkBytes(t, "payload", plain, payload)
		})
	}
}
