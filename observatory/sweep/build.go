package sweep

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/quiver-quic/quiver/peers"
)

// Impl is an implementation whose released versions a sweep can build:
// its name, module and binary come from peers' manifest (Impl.Release).
type Impl struct {
	// Name is the implementation's name in peers' manifest.
	Name string
	// Module is the Go module its releases come from.
	Module string
	// Binary is the name of the built server in the cache.
	Binary string
	// build makes the server binary at out from the module's source at
	// version (in modDir, the module cache), in the scratch folder work.
	build func(ctx context.Context, b *Builder, version, modDir, work, out string) (tags []string, err error)
	// usesAdapter says whether peers/quicgo's source goes into the build.
	usesAdapter bool
}

// builders are how a sweep builds each implementation of the manifest
// that has releases: Quiver's adapter against quic-go, x/net's own
// interop command.
var builders = map[string]func(ctx context.Context, b *Builder, version, modDir, work, out string) ([]string, error){
	"quic-go":  buildQuicGo,
	"go-x-net": buildXNet,
}

// FindImpl returns the implementation called name or one of its aliases
// in peers' manifest, if a sweep can build it.
func FindImpl(name string) (Impl, error) {
	var names []string
	for _, im := range peers.All() {
		if builders[im.Name] != nil && im.Release != nil {
			names = append(names, im.Name)
		}
	}
	pim, err := peers.Find(name)
	if err != nil || builders[pim.Name] == nil || pim.Release == nil {
		return Impl{}, fmt.Errorf("no sweep for %q (one of %s)", name, strings.Join(names, ", "))
	}
	r := pim.Release
	return Impl{Name: pim.Name, Module: r.Module, Binary: r.Binary, build: builders[pim.Name], usesAdapter: r.Package == ""}, nil
}

// ErrBuild wraps a failed build; its text ends with the compiler's own
// first lines.
var ErrBuild = errors.New("build failed")

// Build is one version's server binary, or why there is none.
type Build struct {
	Version string `json:"version"`
	// Binary is the server's path, empty when the build failed.
	Binary string `json:"binary,omitempty"`
	// Tags are the build tags the adapter needed for this release's API.
	Tags []string `json:"tags,omitempty"`
	// Error is why the build failed.
	Error string `json:"error,omitempty"`
	// GoVersion is the toolchain that built it (or failed to).
	GoVersion string `json:"go_version"`
	// Cached is set when the build came from the cache.
	Cached bool `json:"-"`
}

// Builder builds servers at released versions and caches them.
type Builder struct {
	// CacheDir holds the builds (default ~/.cache/quiver/sweeps).
	CacheDir string
	// AdapterDir is peers/quicgo, the quic-go adapter's source.
	AdapterDir string
	// Log, when set, receives the go commands run.
	Log io.Writer

	once      sync.Once
	goVersion string
	goErr     error
}

// DefaultCacheDir is ~/.cache/quiver/sweeps (or the platform's user cache).
func DefaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "quiver", "sweeps")
}

// Build returns im's server at version, from the cache or built now. A
// failed build is cached too (the same toolchain fails the same way); its
// Build has Error set and the error wraps ErrBuild.
func (b *Builder) Build(ctx context.Context, im Impl, version string) (Build, error) {
	gover, err := b.toolchain(ctx)
	if err != nil {
		return Build{}, err
	}
	key, err := b.key(im, version, gover)
	if err != nil {
		return Build{}, err
	}
	cache := b.CacheDir
	if cache == "" {
		cache = DefaultCacheDir()
	}
	dir := filepath.Join(cache, im.Name, version+"-"+key)
	meta := filepath.Join(dir, "build.json")
	if raw, err := os.ReadFile(meta); err == nil {
		var got Build
		if json.Unmarshal(raw, &got) == nil {
			got.Cached = true
			if got.Error != "" {
				return got, fmt.Errorf("%s %s: %w: %s", im.Name, version, ErrBuild, got.Error)
			}
			if _, err := os.Stat(got.Binary); err == nil {
				return got, nil
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Build{}, err
	}
	var modDir string
	if im.Module != "" {
		if modDir, err = b.download(ctx, im.Module, version); err != nil {
			return Build{}, err
		}
	}
	work, err := os.MkdirTemp("", "quiver-sweep-")
	if err != nil {
		return Build{}, err
	}
	defer os.RemoveAll(work)
	out := filepath.Join(dir, im.Binary)
	res := Build{Version: version, GoVersion: gover}
	tags, berr := im.build(ctx, b, version, modDir, work, out)
	if ctx.Err() != nil {
		// A build cut short says nothing about the version.
		return Build{}, ctx.Err()
	}
	res.Tags = tags
	if berr != nil {
		res.Error = berr.Error()
	} else {
		res.Binary = out
	}
	raw, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(meta, raw, 0o644); err != nil {
		return Build{}, err
	}
	if berr != nil {
		return res, fmt.Errorf("%s %s: %w: %s", im.Name, version, ErrBuild, res.Error)
	}
	return res, nil
}

// key names a build: the toolchain, and for the adapter its source, so
// that a changed adapter or a new Go is built afresh.
func (b *Builder) key(im Impl, version, gover string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s %s %s/%s\n", im.Module, version, gover, runtime.GOOS, runtime.GOARCH)
	if im.usesAdapter {
		files, err := b.adapterFiles()
		if err != nil {
			return "", err
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(raw))
			h.Write(raw)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// adapterFiles are the adapter's Go files that go into the server, and
// its go.mod.
func (b *Builder) adapterFiles() ([]string, error) {
	if b.AdapterDir == "" {
		return nil, errors.New("the quic-go adapter's folder (peers/quicgo) is not known; run from inside the Quiver repository")
	}
	ents, err := os.ReadDir(b.AdapterDir)
	if err != nil {
		return nil, fmt.Errorf("quic-go adapter: %w", err)
	}
	var files []string
	for _, e := range ents {
		n := e.Name()
		if (strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go")) || n == "go.mod" {
			files = append(files, filepath.Join(b.AdapterDir, n))
		}
	}
	if !slices.Contains(files, filepath.Join(b.AdapterDir, "go.mod")) {
		return nil, fmt.Errorf("quic-go adapter: no go.mod in %s", b.AdapterDir)
	}
	return files, nil
}

func (b *Builder) toolchain(ctx context.Context) (string, error) {
	b.once.Do(func() {
		out, err := b.goCmd(ctx, "", "env", "GOVERSION")
		b.goVersion, b.goErr = strings.TrimSpace(out), err
	})
	return b.goVersion, b.goErr
}

// download fetches module@version into the module cache and returns its
// folder there.
func (b *Builder) download(ctx context.Context, module, version string) (string, error) {
	out, err := b.goCmd(ctx, tempModDir(), "mod", "download", "-json", module+"@"+version)
	if err != nil {
		return "", err
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	}
	return info.Dir, nil
}

// goCmd runs the go command in dir and returns its standard output; the
// error carries the end of its standard error.
func (b *Builder) goCmd(ctx context.Context, dir string, args ...string) (string, error) {
	if b.Log != nil {
		fmt.Fprintf(b.Log, "go %s\n", strings.Join(args, " "))
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("go %s: %v: %s", args[0], err, compilerReason(stderr.String()))
	}
	return stdout.String(), nil
}

// goEnv is the environment of the go commands: modules resolved freely
// (-mod=mod), no workspace, and no toolchain switch, so that a release
// that needs a newer Go fails to build instead of downloading one.
func goEnv() []string {
	return append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
}

// tempModDir is a folder outside any module, for go commands that must
// not see Quiver's own go.mod.
func tempModDir() string { return os.TempDir() }

// compilerReason keeps the first error of the go command's output with
// the package it is in, the module cache's path cut off:
// "internal/handshake/crypto_setup.go:343:37: cannot use …".
func compilerReason(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "#") || !strings.Contains(line, ".go:") {
			continue
		}
		if i := strings.Index(line, "@"); i >= 0 {
			if j := strings.Index(line[i:], "/"); j >= 0 {
				line = line[i+j+1:]
			}
		}
		return strings.TrimSpace(line)
	}
	s = strings.TrimSpace(s)
	if first, _, ok := strings.Cut(s, "\n"); ok {
		return first + " …"
	}
	return s
}

// quicGoTags reads the quic-go release in modDir and returns the build
// tags that select peers/quicgo's api_*.go files for its API (see
// peers/quicgo/api.go).
func quicGoTags(modDir string) ([]string, error) {
	root, err := readDecls(modDir)
	if err != nil {
		return nil, err
	}
	h3, err := readDecls(filepath.Join(modDir, "http3"))
	if err != nil {
		return nil, err
	}
	ql, err := readDecls(filepath.Join(modDir, "qlog"))
	if err != nil {
		return nil, err
	}
	var tags []string
	if !root.isStruct("Conn") {
		tags = append(tags, "quicgo_connection_iface")
	}
	if !root.hasType("Version") {
		tags = append(tags, "quicgo_versionnumber")
	}
	if !root.hasField("Transport", "VerifySourceAddress") {
		tags = append(tags, "quicgo_config_addrvalidation")
	}
	if !h3.hasType("Transport") {
		if h3.hasField("RoundTripper", "QuicConfig") {
			tags = append(tags, "quicgo_h3_quicconfig")
		} else {
			tags = append(tags, "quicgo_h3_roundtripper")
		}
	}
	if !root.hasField("Config", "EnableStreamResetPartialDelivery") {
		tags = append(tags, "quicgo_no_resetstreamat")
	}
	switch {
	case ql.funcs["DefaultConnectionTracer"]:
	case ql.funcs["DefaultTracer"]:
		tags = append(tags, "quicgo_qlog_defaulttracer")
	default:
		tags = append(tags, "quicgo_qlog_none")
	}
	return tags, nil
}

// buildQuicGo builds a copy of the adapter against the quic-go release,
// with the other modules at the versions that release asks for.
func buildQuicGo(ctx context.Context, b *Builder, version, modDir, work, out string) ([]string, error) {
	if !fileExists(filepath.Join(modDir, "transport.go")) {
		return nil, fmt.Errorf("quic-go %s has no quic.Transport, which the adapter needs (it arrived in v0.35.0)", version)
	}
	tags, err := quicGoTags(modDir)
	if err != nil {
		return nil, fmt.Errorf("read quic-go %s: %w", version, err)
	}
	files, err := b.adapterFiles()
	if err != nil {
		return nil, err
	}
	goDirective := "1.26"
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if filepath.Base(f) == "go.mod" {
			// A fresh go.mod: only quic-go is pinned, and the rest comes
			// at the versions that release requires.
			for _, line := range strings.Split(string(raw), "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
					goDirective = v
				}
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(work, filepath.Base(f)), raw, 0o644); err != nil {
			return nil, err
		}
	}
	gomod := fmt.Sprintf("module quiver.sweep/quicgo-peer\n\ngo %s\n", goDirective)
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(gomod), 0o644); err != nil {
		return nil, err
	}
	if _, err := b.goCmd(ctx, work, "mod", "edit", "-require=github.com/quic-go/quic-go@"+version); err != nil {
		return tags, err
	}
	if _, err := b.goCmd(ctx, work, "mod", "tidy"); err != nil {
		return tags, err
	}
	args := []string{"build", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	_, err = b.goCmd(ctx, work, append(args, ".")...)
	return tags, err
}

// xnetInterop is x/net's interop-runner endpoint, which Quiver runs as
// the x/net server (peers' manifest, Release.Package).
var xnetInterop = func() string {
	im, err := peers.Find("go-x-net")
	if err != nil || im.Release == nil {
		panic("peers' manifest lacks go-x-net's release")
	}
	return im.Release.Package
}()

// buildXNet builds x/net's own interop command at the release.
func buildXNet(ctx context.Context, b *Builder, version, modDir, work, out string) ([]string, error) {
	if !fileExists(filepath.Join(modDir, "internal", "quic", "cmd", "interop", "main.go")) {
		return nil, fmt.Errorf("x/net %s has no %s (the first release with it is v0.18.0)", version, xnetInterop)
	}
	gomod := "module quiver.sweep/xnet-peer\n\ngo 1.24\n"
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(gomod), 0o644); err != nil {
		return nil, err
	}
	if _, err := b.goCmd(ctx, work, "mod", "edit", "-require=golang.org/x/net@"+version, "-tool="+xnetInterop); err != nil {
		return nil, err
	}
	if _, err := b.goCmd(ctx, work, "mod", "tidy"); err != nil {
		return nil, err
	}
	_, err := b.goCmd(ctx, work, "build", "-o", out, xnetInterop)
	return nil, err
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}
