package conformance

import (
	"strings"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// TestRunWidePassive feeds the run-wide checks a scenario whose connection
// shows a reused packet number, a STREAM frame in an Initial packet and a
// reason phrase that is not UTF-8, and checks that the passive scenarios'
// results take them, naming the scenario and connection.
func TestRunWidePassive(t *testing.T) {
	sc := &Scenario{ID: "probe-x", Family: "C", Role: ServerRole}
	tt := &T{sc: sc, rec: newRecorder(time.Now())}
	tr := tt.rec.newConn("bad server")
	now := time.Now()
	tr.record(false, now, wire.PacketType1RTT, 0, 2, 7, nil, nil, 50, 50, (&wire.PingFrame{}).Append(nil))
	tr.record(false, now, wire.PacketType1RTT, 0, 2, 7, nil, nil, 50, 50, (&wire.PingFrame{}).Append(nil))
	tr.record(false, now, wire.PacketTypeInitial, 1, 0, 1, nil, []byte{1}, 50, 50, (&wire.StreamFrame{StreamID: 0, Data: []byte("x")}).Append(nil))
	tr.record(false, now, wire.PacketType1RTT, 0, 2, 9, nil, nil, 50, 50, (&wire.ConnectionCloseFrame{Reason: []byte{0xff, 0xfe}}).Append(nil))
	clean := tt.rec.newConn("good")
	clean.record(false, now, wire.PacketType1RTT, 0, 2, 1, nil, nil, 50, 50, (&wire.PingFrame{}).Append(nil))

	found, n := tt.passiveFindings()
	if n != 2 {
		t.Errorf("judged %d connections, want 2", n)
	}
	results := []Result{
		{Scenario: "inv-pn-monotonic", Verdict: Pass},
		{Scenario: "inv-frames-permitted", Verdict: Pass},
		{Scenario: "close-reason-utf8", Verdict: Inconclusive},
		{Scenario: "tls-no-tls-keyupdate", Verdict: Pass},
	}
	mergePassive(results, [][]passiveFinding{found}, n)
	want := map[string]Verdict{"inv-pn-monotonic": Fail, "inv-frames-permitted": Fail, "close-reason-utf8": Warn, "tls-no-tls-keyupdate": Pass}
	for _, r := range results {
		if r.Verdict != want[r.Scenario] {
			t.Errorf("%s: %s, want %s", r.Scenario, r.Verdict, want[r.Scenario])
		}
		last := r.Checks[len(r.Checks)-1]
		if want[r.Scenario] != Pass && !strings.Contains(last.Sentence, "probe-x, connection 0 (bad server)") {
			t.Errorf("%s: the finding does not name where it was seen: %q", r.Scenario, last.Sentence)
		}
	}
	if c := results[2].Checks[0]; c.Verdict != Warn {
		t.Errorf("close-reason-utf8 finding is %s, want warn (a SHOULD)", c.Verdict)
	}
}
