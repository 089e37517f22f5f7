package conformance

import (
	"strings"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// clock gives the packets of a test record times 10 µs apart, so that no
// gap of the test machine's scheduling makes a packet look like the first
// after a silence (bulkGap).
type clock struct{ at time.Time }

func (c *clock) next() time.Time {
	c.at = c.at.Add(10 * time.Microsecond)
	return c.at
}

// addAt records a 1-RTT packet at the clock's next time.
func (j *judgeConn) addAt(c *clock, sent bool, pn uint64, firstByte byte, frames ...wire.Frame) {
	j.tr.recordMeta(sent, c.next(), wire.PacketType1RTT, 0, 2, pn, nil, nil, 50, 50, rawquic.AppendFrames(nil, frames), pktMeta{firstByte: firstByte})
}

// download records a download on j: n server 1-RTT packets of STREAM
// data with the given unprotected first byte, the tester acknowledging
// every second one; it returns the next server and tester packet numbers.
func download(j *judgeConn, c *clock, from, sentFrom uint64, n int, firstByte byte) (uint64, uint64) {
	pn, spn := from, sentFrom
	for i := 0; i < n; i++ {
		j.addAt(c, false, pn, firstByte, &wire.StreamFrame{StreamID: 0, Offset: pn * 1000, Data: make([]byte, 1000)})
		if i%2 == 1 {
			j.addAt(c, true, spn, 0, ack(0, pn))
			spn++
		}
		pn++
	}
	return pn, spn
}

// TestRecorderKeepsBoundedRecord: after M packets the record holds at
// most N, whatever M; what it drops is counted, summarised and in the
// ledger; packets that are not bulk (a new key phase, a FIN, a
// CONNECTION_CLOSE) are kept; the record only grows in order.
func TestRecorderKeepsBoundedRecord(t *testing.T) {
	j := newJudgeConn(t)
	jc := &clock{at: j.tt.rec.start}
	const m = 60000
	pn, spn := download(j, jc, 0, 0, m, 0x43)
	// The first packet after a silence is kept.
	jc.at = jc.at.Add(time.Second)
	j.addAt(jc, false, pn, 0x43, &wire.StreamFrame{StreamID: 0, Offset: pn * 1000, Data: make([]byte, 1000)})
	if last := j.tt.rec.packets[len(j.tt.rec.packets)-1]; last.pn != pn || last.sent {
		t.Fatalf("the first packet after a 1 s silence was not kept (last kept: %d)", last.pn)
	}
	pn++
	// A new key phase (Key Phase bit 0x04), then a FIN and a close.
	j.addAt(jc, false, pn, 0x47, &wire.StreamFrame{StreamID: 0, Offset: pn * 1000, Data: make([]byte, 1000)})
	j.addAt(jc, false, pn+1, 0x47, &wire.StreamFrame{StreamID: 0, Offset: (pn + 1) * 1000, Fin: true})
	j.addAt(jc, false, pn+2, 0x47, &wire.ConnectionCloseFrame{ErrorCode: 0})
	r := j.tt.rec
	bound := 2*keepFullPerGroup + keepOtherPerScenario
	total := m + (m / 2) + 4
	if len(r.packets) > bound {
		t.Fatalf("the record kept %d of %d packets, bound %d", len(r.packets), total, bound)
	}
	if got := len(r.packets) + r.keep.dropped; got != total {
		t.Fatalf("kept %d + dropped %d = %d, want %d", len(r.packets), r.keep.dropped, got, total)
	}
	if len(r.keep.ledger) != r.keep.dropped {
		t.Fatalf("ledger holds %d entries for %d dropped packets", len(r.keep.ledger), r.keep.dropped)
	}
	tail := r.packets[len(r.packets)-3:]
	if tail[0].pn != pn || tail[1].pn != pn+1 || tail[2].closeFrame() == nil {
		t.Fatalf("the key phase change, FIN and close were not kept: %d %d %v", tail[0].pn, tail[1].pn, tail[2].closeFrame())
	}
	for i := 1; i < len(r.packets); i++ {
		a, b := r.packets[i-1], r.packets[i]
		if a.sent == b.sent && a.pn >= b.pn {
			t.Fatalf("record out of order at %d: %d then %d", i, a.pn, b.pn)
		}
	}
	if s := r.summary(); !strings.Contains(s, "STREAM") || !strings.Contains(s, "summarised") {
		t.Fatalf("summary: %q", s)
	}
	// Counts a sentence gives include what was summarised.
	if got := r.seen(0, false); got != m+4 {
		t.Fatalf("seen(received) = %d, want %d", got, m+4)
	}
	if got := r.seen(0, true); got != int(spn) {
		t.Fatalf("seen(sent) = %d, want %d", got, spn)
	}
	if got := r.droppedSince(0, 0, 0); got == 0 || got > r.keep.dropped {
		t.Fatalf("droppedSince = %d of %d dropped", got, r.keep.dropped)
	}

	// keepEverything keeps every packet.
	k := newJudgeConn(t)
	kc := &clock{at: k.tt.rec.start}
	k.tt.keepEverything()
	download(k, kc, 0, 0, 3*keepFullPerGroup, 0x43)
	if k.tt.rec.keep.dropped != 0 || len(k.tt.rec.packets) != 3*keepFullPerGroup*3/2 {
		t.Fatalf("keepEverything kept %d, dropped %d", len(k.tt.rec.packets), k.tt.rec.keep.dropped)
	}
}

// TestLedgerJudges: the run-wide packet-number checks see the packets the
// recorder dropped.
func TestLedgerJudges(t *testing.T) {
	// A download long enough to be summarised passes all three.
	j := newJudgeConn(t)
	jc := &clock{at: j.tt.rec.start}
	pn, spn := download(j, jc, 0, 0, 3*keepFullPerGroup, 0x41) // 2-byte numbers
	if j.tt.rec.keep.dropped == 0 {
		t.Fatal("nothing dropped")
	}
	for name, judge := range map[string]func(connRecord) (string, []*packet){
		"pn-length": judgePNLength, "ack-only-received": judgeAckOnlyReceived, "pn-monotonic": judgePNMonotonic,
	} {
		if s, _ := judge(j.record()); s != "" {
			t.Fatalf("%s judged an honest download: %q", name, s)
		}
	}
	// The server acknowledges a tester packet number the record dropped:
	// honest, since the ledger has it.
	j.addAt(jc, false, pn, 0x41, ack(spn-10, spn-1))
	if s, _ := judgeAckOnlyReceived(j.record()); s != "" {
		t.Fatalf("ACK of dropped sent packets judged: %q", s)
	}
	j.addAt(jc, false, pn+1, 0x41, ack(spn, spn))
	if s, _ := judgeAckOnlyReceived(j.record()); !strings.Contains(s, "never sent") {
		t.Fatalf("ACK of a number never sent not found: %q", s)
	}

	// A 1-byte number far past what was acknowledged, in a dropped packet.
	k := newJudgeConn(t)
	kc := &clock{at: k.tt.rec.start}
	kpn, _ := download(k, kc, 0, 0, 3*keepFullPerGroup, 0x41)
	k.addAt(kc, false, kpn+300, 0x40, &wire.StreamFrame{StreamID: 0, Offset: 1, Data: []byte("x")})
	if k.tt.rec.packets[len(k.tt.rec.packets)-1].pn == kpn+300 {
		t.Fatal("the short-encoded packet was kept; the test needs it dropped")
	}
	if s, ps := judgePNLength(k.record()); !strings.Contains(s, "1 bytes") || len(ps) != 1 || ps[0].pn != kpn+300 {
		t.Fatalf("short encoding in a dropped packet not found: %q", s)
	}

	// A packet number sent twice, both in dropped packets.
	m := newJudgeConn(t)
	mc := &clock{at: m.tt.rec.start}
	mpn, _ := download(m, mc, 0, 0, 3*keepFullPerGroup, 0x41)
	m.addAt(mc, false, mpn-5, 0x41, &wire.StreamFrame{StreamID: 0, Offset: 1, Data: []byte("x")})
	if s, ps := judgePNMonotonic(m.record()); !strings.Contains(s, "twice") || len(ps) != 2 {
		t.Fatalf("repeated number in dropped packets not found: %q", s)
	}
}

// TestKeptEvidenceChecks: a fail judged on a record with dropped packets
// becomes inconclusive, unless the scenario judged on its own log.
func TestKeptEvidenceChecks(t *testing.T) {
	j := newJudgeConn(t)
	jc := &clock{at: j.tt.rec.start}
	download(j, jc, 0, 0, 3*keepFullPerGroup, 0x41)
	checks := []CheckResult{{Name: "a", Verdict: Pass}, {Name: "b", Verdict: Fail, Sentence: "bad."}}
	if got := j.tt.keptEvidenceChecks(append([]CheckResult(nil), checks...)); got[1].Verdict != Fail {
		t.Fatalf("a fail judged without reading the record changed: %v", got[1].Verdict)
	}
	j.tt.rec.snapshot()
	got := j.tt.keptEvidenceChecks(append([]CheckResult(nil), checks...))
	if got[0].Verdict != Pass || got[1].Verdict != Inconclusive || !strings.Contains(got[1].Sentence, "summarised") {
		t.Fatalf("fail on a summarised record: %+v", got)
	}
	j.tt.ownEvidence()
	if got := j.tt.keptEvidenceChecks(append([]CheckResult(nil), checks...)); got[1].Verdict != Fail {
		t.Fatalf("a fail on the scenario's own log changed: %v", got[1].Verdict)
	}
	// A judge that reads only unsummarised packets keeps its fail, unless
	// packets that were not bulk were dropped too.
	u := newJudgeConn(t)
	download(u, &clock{at: u.tt.rec.start}, 0, 0, 3*keepFullPerGroup, 0x41)
	u.tt.rec.snapshot()
	u.tt.judgesUnsummarised()
	if got := u.tt.keptEvidenceChecks(append([]CheckResult(nil), checks...)); got[1].Verdict != Fail {
		t.Fatalf("a fail on unsummarised packets changed: %v", got[1].Verdict)
	}
	u.tt.rec.keep.otherDropped = 1
	if got := u.tt.keptEvidenceChecks(append([]CheckResult(nil), checks...)); got[1].Verdict != Inconclusive {
		t.Fatalf("a fail while other packets were dropped stood: %v", got[1].Verdict)
	}
	// Nothing dropped: nothing changes.
	k := newJudgeConn(t)
	kc := &clock{at: k.tt.rec.start}
	download(k, kc, 0, 0, 10, 0x41)
	k.tt.rec.snapshot()
	if got := k.tt.keptEvidenceChecks(append([]CheckResult(nil), checks...)); got[1].Verdict != Fail {
		t.Fatalf("a fail on a whole record changed: %v", got[1].Verdict)
	}
}
