package interop

import (
	"strings"
	"testing"
)

// TestCellAckFrequency runs §5.24 Quiver ← Quiver over the loopback relay:
// the Quiver server asks for an ACK every 10 packets and the judge reads
// from the decrypted capture that the frame was sent with those values and
// that the client's ACK ratio followed it. Against quic-go's client, which
// has no ACK frequency extension, the cell is unsupported.
func TestCellAckFrequency(t *testing.T) {
	res := runCell(t, "quiver", "quiver", "ackfrequency")
	if res.Result != Succeeded {
		t.Fatalf("quiver ← quiver: %s (%s)", res.Result, res.Detail)
	}
	var ratio string
	for _, ch := range res.Checks {
		if ch.ID == "ack-ratio" {
			ratio = ch.Detail
		}
	}
	if !strings.Contains(ratio, "client ACK frames") {
		t.Errorf("no ack-ratio check in %+v", res.Checks)
	}
	t.Log(ratio)
	if r := runCell(t, "quiver", "quic-go", "ackfrequency"); r.Result != Unsupported {
		t.Errorf("quiver ← quic-go: %s, want %s", r.Result, Unsupported)
	}
}
