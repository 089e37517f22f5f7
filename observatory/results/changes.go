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
	// Unobservable: a judged scenario became inconclusive — the suite can
	// no longer see what it checks (a peer that stops answering a probe,
	// a precondition gone). To.Sentence says why.
	Unobservable ChangeKind = "unobservable"
	// Observable: an inconclusive scenario is judged again. If the verdict
	// differs from the last judged one, that change is listed as well.
	Observable ChangeKind = "observable"
)

// Describe is the change kind in a few words, for text and pages.
func (k ChangeKind) Describe() string {
	switch k {
	case Unobservable:
		return "became unobservable"
	case Observable:
		return "observable again"
	}
	return string(k)
}

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
// Inconclusive results are compared apart (a scenario becoming or ceasing
// to be inconclusive is a change of its own); error and observed results
// are skipped, since an error is the tester's failure, not the target's.
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
		if !judged(c.Verdict) && c.Verdict != store.Inconclusive {
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
		all := series[k]
		passedBefore := false
		var s []store.Cell // the judged results only
		for i, cur := range all {
			add := func(kind ChangeKind, from store.Cell) {
				out = append(out, Change{Kind: kind, Target: k.target, Scenario: k.scenario, From: from, To: cur})
			}
			if i > 0 {
				prev := all[i-1]
				switch prevInc, curInc := !judged(prev.Verdict), !judged(cur.Verdict); {
				case !prevInc && curInc:
					add(Unobservable, prev)
				case prevInc && !curInc:
					add(Observable, prev)
				}
			}
			if !judged(cur.Verdict) {
				continue
			}
			if len(s) > 0 {
				last := s[len(s)-1]
				if last.Verdict == store.Pass {
					passedBefore = true
				}
				if kind, ok := classify(last.Verdict, cur.Verdict, passedBefore); ok {
					add(kind, last)
				}
			}
			s = append(s, cur)
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
