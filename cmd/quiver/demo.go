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
	"sync"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/store"
	"github.com/quiver-quic/quiver/observatory/web"
	"github.com/quiver-quic/quiver/peers"
	"github.com/quiver-quic/quiver/transfer"
)

// demoImpls are the implementations the demo starts, in the grid's order.
var demoImpls = []string{"quiver", "quic-go", "go-x-net", "ngtcp2"}

// demoServer is one local server under test.
type demoServer struct {
	target conformance.Target
	stop   func()
	// restart stops the server and starts it again on the same address,
	// after a probe crashed it.
	restart func(ctx context.Context) error
}

// reviver restarts the demo's servers by target name.
func reviver(servers []demoServer) func(ctx context.Context, t conformance.Target) error {
	return func(ctx context.Context, t conformance.Target) error {
		for _, s := range servers {
			if s.target.Name == t.Name {
				return s.restart(ctx)
			}
		}
		return fmt.Errorf("%s was not started by the demo", t.Name)
	}
}

// runDemo starts local servers, runs a campaign against them, prints the
// grid and serves the dashboard until ctx ends.
func runDemo(ctx context.Context, env *cmdEnv, o *demoOpts) error {
	fmt.Fprintf(env.stdout, "Quiver %s demo\n\n", version)
	want := demoImpls
	if o.impls != "" {
		want = splitList(o.impls)
		for _, w := range want {
			if !slices.Contains(demoImpls, w) {
				return fmt.Errorf("%w: unknown implementation %q (one of %s)", errUsage, w, strings.Join(demoImpls, ", "))
			}
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
			s.stop()
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
		fmt.Fprintf(env.stdout, "started %-9s %-8s on %s\n", s.target.Name, s.target.Version, s.target.Address)
		targets = append(targets, s.target)
	}
	fmt.Fprintln(env.stdout)

	st, err := store.Open(ctx, o.db)
	if err != nil {
		return err
	}
	defer st.Close()
	topts := &trackOpts{artifacts: o.artifacts, parallel: o.parallel, db: o.db}
	started := time.Now()
	run, err := runCampaign(ctx, env, st, topts, observatory.Campaign{Name: "demo", Targets: targets, Scenarios: scenarios}, reviver(servers))
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
	if err := observatory.WriteGrid(env.stdout, observatory.NewGrid(cells)); err != nil {
		return err
	}
	if o.noWeb || ctx.Err() != nil {
		return nil
	}
	// The peers are no longer needed; the dashboard reads the store.
	for _, s := range servers {
		s.stop()
	}
	servers = nil
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

// startDemoServers starts each wanted implementation on a free loopback
// port. It returns the servers that run, and for the others why not.
func startDemoServers(ctx context.Context, env *cmdEnv, work string, want []string) ([]demoServer, []string) {
	www := filepath.Join(work, "www")
	os.MkdirAll(www, 0o755)
	os.WriteFile(filepath.Join(www, "index.html"), []byte("<!DOCTYPE html><title>quiver demo</title>hello\n"), 0o644)
	cert, key, certErr := peers.WriteSelfSignedCert(work)
	var out []demoServer
	var skipped []string
	triedInstall := false
	for _, name := range want {
		if name == "quiver" {
			s, err := startQuiverServer(ctx, "127.0.0.1:0", www)
			if err != nil {
				skipped = append(skipped, fmt.Sprintf("quiver: %v", err))
				continue
			}
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
		p, err := im.StartServer(ctx, peers.ServerOpts{CertFile: cert, KeyFile: key, Root: www, LogDir: work})
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		ds := demoServer{
			target: conformance.Target{Name: im.Name, Address: p.Addr, SNI: "localhost", ALPN: im.ALPNs, Implementation: im.Name, Version: peerVersion(name, bin)},
		}
		var mu sync.Mutex
		ds.stop = func() {
			mu.Lock()
			defer mu.Unlock()
			p.Stop()
		}
		ds.restart = func(rctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			p.Stop()
			// The same address, so the target stays the same; the
			// process lives on the demo's context, not the caller's.
			np, err := im.StartServer(ctx, peers.ServerOpts{Addr: p.Addr, CertFile: cert, KeyFile: key, Root: www, LogDir: work})
			if err != nil {
				return fmt.Errorf("restart %s: %w", im.Name, err)
			}
			fmt.Fprintf(env.stderr, "restarted %s after it stopped answering\n", im.Name)
			p = np
			return nil
		}
		out = append(out, ds)
	}
	return out, skipped
}

// startQuiverServer serves www with Quiver's own engine, in process.
func startQuiverServer(ctx context.Context, addr, www string) (demoServer, error) {
	ds := demoServer{}
	var (
		mu     sync.Mutex
		cancel context.CancelFunc
		done   chan struct{}
	)
	listen := func(addr string) (string, error) {
		s, err := transfer.Listen(transfer.ServerConfig{Addr: addr, Root: www})
		if err != nil {
			return "", err
		}
		sctx, c := context.WithCancel(ctx)
		d := make(chan struct{})
		go func() { s.Serve(sctx); close(d) }()
		cancel, done = c, d
		return s.Addr().String(), nil
	}
	bound, err := listen(addr)
	if err != nil {
		return ds, err
	}
	ds.target = conformance.Target{Name: "quiver", Address: bound, SNI: "localhost", Implementation: "quiver", Version: version}
	ds.stop = func() {
		mu.Lock()
		defer mu.Unlock()
		cancel()
		<-done
	}
	ds.restart = func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		cancel()
		<-done
		_, err := listen(bound)
		return err
	}
	return ds, nil
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
func peerVersion(name, bin string) string {
	mod := map[string]string{"quic-go": "github.com/quic-go/quic-go", "go-x-net": "golang.org/x/net"}[name]
	if mod != "" {
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
	if name == "ngtcp2" {
		if b, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "ngtcp2-server").Output(); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}
