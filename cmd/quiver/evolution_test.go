package main

import (
	"os"
	"strings"
	"testing"
)

// TestEvolutionDoc: docs/evolution.md is what quiver track evolution makes
// of the datasets in the repository, byte for byte (regenerate it with
// quiver track evolution > docs/evolution.md after a new dataset).
func TestEvolutionDoc(t *testing.T) {
	out, errs, code := quiver(t, "track", "evolution")
	if code != 0 {
		t.Fatalf("track evolution: exit %d\n%s", code, errs)
	}
	for _, want := range []string{
		"## quic-go releases",
		"| v0.41.0 (after v0.40.1) | `tp.max_datagram_frame_size` | 1200 bytes | 16383 bytes |",
		"| v0.51.0 | became unobservable | `pkt-duplicate-packet` | pass (v0.50.0) | inconclusive |",
		"| v0.51.0 (after v0.50.0) | `tp.disable_active_migration` | present | (absent) |",
		"## go-x-net releases",
		"| v0.62.0 (after v0.61.0) | `tp.active_connection_id_limit` | (absent: 2) | 4 |",
		"| v0.25.0 (after v0.24.0) | `keyupdate.server-cadence` | first update at packet 1001 | first update at packet 101 |",
		"changes found",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("track evolution lacks %q", want)
		}
	}
	doc, err := os.ReadFile("../../docs/evolution.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != out {
		t.Error("docs/evolution.md is not what quiver track evolution makes of the datasets: run quiver track evolution > docs/evolution.md")
	}
}
