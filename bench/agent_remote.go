package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/quiver-quic/quiver/rpc"
)

// AgentClient is a controller's connection to one agent.
type AgentClient struct {
	addr, host string
	c          *rpc.Client
}

// DialAgent connects to the agent at addr ("HOST:PORT") with the
// controller keys in keyDir. The connection is made by the first call.
func DialAgent(addr, keyDir string) (*AgentClient, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("agent address %q: %w", addr, err)
	}
	conf, err := ControllerTLS(keyDir)
	if err != nil {
		return nil, err
	}
	return &AgentClient{addr: addr, host: host, c: rpc.NewClient(rpc.DialTCP(addr, conf))}, nil
}

// Addr is the agent's address; Host its host part, where its servers
// listen.
func (a *AgentClient) Addr() string { return a.addr }
func (a *AgentClient) Host() string { return a.host }

// Close closes the connection; the agent stops whatever still runs for it.
func (a *AgentClient) Close() error { return a.c.Close() }

// RemoteEndpoint is an endpoint running on an agent.
type RemoteEndpoint struct {
	Started AgentStarted
	Samples []CPUSample
	s       *rpc.BidiStream[AgentRequest, AgentEvent]
}

// Start runs job on the agent and returns once it runs (a server: once
// its port is bound).
func (a *AgentClient) Start(ctx context.Context, job AgentJob) (*RemoteEndpoint, error) {
	s, err := rpc.OpenStream[AgentRequest, AgentEvent](ctx, a.c, AgentMethod)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", a.addr, err)
	}
	if err := s.Send(&AgentRequest{Start: &job}); err != nil {
		s.Close()
		return nil, fmt.Errorf("agent %s: %w", a.addr, err)
	}
	e := &RemoteEndpoint{s: s}
	for {
		ev, err := e.next()
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("agent %s: %s %s: %w", a.addr, job.Role, job.Impl, err)
		}
		if ev.Started != nil {
			e.Started = *ev.Started
			return e, nil
		}
	}
}

// next reads the next event, keeping CPU samples.
func (e *RemoteEndpoint) next() (*AgentEvent, error) {
	for {
		ev, err := e.s.Recv()
		if err == io.EOF {
			return nil, errors.New("the agent ended the stream without a result")
		}
		if err != nil {
			return nil, err
		}
		if ev.Sample != nil {
			e.Samples = append(e.Samples, *ev.Sample)
			continue
		}
		return ev, nil
	}
}

// Wait waits for the endpoint's result (a client ends by itself).
func (e *RemoteEndpoint) Wait() (*AgentDone, error) {
	defer e.s.Close()
	for {
		ev, err := e.next()
		if err != nil {
			return nil, err
		}
		if ev.Done != nil {
			return ev.Done, nil
		}
	}
}

// Stop asks the agent to stop the endpoint (a server) and returns its
// result.
func (e *RemoteEndpoint) Stop() (*AgentDone, error) {
	if err := e.s.Send(&AgentRequest{Stop: true}); err != nil {
		e.s.Close()
		return nil, err
	}
	return e.Wait()
}

// Close abandons the endpoint; the agent stops it.
func (e *RemoteEndpoint) Close() { e.s.Close() }

// EndpointTrace is the per-second CPU of one endpoint of one run, as its
// agent sampled it.
type EndpointTrace struct {
	Run     int         `json:"run"`
	Role    string      `json:"role"`
	Agent   string      `json:"agent"`
	PID     int         `json:"pid"`
	Samples []CPUSample `json:"samples"`
}

// MeasureRemote runs a goodput, handshake or sweep measurement
// ("goodput", "handshakes", "sweep") with each server on srv's host and
// each client on cli's, alternating as measure does, and returns the same
// Result as a local run together with the agents' CPU samples. A sweep
// runs only configurations of the endpoints themselves (remoteConfig);
// profiles are taken by the agents and come back classified.
func MeasureRemote(ctx context.Context, o Options, kind string, srv, cli *AgentClient) (*Result, []EndpointTrace, error) {
	switch kind {
	case "goodput", "sweep":
		if o.Size <= 0 {
			return nil, nil, errors.New("file size must be positive")
		}
	case "handshakes":
		if o.Handshakes <= 0 {
			return nil, nil, errors.New("number of handshakes must be positive")
		}
		o.Size = 0
	default:
		return nil, nil, fmt.Errorf("kind %q: want goodput or handshakes", kind)
	}
	for _, c := range o.Configs {
		if err := remoteConfig(c); err != nil {
			return nil, nil, err
		}
	}
	if o.Runs <= 0 {
		o.Runs = 1
	}
	if o.RunTimeout <= 0 {
		o.RunTimeout = 2 * time.Minute
	}
	if len(o.Configs) == 0 {
		o.Configs = []Config{{Name: "default"}}
	}
	res := &Result{Kind: kind, Command: o.Command, Started: time.Now().UTC(), Host: hostInfo(), Options: o}
	var cs []cell
	for _, cfg := range o.Configs {
		for _, p := range o.Pairs {
			si, err := lookupImpl(p.Server)
			if err != nil {
				return nil, nil, err
			}
			ci, err := lookupImpl(p.Client)
			if err != nil {
				return nil, nil, err
			}
			c := cell{cfg: cfg, pair: Pair{si.name, ci.name}, srv: si, cli: ci}
			if c.alpn, err = pairALPN(si, ci, o.ALPN); err != nil {
				res.Unsupported = append(res.Unsupported, Note{Config: c.cfg.Name, Pair: c.pair, Reason: err.Error()})
				continue
			}
			if err := c.knobsSupported(kind); err != nil {
				res.Unsupported = append(res.Unsupported, Note{Config: c.cfg.Name, Pair: c.pair, Reason: err.Error()})
				continue
			}
			if kind == "handshakes" && ci.hsClient == nil {
				res.Unsupported = append(res.Unsupported, Note{Config: c.cfg.Name, Pair: c.pair, Reason: ci.name + " has no handshake client"})
				continue
			}
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return res, nil, errors.New("nothing to run: every pair is unsupported")
	}
	var traces []EndpointTrace
	total := o.Runs * len(cs)
	for iter := range o.Runs {
		for k := range cs {
			if err := ctx.Err(); err != nil {
				return res, traces, err
			}
			c := &cs[(k+iter)%len(cs)]
			r, tr := runRemote(ctx, &o, kind, c, iter, srv, cli)
			for i := range tr {
				tr[i].Run = len(res.Runs)
			}
			traces = append(traces, tr...)
			res.Runs = append(res.Runs, r)
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "[%d/%d] %s\n", len(res.Runs), total, r.line())
			}
		}
	}
	res.Summaries = summarize(res)
	return res, traces, nil
}

// runRemote is one run: the server on srv, the client on cli, as
// runTransfer and runHandshakes do locally.
func runRemote(ctx context.Context, o *Options, kind string, c *cell, iter int, srv, cli *AgentClient) (r Run, traces []EndpointTrace) {
	r = Run{Config: c.cfg.Name, Pair: c.pair, ALPN: c.alpn, Iter: iter}
	if kind != "handshakes" {
		r.Bytes = o.Size
	}
	ctx, cancel := context.WithTimeout(ctx, o.RunTimeout)
	defer cancel()
	jobKind := kind
	if kind == "sweep" {
		jobKind = "goodput"
	}
	job := AgentJob{Kind: jobKind, ALPN: c.alpn, Knobs: c.cfg.Knobs, Size: o.Size, Handshakes: o.Handshakes, Parallel: o.Parallel,
		Pin: c.cfg.Pin, Profile: o.Profile}
	sj := job
	sj.Role, sj.Impl, sj.Host = "server", c.srv.name, srv.Host()
	se, err := srv.Start(ctx, sj)
	if err != nil {
		r.Err = err.Error()
		return r, nil
	}
	defer se.Close()
	cj := job
	cj.Role, cj.Impl, cj.Host, cj.Port = "client", c.cli.name, srv.Host(), se.Started.Port
	var cd *AgentDone
	ce, err := cli.Start(ctx, cj)
	if err == nil {
		cd, err = ce.Wait()
	}
	sd, serr := se.Stop()
	traces = append(traces, EndpointTrace{Role: "server", Agent: srv.Addr(), PID: se.Started.PID, Samples: se.Samples})
	if ce != nil {
		traces = append(traces, EndpointTrace{Role: "client", Agent: cli.Addr(), PID: ce.Started.PID, Samples: ce.Samples})
	}
	if err == nil && cd.Err != "" {
		err = errors.New(cd.Err)
	}
	if err == nil && serr != nil {
		err = serr
	}
	if err == nil && sd.Err != "" {
		err = errors.New(sd.Err)
	}
	if cd != nil {
		r.ClientCPU, r.UDP = cd.CPU, cd.UDP
		r.Cipher = reportedCipher(cd.Output)
		if a, ok := parseAckStats(cd.Output); ok {
			r.Acks = &a
		}
	}
	for role, d := range map[string]*AgentDone{"server": sd, "client": cd} {
		if d != nil && d.Profile != nil {
			if r.Profiles == nil {
				r.Profiles = map[string]Split{}
			}
			r.Profiles[role] = *d.Profile
		}
	}
	if sd != nil {
		r.ServerCPU = sd.CPU
		if r.Cipher == "" {
			r.Cipher = reportedCipher(sd.Output)
		}
	}
	if err == nil {
		err = checkCipher(c.cfg.Knobs.Cipher, r.Cipher)
	}
	if err != nil {
		r.Err = err.Error()
		return r, traces
	}
	if ce != nil {
		r.CPUTrace = remoteTrace(se.Samples, ce.Samples, cli.Addr())
	}
	if jobKind == "handshakes" {
		r.Handshakes, r.Wall = cd.Handshakes, cd.HSWall
		r.HandshakesS = float64(r.Handshakes) / r.Wall.Seconds()
	} else {
		r.Wall = cd.Wall
		r.GoodputMbps = float64(o.Size) * 8 / r.Wall.Seconds() / 1e6
	}
	return r, traces
}

// remoteConfig refuses a configuration that cannot run through agents:
// one that changes the network between the ends or a host-wide setting
// (the veth pair, its MTU, offloads or link rate, a relay path, the
// kernel's receive buffers) needs both ends on this host, where the bench
// makes that network; across hosts, set it on the hosts and run once per
// setting. Endpoint settings (GSO, GRO, cipher, congestion control, ACK
// ratio, CPU placement on each host) and profiles run anywhere.
func remoteConfig(c Config) error {
	why := ""
	switch {
	case c.MTU != 0:
		why = "sets the veth pair's MTU"
	case c.Offload != "":
		why = "sets the veth pair's offloads (ethtool -K)"
	case c.Rate != 0:
		why = "shapes the veth pair's link rate"
	case c.Path != nil:
		why = "emulates a path through the relay"
	case c.Rmem != 0:
		why = "sets the kernel's receive buffers (net.core.rmem_*)"
	case c.Topology != "" && c.Topology != "loopback":
		why = "runs on the " + c.Topology + " topology, which the bench builds on this host"
	default:
		return nil
	}
	return fmt.Errorf("configuration %s %s: it needs both ends local (--server-agent/--client-agent cannot run it); "+
		"set it on the hosts themselves and run one bench per setting", c.Name, why)
}

// knobsSupported is cell.check for a cell whose binaries are the agents':
// a knob an implementation cannot take is known from its command line
// alone, and makes the cell a note, not a failed run.
func (c *cell) knobsSupported(kind string) error {
	s := &site{host: "127.0.0.1", port: 1, out: os.TempDir(), file: "file", alpn: c.alpn, knobs: c.cfg.Knobs,
		cert: "cert.pem", key: "key.pem", root: os.TempDir()}
	if _, err := c.srv.server(s); errors.Is(err, errUnsupported) {
		return fmt.Errorf("%s server: %w", c.srv.name, err)
	}
	if kind != "handshakes" {
		if _, err := c.cli.client(s); errors.Is(err, errUnsupported) {
			return fmt.Errorf("%s client: %w", c.cli.name, err)
		}
	}
	if c.cfg.Knobs.AckRatio != 0 && (c.srv.name != "quiver" || c.cli.name != "quiver") {
		return fmt.Errorf("ACK frequency policies: only Quiver implements the sender: %w", errUnsupported)
	}
	return nil
}
