package main

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/results"
	"github.com/quiver-quic/quiver/observatory/store"
	"github.com/quiver-quic/quiver/observatory/web"
	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/transfer"
)

// demoImpls are the implementations the demo starts, in the grid's
// order: every server of peers' manifest, and after quiver quiver-retry.
// quiver runs `quiver serve` with every engine feature on
// (demoServeFlags); quiver-retry adds --retry (and drops --0rtt), which
// changes the verdicts of the Retry and token scenarios and of a few
// others.
func demoImpls() []string {
	var names []string
	for _, im := range peers.All() {
		if im.Server != nil {
			names = append(names, im.Name)
			if im.Name == "quiver" {
				names = append(names, quiverRetry)
			}
		}
	}
	return names
}

// quiverRetry is the demo's second Quiver target, the one with Retry.
const quiverRetry = "quiver-retry"

// runDemo starts local servers, runs a campaign against them, prints the
// grid and serves the dashboard until ctx ends.
func runDemo(ctx context.Context, env *cmdEnv, o *demoOpts) error {
	fmt.Fprintf(env.stdout, "Quiver %s demo\n\n", version)
	want := demoImpls()
	if o.impls != "" {
		want = nil
		for _, w := range splitList(o.impls) {
			if w == quiverRetry {
				want = append(want, w)
				continue
			}
			im, err := peers.Find(w) // names and aliases: x/net is go-x-net
			if err != nil || im.Server == nil {
				return fmt.Errorf("%w: unknown implementation %q (one of %s)", errUsage, w, strings.Join(demoImpls(), ", "))
			}
			want = append(want, im.Name)
		}
	}
	scenarios, err := selectScenarios(scenarioPatterns(o.scenarios))
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	work, err := os.MkdirTemp("", "quiver-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	servers, skipped := startDemoServers(ctx, env, work, want)
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
	}()
	for _, s := range skipped {
		fmt.Fprintf(env.stdout, "skipped %s\n", s)
	}
	if len(servers) == 0 {
		return errors.New("no server could be started")
	}
	var targets []conformance.Target
	for _, s := range servers {
		fmt.Fprintf(env.stdout, "started %-9s %-8s on %s\n", s.Target.Name, s.Target.Version, s.Target.Address)
		targets = append(targets, s.Target)
	}
	fmt.Fprintln(env.stdout)

	st, err := store.Open(ctx, o.db)
	if err != nil {
		return err
	}
	defer st.Close()
	topts := &trackOpts{artifacts: o.artifacts, parallel: o.parallel, db: o.db}
	started := time.Now()
	run, err := runCampaign(ctx, env, st, topts, observatory.Campaign{Name: "demo", Targets: targets, Scenarios: scenarios}, noisyReviver(env, servers))
	if run.ID == 0 {
		return err
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "quiver demo: %v\n", err)
	}
	cells, cerr := st.Cells(ctx, store.Filter{RunID: run.ID})
	if cerr != nil {
		return cerr
	}
	fmt.Fprintf(env.stderr, "campaign took %v\n", time.Since(started).Round(time.Second))
	fmt.Fprintf(env.stdout, "run %d: %d results stored in %s\n\n", run.ID, len(cells), displayDB(o.db))
	if err := results.WriteGrid(env.stdout, results.NewGrid(cells)); err != nil {
		return err
	}
	// The release history kept in the repository goes beside the demo's
	// own run, so that the dashboard has history on a fresh clone.
	importHistory(ctx, env, st)
	if o.noWeb || ctx.Err() != nil {
		return nil
	}
	// The peers are no longer needed; the dashboard reads the store.
	for _, s := range servers {
		s.Stop()
	}
	fmt.Fprintln(env.stdout)
	return serveDashboard(ctx, env, st, o.addr, o.artifacts)
}

// serveDashboard serves the dashboard on addr until ctx ends.
func serveDashboard(ctx context.Context, env *cmdEnv, st store.Store, addr, artifacts string) error {
	app, err := web.New(st, artifacts)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	app.RegisterOnMux(mux)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("dashboard: %w (choose another with --addr)", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(env.stdout, "dashboard on http://%s/ — interrupt to stop\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	<-done
	return nil
}

// noisyReviver restarts the servers a probe crashed, and says so.
func noisyReviver(env *cmdEnv, servers []*observatory.LocalServer) func(context.Context, conformance.Target) error {
	revive := observatory.Reviver(servers...)
	return func(ctx context.Context, t conformance.Target) error {
		err := revive(ctx, t)
		if err == nil {
			fmt.Fprintf(env.stderr, "restarted %s after it stopped answering\n", printableName(t.Name))
		}
		return err
	}
}

// demoLarge is the path of the demo servers' large resource.
const demoLarge = "/large.bin"

// startDemoServers starts each wanted implementation on a free loopback
// port. It returns the servers that run, and for the others why not.
func startDemoServers(ctx context.Context, env *cmdEnv, work string, want []string) ([]*observatory.LocalServer, []string) {
	www := filepath.Join(work, "www")
	os.MkdirAll(www, 0o755)
	os.WriteFile(filepath.Join(www, "index.html"), []byte("<!DOCTYPE html><title>quiver demo</title>hello\n"), 0o644)
	// The large resource (docs/conformance-model.md, Target profile: at least 1 MiB) for the
	// transfer and recovery scenarios.
	large := make([]byte, 1<<20)
	for i := range large {
		large[i] = byte(i * 7)
	}
	os.WriteFile(filepath.Join(www, demoLarge[1:]), large, 0o644)
	cert, key, certErr := peers.WriteSelfSignedCert(work)
	var out []*observatory.LocalServer
	var skipped []string
	triedInstall := false
	for _, name := range want {
		if name == "quiver" || name == quiverRetry {
			flags := demoServeFlags
			if name == quiverRetry {
				// Without 0-RTT: the suite's 0-RTT packets leave before
				// the Retry, which the server drops unseen, so the
				// 0-RTT scenarios would misjudge (they are judged on
				// quiver).
				flags = append(slices.DeleteFunc(slices.Clone(flags), func(f string) bool { return f == "--0rtt" }), "--retry")
			}
			t := conformance.Target{Name: name, SNI: "localhost", Implementation: "quiver", Version: version, SmallPath: "/index.html", LargePath: demoLarge}
			s, err := observatory.StartLocal(t, "127.0.0.1:0", quiverStarter(ctx, www, flags))
			if err != nil {
				skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			fmt.Fprintf(env.stdout, "%s runs: quiver serve %s\n", name, strings.Join(flags, " "))
			out = append(out, s)
			continue
		}
		if certErr != nil {
			skipped = append(skipped, fmt.Sprintf("%s: certificate: %v", name, certErr))
			continue
		}
		im, err := peers.Find(name)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		bin, err := im.Binary("server")
		if errors.Is(err, peers.ErrNotInstalled) && name != "ngtcp2" && !triedInstall {
			// From a fresh clone the Go peers are not built yet: build
			// them once, the way make test does.
			triedInstall = true
			if installPeers(env) == nil {
				bin, err = im.Binary("server")
			}
		}
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		t := conformance.Target{Name: im.Name, SNI: "localhost", ALPN: im.ALPNs, Implementation: im.Name, Version: peerVersion(im, bin), SmallPath: "/index.html", LargePath: demoLarge}
		s, err := observatory.StartLocal(t, "", observatory.PeerStarter(ctx, im, peers.ServerOpts{CertFile: cert, KeyFile: key, Root: www, LogDir: work}))
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		out = append(out, s)
	}
	return out, skipped
}

// quiverStarter serves www with Quiver's own engine, in process, as
// `quiver serve` with the given flags does.
func quiverStarter(ctx context.Context, www string, flags []string) observatory.StartFunc {
	return func(addr string) (string, func(), error) {
		o, err := parseServeFlags(flags)
		if err != nil {
			return "", nil, err
		}
		o.addr, o.root = addr, www
		cfg, err := o.serverConfig()
		if err != nil {
			return "", nil, err
		}
		s, err := transfer.Listen(cfg)
		if err != nil {
			return "", nil, err
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { s.Serve(sctx); close(done) }()
		return s.Addr().String(), func() { cancel(); <-done }, nil
	}
}

// installPeers builds the Go peers with scripts/install-peers when the
// demo runs inside the repository.
func installPeers(env *cmdEnv) error {
	binDir, err := peers.BinDir()
	if err != nil {
		return err
	}
	script := filepath.Join(filepath.Dir(binDir), "scripts", "install-peers")
	if _, err := os.Stat(script); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "building the Go peers with %s --go (once)…\n", peers.InstallCommand)
	cmd := exec.Command(script, "--go")
	cmd.Stdout, cmd.Stderr = env.stderr, env.stderr
	return cmd.Run()
}

// peerVersion reads the implementation's version: from the Go module
// inside a Go peer's binary, or from Debian's package database.
func peerVersion(im peers.Impl, bin string) string {
	if im.Release != nil {
		mod := im.Release.Module
		if bi, err := buildinfo.ReadFile(bin); err == nil {
			// x/net's interop command is built from inside x/net, which
			// is then the binary's main module.
			if bi.Main.Path == mod {
				return bi.Main.Version
			}
			for _, d := range bi.Deps {
				if d.Path == mod {
					return d.Version
				}
			}
		}
		return ""
	}
	if im.Name == "ngtcp2" {
		if b, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "ngtcp2-server").Output(); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}
