package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/quiver-quic/quiver/conformance"
)

// GridColumn is one implementation's report in a grid.
type GridColumn struct {
	Name   string
	Report *conformance.Report
}

// WriteGrid writes a Markdown table with one row per scenario found in any
// report (sorted by role, then ID) and one column per report, then a line
// of verdict counts per column. A scenario a report does not contain shows
// as "—".
func WriteGrid(w io.Writer, cols []GridColumn) error {
	type key struct {
		role conformance.Role
		id   string
	}
	seen := map[key]bool{}
	var rows []key
	cells := make([]map[string]conformance.Verdict, len(cols))
	for i, c := range cols {
		cells[i] = map[string]conformance.Verdict{}
		for _, r := range c.Report.Results {
			k := key{r.Role, r.Scenario}
			if k.role == "" {
				k.role = conformance.ServerRole
			}
			cells[i][r.Scenario] = r.Verdict
			if !seen[k] {
				seen[k] = true
				rows = append(rows, k)
			}
		}
	}
	slices.SortFunc(rows, func(a, b key) int {
		if c := strings.Compare(string(b.role), string(a.role)); c != 0 {
			return c // server before client
		}
		return strings.Compare(a.id, b.id)
	})
	var sb strings.Builder
	sb.WriteString("| scenario |")
	for _, c := range cols {
		sb.WriteString(" " + c.Name + " |")
	}
	sb.WriteString("\n|---|")
	for range cols {
		sb.WriteString("---|")
	}
	sb.WriteString("\n")
	for _, k := range rows {
		fmt.Fprintf(&sb, "| `%s` |", k.id)
		for i := range cols {
			v, ok := cells[i][k.id]
			s := string(v)
			if !ok {
				s = "—"
			}
			sb.WriteString(" " + s + " |")
		}
		sb.WriteString("\n")
	}
	sb.WriteString("| **counts** |")
	for _, c := range cols {
		sb.WriteString(" " + countLine(c.Report.Counts()) + " |")
	}
	sb.WriteString("\n")
	_, err := io.WriteString(w, sb.String())
	return err
}
