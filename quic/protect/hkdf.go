package protect

import (
	"crypto/hkdf"
	"crypto/hmac"
	"hash"
)

// ExpandLabel is HKDF-Expand-Label from RFC 8446 §7.1 with an empty context,
// the only form QUIC uses. RFC 9001 §5.1: "The keys used for packet
// protection are computed from the TLS secrets using the KDF provided by
// TLS. In TLS 1.3, the HKDF-Expand-Label function described in Section 7.1
// of [TLS13] is used with the hash function from the negotiated cipher
// suite."
//
// It allocates; it is meant for key derivation, not for the per-packet path.
func ExpandLabel(h func() hash.Hash, secret []byte, label string, length int) []byte {
	out, err := hkdf.Expand(h, secret, string(hkdfLabel(label, length)), length)
	if err != nil {
		// Expand fails only when length exceeds 255 hash blocks, which no
		// QUIC label asks for.
		panic("protect: HKDF-Expand-Label: " + err.Error())
	}
	return out
}

// hkdfLabel encodes the HkdfLabel structure of RFC 8446 §7.1 with an empty
// context:
//
//	struct {
//	    uint16 length = Length;
//	    opaque label<7..255> = "tls13 " + Label;
//	    opaque context<0..255> = Context;
//	} HkdfLabel;
func hkdfLabel(label string, length int) []byte {
	return appendHKDFLabel(make([]byte, 0, 2+1+len("tls13 ")+len(label)+1), label, length)
}

func appendHKDFLabel(info []byte, label string, length int) []byte {
	const prefix = "tls13 "
	info = append(info, byte(length>>8), byte(length))
	info = append(info, byte(len(prefix)+len(label)))
	info = append(info, prefix...)
	info = append(info, label...)
	return append(info, 0) // empty context
}

// An expander derives several labels from one secret. HKDF-Expand of at
// most one hash length is a single HMAC: RFC 5869 §2.3, "T(1) =
// HMAC-Hash(PRK, T(0) | info | 0x01)" with T(0) empty. Keying an HMAC
// hashes two blocks and allocates two digests, so the labels of one secret
// ("quic key", "quic iv", "quic hp", "quic ku") share one keyed HMAC and
// each costs a Reset: a handshake derives some twenty of them per side.
//
// The label and the output live in the expander's own arrays, so that a
// derivation allocates nothing of its own: expandLabel's result is valid
// only until the next call, and callers copy what they keep (the AEAD and
// header protection ciphers copy their keys, Keys copies the IV and the
// secret).
type expander struct {
	mac  hash.Hash
	info [64]byte
	out  [64]byte // SHA-384 at most
}

func newExpander(h func() hash.Hash, secret []byte) *expander {
	return &expander{mac: hmac.New(h, secret)}
}

// expandLabel is ExpandLabel(h, secret, label, length) for the expander's
// secret. length must not exceed the hash's size. The result is
// overwritten by the next call.
func (e *expander) expandLabel(label string, length int) []byte {
	if length > e.mac.Size() || e.mac.Size() > len(e.out) {
		panic("protect: HKDF-Expand-Label longer than one hash block")
	}
	e.mac.Reset()
	info := appendHKDFLabel(e.info[:0], label, length)
	info = append(info, 0x01) // the block counter of T(1)
	e.mac.Write(info)
	return e.mac.Sum(e.out[:0])[:length]
}
