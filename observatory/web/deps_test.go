package web

import (
	"os/exec"
	"strings"
	"testing"
)

// TestWebLinksOnlyTheStore keeps the dashboard light: of Quiver's own
// packages it links only the store and the store's readers, never the
// suite, the engine, the link emulator, the benchmarks or the RPC library.
func TestWebLinksOnlyTheStore(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(goCmd, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	allowed := map[string]bool{
		"github.com/quiver-quic/quiver/observatory/web":     true,
		"github.com/quiver-quic/quiver/observatory/store":   true,
		"github.com/quiver-quic/quiver/observatory/results": true,
		// facts types and compares what results recorded; it links only the store.
		"github.com/quiver-quic/quiver/observatory/facts": true,
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/quiver-quic/quiver/") && !allowed[p] {
			t.Errorf("observatory/web links %s", p)
		}
	}
}
