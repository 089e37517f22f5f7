package report

import (
	"fmt"
	"io"

	"github.com/quiver-quic/quiver/conformance"
)

// ProgressLine returns a Progress function that keeps one live line on a
// terminal: the count done, the verdict tally and the last scenario. It
// writes nothing when isTerminal is false, so piped output stays clean.
func ProgressLine(w io.Writer, isTerminal bool) func(done, total int, r conformance.Result) {
	if !isTerminal {
		return nil
	}
	counts := map[conformance.Verdict]int{}
	return func(done, total int, r conformance.Result) {
		counts[r.Verdict]++
		fmt.Fprintf(w, "\r\033[K[%d/%d] %s · %s %s", done, total, countLine(counts), r.Scenario, r.Verdict)
		if done == total {
			fmt.Fprint(w, "\r\033[K")
		}
	}
}
