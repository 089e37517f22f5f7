package transfer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/quic"
)

// ClientConfig configures Get.
type ClientConfig struct {
	// ALPN lists the application protocols to offer, in order of
	// preference (default h3, then hq-interop).
	ALPN []string
	// OutDir, when set, receives each body as a file named after the URL's
	// path (the interop runner's convention: /a/b.bin → OutDir/a/b.bin).
	// When empty, bodies go to Stdout in the order of the URLs.
	OutDir string
	// Stdout receives bodies when OutDir is empty.
	Stdout io.Writer
	// Insecure accepts any server certificate; RootCAs, when set, is the
	// trust anchor instead of the system pool.
	Insecure bool
	RootCAs  *x509.CertPool
	// Versions lists the QUIC versions to offer (default: the engine's).
	Versions []uint32
	// QlogDir, when set, receives one qlog file per connection.
	QlogDir string
	// KeyLog, when set, receives the TLS secrets in SSLKEYLOGFILE format.
	KeyLog io.Writer
	// Progress, when set, is called as bytes arrive (from several
	// goroutines; it must be cheap and safe for concurrent use).
	Progress func(url string, bytes int64)
	// Logf, when set, reports what was negotiated.
	Logf func(format string, args ...any)
	// EditQUIC, when set, edits the engine configuration before dialing
	// (tests: probe hooks that make the client misbehave).
	EditQUIC func(*quic.Config)
	// StallAfter, when above 0, is how long a download may go without a
	// byte of body before OnStall is called (again after each further
	// StallAfter without progress), so that a user is told instead of
	// waiting in silence for the idle timeout.
	StallAfter time.Duration
	// OnStall receives the URL, the bytes so far and how long the
	// transfer has made no progress.
	OnStall func(url string, bytes int64, idle time.Duration)
}

// maxRedirects is how many redirects an HTTP/3 download follows.
const maxRedirects = 5

// Result is the outcome of one URL.
type Result struct {
	URL   string
	Bytes int64
	File  string // where the body went, empty for Stdout
	Err   error
}

// Get downloads the URLs: one QUIC connection per authority (host:port),
// every request of that authority concurrently on it. It returns one Result
// per URL in order and an error when any failed.
func Get(ctx context.Context, urls []string, cfg ClientConfig) ([]Result, error) {
	if len(cfg.ALPN) == 0 {
		cfg.ALPN = DefaultALPN
	}
	results := make([]Result, len(urls))
	byHost := make(map[string][]int)
	var hosts []string
	for i, raw := range urls {
		results[i].URL = raw
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			results[i].Err = fmt.Errorf("%q is not an https:// URL with a host", raw)
			continue
		}
		host := u.Host
		if u.Port() == "" {
			host += ":443"
		}
		if _, ok := byHost[host]; !ok {
			hosts = append(hosts, host)
		}
		byHost[host] = append(byHost[host], i)
	}
	// Bodies written to stdout must not interleave, so they are buffered
	// per URL and written in order at the end; files are written as they
	// arrive.
	var bufs []*bufferedBody
	if cfg.OutDir == "" {
		bufs = make([]*bufferedBody, len(urls))
	}
	var wg sync.WaitGroup
	for _, host := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			getHost(ctx, host, byHost[host], results, bufs, cfg)
		}()
	}
	wg.Wait()
	var firstErr error
	for i := range results {
		if results[i].Err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", results[i].URL, results[i].Err)
			}
			continue
		}
		if bufs != nil && bufs[i] != nil && cfg.Stdout != nil {
			if _, err := cfg.Stdout.Write(bufs[i].b); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	return results, firstErr
}

type bufferedBody struct{ b []byte }

func (b *bufferedBody) Write(p []byte) (int, error) { b.b = append(b.b, p...); return len(p), nil }

func getHost(ctx context.Context, host string, idx []int, results []Result, bufs []*bufferedBody, cfg ClientConfig) {
	fail := func(err error) {
		for _, i := range idx {
			if results[i].Err == nil {
				results[i].Err = err
			}
		}
	}
	u, _ := url.Parse(results[idx[0]].URL)
	qcfg := &quic.Config{
		TLSConfig: &tls.Config{
			ServerName:         u.Hostname(),
			NextProtos:         cfg.ALPN,
			InsecureSkipVerify: cfg.Insecure,
			RootCAs:            cfg.RootCAs,
		},
		Versions: cfg.Versions,
		KeyLog:   cfg.KeyLog,
		Tracer:   tracer(cfg.QlogDir, cfg.Logf),
	}
	if cfg.EditQUIC != nil {
		cfg.EditQUIC(qcfg)
	}
	conn, err := quic.Dial(ctx, "udp", host, qcfg)
	if err != nil {
		fail(fmt.Errorf("connect to %s: %w", host, err))
		return
	}
	if cfg.Logf != nil {
		info := conn.ConnectionInfo()
		cfg.Logf("%s: QUIC version 0x%08x, ALPN %s", host, info.Version, conn.ALPN())
	}
	var cc *h3.ClientConn
	if conn.ALPN() == h3.ALPNH3 {
		cc, err = h3.NewClientConn(ctx, h3.FromQUIC(conn), nil)
		if err != nil {
			conn.Close(0x0102, "")
			fail(err)
			return
		}
	}
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i].Bytes, results[i].File, results[i].Err = fetchOne(ctx, conn, cc, results[i].URL, bufs, i, cfg)
		}()
	}
	wg.Wait()
	if cc != nil {
		cc.Close()
	}
	conn.Close(closeCode(conn.ALPN()), "")
}

// closeCode is the "no error" code of the application protocol.
func closeCode(alpn string) uint64 {
	if alpn == h3.ALPNH3 {
		return uint64(h3.ErrCodeNoError)
	}
	return 0
}

func fetchOne(ctx context.Context, conn *quic.Conn, cc *h3.ClientConn, raw string, bufs []*bufferedBody, i int, cfg ClientConfig) (int64, string, error) {
	u, _ := url.Parse(raw)
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	var w io.Writer
	var file string
	var f *os.File
	if cfg.OutDir != "" {
		rel := path.Clean("/" + u.Path)
		if rel == "/" {
			rel = "/index.html"
		}
		file = filepath.Join(cfg.OutDir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return 0, "", err
		}
		var err error
		if f, err = os.Create(file); err != nil {
			return 0, "", err
		}
		defer f.Close()
		w = f
	} else {
		bufs[i] = &bufferedBody{}
		w = bufs[i]
	}
	if cfg.Progress != nil {
		w = &progressWriter{w: w, url: raw, fn: cfg.Progress}
	}
	if cfg.StallAfter > 0 && cfg.OnStall != nil {
		sw := newStallWatch(raw, cfg.StallAfter, cfg.OnStall)
		defer sw.stop()
		w = &stallWriter{w: w, sw: sw}
	}
	var n int64
	var err error
	if cc == nil {
		n, err = h3.GetHQ(ctx, h3.FromQUIC(conn), p, w)
	} else {
		n, err = getH3(ctx, cc, u, w)
	}
	if err == nil && f != nil {
		err = f.Close()
	}
	return n, file, err
}

// getH3 fetches u and follows redirects to the same origin, at most
// maxRedirects of them.
func getH3(ctx context.Context, cc *h3.ClientConn, u *url.URL, w io.Writer) (int64, error) {
	for hop := 0; ; hop++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return 0, err
		}
		resp, err := cc.RoundTrip(req)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode == http.StatusOK {
			defer resp.Body.Close()
			return io.Copy(w, resp.Body)
		}
		resp.Body.Close()
		if !isRedirect(resp.StatusCode) {
			return 0, fmt.Errorf("HTTP status %s", resp.Status)
		}
		next, err := redirectTarget(u, resp.Header.Get("Location"))
		if err != nil {
			return 0, fmt.Errorf("HTTP status %s: %w", resp.Status, err)
		}
		if hop == maxRedirects {
			return 0, fmt.Errorf("HTTP status %s: more than %d redirects (last to %s)", resp.Status, maxRedirects, next)
		}
		u = next
	}
}

// isRedirect reports the statuses whose Location a GET follows (RFC 9110
// §15.4).
func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// redirectTarget resolves a Location against the request's URL and
// accepts it only on the same origin (scheme, host and port): the
// connection serves one authority.
func redirectTarget(from *url.URL, location string) (*url.URL, error) {
	if location == "" {
		return nil, fmt.Errorf("redirect without a Location")
	}
	to, err := from.Parse(location)
	if err != nil {
		return nil, fmt.Errorf("redirect to an invalid Location %q: %v", location, err)
	}
	if to.Scheme != from.Scheme || originHost(to) != originHost(from) {
		return nil, fmt.Errorf("redirect to another origin (%s), not followed", to.Redacted())
	}
	to.Fragment = ""
	return to, nil
}

// originHost is host:port with the default port made explicit.
func originHost(u *url.URL) string {
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), u.Port())
}

type progressWriter struct {
	w   io.Writer
	url string
	n   atomic.Int64
	fn  func(string, int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.fn(p.url, p.n.Add(int64(n)))
	return n, err
}
