package main

import (
	"os"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/observatory/facts"
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
		// The changes issue 15 names are checked against the data.
		"## The changes named in issue 15",
		"| quic-go releases | max_datagram_frame_size 1200 → 16383 | v0.41.0 | v0.41.0 (after v0.40.1: 1200 → 16383) | found at the named release |",
		"| quic-go releases | Config.Tracer | v0.56.0 |  | not observable: ",
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

// Each named change's status follows the data: the named release, the
// first swept one after it, the swept one just before it, another
// release, or not found.
func TestNamedChangesStatus(t *testing.T) {
	swept := map[string][]string{
		"quic-go releases":  {"v0.40.1", "v0.41.0", "v0.43.0", "v0.44.0", "v0.50.0", "v0.51.0", "v0.52.0", "v0.57.0", "v0.59.0", "v0.62.0"},
		"go-x-net releases": {"v0.21.0", "v0.22.0", "v0.25.0", "v0.47.0", "v0.62.0"},
	}
	fch := map[string][]facts.Change{
		"quic-go releases": {
			{Key: "tp.max_datagram_frame_size", FromVersion: "v0.40.1", ToVersion: "v0.41.0", From: "1200", To: "16383"},
			{Key: "tp.disable_active_migration", FromVersion: "v0.50.0", ToVersion: "v0.51.0", From: "present"},
			{Key: "handshake.server-ack-only-initials", FromVersion: "v0.57.0", ToVersion: "v0.59.0", From: "1", To: "0"},
			{Key: "tp.reset_stream_at", FromVersion: "v0.43.0", ToVersion: "v0.44.0", To: "x"},
		},
	}
	var buf strings.Builder
	writeNamedChanges(&buf, fch, nil, swept)
	out := buf.String()
	for _, want := range []string{
		"| v0.41.0 | v0.41.0 (after v0.40.1: 1200 → 16383) | found at the named release |",
		"| v0.52.0 | v0.51.0 (after v0.50.0: present → (absent)) | found one swept release earlier (v0.51.0",
		"| v0.58.0 | v0.59.0 (after v0.57.0: 1 → 0) | found at the first swept release after it (v0.59.0) |",
		"| v0.61.0 | v0.44.0 (after v0.43.0: (absent) → x) | found at another release |",
		"| v0.44.0 |  | not found: no dataset of quic-go clients |",
		"| v0.22.0 |  | **not found** |",
		"| v0.42.0 |  | not observable: ",
		"4 of 13 found, 3 at the named release",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("named changes lack %q:\n%s", want, out)
		}
	}
}
