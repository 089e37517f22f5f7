package peers

import (
	"crypto/tls"
	"crypto/x509"

	"github.com/quiver-quic/quiver/certs"
)

// SelfSigned returns a fresh self-signed certificate and a pool that trusts
// it (see package certs).
func SelfSigned() (tls.Certificate, *x509.CertPool, error) { return certs.SelfSigned() }

// WriteSelfSignedCert writes a fresh self-signed certificate and key as
// PEM files into dir (see package certs).
func WriteSelfSignedCert(dir string) (certFile, keyFile string, err error) {
	return certs.WriteSelfSignedCert(dir)
}
