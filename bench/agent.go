package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/rpc"
)

// AgentMethod is the agent's one RPC method: a bidirectional stream that
// runs one endpoint. The controller sends an AgentRequest with Start, and
// for a server later one with Stop; the agent answers with AgentEvents:
// Started, CPU samples every traceInterval, and Done. When the stream or the
// controller's connection ends first, the endpoint is stopped.
const AgentMethod = "quiver.agent.Endpoint"

// AgentJob is one endpoint to run on an agent's host.
type AgentJob struct {
	// Role is "server" or "client"; Kind "goodput" or "handshakes".
	Role string `json:"role"`
	Kind string `json:"kind"`
	// Impl names the implementation (quiver, quic-go, x/net, ngtcp2, tcp).
	Impl  string `json:"impl"`
	ALPN  string `json:"alpn"`
	Knobs Knobs  `json:"knobs"`
	// Size is the file the server serves and the client fetches (goodput).
	Size int64 `json:"size"`
	// Host is where a server listens (an address of the agent's host), or
	// the server a client connects to; Port is the server's port (client).
	Host string `json:"host"`
	Port int    `json:"port,omitempty"`
	// Handshakes and Parallel size a handshake client.
	Handshakes int `json:"handshakes,omitempty"`
	Parallel   int `json:"parallel,omitempty"`
	// Pin places the endpoint on this host's CPUs as the pin sweep does
	// (none, same, sibling, different: the role's CPU of that placement).
	Pin string `json:"pin,omitempty"`
	// Profile takes a CPU profile of a Go endpoint, returned classified.
	Profile bool `json:"profile,omitempty"`
}

// AgentRequest is a controller's message on the stream.
type AgentRequest struct {
	Start *AgentJob `json:"start,omitempty"`
	Stop  bool      `json:"stop,omitempty"`
}

// AgentEvent is an agent's message on the stream; exactly one field is set.
type AgentEvent struct {
	Started *AgentStarted `json:"started,omitempty"`
	Sample  *CPUSample    `json:"sample,omitempty"`
	Done    *AgentDone    `json:"done,omitempty"`
}

// AgentStarted says the endpoint runs (a server: has bound its port).
type AgentStarted struct {
	PID     int    `json:"pid"`
	Port    int    `json:"port,omitempty"`
	Command string `json:"command"`
}

// CPUSample is an endpoint's cumulative CPU time at T after its start, from
// /proc/PID/stat, with the host's softirq and interrupt CPU time (all
// CPUs, machine-wide) beside it when HostOK.
type CPUSample struct {
	T       time.Duration `json:"t_ns"`
	User    time.Duration `json:"user_ns"`
	System  time.Duration `json:"system_ns"`
	SoftIRQ time.Duration `json:"host_softirq_ns"`
	IRQ     time.Duration `json:"host_irq_ns"`
	HostOK  bool          `json:"host_ok"`
}

// AgentDone is what the endpoint did: its rusage, the client's wall time,
// the host's UDP counters over the run, and what the bench reads from its
// output.
type AgentDone struct {
	CPU        Usage         `json:"cpu"`
	Wall       time.Duration `json:"wall_ns,omitempty"`
	UDP        UDPCounters   `json:"udp"`
	Output     string        `json:"output"`
	Handshakes int           `json:"handshakes,omitempty"`
	HSWall     time.Duration `json:"handshake_wall_ns,omitempty"`
	// Profile is where the endpoint's CPU went, when asked and it is a
	// Go endpoint.
	Profile *Split `json:"profile,omitempty"`
	Err     string `json:"error,omitempty"`
}

// Agent runs benchmark endpoints on its host for a controller. It serves
// AgentMethod and nothing else (the rpc library also answers pings).
type Agent struct {
	// Bins are this host's binaries; Dir is a working folder (default a
	// fresh one on /dev/shm or the temporary folder).
	Bins Bins
	Dir  string
	// Logf, when set, reports each endpoint's start and end.
	Logf func(format string, args ...any)
	// OnStart and OnExit, when set, are told each endpoint's PID when it
	// starts and once it has exited and been reaped (tests).
	OnStart, OnExit func(pid int)
	// StateDir, when set, holds the agent's state file (agent_state.go):
	// at start the agent ends the endpoint groups that dead agents left
	// there, then records its own endpoints' groups while they run.
	StateDir string

	mu     sync.Mutex
	ws     map[int64]*workspace
	state  *stateFile
	server *rpc.Server
}

// DefaultStateDir is where `quiver agent serve` keeps its state file; the
// agents of every network namespace on a host share it.
func DefaultStateDir() string { return filepath.Join(os.TempDir(), "quiver-agent-state") }

// Serve serves the agent on l until ctx ends; then every endpoint still
// running is stopped and its files removed.
func (a *Agent) Serve(ctx context.Context, l rpc.Listener) error {
	if a.Dir == "" {
		base := ""
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			base = "/dev/shm"
		}
		d, err := os.MkdirTemp(base, "quiver-agent-")
		if err != nil {
			return err
		}
		a.Dir = d
		defer os.RemoveAll(d)
	}
	if a.StateDir != "" {
		if _, err := ReapDeadAgents(a.StateDir, a.logf); err != nil {
			return err
		}
		st, err := newStateFile(a.StateDir)
		if err != nil {
			return err
		}
		a.mu.Lock()
		a.state = st
		a.mu.Unlock()
		defer func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			st.close()
			a.state = nil
		}()
	}
	s := rpc.NewServer()
	rpc.RegisterBidiStream(s, AgentMethod, a.endpoint)
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-done:
		}
	}()
	err := s.Serve(l)
	close(done)
	s.Close()
	if ctx.Err() != nil {
		err = nil
	}
	return err
}

func (a *Agent) logf(format string, args ...any) {
	if a.Logf != nil {
		a.Logf(format, args...)
	}
}

// workspace returns the agent's shared files for a file size.
func (a *Agent) workspace(size int64) (*workspace, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := a.ws[size]; w != nil {
		return w, nil
	}
	if len(a.ws) >= maxAgentWorkspaces {
		return nil, fmt.Errorf("the agent already holds files of %d sizes; restart it for another", len(a.ws))
	}
	w, err := newWorkspace(&Options{Size: size, Dir: filepath.Join(a.Dir, "ws-"+strconv.FormatInt(size, 10))})
	if err != nil {
		return nil, err
	}
	if a.ws == nil {
		a.ws = map[int64]*workspace{}
	}
	a.ws[size] = w
	return w, nil
}

// Bounds on what a controller may ask: the file a server writes into the
// agent's folder, the distinct file sizes kept at once, and a handshake
// client's size.
const (
	maxAgentFile       = 16 << 30
	maxAgentWorkspaces = 4
	maxAgentHandshakes = 10_000_000
	maxAgentParallel   = 10_000
)

// validate refuses a job the agent will not run, before anything starts.
func (j *AgentJob) validate() error {
	switch {
	case j.Role != "server" && j.Role != "client":
		return fmt.Errorf("role %q: want server or client", j.Role)
	case j.Kind != "goodput" && j.Kind != "handshakes":
		return fmt.Errorf("kind %q: want goodput or handshakes", j.Kind)
	case j.Size < 0 || j.Size > maxAgentFile:
		return fmt.Errorf("file size %d: want 0 to %d bytes", j.Size, int64(maxAgentFile))
	case j.Handshakes < 0 || j.Handshakes > maxAgentHandshakes || j.Parallel < 0 || j.Parallel > maxAgentParallel:
		return fmt.Errorf("%d handshakes, %d in parallel: want at most %d and %d", j.Handshakes, j.Parallel, maxAgentHandshakes, maxAgentParallel)
	case j.Port < 0 || j.Port > 65535:
		return fmt.Errorf("port %d", j.Port)
	}
	if j.Pin != "" && j.Pin != "none" {
		if _, _, err := pinCPUs(j.Pin); err != nil {
			return fmt.Errorf("pin %q on this host: %w", j.Pin, err)
		}
	}
	if _, err := lookupImpl(j.Impl); err != nil {
		return err
	}
	return nil
}

// endpoint runs one endpoint for the stream's lifetime.
func (a *Agent) endpoint(ctx context.Context, recv func() (*AgentRequest, error), send func(*AgentEvent) error) error {
	first, err := recv()
	if err != nil {
		return err
	}
	if first.Start == nil {
		return rpc.Errorf(rpc.InvalidArgument, "the first message must start an endpoint")
	}
	job := first.Start
	if err := job.validate(); err != nil {
		return rpc.Errorf(rpc.InvalidArgument, "%v", err)
	}
	var sendMu sync.Mutex
	emit := func(e *AgentEvent) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return send(e)
	}
	// The controller's further messages (a server's Stop); a closed
	// stream or connection ends ctx as well.
	stop := make(chan struct{})
	go func() {
		for {
			r, err := recv()
			if err != nil {
				return
			}
			if r.Stop {
				close(stop)
				return
			}
		}
	}()
	done, err := a.run(ctx, job, emit, stop)
	if err != nil {
		return rpc.Errorf(rpc.FailedPrecondition, "%v", err)
	}
	return emit(&AgentEvent{Done: done})
}

// run starts the job's endpoint, reports it, samples its CPU, and ends it
// (a client by itself, a server on stop); when ctx ends first the endpoint
// is stopped and nothing is reported. OnExit hears of the endpoint once it
// is reaped and its files are gone.
func (a *Agent) run(ctx context.Context, job *AgentJob, emit func(*AgentEvent) error, stop <-chan struct{}) (*AgentDone, error) {
	pid := 0
	defer func() {
		if pid != 0 && a.OnExit != nil {
			a.OnExit(pid)
		}
	}()
	return a.runEndpoint(ctx, job, emit, stop, &pid)
}

func (a *Agent) runEndpoint(ctx context.Context, job *AgentJob, emit func(*AgentEvent) error, stop <-chan struct{}, pidOut *int) (*AgentDone, error) {
	im, err := lookupImpl(job.Impl)
	if err != nil {
		return nil, err
	}
	ws, err := a.workspace(job.Size)
	if err != nil {
		return nil, err
	}
	out, err := os.MkdirTemp(a.Dir, "run-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(out)
	s := &site{bins: a.Bins, cert: ws.cert, key: ws.key, root: ws.root, host: job.Host, port: job.Port, out: out,
		file: ws.file, alpn: job.ALPN, knobs: job.Knobs}
	if job.Profile && im.goProfile {
		s.profile = filepath.Join(out, "endpoint.pprof")
	}
	var spec cmdSpec
	switch {
	case job.Role == "server":
		if s.port, err = freePortOn(job.Host, im.proto); err != nil {
			return nil, err
		}
		spec, err = im.server(s)
	case job.Role == "client" && job.Kind == "handshakes":
		if im.hsClient == nil {
			return nil, fmt.Errorf("%s has no handshake client: %w", im.name, errUnsupported)
		}
		spec, err = im.hsClient(s, job.Handshakes, max(job.Parallel, 1))
	case job.Role == "client":
		spec, err = im.client(s)
	default:
		return nil, fmt.Errorf("role %q: want server or client", job.Role)
	}
	if err != nil {
		return nil, err
	}
	spec = pinned(spec, job.Pin, job.Role)
	before := readUDP()
	begin := time.Now()
	p, err := start(spec)
	if err != nil {
		return nil, err
	}
	pid := p.p.Pid()
	*pidOut = pid
	a.track(pid, true)
	a.logf("%s %s started: pid %d: %s", job.Role, im.name, pid, spec)
	if a.OnStart != nil {
		a.OnStart(pid)
	}
	defer func() {
		p.stop()
		a.track(pid, false)
		a.logf("%s %s pid %d ended", job.Role, im.name, pid)
	}()
	if job.Role == "server" {
		if err := p.waitListening(ctx, im.proto, s.port, 10*time.Second); err != nil {
			return nil, err
		}
	}
	if err := emit(&AgentEvent{Started: &AgentStarted{PID: pid, Port: s.port, Command: spec.String()}}); err != nil {
		return nil, err
	}
	go sampleCPU(pid, begin, p.p.Done(), emit)
	d := &AgentDone{}
	var runErr error
	if job.Role == "server" {
		select {
		case <-stop:
		case <-p.p.Done():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		d.CPU, runErr = p.stop()
	} else {
		d.CPU, runErr = p.wait(ctx)
		d.Wall = time.Since(begin)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	d.UDP = readUDP().sub(before)
	d.Output = p.out.String()
	if runErr == nil && job.Role == "client" {
		if job.Kind == "handshakes" {
			d.Handshakes, d.HSWall, runErr = parseHandshakeLine(d.Output)
		} else {
			runErr = checkSize(filepath.Join(out, ws.file), ws.size)
		}
	}
	if runErr != nil {
		d.Err = runErr.Error()
	}
	if s.profile != "" {
		if sp, ok := classifyFiles(map[string]string{job.Role: s.profile})[job.Role]; ok {
			d.Profile = &sp
		}
	}
	return d, nil
}

// track records (or forgets) an endpoint's group in the state file.
func (a *Agent) track(pid int, running bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == nil {
		return
	}
	var err error
	if running {
		err = a.state.add(pid)
	} else {
		err = a.state.remove(pid)
	}
	if err != nil {
		a.logf("agent state: %v", err)
	}
}

// sampleCPU sends the process's CPU time every traceInterval until it
// exits.
func sampleCPU(pid int, begin time.Time, exited <-chan struct{}, emit func(*AgentEvent) error) {
	tick := time.NewTicker(traceInterval)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			return
		case <-tick.C:
			u, sy, ok := procCPU(pid)
			if !ok {
				return
			}
			irq, softirq, hostOK := hostIRQ()
			if emit(&AgentEvent{Sample: &CPUSample{T: time.Since(begin), User: u, System: sy, SoftIRQ: softirq, IRQ: irq, HostOK: hostOK}}) != nil {
				return
			}
		}
	}
}

// clockTick is USER_HZ, the unit of /proc/PID/stat and /proc/stat times
// (100 on every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// procCPU reads utime and stime (fields 14 and 15) of /proc/PID/stat.
func procCPU(pid int) (user, sys time.Duration, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// The command name (field 2) may hold spaces; fields count from its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return time.Duration(ut) * clockTick, time.Duration(st) * clockTick, true
}

// readUDP reads the UDP counters of the agent's network namespace.
func readUDP() UDPCounters {
	b, _ := os.ReadFile("/proc/net/snmp")
	return parseSNMP(string(b))
}

// freePortOn returns a port that was free a moment ago on host.
func freePortOn(host, proto string) (int, error) {
	addr := net.JoinHostPort(host, "0")
	if proto == "tcp" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return 0, err
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// ListenAgent listens for controllers on addr (TCP+TLS) with the keys in
// dir; only a controller certificate from the same `quiver agent init`
// gets through the handshake.
func ListenAgent(addr, keyDir string) (rpc.Listener, error) {
	conf, err := AgentServerTLS(keyDir)
	if err != nil {
		return nil, err
	}
	return rpc.ListenTCP(addr, conf)
}

// DefaultAgent is an agent with this host's binaries.
func DefaultAgent() (*Agent, error) {
	b, err := DefaultBins()
	if err != nil && !errors.Is(err, peers.ErrNotInstalled) {
		return nil, err
	}
	return &Agent{Bins: b, StateDir: DefaultStateDir()}, nil
}
