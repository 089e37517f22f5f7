// Package certs makes the self-signed certificates Quiver serves with when no
// certificate is given: ECDSA P-256, valid for localhost and the loopback
// addresses, accepted by every peer Quiver tests against.
//
// Where to start: [SelfSigned] returns a certificate and a pool that
// trusts it, for a server and a client in one process (the runnable
// examples of packages quic, h3 and rpc use it); [WriteSelfSignedCert]
// writes them as PEM files for another process.
package certs
