package variants

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/netem"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/transfer"
)

// Resources the variant servers serve.
const (
	smallPath = "/small.txt"
	largePath = "/large.bin"
)

// writeRoot fills dir with the small and large resources.
func writeRoot(dir string) error {
	small := make([]byte, 4096)
	for i := range small {
		small[i] = byte('a' + i%26)
	}
	large := make([]byte, 1<<20)
	for i := range large {
		large[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(dir, strings.TrimPrefix(smallPath, "/")), small, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, strings.TrimPrefix(largePath, "/")), large, 0o644)
}

// server is Quiver's file server (what `quiver serve` runs) with a
// target's configuration, on a socket that delays what it sends when the
// target has a delay.
type server struct {
	addr   string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startServer(ctx context.Context, t Target, root string) (*server, error) {
	cfg := transfer.ServerConfig{
		Addr: "127.0.0.1:0", Root: root, Allow0RTT: true,
		EditQUIC: func(c *quic.Config) { t.edit(c) },
	}
	if d := t.delay(); d > 0 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		cfg.PacketConn = newDelayConn(pc, d)
	}
	srv, err := transfer.Listen(cfg)
	if err != nil {
		if cfg.PacketConn != nil {
			cfg.PacketConn.Close()
		}
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &server{addr: srv.Addr().String(), cancel: cancel}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); srv.Serve(ctx) }()
	return s, nil
}

func (s *server) stop() {
	s.cancel()
	s.wg.Wait() // Serve closes the endpoint, and the endpoint its socket
}

// startRelay starts a loopback relay in front of addr applying toServer
// and toClient.
func startRelay(ctx context.Context, addr string, toServer, toClient netem.Link) (*netem.Relay, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	r, err := netem.NewRelay(netem.RelayConfig{Listen: netip.AddrPortFrom(ap.Addr(), 0), Server: ap, ToServer: toServer, ToClient: toClient})
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// client is Quiver's client (transfer.Get, what `quiver get` runs) in
// process with the target's configuration; a delayed target reaches the
// tester's server through a relay that holds back what the client sends.
func client(t Target) conformance.ClientTarget {
	return conformance.ClientTarget{Name: "quiver/" + t.Name(), ALPN: "hq-interop", Launch: func(ctx context.Context, l conformance.Launch) error {
		f, err := os.Create(l.Keylog)
		if err != nil {
			return err
		}
		defer f.Close()
		pem, err := os.ReadFile(l.CAFile)
		if err != nil {
			return err
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		urls := l.URLs
		if d := t.delay(); d > 0 {
			r, err := startRelay(ctx, l.Addr, netem.Link{Delay: d}, netem.Link{})
			if err != nil {
				return fmt.Errorf("relay: %w", err)
			}
			defer r.Stop()
			urls = nil
			for _, u := range l.URLs {
				urls = append(urls, strings.Replace(u, l.Addr, r.Addr().String(), 1))
			}
		}
		cfg := transfer.ClientConfig{ALPN: []string{"hq-interop"}, OutDir: l.OutDir, RootCAs: roots, KeyLog: f,
			EditQUIC: func(c *quic.Config) { t.edit(c) }}
		_, err = transfer.Get(ctx, urls, cfg)
		return err
	}}
}

// runServerSuite runs the server-facing scenarios against the target.
func runServerSuite(ctx context.Context, t Target, root string, opts conformance.Options) (*conformance.Report, error) {
	s, err := startServer(ctx, t, root)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	tgt := conformance.Target{Name: "quiver/" + t.Name(), Address: s.addr, SmallPath: smallPath, LargePath: largePath}
	return conformance.Run(ctx, tgt, opts)
}

// rerunServer runs the given scenarios again, one at a time, against a
// fresh server of the target.
func rerunServer(ctx context.Context, t Target, root string, ids []string, timeout time.Duration) (*conformance.Report, error) {
	return runServerSuite(ctx, t, root, conformance.Options{Scenarios: ids, Parallel: 1, Timeout: timeout})
}
