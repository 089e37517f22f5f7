package conformance

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// defaultLocal stands in for a tester address the capture never learnt
// (a handshake that failed before the socket was known).
var defaultLocal = netip.MustParseAddrPort("127.0.0.1:0")

// WriteJSON writes the versioned JSON report (docs/conformance-report.md).
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// JUnit XML, the subset CI systems read.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Name    string       `xml:"name,attr"`
	Tests   int          `xml:"tests,attr"`
	Fail    int          `xml:"failures,attr"`
	Errors  int          `xml:"errors,attr"`
	Skipped int          `xml:"skipped,attr"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name    string      `xml:"name,attr"`
	Tests   int         `xml:"tests,attr"`
	Fail    int         `xml:"failures,attr"`
	Errors  int         `xml:"errors,attr"`
	Skipped int         `xml:"skipped,attr"`
	Time    float64     `xml:"time,attr"`
	Cases   []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML: one test suite per family,
// fail as failure, error as error, unsupported and inconclusive as skipped
// (neither is a pass), warn and observed as passing cases with the
// sentence in system-out.
func WriteJUnit(w io.Writer, r *Report) error {
	top := junitSuites{Name: "quiver conformance " + r.Target.Address}
	byFam := map[string]*junitSuite{}
	var fams []string
	for _, res := range r.Results {
		s := byFam[res.Family]
		if s == nil {
			s = &junitSuite{Name: "family " + res.Family + " " + familyName(res.Family)}
			byFam[res.Family] = s
			fams = append(fams, res.Family)
		}
		c := junitCase{Name: res.Scenario, Classname: "conformance." + res.Family, Time: res.Duration.Seconds()}
		detail := checkLines(res)
		msg := &junitMessage{Message: res.Sentence, Type: string(res.Verdict), Body: detail}
		switch res.Verdict {
		case Fail:
			c.Failure = msg
			s.Fail++
		case Errored:
			c.Error = msg
			s.Errors++
		case Unsupported, Inconclusive:
			c.Skipped = msg
			s.Skipped++
		default:
			c.SystemOut = string(res.Verdict) + ": " + res.Sentence + "\n" + detail
		}
		s.Tests++
		s.Time += res.Duration.Seconds()
		s.Cases = append(s.Cases, c)
	}
	slices.Sort(fams)
	for _, f := range fams {
		s := byFam[f]
		top.Tests += s.Tests
		top.Fail += s.Fail
		top.Errors += s.Errors
		top.Skipped += s.Skipped
		top.Suites = append(top.Suites, *s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(top); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func checkLines(res Result) string {
	var b strings.Builder
	for _, c := range res.Checks {
		fmt.Fprintf(&b, "[%s] %s: %s\n", c.Verdict, c.Name, c.Sentence)
		if c.Requirement != nil {
			fmt.Fprintf(&b, "    %s\n", c.Requirement)
		}
	}
	if res.Error != "" {
		fmt.Fprintf(&b, "tester error: %s\n", res.Error)
	}
	if res.Confirmed {
		fmt.Fprintf(&b, "confirmed: the verdict came out the same when the scenario ran again alone\n")
	}
	if f := res.FirstRun; f != nil {
		fmt.Fprintf(&b, "first run (up to %d scenarios at once): %s: %s\n", f.Parallel, f.Verdict, f.Sentence)
	}
	return b.String()
}

var families = map[string]string{
	"A": "Handshake and versions",
	"B": "TLS",
	"C": "Packet and frame validity",
	"D": "Streams and flow control",
	"E": "Connection IDs, path validation and migration",
	"F": "Amplification and address validation",
	"G": "Loss recovery and ACK behaviour",
	"H": "ACK frequency",
	"I": "DATAGRAM",
	"J": "Greasing",
	"K": "HTTP/3 and QPACK",
	"L": "Close, draining, idle timeout, stateless reset",
	"M": "Client-facing",
}

func familyName(f string) string { return families[f] }

var verdictOrder = []Verdict{Pass, Fail, Warn, Unsupported, Inconclusive, Errored, Observed}

// WriteTable writes a terminal table grouped by family: each scenario with
// its verdict and sentence, then the family's verdict counts, then the
// totals.
func WriteTable(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Quiver conformance %s against %s (ALPN %s), %s\n\n", r.ToolVersion, r.Target.Address, strings.Join(r.Target.ALPN, ","), r.Finished.Sub(r.Started).Round(time.Millisecond))
	byFam := map[string][]Result{}
	var fams []string
	for _, res := range r.Results {
		if _, ok := byFam[res.Family]; !ok {
			fams = append(fams, res.Family)
		}
		byFam[res.Family] = append(byFam[res.Family], res)
	}
	slices.Sort(fams)
	for _, f := range fams {
		fmt.Fprintf(tw, "%s. %s\n", f, familyName(f))
		counts := map[Verdict]int{}
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

func countLine(counts map[Verdict]int) string {
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

// ProgressLine returns a Progress function that keeps one live line on a
// terminal: the count done, the verdict tally and the last scenario. It
// writes nothing when isTerminal is false, so piped output stays clean.
func ProgressLine(w io.Writer, isTerminal bool) func(done, total int, r Result) {
	if !isTerminal {
		return nil
	}
	counts := map[Verdict]int{}
	return func(done, total int, r Result) {
		counts[r.Verdict]++
		fmt.Fprintf(w, "\r\033[K[%d/%d] %s · %s %s", done, total, countLine(counts), r.Scenario, r.Verdict)
		if done == total {
			fmt.Fprint(w, "\r\033[K")
		}
	}
}
