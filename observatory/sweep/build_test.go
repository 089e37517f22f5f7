package sweep

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/observatory"
	"github.com/quiver-quic/quiver/observatory/store"
)

// The adapter builds and serves at releases of two older API eras, chosen
// by the tags read from each release, and the sweep stores one run per
// version in release order. It needs the module proxy (or a warm module
// cache); QUIVER_REQUIRE_PEERS=1 makes a missing one fail the test.
func TestSweepQuicGoOldReleases(t *testing.T) {
	if testing.Short() {
		t.Skip("builds quic-go twice")
	}
	ctx := context.Background()
	im, err := FindImpl("quic-go")
	if err != nil {
		t.Fatal(err)
	}
	b := &Builder{CacheDir: t.TempDir(), AdapterDir: filepath.Join("..", "..", "peers", "quicgo")}
	if _, err := b.download(ctx, im.Module, "v0.40.1"); err != nil {
		if os.Getenv("QUIVER_REQUIRE_PEERS") == "1" {
			t.Fatalf("quic-go from the module proxy: %v", err)
		}
		t.Skipf("quic-go from the module proxy: %v", err)
	}
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := &Sweep{
		Impl: im, Versions: []string{"v0.40.1", "v0.43.1"}, Scenarios: []string{"hs-v1-basic"},
		Builder: b, Runner: &observatory.Runner{Store: st, Run: conformance.Run, ToolVersion: "test"},
	}
	outs, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantTags := map[string][]string{
		"v0.40.1": {"quicgo_connection_iface", "quicgo_versionnumber", "quicgo_config_addrvalidation", "quicgo_h3_quicconfig", "quicgo_no_resetstreamat", "quicgo_qlog_none"},
		"v0.43.1": {"quicgo_connection_iface", "quicgo_h3_roundtripper", "quicgo_no_resetstreamat", "quicgo_qlog_defaulttracer"},
	}
	for _, o := range outs {
		if o.Err != nil || o.Run.ID == 0 || o.Counts["pass"] != 1 {
			t.Errorf("%s: run %d, counts %v, err %v; want hs-v1-basic to pass", o.Version, o.Run.ID, o.Counts, o.Err)
		}
		if !slices.Equal(o.Build.Tags, wantTags[o.Version]) {
			t.Errorf("%s built with tags %v, want %v", o.Version, o.Build.Tags, wantTags[o.Version])
		}
	}
	cells, err := st.History(ctx, TargetName(im), "hs-v1-basic")
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, c := range cells {
		versions = append(versions, c.Target.Version)
	}
	if !slices.Equal(versions, []string{"v0.40.1", "v0.43.1"}) {
		t.Errorf("history of %s: versions %v, want v0.40.1 then v0.43.1", TargetName(im), versions)
	}

	// The same builds as clients: the client-facing suite launches each
	// release's client, stored under "quic-go clients", with the size
	// quic-go pads its first Initial to before v0.44.0.
	s.Role, s.Scenarios = RoleClient, []string{"cli-initial-datagram-size"}
	outs, err = s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if o.Err != nil || o.Run.ID == 0 || o.Counts["pass"] != 1 || !o.Build.Cached {
			t.Errorf("client %s: run %d, counts %v, cached %v, err %v; want cli-initial-datagram-size to pass on the cached build", o.Version, o.Run.ID, o.Counts, o.Build.Cached, o.Err)
		}
	}
	fcells, err := st.FactCells(ctx, store.FactFilter{Target: "quic-go clients", Key: "initial.client-first-datagram-size"})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []string
	for _, c := range fcells {
		sizes = append(sizes, c.Target.Version+" "+c.Value)
	}
	if !slices.Equal(sizes, []string{"v0.40.1 1252", "v0.43.1 1252"}) {
		t.Errorf("first Initial sizes of quic-go clients: %v, want 1252 bytes at both", sizes)
	}
}

// TestFindImplFromManifest: a sweep's implementations are the peers
// manifest's, aliases included, with the module and binary it names.
func TestFindImplFromManifest(t *testing.T) {
	for _, name := range []string{"go-x-net", "x/net", "xnet"} {
		im, err := FindImpl(name)
		if err != nil || im.Name != "go-x-net" || im.Module != "golang.org/x/net" || im.Binary != "xnet-peer" || im.usesAdapter {
			t.Errorf("FindImpl(%q) = %+v, %v", name, im, err)
		}
	}
	if im, err := FindImpl("quicgo"); err != nil || im.Name != "quic-go" || !im.usesAdapter {
		t.Errorf("FindImpl(quicgo) = %+v, %v", im, err)
	}
	if _, err := FindImpl("ngtcp2"); err == nil {
		t.Error("FindImpl(ngtcp2) found a sweep for a Debian package")
	}
}
