package protect

import "fmt"

// QUIC versions whose packet protection this package implements.
const (
	// Version1 is QUIC version 1 (RFC 9000, RFC 9001).
	Version1 uint32 = 0x00000001
	// Version2 is QUIC version 2 (RFC 9369 §3.1: "The version field of long
	// headers is 0x6b3343cf").
	Version2 uint32 = 0x6b3343cf
)

// Labels are the HKDF-Expand-Label labels that derive packet protection
// material from a traffic secret. They differ between versions
// (RFC 9369 §3.3.2).
type Labels struct {
	Key       string // AEAD key ("quic key" / "quicv2 key")
	IV        string // AEAD IV ("quic iv" / "quicv2 iv")
	HP        string // header protection key ("quic hp" / "quicv2 hp")
	KeyUpdate string // next-generation secret ("quic ku" / "quicv2 ku")
}

// versionParams gathers the constants that RFC 9001 and RFC 9369 fix for a
// version.
type versionParams struct {
	salt       [20]byte
	labels     Labels
	retryKey   [16]byte
	retryNonce [12]byte
}

// RFC 9001 §5.2: "initial_salt = 0x38762cf7f55934b34d179ae6a4c80cadccbb7f0a".
// RFC 9001 §5.8: "The secret key, K, is 128 bits equal to
// 0xbe0c690b9f66575a1d766b54e368c84e. The nonce, N, is 96 bits equal to
// 0x461599d35d632bf2239825bb."
var paramsV1 = versionParams{
	salt: [20]byte{
		0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17,
		0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a,
	},
	labels: Labels{Key: "quic key", IV: "quic iv", HP: "quic hp", KeyUpdate: "quic ku"},
	retryKey: [16]byte{
		0xbe, 0x0c, 0x69, 0x0b, 0x9f, 0x66, 0x57, 0x5a,
		0x1d, 0x76, 0x6b, 0x54, 0xe3, 0x68, 0xc8, 0x4e,
	},
	retryNonce: [12]byte{
		0x46, 0x15, 0x99, 0xd3, 0x5d, 0x63, 0x2b, 0xf2, 0x23, 0x98, 0x25, 0xbb,
	},
}

// RFC 9369 §3.3.1: "initial_salt = 0x0dede3def700a6db819381be6e269dcbf9bd2ed9".
// RFC 9369 §3.3.2: "The labels used in [QUIC-TLS] to derive packet protection
// keys (Section 5.1), header protection keys (Section 5.4), Retry Integrity
// Tag keys (Section 5.8), and key updates (Section 6.1) change from "quic
// key" to "quicv2 key", from "quic iv" to "quicv2 iv", from "quic hp" to
// "quicv2 hp", and from "quic ku" to "quicv2 ku"".
// RFC 9369 §3.3.3: "key = 0x8fb4b01b56ac48e260fbcbcead7ccc92,
// nonce = 0xd86969bc2d7c6d9990efb04a".
var paramsV2 = versionParams{
	salt: [20]byte{
		0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93,
		0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9,
	},
	labels: Labels{Key: "quicv2 key", IV: "quicv2 iv", HP: "quicv2 hp", KeyUpdate: "quicv2 ku"},
	retryKey: [16]byte{
		0x8f, 0xb4, 0xb0, 0x1b, 0x56, 0xac, 0x48, 0xe2,
		0x60, 0xfb, 0xcb, 0xce, 0xad, 0x7c, 0xcc, 0x92,
	},
	retryNonce: [12]byte{
		0xd8, 0x69, 0x69, 0xbc, 0x2d, 0x7c, 0x6d, 0x99, 0x90, 0xef, 0xb0, 0x4a,
	},
}

func params(version uint32) (*versionParams, error) {
	switch version {
	case Version1:
		return &paramsV1, nil
	case Version2:
		return &paramsV2, nil
	}
	return nil, fmt.Errorf("%w: 0x%08x", ErrUnsupportedVersion, version)
}

// SupportedVersion reports whether the package knows the packet protection
// of version (v1 or v2).
func SupportedVersion(version uint32) bool {
	_, err := params(version)
	return err == nil
}

// InitialSalt returns a copy of the salt from which the Initial secrets of
// version are extracted.
func InitialSalt(version uint32) ([]byte, error) {
	p, err := params(version)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), p.salt[:]...), nil
}

// KeyLabels returns the HKDF labels that version uses to derive keys, IVs,
// header protection keys and key-update secrets.
func KeyLabels(version uint32) (Labels, error) {
	p, err := params(version)
	if err != nil {
		return Labels{}, err
	}
	return p.labels, nil
}
