package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// client holds what every connection of one run shares: the TLS session
// cache and the token store make the second connection of resumption and
// zerortt a resumed one, and one key log collects every connection's keys.
type client struct {
	cfg     *config
	tlsConf *tls.Config
	quicCfg *quic.Config
}

func runClient(ctx context.Context, cfg *config) error {
	reqs := make([]*url.URL, 0, len(cfg.urls))
	for _, s := range cfg.urls {
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("URL %q: %w", s, err)
		}
		if _, err := outputName(u); err != nil {
			return fmt.Errorf("URL %q: %w", s, err)
		}
		reqs = append(reqs, u)
	}
	if err := os.MkdirAll(cfg.output, 0o755); err != nil {
		return fmt.Errorf("output folder: %w", err)
	}

	tlsConf, closeKeyLog, err := baseTLSConfig(cfg, cfg.alpn)
	if err != nil {
		return err
	}
	defer closeKeyLog()
	tlsConf.ClientSessionCache = tls.NewLRUClientSessionCache(16)
	tlsConf.InsecureSkipVerify = cfg.insecure && cfg.caFile == ""
	if cfg.caFile != "" {
		pem, err := os.ReadFile(cfg.caFile)
		if err != nil {
			return fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("CA file %s: no PEM certificate in it", cfg.caFile)
		}
		tlsConf.RootCAs = pool
	}
	qc, err := quicConfig(cfg)
	if err != nil {
		return err
	}
	qc.TokenStore = quic.NewLRUTokenStore(16, 4)
	c := &client{cfg: cfg, tlsConf: tlsConf, quicCfg: qc}

	// Split the requests over connections as the test case asks.
	var groups [][]*url.URL
	switch cfg.testcase {
	case "multiconnect":
		for _, u := range reqs {
			groups = append(groups, []*url.URL{u})
		}
	case "resumption", "zerortt":
		groups = append(groups, reqs[:1])
		if len(reqs) > 1 {
			groups = append(groups, reqs[1:])
		}
	default:
		if cfg.zeroRTT && len(reqs) > 1 {
			groups = [][]*url.URL{reqs[:1], reqs[1:]}
		} else {
			groups = [][]*url.URL{reqs}
		}
	}
	for i, g := range groups {
		early := cfg.zeroRTT && i > 0
		var err error
		if cfg.alpn == alpnH3 {
			err = c.fetchH3(ctx, g, early)
		} else {
			err = c.fetchHQ(ctx, g, early)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// outputName is the file a URL is saved as: its path's base name, which
// the contract requires to stay inside the download folder.
func outputName(u *url.URL) (string, error) {
	name := filepath.Base(u.Path)
	if u.Path == "" || u.Path == "/" || !filepath.IsLocal(name) {
		return "", errors.New("URL path names no file")
	}
	return name, nil
}

// authority is host:port of a URL, with the contract's default port 443.
func authority(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// fetchHQ fetches urls, all from one server, over one hq-interop connection,
// with every request in flight at once. With early set the connection
// resumes the last session and sends the requests in 0-RTT.
func (c *client) fetchHQ(ctx context.Context, urls []*url.URL, early bool) error {
	addr := authority(urls[0])
	tlsConf := c.tlsConf.Clone()
	tlsConf.ServerName = urls[0].Hostname()
	var (
		conn quicConn
		err  error
	)
	if early {
		conn, err = quic.DialAddrEarly(ctx, addr, tlsConf, c.quicCfg)
	} else {
		conn, err = quic.DialAddr(ctx, addr, tlsConf, c.quicCfg)
	}
	if err != nil {
		return fmt.Errorf("connect to %s: %w", addr, err)
	}
	err = fetchAll(urls, func(u *url.URL) error { return fetchHQOne(ctx, conn, u, c.cfg.output) })
	if err == nil && early && !conn.ConnectionState().Used0RTT {
		// Still a success: the files arrived in 1-RTT after a rejection.
		fmt.Fprintf(os.Stderr, "quicgo-peer: %s did not accept 0-RTT\n", addr)
	}
	code, msg := quic.ApplicationErrorCode(0), ""
	if err != nil {
		code, msg = 1, "request failed"
	}
	_ = conn.CloseWithError(code, msg)
	return err
}

func fetchHQOne(ctx context.Context, conn quicConn, u *url.URL, outDir string) error {
	name, _ := outputName(u)
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return fmt.Errorf("open stream for %s: %w", u, err)
	}
	if _, err := io.WriteString(s, "GET "+u.EscapedPath()+"\r\n"); err != nil {
		return fmt.Errorf("request %s: %w", u, err)
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("request %s: %w", u, err)
	}
	return saveBody(filepath.Join(outDir, name), s, u)
}

// fetchH3 fetches urls over one HTTP/3 connection. With early set the
// requests go as GET in 0-RTT on a resumed connection.
func (c *client) fetchH3(ctx context.Context, urls []*url.URL, early bool) error {
	tr := newH3Transport(c.tlsConf, c.quicCfg)
	defer tr.Close()
	hc := &http.Client{Transport: tr}
	method := http.MethodGet
	if early {
		method = http3.MethodGet0RTT
	}
	// The first request opens the connection; the rest share it at once.
	get := func(u *url.URL) error {
		req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s: %w", u, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		name, _ := outputName(u)
		return saveBody(filepath.Join(c.cfg.output, name), resp.Body, u)
	}
	if err := get(urls[0]); err != nil {
		return err
	}
	return fetchAll(urls[1:], get)
}

// fetchAll runs fetch for every URL at once and returns the first error.
func fetchAll(urls []*url.URL, fetch func(*url.URL) error) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for _, u := range urls {
		wg.Go(func() {
			if err := fetch(u); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return firstErr
}

// saveBody writes a response body to path, removing a partial file on
// failure so that a broken transfer never passes a byte comparison.
func saveBody(path string, body io.Reader, u *url.URL) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("download %s: %w", u, err)
	}
	return nil
}
