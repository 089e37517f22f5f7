package bench

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// runHandshakes measures one batch of full handshakes: the client
// completes o.Handshakes handshakes, o.Parallel at a time, closing each
// connection once established, and times the loop itself, so that process
// start does not count.
func runHandshakes(ctx context.Context, o *Options, ws *workspace, env *environment, c *cell, iter int) (r Run) {
	r = Run{Config: c.cfg.Name, Pair: c.pair, ALPN: c.alpn, Iter: iter}
	ctx, cancel := context.WithTimeout(ctx, o.RunTimeout)
	defer cancel()
	s, srv, profiles, cleanup, err := startRun(ctx, o, ws, env, c, iter)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer cleanup()
	spec, err := c.cli.hsClient(s, o.Handshakes, max(o.Parallel, 1))
	spec = pinned(spec, c.cfg.Pin, "client")
	if err != nil {
		srv.stop()
		r.Err = err.Error()
		return r
	}
	before := env.udp(s.clientNS)
	cli, err := start(spec)
	if err == nil {
		tr := traceCPU(srv.p.Pid(), cli.p.Pid())
		r.ClientCPU, err = cli.wait(ctx)
		r.CPUTrace = tr.finish()
	}
	var serr error
	r.ServerCPU, serr = srv.stop()
	r.UDP = env.udp(s.clientNS).sub(before)
	if err == nil {
		err = serr
	}
	if err == nil {
		r.Handshakes, r.Wall, err = parseHandshakeLine(cli.out.String())
	}
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.HandshakesS = float64(r.Handshakes) / r.Wall.Seconds()
	r.Profiles = classifyFiles(profiles)
	return r
}

// parseHandshakeLine finds "handshakes N elapsed-ns D" in a client's output.
func parseHandshakeLine(out string) (int, time.Duration, error) {
	for _, l := range strings.Split(out, "\n") {
		var n int
		var ns int64
		if _, err := fmt.Sscanf(strings.TrimSpace(l), "handshakes %d elapsed-ns %d", &n, &ns); err == nil && n > 0 && ns > 0 {
			return n, time.Duration(ns), nil
		}
	}
	return 0, 0, fmt.Errorf("no 'handshakes N elapsed-ns D' line in the client's output:\n%s", out)
}

// Goodput runs the bulk-transfer measurement.
func Goodput(ctx context.Context, o Options) (*Result, error) {
	if o.Size <= 0 {
		return nil, fmt.Errorf("file size must be positive")
	}
	return measure(ctx, &o, "goodput")
}

// Handshakes runs the handshake-rate measurement.
func Handshakes(ctx context.Context, o Options) (*Result, error) {
	if o.Handshakes <= 0 {
		return nil, fmt.Errorf("number of handshakes must be positive")
	}
	o.Size = 0
	return measure(ctx, &o, "handshakes")
}
