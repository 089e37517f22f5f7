package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quiver-quic/quiver/conformance"
)

var verdictOrder = []conformance.Verdict{
	conformance.Pass,
	conformance.Fail,
	conformance.Warn,
	conformance.Unsupported,
	conformance.Inconclusive,
	conformance.Errored,
	conformance.Observed,
}

// WriteTable writes a terminal table grouped by family: each scenario with
// its verdict and sentence, then the family's verdict counts, then the
// totals.
func WriteTable(w io.Writer, r *conformance.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(
		tw,
		"Quiver conformance %s against %s (ALPN %s), %s\n\n",
		r.ToolVersion,
		r.Target.Address,
		strings.Join(r.Target.ALPN, ","),
		r.Finished.Sub(r.Started).Round(time.Millisecond),
	)
	byFam := map[string][]conformance.Result{}
	var fams []string
	for _, res := range r.Results {
		if _, ok := byFam[res.Family]; !ok {
			fams = append(fams, res.Family)
		}
		byFam[res.Family] = append(byFam[res.Family], res)
	}
	slices.Sort(fams)
	for _, f := range fams {
		fmt.Fprintf(tw, "%s. %s\n", f, conformance.FamilyName(f))
		counts := map[conformance.Verdict]int{}
		for _, res := range byFam[f] {
			counts[res.Verdict]++
			v := strings.ToUpper(string(res.Verdict))
			if res.Confirmed {
				v += " (confirmed)"
			}
			if res.FirstRun != nil {
				v += fmt.Sprintf(" (first run %s)", strings.ToUpper(string(res.FirstRun.Verdict)))
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", res.Scenario, v, oneLine(res.Sentence, 110))
		}
		fmt.Fprintf(tw, "  \t%s\t\n\n", countLine(counts))
	}
	fmt.Fprintf(tw, "Total: %d scenarios: %s\n", len(r.Results), countLine(r.Counts()))
	return tw.Flush()
}

func countLine(counts map[conformance.Verdict]int) string {
	var parts []string
	for _, v := range verdictOrder {
		if n := counts[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
	}
	return strings.Join(parts, ", ")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) > n {
		return string([]rune(s)[:n-1]) + "…"
	}
	return s
}
