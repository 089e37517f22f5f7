package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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

// MeasureRemote runs a goodput or handshake measurement ("goodput",
// "handshakes") with each server on srv's host and each client on cli's,
// alternating as measure does, and returns the same Result as a local run
// together with the agents' CPU samples. Only the default configuration
// runs remotely (no sweeps, profiles or topologies).
func MeasureRemote(ctx context.Context, o Options, kind string, srv, cli *AgentClient) (*Result, []EndpointTrace, error) {
	switch kind {
	case "goodput":
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
	if o.Profile {
		return nil, nil, errors.New("--profile is not available through agents")
	}
	if len(o.Configs) > 1 || len(o.Configs) == 1 && (o.Configs[0].Topology != "" || o.Configs[0].Rmem != 0 || o.Configs[0].Path != nil) {
		return nil, nil, errors.New("only the default configuration runs through agents")
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
	for _, p := range o.Pairs {
		si, err := lookupImpl(p.Server)
		if err != nil {
			return nil, nil, err
		}
		ci, err := lookupImpl(p.Client)
		if err != nil {
			return nil, nil, err
		}
		c := cell{cfg: o.Configs[0], pair: Pair{si.name, ci.name}, srv: si, cli: ci}
		if c.alpn, err = pairALPN(si, ci, o.ALPN); err != nil {
			res.Unsupported = append(res.Unsupported, Note{Config: c.cfg.Name, Pair: c.pair, Reason: err.Error()})
			continue
		}
		if kind == "handshakes" && ci.hsClient == nil {
			res.Unsupported = append(res.Unsupported, Note{Config: c.cfg.Name, Pair: c.pair, Reason: ci.name + " has no handshake client"})
			continue
		}
		cs = append(cs, c)
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
	if kind == "goodput" {
		r.Bytes = o.Size
	}
	ctx, cancel := context.WithTimeout(ctx, o.RunTimeout)
	defer cancel()
	job := AgentJob{Kind: kind, ALPN: c.alpn, Knobs: c.cfg.Knobs, Size: o.Size, Handshakes: o.Handshakes, Parallel: o.Parallel}
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
	if kind == "handshakes" {
		r.Handshakes, r.Wall = cd.Handshakes, cd.HSWall
		r.HandshakesS = float64(r.Handshakes) / r.Wall.Seconds()
	} else {
		r.Wall = cd.Wall
		r.GoodputMbps = float64(o.Size) * 8 / r.Wall.Seconds() / 1e6
	}
	return r, traces
}
