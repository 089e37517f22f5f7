package results

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/quiver-quic/quiver/observatory/store"
)

// Grid is cells arranged as scenarios (rows) × targets (columns).
type Grid struct {
	Targets   []string
	Scenarios []string
	cells     map[[2]string]store.Cell
}

// NewGrid arranges cells; a later cell for the same target × scenario
// replaces an earlier one.
func NewGrid(cells []store.Cell) *Grid {
	g := &Grid{cells: map[[2]string]store.Cell{}}
	for _, c := range cells {
		if !slices.Contains(g.Targets, c.Target.Name) {
			g.Targets = append(g.Targets, c.Target.Name)
		}
		if !slices.Contains(g.Scenarios, c.Scenario) {
			g.Scenarios = append(g.Scenarios, c.Scenario)
		}
		g.cells[[2]string{c.Target.Name, c.Scenario}] = c
	}
	slices.Sort(g.Targets)
	slices.Sort(g.Scenarios)
	return g
}

// Cell returns the cell of a target × scenario.
func (g *Grid) Cell(target, scenario string) (store.Cell, bool) {
	c, ok := g.cells[[2]string{target, scenario}]
	return c, ok
}

// Counts tallies verdicts per target.
func (g *Grid) Counts(target string) map[string]int {
	m := map[string]int{}
	for _, s := range g.Scenarios {
		if c, ok := g.Cell(target, s); ok {
			m[c.Verdict]++
		}
	}
	return m
}

// printable makes target-supplied text safe for a terminal: control
// characters (escape sequences included) become U+FFFD.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}

// WriteGrid prints the grid as a table, one row per scenario, one column per
// target, followed by each target's tally.
func WriteGrid(w io.Writer, g *Grid) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "scenario")
	for _, t := range g.Targets {
		fmt.Fprintf(tw, "\t%s", printable(t))
	}
	fmt.Fprintln(tw)
	for _, s := range g.Scenarios {
		fmt.Fprint(tw, s)
		for _, t := range g.Targets {
			v := "-"
			if c, ok := g.Cell(t, s); ok {
				v = c.Verdict
			}
			fmt.Fprintf(tw, "\t%s", v)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, t := range g.Targets {
		fmt.Fprintf(w, "%s: %s\n", printable(t), Tally(g.Counts(t)))
	}
	return nil
}

// verdictOrder is how tallies list verdicts.
var verdictOrder = []string{"pass", "fail", "warn", "unsupported", "inconclusive", "error", "observed"}

// Tally renders verdict counts as "3 pass, 1 fail".
func Tally(m map[string]int) string {
	var parts []string
	for _, v := range verdictOrder {
		if m[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[v], v))
		}
	}
	for v, n := range m {
		if !slices.Contains(verdictOrder, v) && n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
	}
	if len(parts) == 0 {
		return "no results"
	}
	return strings.Join(parts, ", ")
}

// WriteRuns lists runs, newest first.
func WriteRuns(w io.Writer, runs []store.Run) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tcampaign\tstarted\tfinished\tresults\ttool")
	for _, r := range runs {
		fin := "unfinished"
		if !r.Finished.IsZero() {
			fin = r.Finished.Format("2006-01-02 15:04:05Z")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", r.ID, printable(r.Campaign), r.Started.Format("2006-01-02 15:04:05Z"), fin, r.Results, printable(r.ToolVersion))
	}
	return tw.Flush()
}

// WriteResults lists a run's results with their sentences.
func WriteResults(w io.Writer, cells []store.Cell) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tscenario\tverdict\treason")
	for _, c := range cells {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", printable(c.Target.Name), c.Scenario, c.Verdict, printable(c.Sentence))
	}
	return tw.Flush()
}

// CellDiff is a target × scenario whose verdict differs between two runs.
// A missing side has an empty verdict.
type CellDiff struct {
	Target, Scenario string
	A, B             store.Cell
}

// DiffRuns compares the cells of two runs.
func DiffRuns(a, b []store.Cell) []CellDiff {
	ga, gb := NewGrid(a), NewGrid(b)
	type k = [2]string
	var keys []k
	seen := map[k]bool{}
	for _, cs := range [][]store.Cell{a, b} {
		for _, c := range cs {
			key := k{c.Target.Name, c.Scenario}
			if !seen[key] {
				seen[key] = true
				keys = append(keys, key)
			}
		}
	}
	slices.SortFunc(keys, func(x, y k) int { return strings.Compare(x[0]+"\x00"+x[1], y[0]+"\x00"+y[1]) })
	var out []CellDiff
	for _, key := range keys {
		ca, _ := ga.Cell(key[0], key[1])
		cb, _ := gb.Cell(key[0], key[1])
		if ca.Verdict != cb.Verdict {
			out = append(out, CellDiff{Target: key[0], Scenario: key[1], A: ca, B: cb})
		}
	}
	return out
}

// WriteDiff prints a run diff.
func WriteDiff(w io.Writer, runA, runB int64, d []CellDiff) error {
	if len(d) == 0 {
		_, err := fmt.Fprintf(w, "runs %d and %d have the same verdicts\n", runA, runB)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "target\tscenario\trun %d\trun %d\treason (run %d)\n", runA, runB, runB)
	for _, c := range d {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printable(c.Target), c.Scenario, orDash(c.A.Verdict), orDash(c.B.Verdict), printable(c.B.Sentence))
	}
	return tw.Flush()
}

// WriteChanges prints detected changes.
func WriteChanges(w io.Writer, cs []Change) error {
	if len(cs) == 0 {
		_, err := fmt.Fprintln(w, "no changes")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "change\ttarget\tscenario\tfrom\tto\truns\treason")
	for _, c := range cs {
		from := c.From.Verdict + versionSuffix(c.From)
		to := c.To.Verdict + versionSuffix(c.To)
		if c.Kind == Flapping {
			from, to = fmt.Sprintf("%d changes", c.Count), "in the last results"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d→%d\t%s\n", c.Kind.Describe(), printable(c.Target), c.Scenario,
			printable(from), printable(to), c.From.RunID, c.To.RunID, printable(c.To.Sentence))
	}
	return tw.Flush()
}

func versionSuffix(c store.Cell) string {
	if c.Target.Version == "" {
		return ""
	}
	return " (" + c.Target.Version + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
