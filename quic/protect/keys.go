package protect

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"hash"

	"golang.org/x/crypto/chacha20poly1305"
)

// TagSize is the length of the AEAD authentication tag that every QUIC
// cipher suite appends to a packet payload (RFC 9001 §5.3: "These cipher
// suites have a 16-byte authentication tag").
const TagSize = 16

// SampleSize is the length of the ciphertext sample taken for header
// protection (RFC 9001 §5.4.2: "the sampled ciphertext is 16 bytes" for the
// AES and ChaCha20 based schemes).
const SampleSize = 16

// suiteParams describes how a TLS 1.3 cipher suite protects QUIC packets.
type suiteParams struct {
	hash   func() hash.Hash
	keyLen int
	chacha bool
}

func suiteFor(suite uint16) (suiteParams, error) {
	switch suite {
	case tls.TLS_AES_128_GCM_SHA256:
		return suiteParams{hash: sha256.New, keyLen: 16}, nil
	case tls.TLS_AES_256_GCM_SHA384:
		return suiteParams{hash: sha512.New384, keyLen: 32}, nil
	case tls.TLS_CHACHA20_POLY1305_SHA256:
		return suiteParams{hash: sha256.New, keyLen: 32, chacha: true}, nil
	}
	// RFC 9001 §5.3: "An endpoint MUST NOT negotiate a cipher suite that
	// uses TLS_AES_128_CCM_8_SHA256"; CCM is not implemented at all.
	return suiteParams{}, fmt.Errorf("%w: 0x%04x", ErrUnsupportedSuite, suite)
}

// lookup returns the constants of a version and a cipher suite.
func lookup(version uint32, suite uint16) (*versionParams, suiteParams, error) {
	p, err := params(version)
	if err != nil {
		return nil, suiteParams{}, err
	}
	s, err := suiteFor(suite)
	if err != nil {
		return nil, suiteParams{}, err
	}
	return p, s, nil
}

// Keys protects the packets of one direction at one encryption level and
// one key phase: an AEAD, its IV and the header protector. It is built from
// the (suite, secret) pair that crypto/tls reports in QUICSetReadSecret and
// QUICSetWriteSecret events, or from an Initial secret.
//
// A Keys value keeps a nonce scratch buffer and must not be used
// concurrently.
type Keys struct {
	version uint32
	suite   uint16
	secret  []byte
	aead    cipher.AEAD
	iv      [12]byte
	nonce   [12]byte
	hp      *HeaderProtector
}

// NewKeys derives packet protection keys for version from a traffic secret
// of the TLS 1.3 cipher suite suite (tls.TLS_AES_128_GCM_SHA256,
// tls.TLS_AES_256_GCM_SHA384 or tls.TLS_CHACHA20_POLY1305_SHA256).
//
// RFC 9001 §5.1: "The current encryption level secret and the label "quic
// key" are input to the KDF to produce the AEAD key; the label "quic iv" is
// used to derive the Initialization Vector (IV) ... The header protection
// key uses the "quic hp" label". Version 2 uses the "quicv2" labels
// (RFC 9369 §3.3.2).
func NewKeys(version uint32, suite uint16, secret []byte) (*Keys, error) {
	p, s, err := lookup(version, suite)
	if err != nil {
		return nil, err
	}
	if n := s.hash().Size(); len(secret) != n {
		return nil, fmt.Errorf("protect: secret of %d bytes for suite 0x%04x, want %d", len(secret), suite, n)
	}
	x := newExpander(s.hash, secret)
	hp, err := newHeaderProtector(x.expandLabel(p.labels.HP, s.keyLen), s.chacha)
	if err != nil {
		return nil, err
	}
	return newKeys(p, suite, s, secret, x, hp)
}

// newKeys builds the AEAD half of Keys from the expander x of secret; key
// update reuses it with the unchanged header protector.
func newKeys(p *versionParams, suite uint16, s suiteParams, secret []byte, x *expander, hp *HeaderProtector) (*Keys, error) {
	// The key is used before the IV is derived: expandLabel reuses its
	// output array.
	key := x.expandLabel(p.labels.Key, s.keyLen)
	var aead cipher.AEAD
	var err error
	if s.chacha {
		aead, err = chacha20poly1305.New(key)
	} else {
		var block cipher.Block
		if block, err = aes.NewCipher(key); err == nil {
			aead, err = cipher.NewGCM(block)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("protect: AEAD for suite 0x%04x: %w", suite, err)
	}
	k := &Keys{
		version: versionOf(p),
		suite:   suite,
		secret:  append([]byte(nil), secret...),
		aead:    aead,
		hp:      hp,
	}
	copy(k.iv[:], x.expandLabel(p.labels.IV, 12))
	return k, nil
}

func versionOf(p *versionParams) uint32 {
	if p == &paramsV2 {
		return Version2
	}
	return Version1
}

// Version returns the QUIC version whose labels derived the keys.
func (k *Keys) Version() uint32 { return k.version }

// Suite returns the TLS cipher suite of the keys.
func (k *Keys) Suite() uint16 { return k.suite }

// Secret returns the traffic secret the keys were derived from, for a key
// logger or a capture decryptor. The caller must not modify it.
func (k *Keys) Secret() []byte { return k.secret }

// Overhead returns how many bytes Seal adds to a payload (the tag).
func (k *Keys) Overhead() int { return k.aead.Overhead() }

// HeaderProtector returns the header protector that goes with the keys. Key
// updates keep it (RFC 9001 §6.1: "The header protection keys are not
// updated").
func (k *Keys) HeaderProtector() *HeaderProtector { return k.hp }

// ConfidentialityLimit returns how many packets may be sealed with one set
// of keys (RFC 9001 §6.6: "For AEAD_AES_128_GCM and AEAD_AES_256_GCM, the
// confidentiality limit is 2^23 encrypted packets; ... For
// AEAD_CHACHA20_POLY1305, the confidentiality limit is greater than the
// number of possible packets (2^62) and so can be disregarded").
func (k *Keys) ConfidentialityLimit() uint64 {
	if k.suite == tls.TLS_CHACHA20_POLY1305_SHA256 {
		return 1 << 62
	}
	return 1 << 23
}

// IntegrityLimit returns how many packets may fail authentication across
// all keys of a connection before it must close (RFC 9001 §6.6: "For
// AEAD_AES_128_GCM and AEAD_AES_256_GCM, the integrity limit is 2^52
// invalid packets ... For AEAD_CHACHA20_POLY1305, the integrity limit is
// 2^36 invalid packets").
func (k *Keys) IntegrityLimit() uint64 {
	if k.suite == tls.TLS_CHACHA20_POLY1305_SHA256 {
		return 1 << 36
	}
	return 1 << 52
}

// setNonce computes the AEAD nonce for pn into k.nonce. RFC 9001 §5.3: "The
// 62 bits of the reconstructed QUIC packet number in network byte order are
// left-padded with zeros to the size of the IV. The exclusive OR of the
// padded packet number and the IV forms the AEAD nonce."
func (k *Keys) setNonce(pn uint64) {
	k.nonce = k.iv
	x := binary.BigEndian.Uint64(k.nonce[4:]) ^ pn
	binary.BigEndian.PutUint64(k.nonce[4:], x)
}

// Seal encrypts and authenticates payload with header as associated data
// and appends the ciphertext and tag to dst. pn is the full packet number,
// not its truncated encoding. To seal in place, pass payload[:0] as dst with
// TagSize bytes of spare capacity; Seal then does not allocate.
//
// RFC 9001 §5.3: "the associated data, A, for the AEAD is the contents of
// the QUIC header, starting from the first byte of either the short or long
// header, up to and including the unprotected packet number."
func (k *Keys) Seal(dst, header, payload []byte, pn uint64) []byte {
	k.setNonce(pn)
	return k.aead.Seal(dst, k.nonce[:], payload, header)
}

// Open authenticates and decrypts ciphertext (payload and tag) with header
// as associated data and appends the plaintext to dst. To open in place,
// pass ciphertext[:0] as dst. On failure it returns ErrDecrypt, and the
// bytes of dst up to its capacity may have been overwritten.
func (k *Keys) Open(dst, header, ciphertext []byte, pn uint64) ([]byte, error) {
	k.setNonce(pn)
	out, err := k.aead.Open(dst, k.nonce[:], ciphertext, header)
	if err != nil {
		return nil, ErrDecrypt
	}
	return out, nil
}

// SealPacket protects a whole packet in place. pkt holds the unprotected
// header, whose first byte carries the packet number length and whose
// packet number starts at pnOffset, followed by the plaintext payload; it
// needs TagSize bytes of spare capacity to stay allocation-free. The caller
// has already written a Length field that counts the tag. SealPacket seals
// the payload, then applies header protection, and returns the protected
// packet (pkt extended by the tag).
//
// It returns ErrSampleTooShort if the packet would be too short to sample:
// RFC 9001 §5.4.2: "To ensure that sufficient data is available for
// sampling, packets are padded so that the combined lengths of the encoded
// packet number and protected payload is at least 4 bytes longer than the
// sample required for header protection."
func (k *Keys) SealPacket(pkt []byte, pnOffset int, pn uint64) ([]byte, error) {
	if pnOffset < 1 || pnOffset >= len(pkt) {
		return nil, ErrPacketNumberOffset
	}
	hdrLen := pnOffset + int(pkt[0]&0x03) + 1
	if hdrLen > len(pkt) {
		return nil, ErrPacketNumberOffset
	}
	if len(pkt)+k.aead.Overhead() < pnOffset+4+SampleSize {
		return nil, ErrSampleTooShort
	}
	if need := len(pkt) + k.aead.Overhead(); cap(pkt) < need {
		// No room for the tag: move the packet to a buffer that has it, so
		// that the header and the payload stay contiguous.
		grown := make([]byte, len(pkt), need)
		copy(grown, pkt)
		pkt = grown
	}
	out := k.Seal(pkt[hdrLen:hdrLen], pkt[:hdrLen], pkt[hdrLen:], pn)
	pkt = pkt[:hdrLen+len(out)]
	if _, err := k.hp.Apply(pkt, pnOffset, pkt[0]&0x80 != 0); err != nil {
		return nil, err
	}
	return pkt, nil
}

// OpenPacket decrypts, in place, a packet whose header protection has
// already been removed (see HeaderProtector.Remove): pkt[:hdrLen] is the
// header up to and including the packet number, pkt[hdrLen:] the protected
// payload and tag, and pn the full packet number the caller reconstructed.
// It returns the plaintext payload, which aliases pkt.
func (k *Keys) OpenPacket(pkt []byte, hdrLen int, pn uint64) ([]byte, error) {
	if hdrLen < 1 || hdrLen > len(pkt) {
		return nil, ErrPacketNumberOffset
	}
	return k.Open(pkt[hdrLen:hdrLen], pkt[:hdrLen], pkt[hdrLen:], pn)
}

// NextSecret derives the traffic secret of the next key phase. RFC 9001
// §6.1: "secret_<n+1> = HKDF-Expand-Label(secret_<n>, "quic ku", "",
// Hash.length)"; version 2 uses "quicv2 ku" (RFC 9369 §3.3.2).
func NextSecret(version uint32, suite uint16, secret []byte) ([]byte, error) {
	p, s, err := lookup(version, suite)
	if err != nil {
		return nil, err
	}
	return ExpandLabel(s.hash, secret, p.labels.KeyUpdate, s.hash().Size()), nil
}

// Next derives the keys of the next key phase. RFC 9001 §6.1: "The header
// protection keys are not updated", so the result shares k's header
// protector.
func (k *Keys) Next() (*Keys, error) {
	p, s, err := lookup(k.version, k.suite)
	if err != nil {
		return nil, err
	}
	next := newExpander(s.hash, k.secret).expandLabel(p.labels.KeyUpdate, len(k.secret))
	return newKeys(p, k.suite, s, next, newExpander(s.hash, next), k.hp)
}
