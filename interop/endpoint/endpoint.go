// Package endpoint is Quiver's interop endpoint: a server and a client on
// Quiver's engine that follow the interop runner's endpoint contract
// (ROLE, TESTCASE, REQUESTS, SSLKEYLOGFILE,
// QLOGDIR, WWW, DOWNLOADS, CERTS, PORT, exit status 127 for a test case it
// does not support), so that Quiver can join Quiver's own matrix and the
// established runner alike. `quiver interop endpoint` runs it.
//
// The same flags as the quic-go adapter and the x/net interop binary are
// accepted (-listen, -cert, -key, -root, -retry; -output, -alpn, -ca and
// URLs as arguments); a flag wins over the environment.
//
// It lives apart from package interop so that the runner, which judges
// every implementation, does not link the engine it judges.
package endpoint

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiver-quic/quiver/h3"
	"github.com/quiver-quic/quiver/internal/cliargs"
	"github.com/quiver-quic/quiver/keylog"
	"github.com/quiver-quic/quiver/qlog"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/transfer"
)

// ExitUnsupported is the contract's status for a test case the endpoint
// does not support; it also answers unknown names.
const ExitUnsupported = 127

// The endpoint TESTCASE values each role supports, and why the others are
// not. A connectionmigration server offers a preferred_address (its own
// address on a second port); the client runs "transfer" in that test and
// follows the offer by itself. An ackfrequency server, as data sender, asks
// for an ACK every 10 packets within 20 ms (design §5.24: Ack-Eliciting
// Threshold 9, Requested Max Ack Delay max(20 ms, the client's
// min_ack_delay)); its client advertises min_ack_delay, as the engine does
// by default, and obeys. A
// chacha20 client restricts crypto/tls's process-wide TLS 1.3 suites
// (quic.RestrictTLS13Suites); a v2 client starts in v1 and offers v2 in
// version_information for the server to upgrade (RFC 9368).
var (
	ServerCases = []string{"handshake", "transfer", "retry", "resumption", "zerortt", "http3", "multiconnect",
		"chacha20", "keyupdate", "ecn", "v2", "versionnegotiation", "connectionmigration", "ackfrequency"}
	ClientCases = []string{"handshake", "transfer", "retry", "resumption", "zerortt", "http3", "multiconnect",
		"chacha20", "keyupdate", "ecn", "v2", "versionnegotiation", "ackfrequency"}
)

// ackFrequencyPolicy is what an ackfrequency server asks of its client
// (design §5.24); the engine raises the delay to the client's
// min_ack_delay when that is larger.
var ackFrequencyPolicy = quic.AckFrequencyPolicy{Ratio: 10, MaxAckDelay: 20 * time.Millisecond}

// greaseVersion is the reserved version (RFC 9000 §15: 0x?a?a?a?a) a
// versionnegotiation client starts with, to provoke Version Negotiation.
const greaseVersion = 0x1a2a3a4a

// options are the endpoint's settings, from the environment and flags.
type options struct {
	role, testcase                 string
	listen, cert, key, root        string
	retry                          bool
	output, alpn, ca, keylog, qlog string
	urls                           []string
}

// Main runs the endpoint with args (flags and URLs), reading the contract
// from getenv, and returns the process's exit status.
func Main(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	o := options{role: getenv("ROLE"), testcase: getenv("TESTCASE"), keylog: getenv("SSLKEYLOGFILE"), qlog: getenv("QLOGDIR")}
	certs := getenv("CERTS")
	if certs != "" {
		o.cert, o.key, o.ca = filepath.Join(certs, "cert.pem"), filepath.Join(certs, "priv.key"), filepath.Join(certs, "ca.pem")
	}
	o.root, o.output = getenv("WWW"), getenv("DOWNLOADS")
	if p := getenv("PORT"); p != "" {
		o.listen = net.JoinHostPort("", p)
	}
	fs := flag.NewFlagSet("endpoint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", o.listen, "server: UDP `address` to listen on")
	fs.StringVar(&o.cert, "cert", o.cert, "server: certificate chain `file` (PEM)")
	fs.StringVar(&o.key, "key", o.key, "server: private key `file` (PEM)")
	fs.StringVar(&o.root, "root", o.root, "server: `directory` of files to serve")
	fs.BoolVar(&o.retry, "retry", false, "server: validate addresses with Retry (also TESTCASE=retry)")
	fs.StringVar(&o.output, "output", o.output, "client: download `directory`")
	fs.StringVar(&o.alpn, "alpn", "", "client: application `protocol` (default by TESTCASE)")
	fs.StringVar(&o.ca, "ca", o.ca, "client: CA certificate `file`; without one the server is not verified")
	urls, perr := cliargs.Parse(fs, args) // flags before or after the URLs
	if perr != nil {
		return 2
	}
	o.urls = urls
	if len(o.urls) == 0 {
		o.urls = strings.Fields(getenv("REQUESTS"))
	}
	if o.role == "" {
		o.role = "client"
		if len(o.urls) == 0 {
			o.role = "server"
		}
	}
	if o.testcase == "" {
		o.testcase = "transfer"
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	var err error
	switch o.role {
	case "server":
		if !slices.Contains(ServerCases, o.testcase) {
			logf("server: test case %q not supported", o.testcase)
			return ExitUnsupported
		}
		err = runServer(ctx, &o, logf)
	case "client":
		if !slices.Contains(ClientCases, o.testcase) {
			logf("client: test case %q not supported", o.testcase)
			return ExitUnsupported
		}
		err = runClient(ctx, &o, logf)
	default:
		logf("ROLE %q is neither server nor client", o.role)
		return 2
	}
	if err != nil {
		logf("%s: %v", o.role, err)
		return 1
	}
	return 0
}

func openKeyLog(p string) (io.WriteCloser, error) {
	if p == "" {
		return nil, nil
	}
	return keylog.OpenFile(p)
}

func runServer(ctx context.Context, o *options, logf func(string, ...any)) error {
	if o.cert == "" || o.key == "" || o.root == "" || o.listen == "" {
		return errors.New("needs a certificate, a key, a root and an address (CERTS, WWW, PORT or -cert, -key, -root, -listen)")
	}
	c, err := tls.LoadX509KeyPair(o.cert, o.key)
	if err != nil {
		return fmt.Errorf("load certificate: %w", err)
	}
	cfg := transfer.ServerConfig{
		Addr: o.listen, Root: o.root, Certificate: &c, QlogDir: o.qlog, Logf: logf,
		Retry: o.retry || o.testcase == "retry",
		// zerortt: session tickets allow early data, and 0-RTT is
		// accepted. Every other test case issues tickets without it, so
		// that resumption resumes without 0-RTT.
		Allow0RTT: o.testcase == "zerortt",
		// Only v2 accepts a client that starts in v2; everywhere else the
		// contract pins v1.
		Versions: []uint32{quic.Version1},
	}
	if o.testcase == "v2" {
		// v2 first: a client that starts in v1 and offers v2 in its
		// version_information is upgraded (RFC 9368 §2.3); one that starts
		// in v2 stays there.
		cfg.Versions = []uint32{quic.Version2, quic.Version1}
	}
	if o.testcase == "ackfrequency" {
		cfg.EditQUIC = func(q *quic.Config) { q.AckFrequency = ackFrequencyPolicy }
	}
	if o.testcase == "connectionmigration" {
		pa, err := preferredAddress(o.listen)
		if err != nil {
			return err
		}
		cfg.PreferredAddress = pa
	}
	if o.testcase == "http3" {
		cfg.ALPN = []string{h3.ALPNH3}
	} else {
		cfg.ALPN = []string{h3.ALPNHQInterop}
	}
	kl, err := openKeyLog(o.keylog)
	if err != nil {
		return err
	}
	if kl != nil {
		defer kl.Close()
		cfg.KeyLog = kl
	}
	s, err := transfer.Listen(cfg)
	if err != nil {
		return err
	}
	logf("serving %s on %s (TESTCASE=%s)", o.root, s.Addr(), o.testcase)
	return s.Serve(ctx)
}

// preferredAddress is the address a connectionmigration server offers
// (RFC 9000 §9.6): the address it listens on, with a port of its own
// that the kernel picks, since the established runner routes every port
// of the server's address to it. A server listening on every address
// offers the first global unicast address of each family on the host.
func preferredAddress(listen string) (*quic.PreferredAddress, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("preferred address: %w", err)
	}
	var ips []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil && !a.IsUnspecified() {
		ips = append(ips, a.Unmap())
	} else {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return nil, fmt.Errorf("preferred address: %w", err)
		}
		for _, ia := range addrs {
			if n, ok := ia.(*net.IPNet); ok {
				if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap().IsGlobalUnicast() {
					ips = append(ips, a.Unmap())
				}
			}
		}
	}
	pa := &quic.PreferredAddress{}
	for _, a := range ips {
		switch {
		case a.Is4() && !pa.IPv4.IsValid():
			pa.IPv4 = netip.AddrPortFrom(a, 0)
		case a.Is6() && !pa.IPv6.IsValid():
			pa.IPv6 = netip.AddrPortFrom(a, 0)
		}
	}
	if !pa.IPv4.IsValid() && !pa.IPv6.IsValid() {
		return nil, fmt.Errorf("preferred address: no address to offer for %q", listen)
	}
	return pa, nil
}

// client is one run of the client role.
type client struct {
	o    *options
	logf func(string, ...any)
	cfg  *quic.Config
}

func runClient(ctx context.Context, o *options, logf func(string, ...any)) error {
	if len(o.urls) == 0 || o.output == "" {
		return errors.New("needs URLs and a download folder (REQUESTS and DOWNLOADS, or -output and arguments)")
	}
	alpn := o.alpn
	if alpn == "" {
		alpn = h3.ALPNHQInterop
		if o.testcase == "http3" {
			alpn = h3.ALPNH3
		}
	}
	u, err := url.Parse(o.urls[0])
	if err != nil || u.Host == "" {
		return fmt.Errorf("URL %q has no host", o.urls[0])
	}
	tc := &tls.Config{ServerName: u.Hostname(), NextProtos: []string{alpn}, InsecureSkipVerify: true}
	if o.ca != "" {
		pem, err := os.ReadFile(o.ca)
		if err != nil {
			return fmt.Errorf("CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("CA %s: no certificate", o.ca)
		}
		tc.RootCAs, tc.InsecureSkipVerify = pool, false
	}
	cfg := &quic.Config{TLSConfig: tc, Versions: []uint32{quic.Version1}}
	var tickets *ticketCache
	switch o.testcase {
	case "transfer":
		// The test asks for flow-control windows small enough that the
		// server needs MAX_DATA and MAX_STREAM_DATA.
		cfg.InitialMaxData, cfg.InitialMaxStreamData = 1<<20, 512<<10
	case "versionnegotiation":
		// Start with a reserved version; the server's Version
		// Negotiation packet makes the engine restart in v1 (RFC 9000 §6.2).
		cfg.Versions = []uint32{greaseVersion, quic.Version1}
	case "v2":
		// RFC 9369 via RFC 9368: start in v1, offer v2 as compatible.
		cfg.Versions = []uint32{quic.Version1, quic.Version2}
	case "chacha20":
		// Offer TLS_CHACHA20_POLY1305_SHA256 only. The setting is
		// process-wide; this process is this one client.
		quic.EnableTLS13SuiteControl()
		restore, err := quic.RestrictTLS13Suites(tls.TLS_CHACHA20_POLY1305_SHA256)
		if err != nil {
			return err
		}
		defer restore()
	case "resumption", "zerortt":
		tickets = newTicketCache()
		tc.ClientSessionCache = tickets
		cfg.Allow0RTT = o.testcase == "zerortt"
	}
	kl, err := openKeyLog(o.keylog)
	if err != nil {
		return err
	}
	if kl != nil {
		defer kl.Close()
		cfg.KeyLog = kl
	}
	if o.qlog != "" {
		cfg.Tracer = func(odcid []byte, _ bool) qlog.Recorder {
			w, err := qlog.NewFileWriter(o.qlog, odcid, qlog.VantageClient)
			if err != nil {
				logf("qlog: %v", err)
				return nil
			}
			return w
		}
	}
	if err := os.MkdirAll(o.output, 0o755); err != nil {
		return err
	}
	c := &client{o: o, logf: logf, cfg: cfg}
	if tickets != nil {
		// resumption and zerortt: the first request on a first
		// connection, then, once it has left a session ticket, the others
		// on a second connection that resumes the session;
		// zerortt sends them in 0-RTT.
		if len(o.urls) < 2 {
			return fmt.Errorf("%s needs at least two URLs", o.testcase)
		}
		if err := c.fetch(ctx, o.urls[:1], false); err != nil {
			return err
		}
		if err := tickets.wait(ctx, ticketWait); err != nil {
			return err
		}
		return c.fetch(ctx, o.urls[1:], o.testcase == "zerortt")
	}
	if o.testcase == "multiconnect" {
		// One connection per request, one after the other.
		for _, raw := range o.urls {
			if err := c.fetch(ctx, []string{raw}, false); err != nil {
				return err
			}
		}
		return nil
	}
	return c.fetch(ctx, o.urls, false)
}

// fetch downloads urls over one connection, concurrently; early dials
// with DialEarly, so that the requests can travel in 0-RTT.
func (c *client) fetch(ctx context.Context, urls []string, early bool) error {
	u, _ := url.Parse(urls[0])
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	dial := quic.Dial
	if early {
		dial = quic.DialEarly
	}
	conn, err := dial(ctx, "udp", host, c.cfg)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", host, err)
	}
	info := conn.ConnectionInfo()
	c.logf("connected to %s: version %#x, ALPN %s", host, info.Version, conn.ALPN())
	var cc *h3.ClientConn
	if conn.ALPN() == h3.ALPNH3 {
		if cc, err = h3.NewClientConn(ctx, h3.FromQUIC(conn), nil); err != nil {
			conn.Close(0x0102, "")
			return err
		}
	}
	// keyupdate: the client updates its keys once the transfer is under
	// way. A server 1-RTT packet carrying data follows HANDSHAKE_DONE in
	// practice, so 64 KiB of body means the handshake is confirmed
	// (RFC 9001 §6: no update before that).
	var received atomic.Int64
	var updateOnce sync.Once
	onBytes := func(n int) {
		if c.o.testcase != "keyupdate" || received.Add(int64(n)) < 64<<10 {
			return
		}
		updateOnce.Do(func() {
			if err := conn.ForceKeyUpdate(); err != nil {
				c.logf("key update: %v", err)
			} else {
				c.logf("key update started after %d bytes", received.Load())
			}
		})
	}
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i, raw := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.get(ctx, conn, cc, raw, onBytes)
		}()
	}
	wg.Wait()
	info = conn.ConnectionInfo()
	c.logf("%d requests done: version %#x, resumed %v, 0-RTT %v, version negotiated %v, cipher %s, server at %v",
		len(urls), info.Version, info.Resumed, info.Used0RTT, info.VersionNegotiated,
		tls.CipherSuiteName(conn.ConnectionState().CipherSuite), conn.RemoteAddr())
	waitConfirmed(ctx, conn, time.Second)
	if cc != nil {
		cc.Close()
		conn.Close(uint64(h3.ErrCodeNoError), "")
	} else {
		conn.Close(0, "")
	}
	return errors.Join(errs...)
}

// waitConfirmed waits, up to limit, until the handshake is confirmed
// (RFC 9001 §4.1.2: "At the client, the handshake is considered confirmed
// when a HANDSHAKE_DONE frame is received"); ConnectionInfo's
// MaxDatagramSize is 0 until then. A 0-RTT download can end on the
// server's 0.5-RTT data before the client's Finished has reached the
// server; closing at once would put the Finished and the CONNECTION_CLOSE
// side by side, the server would drain without sending HANDSHAKE_DONE, and
// the capture would not show the handshake completing.
func waitConfirmed(ctx context.Context, conn *quic.Conn, limit time.Duration) {
	if conn.ConnectionInfo().MaxDatagramSize > 0 {
		return
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for conn.ConnectionInfo().MaxDatagramSize == 0 {
		select {
		case <-tick.C:
		case <-deadline.C:
			return
		case <-conn.Done():
			return
		case <-ctx.Done():
			return
		}
	}
}

// get downloads one URL into the download folder, under its base name.
func (c *client) get(ctx context.Context, conn *quic.Conn, cc *h3.ClientConn, raw string, onBytes func(int)) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	name := path.Base(u.Path)
	if name == "/" || name == "." {
		return fmt.Errorf("%s: no file name", raw)
	}
	f, err := os.Create(filepath.Join(c.o.output, name))
	if err != nil {
		return err
	}
	w := &countingWriter{w: f, fn: onBytes}
	if cc == nil {
		_, err = h3.GetHQ(ctx, h3.FromQUIC(conn), u.EscapedPath(), w)
	} else {
		err = getH3(ctx, cc, u, w)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name()) // a partial file must not pass for a download
		return fmt.Errorf("%s: %w", raw, err)
	}
	return nil
}

func getH3(ctx context.Context, cc *h3.ClientConn, u *url.URL, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP status %s", resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

type countingWriter struct {
	w  io.Writer
	fn func(int)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.fn(n)
	return n, err
}

// ticketWait bounds how long the client waits, after its first
// connection, for the session ticket that the second one resumes.
const ticketWait = 5 * time.Second

// ticketCache is a client session cache that tells when it holds a
// ticket.
type ticketCache struct {
	tls.ClientSessionCache
	got  chan struct{}
	once sync.Once
}

func newTicketCache() *ticketCache {
	return &ticketCache{ClientSessionCache: tls.NewLRUClientSessionCache(8), got: make(chan struct{})}
}

func (t *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	t.ClientSessionCache.Put(key, cs)
	if cs != nil {
		t.once.Do(func() { close(t.got) })
	}
}

// wait returns once a ticket has arrived, or an error after d.
func (t *ticketCache) wait(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.got:
		return nil
	case <-timer.C:
		return fmt.Errorf("no session ticket within %v of the first connection", d)
	case <-ctx.Done():
		return ctx.Err()
	}
}
