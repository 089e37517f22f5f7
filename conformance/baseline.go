package conformance

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// A Baseline is the verdicts a run is expected to give, scenario by
// scenario: what a CI job pins so that it fails on a change (a new fail,
// and also a fail that became a pass) rather than on every known fail.
// A scenario may accept several verdicts, for one that is known to vary
// (for example pass or inconclusive where the CI host lacks IPv6).
//
// The file form is plain text, one scenario a line, sorted, easy to
// review in a diff:
//
//	# comment
//	hs-v1-basic pass
//	hs-v1-ipv6 pass|inconclusive
//
// ReadBaseline parses it, BaselineOf makes one from a report,
// Baseline.Write writes it and Baseline.Compare lists what changed.
type Baseline map[string][]Verdict

// verdicts lists every verdict a baseline may name.
var verdicts = []Verdict{Pass, Fail, Warn, Unsupported, Inconclusive, Errored, Observed}

// maxBaselineLine bounds one line of a baseline file; no scenario ID and
// verdict list comes near it.
const maxBaselineLine = 4096

// ReadBaseline parses a baseline file. Blank lines and lines starting
// with # are skipped; every other line is a scenario ID, white space and
// one or more verdicts separated by |. An unknown verdict, a line
// without one and a scenario listed twice are errors naming the line.
func ReadBaseline(r io.Reader) (Baseline, error) {
	b := Baseline{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxBaselineLine)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("baseline line %d: want \"SCENARIO VERDICT[|VERDICT…]\", got %q", n, line)
		}
		id := fields[0]
		if _, dup := b[id]; dup {
			return nil, fmt.Errorf("baseline line %d: scenario %s listed twice", n, id)
		}
		var want []Verdict
		for _, s := range strings.Split(fields[1], "|") {
			v := Verdict(s)
			if !slices.Contains(verdicts, v) {
				return nil, fmt.Errorf("baseline line %d: unknown verdict %q for %s (known: %s)", n, s, id, verdictList())
			}
			if !slices.Contains(want, v) {
				want = append(want, v)
			}
		}
		b[id] = want
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("baseline line %d: %w", n+1, err)
	}
	return b, nil
}

func verdictList() string {
	s := make([]string, len(verdicts))
	for i, v := range verdicts {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// BaselineOf records the verdicts of a run as a baseline: each scenario
// is expected to give again the verdict it gave.
func BaselineOf(rep *Report) Baseline {
	b := Baseline{}
	for _, r := range rep.Results {
		b[r.Scenario] = []Verdict{r.Verdict}
	}
	return b
}

// Scenarios returns the baseline's scenario IDs, sorted: the selection
// that runs exactly what the baseline pins.
func (b Baseline) Scenarios() []string {
	ids := make([]string, 0, len(b))
	for id := range b {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Write writes the baseline in its file form, sorted by scenario, after a
// comment that says what the file is.
func (b Baseline) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "# Quiver conformance baseline: a scenario and the verdicts expected of it, one a line.")
	fmt.Fprintln(bw, "# Accept several with |, e.g. \"hs-v1-ipv6 pass|inconclusive\". Used by quiver test --baseline.")
	for _, id := range b.Scenarios() {
		s := make([]string, len(b[id]))
		for i, v := range b[id] {
			s[i] = string(v)
		}
		fmt.Fprintf(bw, "%s %s\n", id, strings.Join(s, "|"))
	}
	return bw.Flush()
}

// A Change is a scenario whose verdict is not one its baseline expects.
// Want is nil for a scenario the baseline does not list (a new one); Got
// is empty for a scenario the baseline lists but the run did not
// include.
type Change struct {
	Scenario string
	Want     []Verdict
	Got      Verdict
}

// String says what changed in one line, e.g.
// "hs-v1-basic: expected pass, got fail".
func (c Change) String() string {
	switch {
	case c.Want == nil:
		return fmt.Sprintf("%s: not in the baseline, got %s", c.Scenario, c.Got)
	case c.Got == "":
		return fmt.Sprintf("%s: expected %s, not run", c.Scenario, joinVerdicts(c.Want))
	}
	return fmt.Sprintf("%s: expected %s, got %s", c.Scenario, joinVerdicts(c.Want), c.Got)
}

func joinVerdicts(vs []Verdict) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, " or ")
}

// Compare lists, sorted by scenario, every result of rep whose verdict
// the baseline does not expect, every scenario of rep the baseline does
// not list, and every scenario the baseline lists that rep lacks. An
// empty list means the run gave exactly the expected verdicts.
func (b Baseline) Compare(rep *Report) []Change {
	var out []Change
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.Scenario] = true
		want, ok := b[r.Scenario]
		switch {
		case !ok:
			out = append(out, Change{Scenario: r.Scenario, Got: r.Verdict})
		case !slices.Contains(want, r.Verdict):
			out = append(out, Change{Scenario: r.Scenario, Want: want, Got: r.Verdict})
		}
	}
	for id, want := range b {
		if !seen[id] {
			out = append(out, Change{Scenario: id, Want: want})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scenario < out[j].Scenario })
	return out
}
