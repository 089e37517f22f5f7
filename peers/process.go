package peers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quiver-quic/quiver/internal/tailbuf"
)

// stopGrace is how long a peer has to exit after SIGTERM before SIGKILL,
// as in the interop runner's contract.
const stopGrace = 5 * time.Second

// errExitedEarly is a server's exit before it was ready.
var errExitedEarly = errors.New("exited")

// defaultReadyTimeout bounds the wait for a server to bind its port.
const defaultReadyTimeout = 10 * time.Second

// ServerOpts says how to start a server.
type ServerOpts struct {
	// Addr is host:port to listen on; an empty or zero port picks a free
	// one. The default is 127.0.0.1 and a free port.
	Addr     string
	CertFile string
	KeyFile  string
	// Root is the folder of files to serve.
	Root string
	// ALPN, when set, must be one the implementation speaks; servers that
	// speak several pick by the client's offer.
	ALPN string
	// Retry makes the server validate every client's address with Retry.
	Retry bool
	// TestCase is the endpoint TESTCASE; empty means a plain server.
	TestCase string
	// KeylogFile and QlogDir, when set, are where the peer writes its TLS
	// secrets (NSS key log) and qlog files.
	KeylogFile string
	QlogDir    string
	// LogDir, when set, receives the process's stdout and stderr as
	// NAME-server.log; otherwise the last part of them is kept in memory.
	LogDir string
	// ReadyTimeout bounds the wait for the port to be bound (default 10s).
	ReadyTimeout time.Duration
	// ExtraArgs are appended to the implementation's own options.
	ExtraArgs []string
	// Netns, when set, starts the server inside that network namespace
	// (ip netns exec, as root), so that it binds and routes there.
	Netns string
}

// ClientOpts says how to run a client.
type ClientOpts struct {
	// URLs to fetch, all from one server, e.g. https://127.0.0.1:4433/file.
	URLs []string
	// OutDir is where the files are saved under their URL base names.
	OutDir string
	// ALPN, when set, must be one the implementation speaks.
	ALPN string
	// TestCase is the endpoint TESTCASE; empty means a plain download.
	TestCase string
	// KeylogFile and QlogDir as in ServerOpts.
	KeylogFile string
	QlogDir    string
	// CAFile, when set and the client can use it, verifies the server's
	// certificate; otherwise clients skip verification.
	CAFile string
	// LogDir as in ServerOpts, with NAME-client.log.
	LogDir    string
	ExtraArgs []string
	// Netns as in ServerOpts.
	Netns string
}

// Process is a running peer.
type Process struct {
	Impl string
	Role string
	// Addr is the address a server listens on.
	Addr string
	// LogFile is where stdout and stderr go, if a LogDir was given.
	LogFile string

	cmd     *exec.Cmd
	out     *tailbuf.Buffer
	logFile *os.File

	done    chan struct{}
	waitErr error

	mu      sync.Mutex
	stopped bool
}

// Result is what a client run produced.
type Result struct {
	ExitCode int
	Duration time.Duration
	// Missing lists the URLs whose file is not in OutDir.
	Missing []string
	// Output is the end of the client's stdout and stderr.
	Output  string
	LogFile string
}

// vars are the values of a Command template's placeholders.
type vars struct {
	m     map[string]string
	urls  []string
	conds map[string]bool
	extra []string
}

// placeholders are the names Command templates may use; one without a
// value expands to the empty string.
var placeholders = []string{"ADDR", "HOST", "PORT", "CERT", "KEY", "ROOT", "OUT", "CA", "ALPN", "TESTCASE", "KEYLOG", "QLOGDIR"}

func (v *vars) expand(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	for _, k := range placeholders {
		s = strings.ReplaceAll(s, "{"+k+"}", v.m[k])
	}
	return s
}

// build turns a Command template into an argument list and environment.
// The environment is the parent's without the interop contract's
// variables, so that a developer's own SSLKEYLOGFILE never leaks into a
// peer, plus the template's.
func (c *Command) build(v *vars) (args, env []string) {
	for _, a := range c.Args {
		switch a {
		case "{URLS}":
			args = append(args, v.urls...)
		case "{OPTS}":
			for _, name := range []string{"retry", "keylog", "qlog", "ca", "alpn"} {
				if v.conds[name] {
					for _, x := range c.When[name].Args {
						args = append(args, v.expand(x))
					}
				}
			}
			args = append(args, v.extra...)
		default:
			args = append(args, v.expand(a))
		}
	}
	merged := map[string]string{}
	for k, val := range c.Env {
		merged[k] = val
	}
	for name, on := range v.conds {
		if on {
			for k, val := range c.When[name].Env {
				merged[k] = val
			}
		}
	}
	contract := map[string]bool{"ROLE": true, "TESTCASE": true, "REQUESTS": true, "SSLKEYLOGFILE": true,
		"QLOGDIR": true, "WWW": true, "DOWNLOADS": true, "CERTS": true, "PORT": true, "LOGS": true}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !contract[k] {
			env = append(env, kv)
		}
	}
	for k, val := range merged {
		if val = v.expand(val); val != "" {
			env = append(env, k+"="+val)
		}
	}
	return args, env
}

// StartServer starts the implementation's server and returns once its UDP
// port is bound. The process lives until Stop, or until ctx is done.
func (im Impl) StartServer(ctx context.Context, o ServerOpts) (*Process, error) {
	cmd, err := im.check("server", o.TestCase, o.ALPN)
	if err != nil {
		return nil, err
	}
	bin, err := im.Binary("server")
	if err != nil {
		return nil, err
	}
	tc := o.TestCase
	if tc == "" {
		tc = im.DefaultCase
	}
	timeout := o.ReadyTimeout
	if timeout <= 0 {
		timeout = defaultReadyTimeout
	}
	// A port picked here may be taken by another process before the peer
	// binds it; the peer then exits at once, and a new port is worth a try.
	const attempts = 3
	for try := 1; ; try++ {
		addr, picked, err := serverAddr(o.Addr)
		if err != nil {
			return nil, err
		}
		host, port, _ := net.SplitHostPort(addr)
		v := &vars{
			m: map[string]string{
				"ADDR": addr, "HOST": host, "PORT": port, "CERT": o.CertFile, "KEY": o.KeyFile,
				"ROOT": o.Root, "ALPN": o.ALPN, "TESTCASE": tc, "KEYLOG": o.KeylogFile, "QLOGDIR": o.QlogDir,
			},
			conds: map[string]bool{"retry": o.Retry, "keylog": o.KeylogFile != "", "qlog": o.QlogDir != "", "alpn": o.ALPN != ""},
			extra: o.ExtraArgs,
		}
		args, env := cmd.build(v)
		p, err := start(ctx, im.Name, "server", bin, args, env, o.LogDir, o.Netns)
		if err != nil {
			return nil, err
		}
		p.Addr = addr
		portNum, _ := strconv.Atoi(port)
		err = p.waitBound(ctx, portNum, timeout)
		if err == nil {
			return p, nil
		}
		p.Stop()
		if !picked || try == attempts || !errors.Is(err, errExitedEarly) {
			return nil, err
		}
	}
}

// serverAddr fills in the default host and, for port 0, a free port;
// picked says whether it chose the port.
func serverAddr(addr string) (_ string, picked bool, err error) {
	host, port := "127.0.0.1", "0"
	if addr != "" {
		h, pt, err := net.SplitHostPort(addr)
		if err != nil {
			return "", false, fmt.Errorf("server address %q: %w", addr, err)
		}
		if h != "" {
			host = h
		}
		if pt != "" {
			port = pt
		}
	}
	if port == "0" {
		p, err := FreeUDPPort(host)
		if err != nil {
			return "", false, err
		}
		port, picked = strconv.Itoa(p), true
	}
	return net.JoinHostPort(host, port), picked, nil
}

// FreeUDPPort returns a UDP port on host that was free a moment ago. Another
// process may take it before the peer binds it; StartServer then fails
// rather than talk to the wrong server, because readiness requires the
// peer's own socket on that port.
func FreeUDPPort(host string) (int, error) {
	c, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free UDP port on %s: %w", host, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// RunClient runs the implementation's client to completion and checks
// that every URL's file arrived. It returns an error when the client
// exits non-zero (ErrUnsupported for 127), a file is missing, or ctx ends
// first; the Result is filled in whenever the client ran.
func (im Impl) RunClient(ctx context.Context, o ClientOpts) (*Result, error) {
	cmd, err := im.check("client", o.TestCase, o.ALPN)
	if err != nil {
		return nil, err
	}
	if len(o.URLs) == 0 {
		return nil, errors.New("client needs at least one URL")
	}
	if o.OutDir == "" {
		return nil, errors.New("client needs an output folder")
	}
	bin, err := im.Binary("client")
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(o.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("URL %q: %w", o.URLs[0], err)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, err
	}
	tc := o.TestCase
	if tc == "" {
		tc = im.DefaultCase
	}
	v := &vars{
		m: map[string]string{
			"ADDR": net.JoinHostPort(u.Hostname(), port), "HOST": u.Hostname(), "PORT": port,
			"OUT": o.OutDir, "CA": o.CAFile, "ALPN": o.ALPN, "TESTCASE": tc,
			"KEYLOG": o.KeylogFile, "QLOGDIR": o.QlogDir,
		},
		urls:  o.URLs,
		conds: map[string]bool{"keylog": o.KeylogFile != "", "qlog": o.QlogDir != "", "ca": o.CAFile != "", "alpn": o.ALPN != ""},
		extra: o.ExtraArgs,
	}
	args, env := cmd.build(v)
	begin := time.Now()
	p, err := start(ctx, im.Name, "client", bin, args, env, o.LogDir, o.Netns)
	if err != nil {
		return nil, err
	}
	var waitErr error
	select {
	case <-p.done:
		waitErr = p.waitErr
	case <-ctx.Done():
		p.Stop()
		waitErr = fmt.Errorf("%s client: %w", im.Name, ctx.Err())
	}
	res := &Result{
		ExitCode: p.cmd.ProcessState.ExitCode(),
		Duration: time.Since(begin),
		Output:   p.Output(),
		LogFile:  p.LogFile,
	}
	for _, s := range o.URLs {
		pu, err := url.Parse(s)
		if err != nil {
			res.Missing = append(res.Missing, s)
			continue
		}
		if _, err := os.Stat(filepath.Join(o.OutDir, path.Base(pu.Path))); err != nil {
			res.Missing = append(res.Missing, s)
		}
	}
	switch {
	case ctx.Err() != nil:
		return res, waitErr
	case res.ExitCode == 127:
		return res, fmt.Errorf("%s client exited with 127: %w", im.Name, ErrUnsupported)
	case waitErr != nil:
		return res, fmt.Errorf("%s client: %w\n%s", im.Name, waitErr, res.Output)
	case len(res.Missing) > 0:
		return res, fmt.Errorf("%s client exited %d but did not download %s\n%s", im.Name, res.ExitCode, strings.Join(res.Missing, " "), res.Output)
	}
	return res, nil
}

// start launches a peer in its own process group, with its output going to
// a log file or an in-memory tail; in network namespace netns if set.
func start(ctx context.Context, name, role, bin string, args, env []string, logDir, netns string) (*Process, error) {
	if netns != "" {
		// ip(8) joins the namespace and execs the peer in the same
		// process, so the process group, the exit status and the sockets
		// under /proc/PID/net are the peer's own.
		args = append([]string{"netns", "exec", netns, bin}, args...)
		bin = "ip"
	}
	p := &Process{Impl: name, Role: role, out: &tailbuf.Buffer{Max: 64 << 10}, done: make(chan struct{})}
	var w io.Writer = p.out
	if logDir != "" {
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return nil, err
		}
		p.LogFile = filepath.Join(logDir, strings.ReplaceAll(name, "/", "-")+"-"+role+".log")
		f, err := os.Create(p.LogFile)
		if err != nil {
			return nil, err
		}
		p.logFile = f
		fmt.Fprintf(f, "# %s %s\n", bin, strings.Join(args, " "))
		w = io.MultiWriter(f, p.out)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout = w
	p.cmd.Stderr = w
	// A child that keeps the output pipe open must not hang Wait.
	p.cmd.WaitDelay = 2 * time.Second
	// A group of its own lets Stop reach any children the peer starts;
	// the peer dies with this process (sysproc_linux.go).
	err := startSupervised(p.cmd, func(err error) {
		p.waitErr = err
		if p.logFile != nil {
			p.logFile.Close()
		}
		close(p.done)
	})
	if err != nil {
		if p.logFile != nil {
			p.logFile.Close()
		}
		return nil, fmt.Errorf("start %s %s: %w", name, role, err)
	}
	go func() {
		select {
		case <-ctx.Done():
			p.Stop()
		case <-p.done:
		}
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit and returns its exit error, or nil
// if it exited because of Stop.
func (p *Process) Wait() error {
	<-p.done
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	if stopped {
		return nil
	}
	if p.waitErr != nil {
		return fmt.Errorf("%s %s: %w", p.Impl, p.Role, p.waitErr)
	}
	return nil
}

// Stop sends SIGTERM to the process group, and SIGKILL if it is still
// there after five seconds. It returns the exit error if the process had
// already ended by itself, since a server that dies early is a finding;
// an exit caused by the signal is not judged.
func (p *Process) Stop() error {
	select {
	case <-p.done:
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if !stopped && p.waitErr != nil {
			return fmt.Errorf("%s %s had exited: %w", p.Impl, p.Role, p.waitErr)
		}
		return nil
	default:
	}
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	return nil
}

// Output returns the end of what the process wrote to stdout and stderr.
func (p *Process) Output() string { return p.out.String() }

// waitBound waits until the process (or its group) has a UDP socket
// bound to port, failing early if the process exits.
func (p *Process) waitBound(ctx context.Context, port int, timeout time.Duration) error {
	return p.WaitListening(ctx, "udp", port, timeout)
}

// BoundUDP returns the local addresses of the UDP sockets the process (or
// its group) holds, in its network namespace: besides the server's port,
// e.g. the socket of a preferred address (RFC 9000 §9.6) that a runner
// must route to the server.
func (p *Process) BoundUDP() []netip.AddrPort {
	return udpBound(p.cmd.Process.Pid)
}
