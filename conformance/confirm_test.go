package conformance

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
)

// flakyScenario fails its first fails runs and passes afterwards; runs
// counts them.
func flakyScenario(id string, fails int32, runs *atomic.Int32, timing bool, warn bool) *Scenario {
	must := rfc9000("1", Must, "x MUST y")
	should := rfc9000("1", Should, "x SHOULD y")
	return &Scenario{ID: id, Title: id, Family: "C", Role: ServerRole, Revision: 1, Timing: timing,
		Run: func(ctx context.Context, t *T) {
			n := runs.Add(1)
			switch {
			case n > fails:
				t.Pass("c", must, "fine")
			case warn && timing && n == 1 && id == "x-timing-inconclusive":
				t.Inconclusive("too slow to tell")
			case warn:
				t.Warn("c", should, "slow")
			default:
				t.Fail("c", must, "broken")
			}
		}}
}

// TestConfirmVerdicts: a fail is reported only when a re-run alone
// reproduces it (then marked confirmed); a fail that does not reproduce
// gives the re-run's verdict with the first run kept beside it. Timing
// warns are confirmed the same way; other warns and passes run once.
func TestConfirmVerdicts(t *testing.T) {
	var once, twice, timingWarn, plainWarn, pass, timingInc atomic.Int32
	scs := []*Scenario{
		flakyScenario("x-fails-once", 1, &once, false, false),
		flakyScenario("x-fails-twice", 2, &twice, false, false),
		flakyScenario("x-timing-warn-once", 1, &timingWarn, true, true),
		flakyScenario("x-plain-warn", 1, &plainWarn, false, true),
		flakyScenario("x-pass", 0, &pass, false, false),
		flakyScenario("x-timing-inconclusive", 1, &timingInc, true, true),
	}
	prof := &Profile{} // unreachable: no health check after the inconclusive one
	rs := runScenarios(context.Background(), prof, scs, Options{Parallel: 4})
	got := map[string]Result{}
	for _, r := range rs {
		got[r.Scenario] = r
	}
	if r := got["x-fails-once"]; r.Verdict != Pass || r.Confirmed || r.FirstRun == nil || r.FirstRun.Verdict != Fail ||
		!strings.Contains(r.Sentence, "did not reproduce") {
		t.Errorf("fails once: %s confirmed=%v first=%+v: %s", r.Verdict, r.Confirmed, r.FirstRun, r.Sentence)
	}
	if r := got["x-fails-twice"]; r.Verdict != Fail || !r.Confirmed || r.FirstRun != nil {
		t.Errorf("fails twice: %s confirmed=%v first=%+v", r.Verdict, r.Confirmed, r.FirstRun)
	}
	if r := got["x-timing-warn-once"]; r.Verdict != Pass || r.FirstRun == nil || r.FirstRun.Verdict != Warn {
		t.Errorf("timing warn once: %s first=%+v", r.Verdict, r.FirstRun)
	}
	if r := got["x-plain-warn"]; r.Verdict != Warn || r.Confirmed || plainWarn.Load() != 1 {
		t.Errorf("plain warn: %s confirmed=%v, %d runs (want 1)", r.Verdict, r.Confirmed, plainWarn.Load())
	}
	if r := got["x-timing-inconclusive"]; r.Verdict != Pass || r.FirstRun == nil || r.FirstRun.Verdict != Inconclusive {
		t.Errorf("timing inconclusive once: %s first=%+v", r.Verdict, r.FirstRun)
	}
	if once.Load() != 2 || twice.Load() != 2 || pass.Load() != 1 {
		t.Errorf("runs: fails-once %d, fails-twice %d, pass %d (want 2, 2, 1)", once.Load(), twice.Load(), pass.Load())
	}
	// The JSON says so (conformance/report's TestTableMarksConfirmed checks
	// the table).
	js, err := json.Marshal(&Report{Results: rs})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"confirmed":true`) || !strings.Contains(string(js), `"first_run"`) {
		t.Errorf("JSON lacks confirmed or first_run")
	}
}

// TestTimingScenariosExist keeps the list of timing-based scenarios true.
func TestTimingScenariosExist(t *testing.T) {
	for id := range timingScenarios {
		if s := Lookup(id); s == nil || !s.Timing {
			t.Errorf("timing scenario %q is not registered", id)
		}
	}
}
