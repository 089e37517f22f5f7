package results

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/observatory/store"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func cell(run int64, target, version, scenario, verdict string) store.Cell {
	return store.Cell{RunID: run, Target: store.Target{Name: target, Version: version}, Scenario: scenario, Verdict: verdict}
}

func TestDetectChanges(t *testing.T) {
	series := func(target, scenario string, verdicts ...string) []store.Cell {
		var cs []store.Cell
		for i, v := range verdicts {
			cs = append(cs, cell(int64(i+1), target, fmt.Sprintf("v%d", i+1), scenario, v))
		}
		return cs
	}
	for _, tc := range []struct {
		name     string
		verdicts []string
		window   int
		want     string
	}{
		{"steady", []string{"pass", "pass", "pass"}, 0, ""},
		{"feature arrives", []string{"unsupported", "unsupported", "pass"}, 0, "arrived 2→3"},
		{"first pass after failing is an arrival", []string{"fail", "pass"}, 0, "arrived 1→2"},
		{"regression then fix", []string{"pass", "fail", "fail", "pass"}, 0, "regressed 1→2, fixed 3→4, flapping 1→4 ×2"},
		{"warn is a regression", []string{"pass", "warn"}, 0, "regressed 1→2"},
		{"dropped support is a regression", []string{"pass", "unsupported"}, 0, "regressed 1→2"},
		{"errors are skipped", []string{"pass", "error", "pass", "observed", "pass"}, 0, ""},
		{"inconclusive is a change both ways", []string{"pass", "inconclusive", "error", "pass", "inconclusive"}, 0,
			"unobservable 1→2, observable 2→4, unobservable 4→5"},
		{"a regression through inconclusive", []string{"pass", "inconclusive", "fail"}, 0, "unobservable 1→2, observable 2→3, regressed 1→3"},
		{"stays inconclusive", []string{"pass", "inconclusive", "inconclusive", "inconclusive"}, 0, "unobservable 1→2"},
		{"starts inconclusive", []string{"inconclusive", "unsupported", "pass"}, 0, "observable 1→2, arrived 2→3"},
		{"flapping", []string{"pass", "fail", "pass", "fail"}, 0, "regressed 1→2, fixed 2→3, regressed 3→4, flapping 1→4 ×3"},
		{"old flaps leave the window", []string{"pass", "fail", "pass", "pass", "pass", "pass", "pass"}, 4, "regressed 1→2, fixed 2→3"},
		{"fail to warn is no listed change", []string{"fail", "warn"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range DetectChanges(series("t", "s", tc.verdicts...), tc.window) {
				s := fmt.Sprintf("%s %d→%d", c.Kind, c.From.RunID, c.To.RunID)
				if c.Kind == Flapping {
					s += fmt.Sprintf(" ×%d", c.Count)
				}
				got = append(got, s)
			}
			if g := strings.Join(got, ", "); g != tc.want {
				t.Errorf("DetectChanges(%v) = %q, want %q", tc.verdicts, g, tc.want)
			}
		})
	}

	// Series are kept apart by target and by scenario.
	var cs []store.Cell
	cs = append(cs, cell(1, "a", "", "s", "pass"), cell(1, "b", "", "s", "fail"), cell(1, "a", "", "s2", "fail"))
	cs = append(cs, cell(2, "a", "", "s", "pass"), cell(2, "b", "", "s", "pass"), cell(2, "a", "", "s2", "fail"))
	ch := DetectChanges(cs, 0)
	if len(ch) != 1 || ch[0].Target != "b" || ch[0].Kind != Arrived {
		t.Errorf("DetectChanges over two targets = %+v, want b arrived", ch)
	}
}

func TestTextOutput(t *testing.T) {
	a := []store.Cell{cell(1, "x", "", "s1", "pass"), cell(1, "y\x1b[31m", "", "s1", "fail"), cell(1, "x", "", "s2", "warn")}
	b := []store.Cell{cell(2, "x", "", "s1", "pass"), cell(2, "y\x1b[31m", "", "s1", "pass")}
	var buf bytes.Buffer
	if err := WriteGrid(&buf, NewGrid(a)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "\x1b") {
		t.Errorf("a target's escape sequence reached the terminal:\n%q", out)
	}
	for _, want := range []string{"scenario", "s1", "pass", "fail", "x: 1 pass, 1 warn"} {
		if !strings.Contains(out, want) {
			t.Errorf("grid lacks %q:\n%s", want, out)
		}
	}
	d := DiffRuns(a, b)
	if len(d) != 2 || d[0].Target != "x" || d[0].Scenario != "s2" || d[0].B.Verdict != "" || d[1].B.Verdict != "pass" {
		t.Errorf("DiffRuns = %+v", d)
	}
	buf.Reset()
	WriteDiff(&buf, 1, 2, d)
	if !strings.Contains(buf.String(), "warn") || !strings.Contains(buf.String(), "run 2") {
		t.Errorf("diff output:\n%s", buf.String())
	}
	if got := Tally(map[string]int{"fail": 2, "pass": 1}); got != "1 pass, 2 fail" {
		t.Errorf("Tally = %q", got)
	}
}

// TestChangesInconclusiveShown: quic-go v0.51.0 stopped answering the
// server-side PATH_CHALLENGE probe, so pkt-duplicate-packet went from pass to
// inconclusive; that is a change, printed with its reason, not "no changes".
func TestChangesInconclusiveShown(t *testing.T) {
	before := cell(1, "quic-go releases", "v0.50.0", "pkt-duplicate-packet", "pass")
	after := cell(2, "quic-go releases", "v0.51.0", "pkt-duplicate-packet", "inconclusive")
	after.Sentence = "No PATH_RESPONSE came back to the PATH_CHALLENGE probe, so duplicates could not be told apart."
	ch := DetectChanges([]store.Cell{before, after}, 0)
	if len(ch) != 1 || ch[0].Kind != Unobservable {
		t.Fatalf("DetectChanges = %+v, want one unobservable change", ch)
	}
	var buf bytes.Buffer
	if err := WriteChanges(&buf, ch); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"became unobservable", "pass (v0.50.0)", "inconclusive (v0.51.0)", "No PATH_RESPONSE came back"} {
		if !strings.Contains(out, want) {
			t.Errorf("changes output lacks %q:\n%s", want, out)
		}
	}
}
