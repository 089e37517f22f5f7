package peers

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// Spec is a process for Spawn to start and supervise: the one supervisor
// of Quiver's child processes (peers, the benchmark's endpoints, and any
// command a caller starts, e.g. a client under test through /bin/sh -c).
type Spec struct {
	// Name and Role label the process in errors and name its log file.
	Name, Role string
	// Path is the program; Args its arguments (without the program).
	Path string
	Args []string
	// Env is the whole environment; nil means this process's own.
	Env []string
	// Netns, when set, runs the program inside that network namespace
	// (through ip netns exec, which execs it in the same process).
	Netns string
	// LogDir, when set, also writes stdout and stderr to
	// LogDir/NAME-ROLE.log; the last 64 KiB are always kept (Output).
	LogDir string
}

// Spawn starts s in a process group of its own. Stop ends the whole
// group (SIGTERM, SIGKILL after five seconds); so does the end of ctx.
// On Linux the process also receives SIGKILL when this process dies,
// even by SIGKILL (PR_SET_PDEATHSIG, sysproc_linux.go).
func Spawn(ctx context.Context, s Spec) (*Process, error) {
	return start(ctx, s.Name, s.Role, s.Path, s.Args, s.Env, s.LogDir, s.Netns)
}

// Usage is the CPU and memory a process used, from the kernel's rusage
// at its exit.
type Usage struct {
	User   time.Duration `json:"user_ns"`
	System time.Duration `json:"system_ns"`
	// MaxRSS is the peak resident set in bytes.
	MaxRSS int64 `json:"max_rss_bytes"`
}

// Total is user plus system time.
func (u Usage) Total() time.Duration { return u.User + u.System }

// Usage returns the rusage of the exited process (zero while it runs).
func (p *Process) Usage() Usage {
	select {
	case <-p.done:
	default:
		return Usage{}
	}
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

// Pid is the process's id, which is also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// WaitListening waits until the process, or its group, holds a socket on
// local port: proto "udp" (bound) or "tcp" (listening), in the process's
// own network namespace. It fails when the process exits first, ctx ends,
// or timeout passes.
func (p *Process) WaitListening(ctx context.Context, proto string, port int, timeout time.Duration) error {
	if proto != "udp" && proto != "tcp" {
		return fmt.Errorf("peers: protocol %q: want udp or tcp", proto)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if boundBy(p.cmd.Process.Pid, proto, port) {
			return nil
		}
		select {
		case <-p.done:
			if p.cmd.ProcessState.ExitCode() == 127 {
				return fmt.Errorf("%s %s exited with 127: %w", p.Impl, p.Role, ErrUnsupported)
			}
			return fmt.Errorf("%s %s %w before binding %s port %d: %v\n%s", p.Impl, p.Role, errExitedEarly, proto, port, p.waitErr, p.Output())
		case <-ctx.Done():
			return fmt.Errorf("%s %s: waiting for %s port %d: %w", p.Impl, p.Role, proto, port, ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("%s %s did not bind %s port %d within %v\n%s", p.Impl, p.Role, proto, port, timeout, p.Output())
		case <-tick.C:
		}
	}
}
