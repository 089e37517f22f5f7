package observatory

import (
	"context"
	"fmt"
	"sync"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/peers"
)

// StartFunc starts a server on addr (port 0 picks a free one) and returns
// the address it listens on and how to stop it.
type StartFunc func(addr string) (bound string, stop func(), err error)

// LocalServer is a server the observatory started on this machine (one of
// the demo's, or a sweep's build). When a probe crashes it, Restart starts
// it again on the same address, so the target stays the same.
type LocalServer struct {
	// Target is the server as the suite sees it; its Address is where the
	// server listens.
	Target conformance.Target

	start StartFunc
	mu    sync.Mutex
	stop  func()
}

// StartLocal starts a server with start on addr and describes it as t,
// whose Address is set to the bound address.
func StartLocal(t conformance.Target, addr string, start StartFunc) (*LocalServer, error) {
	bound, stop, err := start(addr)
	if err != nil {
		return nil, err
	}
	t.Address = bound
	return &LocalServer{Target: t, start: start, stop: stop}, nil
}

// Stop stops the server; stopping twice is harmless.
func (s *LocalServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
}

// Restart stops the server, whether it still runs or not, and starts it
// again on the same address.
func (s *LocalServer) Restart(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
	_, stop, err := s.start(s.Target.Address)
	if err != nil {
		return fmt.Errorf("restart %s: %w", s.Target.Name, err)
	}
	s.stop = stop
	return nil
}

// Reviver restarts, by target name, the servers given; it is what
// Runner.Revive wants.
func Reviver(servers ...*LocalServer) func(ctx context.Context, t conformance.Target) error {
	return func(ctx context.Context, t conformance.Target) error {
		for _, s := range servers {
			if s.Target.Name == t.Name {
				return s.Restart(ctx)
			}
		}
		return fmt.Errorf("%s was not started here, so it cannot be restarted", t.Name)
	}
}

// everyVersion are the server arguments that make a peer offer every QUIC
// version it speaks. The adapters follow the interop runner's contract,
// which pins v1 outside its v2 test case; the observatory wants to see
// all an implementation can do.
var everyVersion = map[string][]string{"quic-go": {"-versions", "v1,v2"}}

// PeerStarter starts im's server as a process with o (whose Addr is
// replaced by the address asked for), offering every QUIC version it
// speaks. The process lives until stopped or until ctx ends.
func PeerStarter(ctx context.Context, im peers.Impl, o peers.ServerOpts) StartFunc {
	o.ExtraArgs = append(append([]string(nil), o.ExtraArgs...), everyVersion[im.Name]...)
	return func(addr string) (string, func(), error) {
		o.Addr = addr
		p, err := im.StartServer(ctx, o)
		if err != nil {
			return "", nil, err
		}
		return p.Addr, func() { p.Stop() }, nil
	}
}
