package quic

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"
)

var (
	testCertOnce sync.Once
	testCert     tls.Certificate
	testPool     *x509.CertPool
)

// testCertificate returns a self-signed ECDSA P-256 certificate for
// localhost, 127.0.0.1 and ::1, generated once per test binary.
func testCertificate(t testing.TB) (tls.Certificate, *x509.CertPool) {
	testCertOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{CommonName: "localhost"},
			NotBefore:             time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC), // synctest bubbles start in 2000
			NotAfter:              time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
			DNSNames:              []string{"localhost"},
			IPAddresses:           []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		leaf, _ := x509.ParseCertificate(der)
		testCert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
		testPool = x509.NewCertPool()
		testPool.AddCert(leaf)
	})
	return testCert, testPool
}

func testServerConfig(t testing.TB, alpn string) *Config {
	cert, _ := testCertificate(t)
	return &Config{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{alpn}}}
}

func testClientConfig(t testing.TB, alpn string) *Config {
	_, pool := testCertificate(t)
	return &Config{TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{alpn}}}
}
