package rpcbench

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/netem"
)

// Path is an emulated network path between the bench's clients and
// servers: UDP transports cross a netem.Relay and TCP ones a
// netem.StreamRelay, each direction with the same Link. The zero Link
// (profile "loopback") relays nothing: clients dial the servers directly.
type Path struct {
	Name string
	Link netem.Link

	mu   sync.Mutex
	stop []func()
	seed uint64
}

// Profiles are the named paths, after the anchors' network profiles
// (docs/rpc.md): round-trip time is twice Delay.
var Profiles = map[string]netem.Link{
	"loopback": {},
	"lan":      {Delay: time.Millisecond, Rate: 100e6, QueueBytes: 64 << 10},
	"wan":      {Delay: 15 * time.Millisecond, Rate: 20e6, QueueBytes: 150 << 10},
	"lossy":    {Delay: 15 * time.Millisecond, Rate: 20e6, QueueBytes: 150 << 10, Loss: 0.02},
}

// ParsePath reads a profile name, optionally followed by overrides:
// "wan", "lossy", "wan,loss=0.005", "loopback,delay=5ms,rate=50e6".
func ParsePath(s string) (*Path, error) {
	parts := strings.Split(s, ",")
	l, ok := Profiles[parts[0]]
	if !ok {
		return nil, fmt.Errorf("unknown path profile %q (loopback, lan, wan, lossy)", parts[0])
	}
	for _, kv := range parts[1:] {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "delay":
			l.Delay, err = time.ParseDuration(v)
		case "rate":
			var f float64
			f, err = strconv.ParseFloat(v, 64)
			l.Rate = int64(f)
		case "loss":
			l.Loss, err = strconv.ParseFloat(v, 64)
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return nil, fmt.Errorf("path %q: %s: %v", s, kv, err)
		}
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &Path{Name: s, Link: l, seed: 1}, nil
}

// Emulated says whether the path relays anything.
func (p *Path) Emulated() bool {
	return p != nil && (p.Link.Delay > 0 || p.Link.Rate > 0 || p.Link.Loss > 0)
}

// Wrap puts a relay for the path in front of a server at addr
// (network "tcp" or "udp") and returns the address to dial instead.
func (p *Path) Wrap(network, addr string) (string, error) {
	if !p.Emulated() {
		return addr, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seed++
	switch network {
	case "tcp":
		r, err := netem.NewStreamRelay(netem.StreamRelayConfig{Server: addr, ToServer: p.Link, ToClient: p.Link, Seed: p.seed})
		if err != nil {
			return "", err
		}
		p.stop = append(p.stop, func() { r.Close() })
		return r.Addr().String(), nil
	case "udp":
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return "", err
		}
		r, err := netem.NewRelay(netem.RelayConfig{Server: ap, ToServer: p.Link, ToClient: p.Link, Seed: p.seed})
		if err != nil {
			return "", err
		}
		if err := r.Start(context.Background()); err != nil {
			return "", err
		}
		p.stop = append(p.stop, func() { r.Stop() })
		return r.Addr().String(), nil
	}
	return "", fmt.Errorf("path: cannot relay %s", network)
}

// Close stops every relay.
func (p *Path) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	stop := p.stop
	p.stop = nil
	p.mu.Unlock()
	for _, f := range stop {
		f()
	}
}

// String describes the path for reports.
func (p *Path) String() string {
	if !p.Emulated() {
		return "loopback (no emulation)"
	}
	l := p.Link
	return fmt.Sprintf("%s: RTT %v, %.0f Mbit/s each way, loss %.1f%% each way (TCP: loss as head-of-line stall)",
		p.Name, 2*l.Delay, float64(l.Rate)/1e6, 100*l.Loss)
}
