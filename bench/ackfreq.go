package bench

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

// EmulatedPath is a path of the ACK frequency bench, emulated in user
// space by a netem.Relay between the client and the server: Down carries
// the data (server to client), Up the ACKs (client to server).
type EmulatedPath struct {
	Name string     `json:"name"`
	Note string     `json:"note"`
	Down netem.Link `json:"down"`
	Up   netem.Link `json:"up"`
}

// link is one direction: rate in bit/s, one-way delay, jitter, and a
// drop-tail queue of one bandwidth-delay product of the whole path (at
// least 64 KiB), with 28 bytes of IPv4+UDP overhead per datagram.
func link(rate int64, oneWay, jitter, rtt time.Duration) netem.Link {
	bdp := int(float64(rate) / 8 * rtt.Seconds())
	return netem.Link{Rate: rate, Delay: oneWay, Jitter: jitter, Overhead: 28, QueueBytes: max(bdp, 64<<10)}
}

// Paths are the emulated paths, by name.
var Paths = map[string]EmulatedPath{
	"terrestrial": {Name: "terrestrial", Note: "20 ms RTT, 100 Mbit/s both ways",
		Down: link(100e6, 10*time.Millisecond, 0, 20*time.Millisecond), Up: link(100e6, 10*time.Millisecond, 0, 20*time.Millisecond)},
	"cellular": {Name: "cellular", Note: "50 ms RTT, 20 Mbit/s down, 5 Mbit/s up, ±5 ms jitter",
		Down: link(20e6, 25*time.Millisecond, 5*time.Millisecond, 50*time.Millisecond), Up: link(5e6, 25*time.Millisecond, 5*time.Millisecond, 50*time.Millisecond)},
	"geo": {Name: "geo", Note: "GEO satellite: 600 ms RTT, 20 Mbit/s down, 2 Mbit/s up",
		Down: link(20e6, 300*time.Millisecond, 0, 600*time.Millisecond), Up: link(2e6, 300*time.Millisecond, 0, 600*time.Millisecond)},
	"asymmetric": {Name: "asymmetric", Note: "20 ms RTT, 50 Mbit/s down, 0.5 Mbit/s up (the return path is the bottleneck for ACKs)",
		Down: link(50e6, 10*time.Millisecond, 0, 20*time.Millisecond), Up: link(500e3, 10*time.Millisecond, 0, 20*time.Millisecond)},
	"narrow-return": {Name: "narrow-return", Note: "20 ms RTT, 50 Mbit/s down, 0.2 Mbit/s up (narrower than RFC 9000's ACK rate at full forward speed)",
		Down: link(50e6, 10*time.Millisecond, 0, 20*time.Millisecond), Up: link(200e3, 10*time.Millisecond, 0, 20*time.Millisecond)},
	// The terrestrial path with 1 % random loss each way, and with 2 % of
	// the data datagrams held back 5 ms (reordered behind up to about
	// 40 later ones at 100 Mbit/s): the study's impaired paths.
	"lossy": {Name: "lossy", Note: "terrestrial with 1 % random loss both ways",
		Down: lossy(link(100e6, 10*time.Millisecond, 0, 20*time.Millisecond)), Up: lossy(link(100e6, 10*time.Millisecond, 0, 20*time.Millisecond))},
	"reordering": {Name: "reordering", Note: "terrestrial with 2 % of data datagrams delayed 5 ms (reordered)",
		Down: reordered(link(100e6, 10*time.Millisecond, 0, 20*time.Millisecond)), Up: link(100e6, 10*time.Millisecond, 0, 20*time.Millisecond)},
}

func lossy(l netem.Link) netem.Link {
	l.Loss = 0.01
	return l
}

func reordered(l netem.Link) netem.Link {
	l.Reorder, l.ReorderDelay = 0.02, 5*time.Millisecond
	return l
}

// PathNames lists the paths in report order.
var PathNames = []string{"terrestrial", "cellular", "geo", "asymmetric", "narrow-return", "lossy", "reordering"}

// DefaultRatios are the ACK ratios of the study, plus the adaptive policy.
// "strict" is 1:2 with a receiver that acknowledges every two packets even
// within a burst (RFC 9000's baseline, measured). A ratio may carry a fixed Requested Max Ack Delay after "@" (10@25ms, as
// the study's fixed 25 ms); without one it is smoothed RTT / 4.
const DefaultRatios = "2,4,8,10,16,32,64,adaptive"

func ratioName(r int) string {
	if r < 0 {
		return "adaptive"
	}
	return "1:" + strconv.Itoa(r)
}

// AckFreqConfigs makes one configuration per path and ACK ratio ("2" is
// the RFC 9000 default, "adaptive" the adaptive policy).
func AckFreqConfigs(paths, ratios []string) ([]Config, error) {
	var out []Config
	for _, pn := range paths {
		p, ok := Paths[strings.TrimSpace(pn)]
		if !ok {
			return nil, fmt.Errorf("path %q: want one of %s", pn, strings.Join(PathNames, ", "))
		}
		for _, rs := range ratios {
			if strings.TrimSpace(rs) == "strict" {
				pc := p
				out = append(out, Config{Name: p.Name + "/strict", Knobs: Knobs{AckRatio: 2, StrictAcks: true}, Topology: "relay", Path: &pc})
				continue
			}
			r := -1
			rs, ds, hasDelay := strings.Cut(strings.TrimPrefix(strings.TrimSpace(rs), "1:"), "@")
			var delay time.Duration
			if hasDelay {
				d, err := time.ParseDuration(ds)
				if err != nil || d <= 0 || rs == "adaptive" || rs == "2" {
					return nil, fmt.Errorf("ACK ratio %s@%s: want a fixed ratio above 2 with a positive delay (10@25ms)", rs, ds)
				}
				delay = d
			}
			if rs != "adaptive" {
				n, err := strconv.Atoi(rs)
				if err != nil || n < 1 {
					return nil, fmt.Errorf("ACK ratio %q: want a number of packets per ACK (2, 10, …) or adaptive", rs)
				}
				r = n
			}
			pc := p
			name := p.Name + "/" + ratioName(r)
			if delay > 0 {
				name += "@" + delay.String()
			}
			out = append(out, Config{Name: name, Knobs: Knobs{AckRatio: r, AckDelay: delay}, Topology: "relay", Path: &pc})
		}
	}
	return out, nil
}

// AckFreq runs Quiver to Quiver downloads over the emulated paths with
// each ACK ratio and counts what the return path carries.
func AckFreq(ctx context.Context, o Options) (*Result, error) {
	if o.Size <= 0 {
		return nil, fmt.Errorf("file size must be positive")
	}
	o.Pairs = []Pair{{"quiver", "quiver"}}
	o.ALPN = "hq-interop"
	return measure(ctx, &o, "ackfreq")
}

// LinkStats is what the relay saw of one run, per direction.
type LinkStats struct {
	Down netem.Stats `json:"down"`
	Up   netem.Stats `json:"up"`
	// UpSmall counts return-path datagrams of at most SmallDatagram bytes:
	// without decryption, the best sign of an ACK-only packet (a 1-RTT
	// packet with one ACK frame and a short header is about 30 to 60
	// bytes; data-bearing packets fill the path MTU).
	UpSmall      uint64 `json:"up_small"`
	UpSmallBytes uint64 `json:"up_small_bytes"`
}

// SmallDatagram is the size limit of a datagram counted as ACK-only.
const SmallDatagram = 100

// startRelay starts a relay for the path in front of the server at
// s.addr() and points the site's client at it. The returned function stops
// the relay and returns its counts.
func startRelay(ctx context.Context, p *EmulatedPath, s *site, seed uint64) (func() LinkStats, error) {
	server, err := netip.ParseAddrPort(s.addr())
	if err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		small LinkStats
	)
	r, err := netem.NewRelay(netem.RelayConfig{
		Listen:   netip.MustParseAddrPort("127.0.0.1:0"),
		Server:   server,
		ToServer: p.Up, ToClient: p.Down,
		Seed: seed,
		Capture: func(e netem.Event) {
			if e.Kind == netem.Sent && e.Dir == netem.ToServer && len(e.Payload) <= SmallDatagram {
				mu.Lock()
				small.UpSmall++
				small.UpSmallBytes += uint64(len(e.Payload))
				mu.Unlock()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	s.port = int(r.Addr().Port())
	return func() LinkStats {
		r.Stop()
		up, down := r.Stats()
		mu.Lock()
		defer mu.Unlock()
		return LinkStats{Down: down, Up: up, UpSmall: small.UpSmall, UpSmallBytes: small.UpSmallBytes}
	}, nil
}
