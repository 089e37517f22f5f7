// Command quicgo-peer runs quic-go (github.com/quic-go/quic-go) as an
// interop peer for Quiver.
//
// It follows the interop runner's environment contract (ROLE, TESTCASE,
// REQUESTS, SSLKEYLOGFILE, QLOGDIR, and the project's WWW, DOWNLOADS, CERTS
// and PORT in place of the container's fixed paths), and it also takes flags
// so that it can be started directly on loopback:
//
//	quicgo-peer -listen 127.0.0.1:4433 -cert cert.pem -key key.pem -root DIR
//	quicgo-peer -output DIR [-alpn h3] https://127.0.0.1:4433/file ...
//
// The server speaks hq-interop and h3 on the same port and picks by ALPN.
// Flags win over the environment. A test case it cannot run makes it exit
// with status 127, as the contract requires; any other failure exits 1.
//
// This module is separate from Quiver's main module on purpose: quic-go is
// a peer to test against and must never be linked into Quiver itself.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
)

const (
	alpnHQ = "hq-interop"
	alpnH3 = "h3"
)

// exitUnsupported is the contract's status for a test case this peer cannot run.
const exitUnsupported = 127

// errUnsupported marks a request the peer cannot honour; main maps it to 127.
var errUnsupported = errors.New("unsupported")

// serverCases and clientCases list the endpoint TESTCASE values each role
// accepts. An empty TESTCASE means a plain transfer, for direct use.
var (
	serverCases = map[string]bool{
		"": true, "handshake": true, "transfer": true, "retry": true, "resumption": true,
		"zerortt": true, "http3": true, "multiconnect": true, "chacha20": true,
		"keyupdate": true, "v2": true, "ecn": true, "versionnegotiation": true,
	}
	// The client cannot run versionnegotiation (quic-go cannot start with
	// an unknown version) or connectionmigration (quic-go does not use a
	// server's preferred_address). chacha20 narrows crypto/tls's
	// process-wide TLS 1.3 suites (ciphers.go).
	clientCases = map[string]bool{
		"": true, "handshake": true, "transfer": true, "retry": true, "resumption": true,
		"zerortt": true, "http3": true, "multiconnect": true, "keyupdate": true,
		"v2": true, "ecn": true, "chacha20": true,
	}
)

// config is everything the peer was asked to do, from flags and environment.
type config struct {
	role     string
	testcase string

	listen   string
	certFile string
	keyFile  string
	root     string

	output   string
	urls     []string
	alpn     string
	insecure bool
	caFile   string

	retry    bool
	zeroRTT  bool
	versions []quicVersion

	keylog  string
	qlogDir string

	// handshakes, when positive, makes the client complete that many full
	// handshakes with the first URL's server, parallel at a time, and
	// report the rate instead of downloading (quiver bench handshakes).
	handshakes int
	parallel   int
	// idleConns, when positive, opens that many connections to a server
	// in the process and prints the heap per idle connection.
	idleConns int
	// cpuprofile, when set, receives a pprof CPU profile of the whole run.
	cpuprofile string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is main without the process exit, so it can be tested.
func run(args []string, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "quicgo-peer: %v\n", err)
		if errors.Is(err, errUnsupported) {
			return exitUnsupported
		}
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if cfg.cpuprofile != "" {
		stopProfile, perr := startCPUProfile(cfg.cpuprofile)
		if perr != nil {
			fmt.Fprintf(stderr, "quicgo-peer: %v\n", perr)
			return 1
		}
		defer stopProfile()
	}
	switch {
	case cfg.idleConns > 0:
		err = runIdleConns(ctx, cfg.idleConns, os.Stdout)
	case cfg.role == "server":
		err = runServer(ctx, cfg)
	case cfg.handshakes > 0:
		err = runHandshakes(ctx, cfg, os.Stdout)
	default:
		err = runClient(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "quicgo-peer: %v\n", err)
		if errors.Is(err, errUnsupported) {
			return exitUnsupported
		}
		return 1
	}
	return 0
}

func parseConfig(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("quicgo-peer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		role     = fs.String("role", os.Getenv("ROLE"), "server or client (default: $ROLE, else server when -listen is set)")
		listen   = fs.String("listen", "", "server: UDP address to listen on (default: :$PORT, else :443)")
		certFile = fs.String("cert", "", "server: certificate chain, PEM (default: $CERTS/cert.pem)")
		keyFile  = fs.String("key", "", "server: private key, PEM (default: $CERTS/priv.key)")
		root     = fs.String("root", os.Getenv("WWW"), "server: folder of files to serve (default: $WWW)")
		output   = fs.String("output", os.Getenv("DOWNLOADS"), "client: folder to save files in (default: $DOWNLOADS)")
		alpn     = fs.String("alpn", "", "client: hq-interop or h3 (default: h3 for TESTCASE=http3, else hq-interop)")
		insecure = fs.Bool("insecure", true, "client: skip certificate verification unless -ca is given")
		caFile   = fs.String("ca", "", "client: verify the server against this CA certificate, PEM (default: $CERTS/ca.pem when it exists)")
		retry    = fs.Bool("retry", false, "server: force a Retry on every new connection (also TESTCASE=retry)")
		zeroRTT  = fs.Bool("0rtt", false, "client: send requests after the first in 0-RTT on a resumed connection (also TESTCASE=zerortt)")
		versions = fs.String("versions", "", "QUIC versions, most preferred first, e.g. v1,v2 (default: v2,v1 for TESTCASE=v2, else v1)")
		keylog   = fs.String("keylog", os.Getenv("SSLKEYLOGFILE"), "NSS key log file (default: $SSLKEYLOGFILE)")
		qlogDir  = fs.String("qlog", os.Getenv("QLOGDIR"), "qlog folder (default: $QLOGDIR)")
		hs       = fs.Int("handshakes", 0, "client: complete `N` full handshakes with the first URL's server and print the rate instead of downloading")
		parallel = fs.Int("parallel", 1, "client: handshakes in flight at once with -handshakes")
		idle     = fs.Int("idleconns", 0, "open `N` idle connections to a server in this process and print the heap per connection")
		cpuprof  = fs.String("cpuprofile", "", "write a pprof CPU profile of the run to `file`")
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: quicgo-peer [flags] [URL...]\n\nquic-go as an interop peer: server (hq-interop and h3) or client.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}

	cfg := &config{
		role:       *role,
		testcase:   os.Getenv("TESTCASE"),
		listen:     *listen,
		certFile:   *certFile,
		keyFile:    *keyFile,
		root:       *root,
		output:     *output,
		urls:       fs.Args(),
		alpn:       *alpn,
		insecure:   *insecure,
		caFile:     *caFile,
		retry:      *retry,
		zeroRTT:    *zeroRTT,
		keylog:     *keylog,
		qlogDir:    *qlogDir,
		handshakes: *hs,
		parallel:   max(*parallel, 1),
		cpuprofile: *cpuprof,
		idleConns:  *idle,
	}
	if cfg.idleConns > 0 {
		return cfg, nil // needs neither role nor URLs
	}
	if cfg.role == "" {
		if cfg.listen != "" {
			cfg.role = "server"
		} else {
			cfg.role = "client"
		}
	}
	if len(cfg.urls) == 0 {
		cfg.urls = strings.Fields(os.Getenv("REQUESTS"))
	}
	certs := os.Getenv("CERTS")

	switch cfg.role {
	case "server":
		if !serverCases[cfg.testcase] {
			return nil, fmt.Errorf("server test case %q: %w", cfg.testcase, errUnsupported)
		}
		if cfg.listen == "" {
			port := os.Getenv("PORT")
			if port == "" {
				port = "443"
			}
			cfg.listen = ":" + port
		}
		if cfg.certFile == "" && certs != "" {
			cfg.certFile = filepath.Join(certs, "cert.pem")
		}
		if cfg.keyFile == "" && certs != "" {
			cfg.keyFile = filepath.Join(certs, "priv.key")
		}
		if cfg.certFile == "" || cfg.keyFile == "" {
			return nil, errors.New("server needs -cert and -key (or $CERTS)")
		}
		if cfg.root == "" {
			return nil, errors.New("server needs -root (or $WWW)")
		}
		cfg.retry = cfg.retry || cfg.testcase == "retry"
	case "client":
		if !clientCases[cfg.testcase] {
			return nil, fmt.Errorf("client test case %q: %w", cfg.testcase, errUnsupported)
		}
		if len(cfg.urls) == 0 {
			return nil, errors.New("client needs URLs as arguments (or $REQUESTS)")
		}
		if cfg.output == "" && cfg.handshakes == 0 {
			return nil, errors.New("client needs -output (or $DOWNLOADS)")
		}
		if cfg.caFile == "" && certs != "" {
			if _, err := os.Stat(filepath.Join(certs, "ca.pem")); err == nil {
				cfg.caFile = filepath.Join(certs, "ca.pem")
			}
		}
		if cfg.alpn == "" {
			cfg.alpn = alpnHQ
			if cfg.testcase == "http3" {
				cfg.alpn = alpnH3
			}
		}
		if cfg.alpn != alpnHQ && cfg.alpn != alpnH3 {
			return nil, fmt.Errorf("ALPN %q: %w (want %s or %s)", cfg.alpn, errUnsupported, alpnHQ, alpnH3)
		}
		cfg.zeroRTT = cfg.zeroRTT || cfg.testcase == "zerortt"
		if cfg.testcase == "chacha20" {
			offerOnlyChaCha20()
		}
	default:
		return nil, fmt.Errorf("role %q: want server or client", cfg.role)
	}

	switch {
	case *versions != "":
		vs, err := parseVersions(*versions)
		if err != nil {
			return nil, err
		}
		cfg.versions = vs
	case cfg.testcase == "v2":
		cfg.versions = []quicVersion{quic.Version2, quic.Version1}
	default:
		// The contract pins v1 outside the v2 test case.
		cfg.versions = []quicVersion{quic.Version1}
	}
	return cfg, nil
}

// parseVersions reads a comma-separated list such as "v2,v1" or "0x1".
func parseVersions(s string) ([]quicVersion, error) {
	var vs []quicVersion
	for _, f := range strings.Split(s, ",") {
		switch f = strings.TrimSpace(strings.ToLower(f)); f {
		case "v1", "1":
			vs = append(vs, quic.Version1)
		case "v2", "2":
			vs = append(vs, quic.Version2)
		default:
			n, err := strconv.ParseUint(f, 0, 32)
			if err != nil {
				return nil, fmt.Errorf("QUIC version %q: want v1, v2 or a number such as 0x6b3343cf", f)
			}
			vs = append(vs, quicVersion(n))
		}
	}
	return vs, nil
}

// baseTLSConfig is the TLS 1.3 configuration both roles start from, with
// the key log open if one was asked for; call closeKeyLog when done. The
// key log is opened for appending, so that a client's several connections
// (resumption, multiconnect) all land in one file.
func baseTLSConfig(cfg *config, alpns ...string) (conf *tls.Config, closeKeyLog func(), err error) {
	conf = &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: alpns}
	if cfg.keylog == "" {
		return conf, func() {}, nil
	}
	if err := os.MkdirAll(filepath.Dir(cfg.keylog), 0o755); err != nil {
		return nil, nil, fmt.Errorf("key log: %w", err)
	}
	f, err := os.OpenFile(cfg.keylog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("key log: %w", err)
	}
	conf.KeyLogWriter = f
	return conf, func() { f.Close() }, nil
}

// startCPUProfile starts a pprof CPU profile into path; the returned
// function stops it and closes the file.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// runHandshakes completes cfg.handshakes full handshakes (no session
// resumption: every connection starts without a ticket) with the first
// URL's server, cfg.parallel at a time, closing each connection as soon as
// it is established. It prints one line that quiver bench handshakes reads:
//
//	handshakes N elapsed-ns D
func runHandshakes(ctx context.Context, cfg *config, stdout io.Writer) error {
	u, err := url.Parse(cfg.urls[0])
	if err != nil {
		return fmt.Errorf("URL %q: %w", cfg.urls[0], err)
	}
	tlsConf, closeKeyLog, err := baseTLSConfig(cfg, cfg.alpn)
	if err != nil {
		return err
	}
	defer closeKeyLog()
	tlsConf.InsecureSkipVerify = true
	tlsConf.ServerName = u.Hostname()
	qc, err := quicConfig(cfg)
	if err != nil {
		return err
	}
	addr := u.Host
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	for range cfg.parallel {
		wg.Go(func() {
			for next.Add(1) <= int64(cfg.handshakes) {
				conn, err := quic.DialAddr(ctx, addr, tlsConf, qc)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("handshake with %s: %w", addr, err)
					}
					mu.Unlock()
					return
				}
				_ = conn.CloseWithError(0, "")
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	fmt.Fprintf(stdout, "handshakes %d elapsed-ns %d\n", cfg.handshakes, time.Since(start).Nanoseconds())
	return nil
}
