package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/quiver-quic/quiver/conformance"
)

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
func WriteJUnit(w io.Writer, r *conformance.Report) error {
	top := junitSuites{Name: "quiver conformance " + r.Target.Address}
	byFam := map[string]*junitSuite{}
	var fams []string
	for _, res := range r.Results {
		s := byFam[res.Family]
		if s == nil {
			s = &junitSuite{Name: "family " + res.Family + " " + conformance.FamilyName(res.Family)}
			byFam[res.Family] = s
			fams = append(fams, res.Family)
		}
		c := junitCase{Name: res.Scenario, Classname: "conformance." + res.Family, Time: res.Duration.Seconds()}
		detail := checkLines(res)
		msg := &junitMessage{Message: res.Sentence, Type: string(res.Verdict), Body: detail}
		switch res.Verdict {
		case conformance.Fail:
			c.Failure = msg
			s.Fail++
		case conformance.Errored:
			c.Error = msg
			s.Errors++
		case conformance.Unsupported, conformance.Inconclusive:
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

func checkLines(res conformance.Result) string {
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
