// Package results reads what the observatory stored: the grid of targets
// × scenarios, tallies, run diffs, change detection (arrived, regressed,
// fixed, flapping) and version order, as text for the CLI and as data for
// the dashboard. It depends on the store only, not on the suite or the
// engine.
//
// Where to start: [NewGrid] and [WriteGrid] for the grid of one run's
// cells, [DetectChanges] for what changed across runs, [DiffRuns] for two
// runs side by side, [CompareVersions] to order release tags.
package results

import (
	"cmp"
	"slices"

	"github.com/quiver-quic/quiver/observatory/store"
)

// ChangeKind names what happened between two consecutive results of a
// target × scenario.
type ChangeKind string

// Change kinds.
const (
	// Arrived: the scenario passes for the first time, after being
	// unsupported or failing — a feature appeared.
	Arrived ChangeKind = "arrived"
	// Regressed: a scenario that passed now fails, warns, or is no longer
	// supported.
	Regressed ChangeKind = "regressed"
	// Fixed: a scenario that passed before, then failed or warned, passes
	// again.
	Fixed ChangeKind = "fixed"
	// Flapping: the verdict changed at least twice within the last N
	// judged results; the individual changes are listed too.
	Flapping ChangeKind = "flapping"
)

// Change is one detected change. From and To are the two results
// compared; for Flapping, From is the oldest and To the newest result of
// the window, and Count the number of verdict changes in it.
type Change struct {
	Kind     ChangeKind `json:"kind"`
	Target   string     `json:"target"`
	Scenario string     `json:"scenario"`
	From     store.Cell `json:"from"`
	To       store.Cell `json:"to"`
	Count    int        `json:"count,omitempty"`
}

// DefaultFlapWindow is how many recent judged results flapping looks at.
const DefaultFlapWindow = 5

// judged reports whether a verdict says something about the target.
// Inconclusive, error and observed results are skipped when finding the
// previous result, so a network hiccup is neither a regression nor a fix.
func judged(v string) bool {
	switch v {
	case store.Pass, store.Fail, store.Warn, store.Unsupported:
		return true
	}
	return false
}

// DetectChanges finds the changes in cells, which must be in history order
// (as Store.Cells returns them). window is the flapping window (≤ 0: the
// default). Changes come back ordered by the run of their newer result,
// then target and scenario.
func DetectChanges(cells []store.Cell, window int) []Change {
	if window <= 0 {
		window = DefaultFlapWindow
	}
	type key struct{ target, scenario string }
	series := map[key][]store.Cell{}
	var keys []key
	for _, c := range cells {
		if !judged(c.Verdict) {
			continue
		}
		k := key{c.Target.Name, c.Scenario}
		if _, ok := series[k]; !ok {
			keys = append(keys, k)
		}
		series[k] = append(series[k], c)
	}
	var out []Change
	for _, k := range keys {
		s := series[k]
		passedBefore := false
		for i := 1; i < len(s); i++ {
			prev, cur := s[i-1], s[i]
			if prev.Verdict == store.Pass {
				passedBefore = true
			}
			if kind, ok := classify(prev.Verdict, cur.Verdict, passedBefore); ok {
				out = append(out, Change{Kind: kind, Target: k.target, Scenario: k.scenario, From: prev, To: cur})
			}
		}
		if len(s) > window {
			s = s[len(s)-window:]
		}
		n := 0
		for i := 1; i < len(s); i++ {
			if s[i].Verdict != s[i-1].Verdict {
				n++
			}
		}
		if n >= 2 {
			out = append(out, Change{Kind: Flapping, Target: k.target, Scenario: k.scenario, From: s[0], To: s[len(s)-1], Count: n})
		}
	}
	slices.SortStableFunc(out, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.To.RunID, b.To.RunID), cmp.Compare(a.Target, b.Target), cmp.Compare(a.Scenario, b.Scenario))
	})
	return out
}

func classify(prev, cur string, passedBefore bool) (ChangeKind, bool) {
	pass, fail, warn, unsup := store.Pass, store.Fail, store.Warn, store.Unsupported
	switch {
	case prev == pass && (cur == fail || cur == warn || cur == unsup):
		return Regressed, true
	case cur == pass && prev == unsup:
		return Arrived, true
	case cur == pass && (prev == fail || prev == warn):
		if passedBefore {
			return Fixed, true
		}
		return Arrived, true
	}
	return "", false
}
