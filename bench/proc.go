package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quiver-quic/quiver/internal/tailbuf"
)

// stopGrace is how long a server has to exit after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// Usage is the CPU a process used, from the kernel's rusage at its exit.
type Usage struct {
	User   time.Duration `json:"user_ns"`
	System time.Duration `json:"system_ns"`
	// MaxRSS is the peak resident set in bytes.
	MaxRSS int64 `json:"max_rss_bytes"`
}

// Total is user plus system time.
func (u Usage) Total() time.Duration { return u.User + u.System }

// cmdSpec is one endpoint's command line.
type cmdSpec struct {
	Path string
	Args []string
	// Env is added to the bench's own environment.
	Env []string
	// Netns, when set, runs the command inside that network namespace.
	Netns string
}

func (c cmdSpec) String() string {
	var b strings.Builder
	for _, e := range c.Env {
		b.WriteString(e + " ")
	}
	if c.Netns != "" {
		b.WriteString("ip netns exec " + c.Netns + " ")
	}
	b.WriteString(c.Path)
	for _, a := range c.Args {
		b.WriteString(" " + a)
	}
	return b.String()
}

// proc is a running endpoint.
type proc struct {
	spec cmdSpec
	cmd  *exec.Cmd
	out  *tailbuf.Buffer
	done chan struct{}
	err  error

	mu      sync.Mutex
	stopped bool
}

// start launches spec in a process group of its own.
func start(spec cmdSpec) (*proc, error) {
	path, args := spec.Path, spec.Args
	if spec.Netns != "" {
		path, args = "ip", append([]string{"netns", "exec", spec.Netns, spec.Path}, spec.Args...)
	}
	p := &proc{spec: spec, out: &tailbuf.Buffer{Max: 32 << 10}, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = append(os.Environ(), spec.Env...)
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.WaitDelay = 2 * time.Second
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Path, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// usage returns the rusage of the exited process.
func (p *proc) usage() Usage {
	st := p.cmd.ProcessState
	if st == nil {
		return Usage{}
	}
	u := Usage{User: st.UserTime(), System: st.SystemTime()}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		u.MaxRSS = ru.Maxrss * 1024
	}
	return u
}

// wait waits for the process to exit by itself and returns its usage and
// exit error; when ctx ends first, it stops the process.
func (p *proc) wait(ctx context.Context) (Usage, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		p.stop()
		return p.usage(), fmt.Errorf("%s: %w", p.spec.Path, ctx.Err())
	}
	if p.err != nil {
		return p.usage(), fmt.Errorf("%s: %w\n%s", p.spec, p.err, p.out)
	}
	return p.usage(), nil
}

// stop ends the process group with SIGTERM (SIGKILL after a grace period)
// and returns its usage. A process that had already exited with an error
// reports it, because a server that dies during a run is a finding.
func (p *proc) stop() (Usage, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if !stopped && p.err != nil {
			return p.usage(), fmt.Errorf("%s exited early: %w\n%s", p.spec.Path, p.err, p.out)
		}
		return p.usage(), nil
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
	return p.usage(), nil
}

// waitListening polls until the process has a socket bound to port
// (proto "udp" or "tcp"), reading the socket tables of the process's own
// network namespace, so that it also works inside `ip netns exec`.
func (p *proc) waitListening(ctx context.Context, proto string, port int, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if portBound(p.cmd.Process.Pid, proto, port) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before binding %s port %d: %v\n%s", p.spec, proto, port, p.err, p.out)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%s did not bind %s port %d within %v\n%s", p.spec, proto, port, timeout, p.out)
		case <-tick.C:
		}
	}
}

// portBound reports whether a socket in pid's network namespace is bound
// to local port (for TCP: listening).
func portBound(pid int, proto string, port int) bool {
	want := fmt.Sprintf(":%04X", port)
	for _, table := range []string{proto, proto + "6"} {
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "net", table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan()
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local_address rem_address st ...; 0A is TCP LISTEN.
			if len(fields) > 3 && strings.HasSuffix(fields[1], want) && (proto == "udp" || fields[3] == "0A") {
				f.Close()
				return true
			}
		}
		f.Close()
	}
	return false
}

// errUnsupported marks a setting an implementation cannot take; such a
// configuration is reported as unsupported, never approximated.
var errUnsupported = errors.New("not supported")
