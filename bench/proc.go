package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/peers"
)

// Usage is the CPU a process used, from the kernel's rusage at its exit.
type Usage = peers.Usage

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

// proc is a running endpoint, supervised by peers.Spawn (the one process
// supervisor: its own process group, SIGTERM then SIGKILL).
type proc struct {
	spec cmdSpec
	p    *peers.Process
	out  interface{ String() string }
}

// start launches spec in a process group of its own.
func start(spec cmdSpec) (*proc, error) {
	p, err := peers.Spawn(context.Background(), peers.Spec{Name: filepath.Base(spec.Path), Role: "bench",
		Path: spec.Path, Args: spec.Args, Env: append(os.Environ(), spec.Env...), Netns: spec.Netns})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Path, err)
	}
	return &proc{spec: spec, p: p, out: output{p}}, nil
}

// output is what the process wrote, as a String for the parsers.
type output struct{ p *peers.Process }

func (o output) String() string { return o.p.Output() }

// usage returns the rusage of the exited process.
func (p *proc) usage() Usage { return p.p.Usage() }

// wait waits for the process to exit by itself and returns its usage and
// exit error; when ctx ends first, it stops the process.
func (p *proc) wait(ctx context.Context) (Usage, error) {
	select {
	case <-p.p.Done():
	case <-ctx.Done():
		p.p.Stop()
		return p.usage(), fmt.Errorf("%s: %w", p.spec.Path, ctx.Err())
	}
	if err := p.p.Wait(); err != nil {
		return p.usage(), fmt.Errorf("%s: %w\n%s", p.spec, err, p.out)
	}
	return p.usage(), nil
}

// stop ends the process group with SIGTERM (SIGKILL after a grace period)
// and returns its usage. A process that had already exited with an error
// reports it, because a server that dies during a run is a finding.
func (p *proc) stop() (Usage, error) {
	if err := p.p.Stop(); err != nil {
		return p.usage(), fmt.Errorf("%s exited early: %w\n%s", p.spec.Path, err, p.out)
	}
	return p.usage(), nil
}

// waitListening waits until the process has a socket bound to port
// (proto "udp" or "tcp"), in the process's own network namespace, so that
// it also works inside `ip netns exec`.
func (p *proc) waitListening(ctx context.Context, proto string, port int, timeout time.Duration) error {
	return p.p.WaitListening(ctx, proto, port, timeout)
}

// errUnsupported marks a setting an implementation cannot take; such a
// configuration is reported as unsupported, never approximated.
var errUnsupported = errors.New("not supported")
