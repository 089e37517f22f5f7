package interop

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File is one generated file of a test case.
type File struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	// SHA256 of the content, computed while writing it.
	SHA256 [32]byte `json:"-"`
}

// keystream returns the content generator of one file: a ChaCha8 stream
// keyed by the run seed and the file's name, so any file can be made again.
func keystream(seed uint64, name string) io.Reader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	h := sha256.Sum256([]byte(name))
	copy(key[8:], h[:24])
	return mrand.NewChaCha8(key)
}

// writeFiles generates the files of a test case into dir.
func writeFiles(dir string, seed uint64, files []File) ([]File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := slices.Clone(files)
	for i, f := range out {
		fh, err := os.Create(filepath.Join(dir, f.Name))
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		_, err = io.CopyN(io.MultiWriter(fh, h), keystream(seed, f.Name), f.Size)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", f.Name, err)
		}
		copy(out[i].SHA256[:], h.Sum(nil))
	}
	return out, nil
}

// fileSpecs returns n files of size bytes named by prefix, or with random
// 250-letter names when longNames is set (the zerortt test case).
func fileSpecs(seed uint64, n int, size int64, prefix string, longNames bool) []File {
	r := mrand.New(mrand.NewPCG(seed, uint64(n)))
	var fs []File
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i+1)
		if n == 1 {
			name = prefix
		}
		if longNames {
			var b strings.Builder
			for range 250 {
				b.WriteByte(byte('a' + r.IntN(26)))
			}
			name = b.String()
		}
		fs = append(fs, File{Name: name, Size: size})
	}
	return fs
}

// compareDownloads checks §4.3 FILES: the folder holds exactly the
// requested names, each equal to the original byte for byte.
func compareDownloads(dir string, files []File) (ok bool, detail string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err.Error()
	}
	want := map[string]File{}
	for _, f := range files {
		want[f.Name] = f
	}
	var problems []string
	got := map[string]bool{}
	for _, e := range entries {
		got[e.Name()] = true
		f, ok := want[e.Name()]
		if !ok {
			problems = append(problems, "unexpected "+short(e.Name()))
			continue
		}
		fh, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		h := sha256.New()
		n, _ := io.Copy(h, fh)
		fh.Close()
		if n != f.Size {
			problems = append(problems, fmt.Sprintf("%s has %d bytes, want %d", short(f.Name), n, f.Size))
		} else if !bytes.Equal(h.Sum(nil), f.SHA256[:]) {
			problems = append(problems, short(f.Name)+" differs from the original")
		}
	}
	missing := 0
	for _, f := range files {
		if !got[f.Name] {
			missing++
		}
	}
	if missing > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d files missing", missing, len(files)))
	}
	if len(problems) > 0 {
		if len(problems) > 5 {
			problems = append(problems[:5], fmt.Sprintf("and %d more", len(problems)-5))
		}
		return false, strings.Join(problems, "; ")
	}
	return true, fmt.Sprintf("%d files byte-exact", len(files))
}

func short(name string) string {
	if len(name) > 24 {
		return name[:20] + "…"
	}
	return name
}

// writeCerts writes the contract's certificate folder: priv.key (the
// leaf's EC P-256 key), cert.pem (the chain, leaf first) and ca.pem (the
// root). chain counts every certificate in cert.pem; with chain 1 the leaf
// is its own root. extraNames adds random 250-character DNS names to the
// leaf, which the amplificationlimit test uses to inflate the Certificate
// message.
func writeCerts(dir string, chain, extraNames int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	now := time.Now()
	serial := int64(1)
	mk := func(tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(10*24*time.Hour)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		if err != nil {
			return nil, nil, err
		}
		c, err := x509.ParseCertificate(der)
		return c, key, err
	}
	leafTmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "server"},
		DNSNames:    []string{"server", "server4", "server6", "server46", "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	r := mrand.New(mrand.NewPCG(uint64(now.UnixNano()), 7))
	for range extraNames {
		var b strings.Builder
		for range 250 {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
		leafTmpl.DNSNames = append(leafTmpl.DNSNames, b.String())
	}
	var certs []*x509.Certificate
	var leafKey *ecdsa.PrivateKey
	if chain <= 1 {
		leafTmpl.BasicConstraintsValid, leafTmpl.IsCA = true, true
		leafTmpl.KeyUsage |= x509.KeyUsageCertSign
		c, k, err := mk(leafTmpl, nil, nil)
		if err != nil {
			return err
		}
		certs, leafKey = []*x509.Certificate{c}, k
	} else {
		caTmpl := func(name string) *x509.Certificate {
			return &x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
				KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
		}
		root, rootKey, err := mk(caTmpl("quiver interop root"), nil, nil)
		if err != nil {
			return err
		}
		parent, parentKey := root, rootKey
		var inter []*x509.Certificate
		for i := range chain - 2 {
			c, k, err := mk(caTmpl(fmt.Sprintf("quiver interop intermediate %d", i+1)), parent, parentKey)
			if err != nil {
				return err
			}
			inter = append([]*x509.Certificate{c}, inter...)
			parent, parentKey = c, k
		}
		leaf, k, err := mk(leafTmpl, parent, parentKey)
		if err != nil {
			return err
		}
		certs = append(append([]*x509.Certificate{leaf}, inter...), root)
		leafKey = k
	}
	var chainPEM []byte
	for _, c := range certs {
		chainPEM = append(chainPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		return err
	}
	rootPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certs[len(certs)-1].Raw})
	for name, b := range map[string][]byte{
		"cert.pem": chainPEM,
		"ca.pem":   rootPEM,
		"priv.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
