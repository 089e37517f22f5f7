package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/quiver-quic/quiver/keylog"
	"github.com/quiver-quic/quiver/quic"
	"github.com/quiver-quic/quiver/transfer"
)

type serveOpts struct {
	addr, root, alpn, qlog, keylog, cert, key string
	retry                                     bool
	cpuprofile, cipher, preferred             string
}

func serveCommand() *command {
	return &command{
		name:    "serve",
		summary: "serve files over QUIC with Quiver's engine (hq-interop and HTTP/3)",
		usage:   "[flags]",
		examples: []string{
			"quiver serve --addr 127.0.0.1:4433 --root ./www",
			"quiver serve --addr 127.0.0.1:4433 --root ./www --alpn h3 --retry --qlog ./qlog --keylog keys.log",
			"quiver serve --addr 127.0.0.1:4433 --root ./www --cipher chacha20",
			"quiver serve --addr 127.0.0.1:4433 --root ./www --preferred-address 127.0.0.2:4434",
		},
		setFlags: func(fs *flag.FlagSet) any {
			o := &serveOpts{}
			fs.StringVar(&o.addr, "addr", "127.0.0.1:4433", "UDP `address` to listen on")
			fs.StringVar(&o.root, "root", ".", "`directory` whose files are served")
			fs.StringVar(&o.alpn, "alpn", "hq-interop,h3", "application `protocols`, comma-separated")
			fs.BoolVar(&o.retry, "retry", false, "validate client addresses with Retry")
			fs.StringVar(&o.qlog, "qlog", "", "write a qlog file per connection under `dir`")
			fs.StringVar(&o.keylog, "keylog", "", "append TLS secrets to `file` (SSLKEYLOGFILE format)")
			fs.StringVar(&o.cert, "cert", "", "certificate `file` (PEM); default: a generated self-signed one")
			fs.StringVar(&o.key, "key", "", "private key `file` (PEM) for --cert")
			fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a pprof CPU profile to `file` (quiver bench)")
			fs.StringVar(&o.cipher, "cipher", "", cipherFlagUsage)
			fs.StringVar(&o.preferred, "preferred-address", "", "also serve on `addresses` (IPv4 and/or IPv6 host:port, comma-separated) and ask clients to move there after the handshake (RFC 9000 §9.6)")
			return o
		},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			o := opts.(*serveOpts)
			if len(args) > 0 {
				return fmt.Errorf("%w: serve takes no arguments", errUsage)
			}
			restore, err := restrictCiphers(o.cipher)
			if err != nil {
				return err
			}
			defer restore()
			stopProfile, err := startCPUProfile(o.cpuprofile)
			if err != nil {
				return err
			}
			defer stopProfile()
			cfg := transfer.ServerConfig{
				Addr:    o.addr,
				Root:    o.root,
				ALPN:    splitList(o.alpn),
				Retry:   o.retry,
				QlogDir: o.qlog,
				Logf: func(format string, args ...any) {
					fmt.Fprintf(env.stderr, format+"\n", args...)
				},
			}
			if o.preferred != "" {
				pa, err := parsePreferredAddress(o.preferred)
				if err != nil {
					return fmt.Errorf("%w: --preferred-address: %v", errUsage, err)
				}
				cfg.PreferredAddress = pa
			}
			if (o.cert == "") != (o.key == "") {
				return fmt.Errorf("%w: --cert and --key go together", errUsage)
			}
			if o.cert != "" {
				c, err := tls.LoadX509KeyPair(o.cert, o.key)
				if err != nil {
					return fmt.Errorf("load certificate: %w", err)
				}
				cfg.Certificate = &c
			}
			if o.keylog != "" {
				f, err := keylog.OpenFile(o.keylog)
				if err != nil {
					return err
				}
				defer f.Close()
				cfg.KeyLog = f
			}
			s, err := transfer.Listen(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.stderr, "serving %s on %s (%s); interrupt to stop\n", o.root, s.Addr(), strings.Join(cfg.ALPN, ", "))
			return s.Serve(ctx)
		},
	}
}

// parsePreferredAddress reads --preferred-address: at most one IPv4 and
// one IPv6 host:port, comma-separated.
func parsePreferredAddress(s string) (*quic.PreferredAddress, error) {
	pa := &quic.PreferredAddress{}
	for _, item := range splitList(s) {
		a, err := netip.ParseAddrPort(item)
		if err != nil {
			return nil, err
		}
		a = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
		slot := &pa.IPv6
		if a.Addr().Is4() {
			slot = &pa.IPv4
		}
		if slot.IsValid() {
			return nil, fmt.Errorf("two addresses of one family: %s", s)
		}
		*slot = a
	}
	if !pa.IPv4.IsValid() && !pa.IPv6.IsValid() {
		return nil, fmt.Errorf("no address in %q", s)
	}
	return pa, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
// cipherFlagUsage documents --cipher for serve and get.
const cipherFlagUsage = "TLS 1.3 cipher `suites` to offer or accept, comma-separated: aes128, aes256, chacha20 (default: crypto/tls's choice)"

// restrictCiphers applies --cipher: crypto/tls has no per-connection choice
// of TLS 1.3 suites, so the list applies to the whole process.
func restrictCiphers(list string) (restore func(), err error) {
	if list == "" {
		return func() {}, nil
	}
	var suites []uint16
	for _, name := range splitList(list) {
		s, err := quic.ParseTLS13Suite(name)
		if err != nil {
			return nil, fmt.Errorf("%w: --cipher: %v", errUsage, err)
		}
		suites = append(suites, s)
	}
	return quic.RestrictTLS13Suites(suites...)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// isTerminal reports whether w is a character device, so that progress
// lines are drawn only for a person and never into a pipe or a file.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
