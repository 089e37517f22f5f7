package sweep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/store"
	"github.com/quiver-quic/quiver/peers"
)

// Sweep runs the suite against an implementation's released versions.
type Sweep struct {
	Impl Impl
	// Role is RoleServer (the default) or RoleClient: which of each
	// release's endpoints is tested, by the server-facing or the
	// client-facing suite. Scenarios must be of that role.
	Role string
	// Versions are swept in the order given; Choose returns them in
	// release order, which is the order history follows.
	Versions  []string
	Scenarios []string
	Builder   *Builder
	// Runner stores the results; its Revive is set for each version's
	// server.
	Runner *observatory.Runner
	// Version, when set, is called as each version starts ("build",
	// "test") and when it ends (with its outcome).
	Version func(v Outcome)
}

// Outcome is what happened to one version.
type Outcome struct {
	Version string
	// Stage is "build" or "test" while the version is under way, "done"
	// when it ended.
	Stage string
	Build Build
	// Run is the version's run when the suite ran.
	Run store.Run
	// Counts are the verdicts of the run, by verdict.
	Counts map[string]int
	// Err is why the version has no results (a failed build, a server
	// that would not start).
	Err error
}

// TargetName is the name a sweep's results are stored under: one series
// per implementation, apart from any target of the same implementation
// measured by other campaigns.
func TargetName(im Impl) string { return im.Name + " releases" }

// Run sweeps the versions in order. A version that does not build or
// start is reported in its Outcome and skipped; the error is only for
// what stops the sweep (an interruption, a store that fails).
func (s *Sweep) Run(ctx context.Context) ([]Outcome, error) {
	pim, so, cleanup, err := s.prepare()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	var out []Outcome
	for _, v := range s.Versions {
		o := s.one(ctx, pim, v, so, store.Run{})
		out = append(out, o)
		s.report(o)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if o.Err != nil && !errors.Is(o.Err, ErrBuild) && !errors.Is(o.Err, errStart) {
			return out, o.Err
		}
	}
	return out, nil
}

// prepare makes the folder the servers share: a page to serve and a
// certificate.
func (s *Sweep) prepare() (peers.Impl, peers.ServerOpts, func(), error) {
	pim, err := peers.Find(s.Impl.Name)
	if err != nil {
		return pim, peers.ServerOpts{}, nil, err
	}
	work, err := os.MkdirTemp("", "quiver-sweep-run-")
	if err != nil {
		return pim, peers.ServerOpts{}, nil, err
	}
	cleanup := func() { os.RemoveAll(work) }
	www := filepath.Join(work, "www")
	if err := os.MkdirAll(www, 0o755); err != nil {
		cleanup()
		return pim, peers.ServerOpts{}, nil, err
	}
	if err := os.WriteFile(filepath.Join(www, "index.html"), []byte("<!DOCTYPE html><title>quiver sweep</title>hello\n"), 0o644); err != nil {
		cleanup()
		return pim, peers.ServerOpts{}, nil, err
	}
	// The large resource (docs/conformance-model.md, Target profile: at
	// least 1 MiB) for the transfer, key-update and recovery scenarios.
	large := make([]byte, 1<<20)
	for i := range large {
		large[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(www, LargePath[1:]), large, 0o644); err != nil {
		cleanup()
		return pim, peers.ServerOpts{}, nil, err
	}
	cert, key, err := peers.WriteSelfSignedCert(work)
	if err != nil {
		cleanup()
		return pim, peers.ServerOpts{}, nil, err
	}
	return pim, peers.ServerOpts{CertFile: cert, KeyFile: key, Root: www, LogDir: work}, cleanup, nil
}

// RunInto sweeps one version into a run that exists already (a keyed
// campaign of the watcher, perhaps resumed): scenarios the run holds a
// result for are not run again. A version that does not build or start
// returns an error that wraps ErrBuild or ErrStart.
func (s *Sweep) RunInto(ctx context.Context, version string, run store.Run) (Outcome, error) {
	pim, so, cleanup, err := s.prepare()
	if err != nil {
		return Outcome{Version: version}, err
	}
	defer cleanup()
	o := s.one(ctx, pim, version, so, run)
	s.report(o)
	return o, o.Err
}

// LargePath is the large resource each swept server serves.
const LargePath = "/large.bin"

// ErrStart marks a server that did not start.
var ErrStart = errStart

// errStart marks a server that did not start.
var errStart = errors.New("server did not start")

func (s *Sweep) report(o Outcome) {
	if s.Version != nil {
		s.Version(o)
	}
}

// one builds, starts and tests one version.
func (s *Sweep) one(ctx context.Context, pim peers.Impl, version string, so peers.ServerOpts, into store.Run) Outcome {
	o := Outcome{Version: version, Stage: "build"}
	s.report(o)
	b, err := s.Builder.Build(ctx, s.Impl, version)
	o.Build = b
	if err != nil {
		o.Stage, o.Err = "done", err
		return o
	}
	if s.Role == RoleClient {
		return s.client(ctx, pim, version, o, into)
	}
	// The manifest's command line, with this build's binary.
	cmd := *pim.Server
	cmd.Path = b.Binary
	pim.Server = &cmd
	t := conformance.Target{Name: TargetName(s.Impl), SNI: "localhost", ALPN: pim.ALPNs, Implementation: s.Impl.Name, Version: version,
		SmallPath: "/index.html", LargePath: LargePath}
	srv, err := observatory.StartLocal(t, "", observatory.PeerStarter(ctx, pim, so))
	if err != nil {
		o.Stage, o.Err = "done", fmt.Errorf("%s %s: %w: %v", s.Impl.Name, version, errStart, err)
		return o
	}
	defer srv.Stop()
	o.Stage = "test"
	s.report(o)
	r := *s.Runner
	r.Revive = observatory.Reviver(srv)
	c := observatory.Campaign{Name: fmt.Sprintf("sweep %s %s", s.Impl.Name, version), Targets: []conformance.Target{srv.Target}, Scenarios: s.Scenarios}
	var run store.Run
	if into.ID != 0 {
		run, err = r.RunCampaignIn(ctx, into, c)
	} else {
		run, err = r.RunCampaign(ctx, c)
	}
	return s.finish(ctx, &r, o, run, err)
}

// client tests one version's client (built already, o.Build): the
// client-facing suite serves and launches it for each scenario.
func (s *Sweep) client(ctx context.Context, pim peers.Impl, version string, o Outcome, into store.Run) Outcome {
	t := conformance.Target{Name: TargetNameFor(s.Impl, RoleClient), ALPN: []string{clientALPN}, Implementation: s.Impl.Name, Version: version}
	ct, err := ClientTarget(pim, t.Name, o.Build.Binary)
	if err != nil {
		o.Stage, o.Err = "done", fmt.Errorf("%s %s: %w: %v", s.Impl.Name, version, errStart, err)
		return o
	}
	o.Stage = "test"
	s.report(o)
	r := *s.Runner
	r.Revive = nil
	r.Run = clientRun(ct)
	c := observatory.Campaign{Name: fmt.Sprintf("sweep %s client %s", s.Impl.Name, version), Targets: []conformance.Target{t}, Scenarios: s.Scenarios}
	var run store.Run
	if into.ID != 0 {
		run, err = r.RunCampaignIn(ctx, into, c)
	} else {
		run, err = r.RunCampaign(ctx, c)
	}
	return s.finish(ctx, &r, o, run, err)
}

// finish records a version's run and its verdict counts in o.
func (s *Sweep) finish(ctx context.Context, r *observatory.Runner, o Outcome, run store.Run, err error) Outcome {
	o.Stage, o.Run, o.Err = "done", run, err
	if run.ID != 0 {
		cells, cerr := r.Store.Cells(context.WithoutCancel(ctx), store.Filter{RunID: run.ID})
		if cerr != nil && o.Err == nil {
			o.Err = cerr
		}
		o.Counts = map[string]int{}
		for _, c := range cells {
			o.Counts[c.Verdict]++
		}
	}
	return o
}
