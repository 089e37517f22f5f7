package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/keylog"
	"github.com/quiver-quic/quiver/transfer"
)

type getOpts struct {
	alpn, out, qlog, keylog string
	insecure                bool
	cpuprofile, cipher      string
	stall                   time.Duration
}

func getCommand() *command {
	return &command{
		name:    "get",
		summary: "download URLs over QUIC with Quiver's engine",
		usage:   "[flags] URL...",
		examples: []string{
			"quiver get --insecure https://127.0.0.1:4433/index.html",
			"quiver get --alpn hq-interop --out ./downloads --keylog keys.log https://127.0.0.1:4433/a https://127.0.0.1:4433/b",
			"quiver get --insecure --cipher chacha20 https://127.0.0.1:4433/index.html",
			"quiver get --insecure --stall 2s https://127.0.0.1:4433/large.bin",
		},
		setFlags: func(fs *flag.FlagSet) any {
			o := &getOpts{}
			fs.StringVar(&o.alpn, "alpn", "h3,hq-interop", "application `protocols` to offer, in order of preference")
			fs.StringVar(&o.out, "out", "", "save each body under `dir` (default: write to standard output)")
			fs.StringVar(&o.qlog, "qlog", "", "write a qlog file per connection under `dir`")
			fs.StringVar(&o.keylog, "keylog", "", "append TLS secrets to `file` (SSLKEYLOGFILE format)")
			fs.BoolVar(&o.insecure, "insecure", false, "accept any server certificate")
			fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a pprof CPU profile to `file` (quiver bench)")
			fs.StringVar(&o.cipher, "cipher", "", cipherFlagUsage)
			fs.DurationVar(&o.stall, "stall", 5*time.Second, "say on stderr when a download has received nothing for this `long` (0: never)")
			return o
		},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			o := opts.(*getOpts)
			if len(args) == 0 {
				return fmt.Errorf("%w: get takes at least one URL", errUsage)
			}
			if o.stall < 0 {
				return fmt.Errorf("%w: --stall: negative duration %v", errUsage, o.stall)
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
			cfg := transfer.ClientConfig{
				ALPN:     splitList(o.alpn),
				OutDir:   o.out,
				Stdout:   env.stdout,
				Insecure: o.insecure,
				QlogDir:  o.qlog,
			}
			if o.stall > 0 {
				cfg.StallAfter = o.stall
				var mu sync.Mutex // notices of several URLs must not interleave
				clear := ""
				if isTerminal(env.stderr) {
					clear = "\r\033[K" // over the progress line
				}
				cfg.OnStall = func(url string, n int64, idle time.Duration) {
					mu.Lock()
					defer mu.Unlock()
					fmt.Fprintf(env.stderr, "%squiver get: %s: no data for %v (%d bytes so far); still waiting until the connection's idle timeout\n", clear, url, idle, n)
				}
			}
			if o.keylog != "" {
				f, err := keylog.OpenFile(o.keylog)
				if err != nil {
					return err
				}
				defer f.Close()
				cfg.KeyLog = f
			}
			var bar *progressLine
			if isTerminal(env.stderr) {
				bar = newProgressLine(env.stderr)
				cfg.Progress = bar.update
			}
			start := time.Now()
			res, err := transfer.Get(ctx, args, cfg)
			if bar != nil {
				bar.finish()
			}
			if o.out != "" {
				for _, r := range res {
					if r.Err == nil {
						fmt.Fprintf(env.stderr, "%s -> %s (%d bytes)\n", r.URL, r.File, r.Bytes)
					}
				}
				fmt.Fprintf(env.stderr, "%d URL(s) in %v\n", len(res), time.Since(start).Round(time.Millisecond))
			}
			return err
		},
	}
}

// progressLine draws one self-overwriting line of byte counts on a
// terminal, at most ten times a second.
type progressLine struct {
	mu    sync.Mutex
	w     io.Writer
	bytes map[string]int64
	last  time.Time
}

func newProgressLine(w io.Writer) *progressLine {
	return &progressLine{w: w, bytes: make(map[string]int64)}
}

func (p *progressLine) update(url string, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bytes[url] = n
	if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond {
		p.last = now
		p.draw()
	}
}

func (p *progressLine) draw() {
	var total int64
	for _, n := range p.bytes {
		total += n
	}
	fmt.Fprintf(p.w, "\r\033[K%d stream(s), %.1f MB received", len(p.bytes), float64(total)/1e6)
}

func (p *progressLine) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw()
	fmt.Fprintln(p.w)
}
