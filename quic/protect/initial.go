package protect

import (
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
)

// InitialSecrets derives the client and server Initial secrets of version
// from the Destination Connection ID of the client's first Initial packet.
// It returns nil secrets for a version this package does not support (see
// SupportedVersion).
//
// RFC 9001 §5.2:
//
//	initial_secret = HKDF-Extract(initial_salt, client_dst_connection_id)
//	client_initial_secret = HKDF-Expand-Label(initial_secret, "client in", "", Hash.length)
//	server_initial_secret = HKDF-Expand-Label(initial_secret, "server in", "", Hash.length)
//
// RFC 9369 §3.3.1 changes only the salt; the "client in" and "server in"
// labels stay the same.
func InitialSecrets(version uint32, dcid []byte) (client, server []byte) {
	p, err := params(version)
	if err != nil {
		return nil, nil
	}
	return initialSecretsWithSalt(p.salt[:], dcid)
}

// InitialSecretsWithSalt derives Initial secrets with an arbitrary salt, for
// probes of versions that this package does not define.
func InitialSecretsWithSalt(salt, dcid []byte) (client, server []byte) {
	return initialSecretsWithSalt(salt, dcid)
}

func initialSecretsWithSalt(salt, dcid []byte) (client, server []byte) {
	// RFC 9001 §5.2: "The hash function for HKDF when deriving initial
	// secrets and keys is SHA-256".
	initial, err := hkdf.Extract(sha256.New, dcid, salt)
	if err != nil {
		panic("protect: HKDF-Extract: " + err.Error())
	}
	client = ExpandLabel(sha256.New, initial, "client in", sha256.Size)
	server = ExpandLabel(sha256.New, initial, "server in", sha256.Size)
	return client, server
}

// InitialSuite is the cipher suite of Initial packets. RFC 9001 §5.2:
// "Initial packets apply the packet protection process, but use a secret
// derived from the Destination Connection ID field ... [with]
// AEAD_AES_128_GCM".
const InitialSuite = tls.TLS_AES_128_GCM_SHA256

// NewInitialKeys derives the client and server Initial packet protection
// keys of version from the client's original Destination Connection ID. A
// client seals with client and opens with server; a server the reverse.
func NewInitialKeys(version uint32, dcid []byte) (client, server *Keys, err error) {
	if _, err := params(version); err != nil {
		return nil, nil, err
	}
	cs, ss := InitialSecrets(version, dcid)
	if client, err = NewKeys(version, InitialSuite, cs); err != nil {
		return nil, nil, err
	}
	if server, err = NewKeys(version, InitialSuite, ss); err != nil {
		return nil, nil, err
	}
	return client, server, nil
}
