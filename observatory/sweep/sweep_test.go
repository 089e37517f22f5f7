package sweep

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/observatory/results"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestCompareVersions(t *testing.T) {
	in := []string{"v0.10.0", "v0.9.1", "v1.0.0", "v0.9.1-rc.1", "v0.9.0", "junk", "v0.40.1", "v0.4.0"}
	slices.SortFunc(in, results.CompareVersions)
	want := []string{"v0.4.0", "v0.9.0", "v0.9.1-rc.1", "v0.9.1", "v0.10.0", "v0.40.1", "v1.0.0", "junk"}
	if !slices.Equal(in, want) {
		t.Errorf("sorted = %v, want %v", in, want)
	}
}

func TestChoose(t *testing.T) {
	all := []string{"v0.37.5", "v0.40.1", "v0.41.0", "v0.42.0"}
	for _, tc := range []struct {
		listed []string
		since  string
		want   string // joined, or "error"
	}{
		{[]string{"v0.41.0", "v0.37.5", "v0.41.0"}, "", "v0.37.5 v0.41.0"},
		{nil, "v0.40.0", "v0.40.1 v0.41.0 v0.42.0"},
		{nil, "v0.41.0", "v0.41.0 v0.42.0"},
		{[]string{"v0.39.0"}, "", "error"},
		{nil, "v0.50.0", "error"},
		{nil, "latest", "error"},
		{[]string{"v0.40.1"}, "v0.40.0", "error"},
		{nil, "", "error"},
	} {
		got, err := Choose(all, tc.listed, tc.since)
		g := strings.Join(got, " ")
		if err != nil {
			g = "error"
		}
		if g != tc.want {
			t.Errorf("Choose(%v, %q) = %q (%v), want %q", tc.listed, tc.since, g, err, tc.want)
		}
	}
}

// fakeModule writes Go files into a module-like folder.
func fakeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The tags follow the declarations a release has, not its version number.
func TestQuicGoTags(t *testing.T) {
	old := fakeModule(t, map[string]string{
		"interface.go":       "package quic\ntype Connection interface{}\ntype VersionNumber uint32\ntype Config struct{ RequireAddressValidation func() bool }\n",
		"transport.go":       "package quic\ntype Transport struct{ Conn any }\n",
		"http3/roundtrip.go": "package http3\ntype RoundTripper struct{ QuicConfig any }\n",
		"qlog/qlog.go":       "package qlog\nfunc NewConnectionTracer() {}\n",
		"qlog/x_test.go":     "package qlog\nfunc DefaultTracer() {}\n",
	})
	middle := fakeModule(t, map[string]string{
		"interface.go":       "package quic\ntype Connection interface{}\ntype Version uint32\n",
		"transport.go":       "package quic\ntype Transport struct{ VerifySourceAddress func() bool }\n",
		"http3/roundtrip.go": "package http3\ntype RoundTripper struct{ QUICConfig any }\n",
		"qlog/qlog.go":       "package qlog\nfunc DefaultTracer() {}\n",
	})
	current := fakeModule(t, map[string]string{
		"conn.go":            "package quic\ntype Conn struct{}\ntype Version uint32\ntype Config struct{ EnableStreamResetPartialDelivery bool }\n",
		"transport.go":       "package quic\ntype Transport struct{ VerifySourceAddress func() bool }\n",
		"http3/transport.go": "package http3\ntype Transport struct{}\ntype RoundTripper = Transport\n",
		"qlog/qlog.go":       "package qlog\nfunc DefaultConnectionTracer() {}\n",
	})
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{old, []string{"quicgo_connection_iface", "quicgo_versionnumber", "quicgo_config_addrvalidation", "quicgo_h3_quicconfig", "quicgo_no_resetstreamat", "quicgo_qlog_none"}},
		{middle, []string{"quicgo_connection_iface", "quicgo_h3_roundtripper", "quicgo_no_resetstreamat", "quicgo_qlog_defaulttracer"}},
		{current, nil},
	} {
		got, err := quicGoTags(tc.dir)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("quicGoTags = %v, %v; want %v", got, err, tc.want)
		}
	}
}

// A build is cached with its outcome, failures too, and a changed
// adapter is built afresh.
func TestBuilderCache(t *testing.T) {
	ctx := context.Background()
	adapter := fakeModule(t, map[string]string{"go.mod": "module x\n\ngo 1.26\n", "main.go": "package main\n"})
	builds := 0
	im := Impl{Name: "fake", Binary: "peer", usesAdapter: true,
		build: func(ctx context.Context, b *Builder, version, modDir, work, out string) ([]string, error) {
			builds++
			if version == "v0.1.0" {
				return nil, errors.New("internal/x.go:1:1: too old")
			}
			return []string{"tag"}, os.WriteFile(out, []byte("binary"), 0o755)
		}}
	b := &Builder{CacheDir: t.TempDir(), AdapterDir: adapter}
	got, err := b.Build(ctx, im, "v0.2.0")
	if err != nil || got.Cached || got.Binary == "" || !slices.Equal(got.Tags, []string{"tag"}) {
		t.Fatalf("first build = %+v, %v", got, err)
	}
	if got, err := b.Build(ctx, im, "v0.2.0"); err != nil || !got.Cached || builds != 1 {
		t.Errorf("second build = %+v, %v after %d builds; want it cached", got, err, builds)
	}
	for range 2 {
		got, err := b.Build(ctx, im, "v0.1.0")
		if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "too old") || got.Binary != "" {
			t.Errorf("failing build = %+v, %v; want ErrBuild with the reason", got, err)
		}
	}
	if builds != 2 {
		t.Errorf("%d builds, want the failure cached too", builds)
	}
	if err := os.WriteFile(filepath.Join(adapter, "main.go"), []byte("package main // changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Build(ctx, im, "v0.2.0"); err != nil || got.Cached {
		t.Errorf("build after an adapter change = %+v, %v; want a fresh build", got, err)
	}
}

func TestCompilerReason(t *testing.T) {
	out := "# github.com/quic-go/quic-go/internal/handshake\n/root/go/pkg/mod/github.com/quic-go/quic-go@v0.37.1/internal/handshake/crypto_setup.go:343:37: cannot use h.allow0RTT\n"
	if got, want := compilerReason(out), "internal/handshake/crypto_setup.go:343:37: cannot use h.allow0RTT"; got != want {
		t.Errorf("compilerReason = %q, want %q", got, want)
	}
}
