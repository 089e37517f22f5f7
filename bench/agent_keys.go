package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// The files `quiver agent init` writes into its directory: a CA that signs
// both ends, the agent's certificate (server authentication, name
// AgentServerName) and the controller's (client authentication). The CA's
// private key is not kept: new certificates need a new init, and a leaked
// directory can be replaced wholesale.
const (
	AgentCAFile         = "ca.pem"
	AgentCertFile       = "agent.pem"
	AgentKeyFile        = "agent.key"
	ControllerCertFile  = "controller.pem"
	ControllerKeyFile   = "controller.key"
	AgentServerName     = "quiver-agent"
	agentControllerName = "quiver-controller"
)

// InitAgentKeys makes a fresh CA and the agent's and controller's
// certificates in dir (created if needed). It refuses to overwrite an
// existing set.
func InitAgentKeys(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, AgentCAFile)); err == nil {
		return fmt.Errorf("%s already holds agent keys (%s); remove them first", dir, AgentCAFile)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "quiver agent CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(5, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, AgentCAFile), "CERTIFICATE", caDER, 0o644); err != nil {
		return err
	}
	for _, leaf := range []struct {
		name, cert, key string
		usage           x509.ExtKeyUsage
	}{
		{AgentServerName, AgentCertFile, AgentKeyFile, x509.ExtKeyUsageServerAuth},
		{agentControllerName, ControllerCertFile, ControllerKeyFile, x509.ExtKeyUsageClientAuth},
	} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: leaf.name}, DNSNames: []string{leaf.name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(5, 0, 0),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{leaf.usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, leaf.cert), "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, leaf.key), "PRIVATE KEY", kder, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

func loadCA(dir string) (*x509.CertPool, error) {
	b, err := os.ReadFile(filepath.Join(dir, AgentCAFile))
	if err != nil {
		return nil, fmt.Errorf("agent keys: %w (make them with quiver agent init)", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("agent keys: no certificate in " + AgentCAFile)
	}
	return pool, nil
}

// AgentServerTLS is the agent's TLS configuration: its own certificate,
// and a controller certificate signed by the directory's CA required
// (mutual TLS; anything else fails the handshake).
func AgentServerTLS(dir string) (*tls.Config, error) {
	pool, err := loadCA(dir)
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, AgentCertFile), filepath.Join(dir, AgentKeyFile))
	if err != nil {
		return nil, fmt.Errorf("agent keys: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS13}, nil
}

// ControllerTLS is the controller's TLS configuration: its certificate,
// and the agent verified against the directory's CA under AgentServerName
// (agents are reached by address, so the name is fixed, not the host's).
func ControllerTLS(dir string) (*tls.Config, error) {
	pool, err := loadCA(dir)
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, ControllerCertFile), filepath.Join(dir, ControllerKeyFile))
	if err != nil {
		return nil, fmt.Errorf("controller keys: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: AgentServerName, MinVersion: tls.VersionTLS13}, nil
}
