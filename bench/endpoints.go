package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// The bench's own endpoints run inside the quiver binary as hidden
// `quiver bench` subcommands, so that each is a process of its own and
// its rusage is its own.

// StartCPUProfile writes a pprof CPU profile to path until the returned
// function is called; an empty path does nothing.
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
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

// TLSServer serves the files under root over TLS 1.3 on TCP with HTTP/1.1,
// the study's TCP+TLS baseline built from Go's crypto/tls, until ctx ends.
// cc, when set, is the TCP congestion controller of the accepted sockets.
func TLSServer(ctx context.Context, addr, certFile, keyFile, root, cc string) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("load certificate: %w", err)
	}
	lc := net.ListenConfig{}
	if cc != "" {
		// Accepted sockets inherit the listener's congestion controller.
		lc.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptString(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CONGESTION, cc)
			}); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("TCP congestion control %q: %w", cc, serr)
			}
			return nil
		}
	}
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler: http.FileServer(http.Dir(root)),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS13,
			NextProtos:   []string{"http/1.1"},
		},
		// HTTP/1.1 only, as the study's nginx and wget spoke.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(l, "", "") }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		srv.Close()
		<-done
		return nil
	}
}

// TLSGet downloads rawURL over TLS 1.3 and HTTP/1.1 into outDir under the
// URL's base name, without verifying the certificate.
func TLSGet(ctx context.Context, rawURL, outDir string) (int64, error) {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}},
		TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.TLS != nil {
		printCipher(os.Stderr, *resp.TLS)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", rawURL, resp.Status)
	}
	return saveTo(outDir, req.URL, resp.Body)
}

func saveTo(outDir string, u *url.URL, body io.Reader) (int64, error) {
	name := path.Base(u.Path)
	if name == "/" || name == "." {
		return 0, fmt.Errorf("URL %s names no file", u)
	}
	f, err := os.Create(filepath.Join(outDir, name))
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// HandshakeClient completes n full handshakes with the server at rawURL's
// host, parallel at a time, and returns the time the loop took. impl is
// "quiver" (Quiver's engine, QUIC with alpn) or "tcp" (crypto/tls over
// TCP). No session is resumed: every handshake is a full one.
func HandshakeClient(ctx context.Context, impl, rawURL, alpn string, n, parallel int) (time.Duration, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, err
	}
	tlsConf := &tls.Config{InsecureSkipVerify: true, ServerName: u.Hostname(), MinVersion: tls.VersionTLS13}
	var dial func() error
	switch impl {
	case "quiver":
		tlsConf.NextProtos = []string{alpn}
		cfg := &quic.Config{TLSConfig: tlsConf}
		dial = func() error {
			c, err := quic.Dial(ctx, "udp", u.Host, cfg)
			if err != nil {
				return err
			}
			return c.Close(0, "")
		}
	case "tcp":
		tlsConf.NextProtos = []string{"http/1.1"}
		d := &tls.Dialer{Config: tlsConf}
		dial = func() error {
			c, err := d.DialContext(ctx, "tcp", u.Host)
			if err != nil {
				return err
			}
			return c.Close()
		}
	default:
		return 0, fmt.Errorf("handshake client %q: want quiver or tcp", impl)
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	begin := time.Now()
	for range max(parallel, 1) {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := dial(); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("handshake with %s: %w", u.Host, err) })
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(begin), firstErr
}

// QuiverEndpointConfig is the engine configuration of the bench's own
// Quiver endpoint, used when a sweep sets a knob that `quiver serve` and
// `quiver get` do not expose.
type QuiverEndpointConfig struct {
	CC string
	// AckRatio is passed to AckPolicy unless it is 0 or 2, the
	// default of RFC 9000 (one ACK per two ack-eliciting packets).
	AckRatio int
	// AckPolicy applies AckRatio to the engine's configuration; nil means
	// ApplyAckPolicy. A caller that wants another policy passes it here.
	AckPolicy func(cfg *quic.Config, ratio int, server bool) error
	// AckDelay, when positive, replaces the fixed ratios' Requested Max
	// Ack Delay of smoothed RTT / 4 with this fixed value.
	AckDelay time.Duration
	// StrictAcks makes the client (the data receiver) acknowledge every
	// two ack-eliciting packets, even within a burst.
	StrictAcks bool
	// SocketBuffer is quic.Config.SocketBuffer: 0 the engine's 8 MiB, -1
	// the kernel's default.
	SocketBuffer int
	// AckStats makes the client count, from the engine's own packets, the
	// ACKs it sends and the ACK_FREQUENCY frames it obeys, and print them
	// (AckStatsLine) when the download ends.
	AckStats bool
}

// AckStatsLine starts the line in which the bench's Quiver client reports
// its ACK counts.
const AckStatsLine = "ack-stats: "

// AckStats is what the data receiver counted in the Application space.
type AckStats struct {
	// AppPackets is the 1-RTT packets the receiver sent, ACKPackets those
	// of them that carried an ACK frame.
	AppPackets uint64 `json:"app_packets"`
	ACKPackets uint64 `json:"ack_packets"`
	// DataPackets is the 1-RTT packets it received.
	DataPackets uint64 `json:"data_packets"`
	// AckFrequency is the ACK_FREQUENCY frames it received, Threshold the
	// Ack-Eliciting Threshold of the last (-1: none).
	AckFrequency uint64 `json:"ack_frequency_frames"`
	Threshold    int64  `json:"threshold"`
}

// String is the ACK statistics line the bench endpoint prints, which the bench parses back.
func (a AckStats) String() string {
	return fmt.Sprintf("%sapp-packets=%d ack-packets=%d data-packets=%d ack-frequency=%d threshold=%d",
		AckStatsLine, a.AppPackets, a.ACKPackets, a.DataPackets, a.AckFrequency, a.Threshold)
}

// parseAckStats reads the line back.
func parseAckStats(out string) (AckStats, bool) {
	for _, l := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), AckStatsLine)
		if !ok {
			continue
		}
		var a AckStats
		if _, err := fmt.Sscanf(rest, "app-packets=%d ack-packets=%d data-packets=%d ack-frequency=%d threshold=%d",
			&a.AppPackets, &a.ACKPackets, &a.DataPackets, &a.AckFrequency, &a.Threshold); err == nil {
			return a, true
		}
	}
	return AckStats{}, false
}

// ackCounter fills AckStats from the engine's probe hooks, which run on
// the connection's goroutine; the counts are atomic so that the download
// can read them while the connection still runs.
type ackCounter struct {
	app, acks, data, af atomic.Uint64
	threshold           atomic.Int64
	p                   wire.Parser // the connection goroutine's only
}

func newAckCounter() *ackCounter {
	c := &ackCounter{}
	c.threshold.Store(-1)
	return c
}

func (c *ackCounter) probe() *quic.Probe {
	return &quic.Probe{
		OnPacketSent: func(p quic.PacketInfo) {
			if p.Space != quic.SpaceApplication {
				return
			}
			c.app.Add(1)
			for b := p.Payload; len(b) > 0; {
				f, n, err := c.p.Parse(b)
				if err != nil || n <= 0 {
					return
				}
				if _, ok := f.(*wire.AckFrame); ok {
					c.acks.Add(1)
					return
				}
				b = b[n:]
			}
		},
		OnPacketReceived: func(p quic.PacketInfo) {
			if p.Space != quic.SpaceApplication {
				return
			}
			c.data.Add(1)
			// Control frames come before stream data: stop at the first
			// STREAM frame, so that a data packet costs one frame header.
			for b := p.Payload; len(b) > 0; {
				f, n, err := c.p.Parse(b)
				if err != nil || n <= 0 {
					return
				}
				switch f := f.(type) {
				case *wire.AckFrequencyFrame:
					c.af.Add(1)
					c.threshold.Store(int64(f.AckElicitingThreshold))
				case *wire.StreamFrame:
					return
				}
				b = b[n:]
			}
		},
	}
}

func (c *ackCounter) stats() AckStats {
	return AckStats{AppPackets: c.app.Load(), ACKPackets: c.acks.Load(), DataPackets: c.data.Load(),
		AckFrequency: c.af.Load(), Threshold: c.threshold.Load()}
}

func (q QuiverEndpointConfig) apply(cfg *quic.Config, server bool) error {
	switch q.CC {
	case "":
	case "cubic":
		cfg.Congestion = quic.Cubic
	case "reno":
		cfg.Congestion = quic.NewReno
	default:
		return fmt.Errorf("congestion controller %q: want cubic or reno", q.CC)
	}
	cfg.SocketBuffer = q.SocketBuffer
	cfg.StrictAcks = q.StrictAcks && !server
	if q.AckRatio != 0 && q.AckRatio != 2 {
		policy := q.AckPolicy
		if policy == nil {
			policy = ApplyAckPolicy
		}
		if err := policy(cfg, q.AckRatio, server); err != nil {
			return err
		}
		if q.AckDelay > 0 && cfg.AckFrequency.Ratio > 0 {
			cfg.AckFrequency.MaxAckDelay = q.AckDelay
		}
	}
	return nil
}

// RestrictCipher makes every TLS 1.3 handshake of this process offer (as
// a client) or accept (as a server) only the named suite (aes128, aes256
// or chacha20); "" leaves crypto/tls's default list. The bench's own
// endpoints are processes of their own, so the process-wide setting
// (quic.RestrictTLS13Suites) is theirs alone.
func RestrictCipher(name string) (restore func(), err error) {
	if name == "" {
		return func() {}, nil
	}
	id, err := quic.ParseTLS13Suite(name)
	if err != nil {
		return nil, err
	}
	quic.EnableTLS13SuiteControl()
	return quic.RestrictTLS13Suites(id)
}

// CipherLine is what the bench's endpoints print once a handshake has
// chosen its suite; the bench reads it back from their output.
const CipherLine = "cipher-suite: "

func printCipher(w io.Writer, st tls.ConnectionState) {
	if st.CipherSuite != 0 {
		fmt.Fprintf(w, "%s%s\n", CipherLine, tls.CipherSuiteName(st.CipherSuite))
	}
}

// QuiverServe serves the files under root over hq-interop with Quiver's
// engine until ctx ends.
func QuiverServe(ctx context.Context, addr, certFile, keyFile, root string, q QuiverEndpointConfig) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("load certificate: %w", err)
	}
	cfg := &quic.Config{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"hq-interop"}}}
	if err := q.apply(cfg, true); err != nil {
		return err
	}
	dir, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer dir.Close()
	ep, err := quic.Listen("udp", addr, cfg)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ep.Close()
	for {
		conn, err := ep.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		printCipher(os.Stderr, conn.ConnectionState())
		wg.Go(func() { serveHQConn(ctx, conn, dir) })
	}
}

func serveHQConn(ctx context.Context, conn *quic.Conn, dir *os.Root) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		s, err := conn.AcceptStream(ctx)
		if err != nil {
			return
		}
		wg.Go(func() {
			req, err := bufio.NewReader(io.LimitReader(s, 4096)).ReadString('\n')
			p, ok := strings.CutPrefix(strings.TrimSpace(req), "GET /")
			if err != nil || !ok {
				s.Reset(0x10b)
				return
			}
			f, err := dir.Open(p)
			if err != nil {
				s.Reset(0x10b)
				return
			}
			defer f.Close()
			if _, err := io.Copy(s, f); err != nil {
				s.Reset(0x102)
				return
			}
			s.Close()
		})
	}
}

// QuiverGet downloads rawURL over hq-interop with Quiver's engine into
// outDir.
func QuiverGet(ctx context.Context, rawURL, outDir string, q QuiverEndpointConfig) (int64, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, err
	}
	cfg := &quic.Config{TLSConfig: &tls.Config{InsecureSkipVerify: true, ServerName: u.Hostname(), NextProtos: []string{"hq-interop"}}}
	if err := q.apply(cfg, false); err != nil {
		return 0, err
	}
	var counter *ackCounter
	if q.AckStats {
		counter = newAckCounter()
		cfg.Probe = counter.probe()
	}
	conn, err := quic.Dial(ctx, "udp", u.Host, cfg)
	if err != nil {
		return 0, err
	}
	defer conn.Close(0, "")
	printCipher(os.Stderr, conn.ConnectionState())
	if counter != nil {
		defer func() { fmt.Fprintln(os.Stderr, counter.stats()) }()
	}
	s, err := conn.OpenStream(ctx)
	if err != nil {
		return 0, err
	}
	if _, err := io.WriteString(s, "GET "+u.EscapedPath()+"\r\n"); err != nil {
		return 0, err
	}
	if err := s.CloseWrite(); err != nil {
		return 0, err
	}
	return saveTo(outDir, u, s)
}

// ApplyAckPolicy applies an ACK frequency sender policy to an engine
// configuration: ratio > 0 asks the peer for one ACK per ratio
// ack-eliciting packets (1:ratio), -1 selects the adaptive policy. server
// says which side the configuration is for.
//
// The policy belongs to the data sender, the server of a download: it
// sends ACK_FREQUENCY frames to the client, which obeys them. The client
// only has to accept the extension, which the engine does by default
// (Config.MinAckDelay 1 ms advertises min_ack_delay), so its
// configuration is left alone. The fixed ratios use the engine's default
// delay (quic.AckFrequencyPolicy with MaxAckDelay -1): a Requested Max
// Ack Delay of smoothed RTT / 4, re-sent when the RTT moves
// (docs/ack-frequency-results.md).
func ApplyAckPolicy(cfg *quic.Config, ratio int, server bool) error {
	switch {
	case ratio == 0:
		return nil
	case ratio < 0:
		if server {
			cfg.AckFrequency = quic.AckFrequencyPolicy{Ratio: quic.AdaptiveAckRatio}
		}
		return nil
	}
	if server {
		cfg.AckFrequency = quic.AckFrequencyPolicy{Ratio: ratio, MaxAckDelay: -1}
	}
	if cfg.MinAckDelay < 0 {
		return fmt.Errorf("ACK ratio %s: the receiver has the ACK frequency extension switched off (MinAckDelay < 0)", ratioName(ratio))
	}
	return nil
}
