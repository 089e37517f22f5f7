package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certDNSNames are the names every peer is reached by: loopback, and the
// interop runner's host names.
var certDNSNames = []string{"localhost", "server", "server4", "server6", "server46"}

// certIPs are the loopback addresses, which clients dial directly.
var certIPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}

// selfSignedPEM makes a self-signed ECDSA P-256 certificate valid for ten
// days and its PKCS #8 key, both PEM-encoded. Every peer in the manifest
// accepts it (ngtcp2's GnuTLS included).
func selfSignedPEM() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localhost", Organization: []string{"Quiver test peers"}},
		// An hour of slack for clocks that disagree.
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              certDNSNames,
		IPAddresses:           certIPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// SelfSigned returns a fresh self-signed certificate (SANs localhost,
// 127.0.0.1, ::1 and the interop host names) and a pool that trusts it, for
// code that runs a TLS or QUIC endpoint in process.
func SelfSigned() (tls.Certificate, *x509.CertPool, error) {
	certPEM, keyPEM, err := selfSignedPEM()
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("self-signed certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("self-signed certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	return cert, pool, nil
}

// WriteSelfSignedCert writes a fresh self-signed certificate to
// dir/cert.pem and its key to dir/priv.key (the interop runner's names).
// The certificate is its own CA, so certFile also serves as a client's CA
// file.
func WriteSelfSignedCert(dir string) (certFile, keyFile string, err error) {
	certPEM, keyPEM, err := selfSignedPEM()
	if err != nil {
		return "", "", fmt.Errorf("self-signed certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "priv.key")
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}
