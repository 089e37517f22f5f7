package interop

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/quiver-quic/quiver/netem"
	"github.com/quiver-quic/quiver/peers"
)

// Link engines: where a cell's link runs (quiver interop --engine).
const (
	// EngineAuto runs a cell in network namespaces when its test case
	// needs them and the host allows them, and through the loopback
	// relay otherwise.
	EngineAuto = "auto"
	// EngineProxy runs every cell through the relay on loopback.
	EngineProxy = "proxy"
	// EngineNS runs every cell in network namespaces: the client and the
	// server each in its own, joined through a router namespace where the
	// relay (and, for cross traffic, a tbf bottleneck) sits.
	EngineNS = "ns"
)

// nsPort is the server's port in namespace mode.
const nsPort = 443

// crossHeadStart is how long the cross-traffic flow runs before the QUIC
// client starts (crosstraffic).
const crossHeadStart = 5 * time.Second

// engineFor picks the engine of a cell, or says why none can run it.
func (r *Runner) engineFor(tc *TestCase) (engine, unsupported string) {
	e := r.Engine
	if e == "" {
		e = EngineAuto
	}
	nsErr := netem.NamespacesAvailable()
	switch e {
	case EngineProxy:
		if tc.NeedsNamespaces != "" {
			return "", tc.NeedsNamespaces + " (engine proxy; run with --engine auto or ns as root)"
		}
		return EngineProxy, ""
	case EngineNS:
		if nsErr != nil {
			return "", nsErr.Error()
		}
		if tc.Scenario.IPv6 {
			return "", "the namespace engine is IPv4 only"
		}
		return EngineNS, ""
	case EngineAuto:
		if tc.NeedsNamespaces == "" {
			return EngineProxy, ""
		}
		if nsErr != nil {
			return "", tc.NeedsNamespaces + ": " + nsErr.Error()
		}
		return EngineNS, ""
	}
	return "", fmt.Sprintf("no link engine %q (have auto, proxy, ns)", e)
}

// cellLink is where a cell's endpoints run and how its relay reaches
// them: loopback (proxy), or the namespaces of the ns engine.
type cellLink struct {
	engine string
	ns     *netem.Namespaces

	// serverListen is the server's host:port (port 0: free port).
	serverListen       string
	serverNS, clientNS string
	// urlHost is the host the client's URLs name; the port is the
	// relay's.
	urlHost string
	relay   netem.RelayConfig
	cross   *netem.TCPFlow
	line    *netem.DelayLine
}

// setupLink prepares the link of a cell for engine. The relay config it
// returns lacks Server, the links, seed and capture.
func setupLink(ctx context.Context, engine string, tc *TestCase) (*cellLink, error) {
	if engine == EngineProxy {
		host := "127.0.0.1"
		if tc.Scenario.IPv6 {
			host = "::1"
		}
		l := &cellLink{engine: engine, serverListen: net.JoinHostPort(host, "0"), urlHost: host}
		return l, nil
	}
	cfg := netem.NamespaceConfig{}
	if tc.Scenario.KernelBottleneck {
		// The bottleneck towards the client is the router's tbf, shared
		// by the relay's QUIC datagrams and the forwarded TCP flow.
		cfg.RateToClient = tc.Scenario.ToClient.Rate
		cfg.QueueBytes = tc.Scenario.ToClient.QueuePackets * 1500
		cfg.Forward = true
	}
	n, err := netem.SetupNamespaces(ctx, cfg)
	if err != nil {
		return nil, err
	}
	relayAddr := netip.AddrPortFrom(netem.NSRouterC, nsPort)
	// In the client's namespace the established host names lead to the
	// link, whose relay forwards to the server.
	if err := n.SetHosts(n.Client, map[string][]netip.Addr{
		"server": {relayAddr.Addr()}, "server4": {relayAddr.Addr()}, "server46": {relayAddr.Addr()},
	}); err != nil {
		n.Close()
		return nil, err
	}
	l := &cellLink{
		engine: engine, ns: n,
		serverListen: netip.AddrPortFrom(netem.NSServerAddr, nsPort).String(),
		serverNS:     n.Server, clientNS: n.Client, urlHost: urlHost(tc),
		relay: netem.RelayConfig{Listen: relayAddr, UpstreamAddr: netem.NSRouterS,
			ListenUDP: n.ListenUDP(n.Router), RebindPool: netem.NSRebindPool},
	}
	return l, nil
}

// urlHost is the host name of a test case's URLs in namespace mode
// (the established runner's names): server46 for connectionmigration, server4 otherwise.
func urlHost(tc *TestCase) string {
	if tc.ServerCase == "connectionmigration" {
		return "server46"
	}
	return "server4"
}

// preferredWait bounds the wait for a connectionmigration server's
// further sockets, which it may open just after its main one.
const preferredWait = 2 * time.Second

// preferredRoutes finds the UDP sockets a connectionmigration server holds
// besides the one at addr (its preferred address, RFC 9000 §9.6) and
// returns a relay alternate for each: the router takes in what the client
// sends to that address (Namespaces.Intercept) and the relay answers for
// it, so that the client reaches the preferred address through the link,
// as it would through the established runner's simulator. An address the
// server bound as unspecified stands for the server's own.
func (l *cellLink) preferredRoutes(ctx context.Context, srv *peers.Process, addr netip.AddrPort) ([]netem.RelayAlternate, error) {
	if l.ns == nil {
		return nil, nil
	}
	deadline := time.Now().Add(preferredWait)
	var extra []netip.AddrPort
	for {
		extra = extra[:0]
		for _, a := range srv.BoundUDP() {
			if a.Port() == addr.Port() {
				continue
			}
			if a.Addr().IsUnspecified() {
				a = netip.AddrPortFrom(addr.Addr(), a.Port())
			}
			if a.Addr().Is4() && !slices.Contains(extra, a) {
				extra = append(extra, a)
			}
		}
		if len(extra) > 0 || time.Now().After(deadline) {
			break
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	var out []netem.RelayAlternate
	var intercepted []netip.Addr
	for _, a := range extra {
		if !slices.Contains(intercepted, a.Addr()) {
			if err := l.ns.Intercept(ctx, a.Addr()); err != nil {
				return nil, err
			}
			intercepted = append(intercepted, a.Addr())
		}
		out = append(out, netem.RelayAlternate{Listen: a, Server: a, ListenUDP: l.ns.ListenUDPTransparent(l.ns.Router)})
	}
	return out, nil
}

// scenarioLinks returns the relay's two directions: the scenario's, but
// with the rate and queue towards the client left to the kernel's
// bottleneck when the scenario asks for one and the engine has it.
func (l *cellLink) scenarioLinks(s Scenario) (toServer, toClient netem.Link) {
	toServer, toClient = s.ToServer, s.ToClient
	if s.KernelBottleneck && l.ns != nil {
		toClient.Rate, toClient.QueuePackets, toClient.QueueBytes = 0, 0, 0
	}
	return toServer, toClient
}

// startCross starts the scenario's cross traffic, if any, and lets it run
// for its head start.
func (l *cellLink) startCross(ctx context.Context, s Scenario, lg *cellLog) error {
	if !s.CrossTraffic {
		return nil
	}
	if l.ns == nil {
		return fmt.Errorf("cross traffic needs the namespace engine")
	}
	// The TCP flow is forwarded by the kernel, not the relay: the delay
	// line gives it the scenario's one-way delay, so that both flows see
	// the same base RTT at the shared bottleneck.
	line, err := l.ns.DelayTCP(ctx, s.ToClient.Delay)
	if err != nil {
		return err
	}
	l.line = line
	f, err := l.ns.StartTCPFlow(ctx, l.ns.Server, netem.NSCrossServer, l.ns.Client, netip.AddrPortFrom(netem.NSCrossClient, 5201), "cubic")
	if err != nil {
		return err
	}
	l.cross = f
	lg.printf("cross traffic: TCP %s from %s to %s, %v head start", f.CC, netem.NSCrossServer, netem.NSCrossClient, crossHeadStart)
	t := time.NewTimer(crossHeadStart)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// stopCross ends the cross traffic and records it.
func (l *cellLink) stopCross(lg *cellLog) *CrossRecord {
	if l.cross == nil {
		return nil
	}
	n, bps, err := l.cross.Stop()
	l.cross = nil
	rec := &CrossRecord{CC: "cubic", Bytes: n, Mbps: bps / 1e6}
	if err != nil {
		rec.Error = err.Error()
	}
	if l.line != nil {
		rec.DelayMs = float64(l.line.Delay) / float64(time.Millisecond)
		l.line.Close()
		l.line = nil
	}
	lg.printf("cross traffic: %d bytes, %.2f Mbit/s (%v)", n, bps/1e6, err)
	return rec
}

// close removes the namespaces; it stops the cross traffic first.
func (l *cellLink) close() {
	if l.cross != nil {
		l.cross.Stop()
	}
	if l.line != nil {
		l.line.Close()
	}
	if l.ns != nil {
		l.ns.Close()
	}
}

// doInRouter runs f where the runner's own sockets should live: in the
// router namespace with the ns engine, here otherwise.
func (l *cellLink) doInRouter(f func()) {
	if l.ns == nil {
		f()
		return
	}
	l.ns.Do(l.ns.Router, func() error { f(); return nil })
}

// CrossRecord is the cross-traffic flow of a crosstraffic run.
type CrossRecord struct {
	CC    string  `json:"cc"`
	Bytes int64   `json:"bytes"`
	Mbps  float64 `json:"mbps"`
	// DelayMs is the one-way delay the flow's packets got in each
	// direction (the delay line).
	DelayMs float64 `json:"delay_ms"`
	Error   string  `json:"error,omitempty"`
}
