package protect

import (
	"crypto/hkdf"
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
	const prefix = "tls13 "
	info := make([]byte, 0, 2+1+len(prefix)+len(label)+1)
	info = append(info, byte(length>>8), byte(length))
	info = append(info, byte(len(prefix)+len(label)))
	info = append(info, prefix...)
	info = append(info, label...)
	return append(info, 0) // empty context
}
