package conformance

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func reportOf(pairs ...string) *Report {
	rep := &Report{}
	for i := 0; i+1 < len(pairs); i += 2 {
		rep.Results = append(rep.Results, Result{Scenario: pairs[i], Verdict: Verdict(pairs[i+1])})
	}
	return rep
}

func TestBaselineRoundTrip(t *testing.T) {
	rep := reportOf("hs-v1-basic", "pass", "fc-stream-limit", "fail", "hs-padding-only-initial", "observed")
	var buf bytes.Buffer
	if err := BaselineOf(rep).Write(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	// Two comment lines, then the scenarios sorted.
	want := []string{"fc-stream-limit fail", "hs-padding-only-initial observed", "hs-v1-basic pass"}
	if !slices.Equal(lines[2:], want) || !strings.HasPrefix(lines[0], "#") {
		t.Fatalf("written baseline:\n%s", buf.String())
	}
	b, err := ReadBaseline(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if ch := b.Compare(rep); len(ch) != 0 {
		t.Fatalf("a run compared with its own baseline changed: %v", ch)
	}
	if got := b.Scenarios(); !slices.Equal(got, []string{"fc-stream-limit", "hs-padding-only-initial", "hs-v1-basic"}) {
		t.Fatalf("Scenarios() = %v", got)
	}
}

func TestBaselineCompare(t *testing.T) {
	b, err := ReadBaseline(strings.NewReader(`
# pinned
hs-v1-basic pass
hs-v1-ipv6 pass|inconclusive
fc-stream-limit fail
gone-scenario pass
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := reportOf(
		"hs-v1-basic", "fail", // a regression
		"hs-v1-ipv6", "inconclusive", // accepted alternative: no change
		"fc-stream-limit", "pass", // fixed: a change too
		"new-scenario", "warn", // not in the baseline
	)
	got := b.Compare(rep)
	var lines []string
	for _, c := range got {
		lines = append(lines, c.String())
	}
	want := []string{
		"fc-stream-limit: expected fail, got pass",
		"gone-scenario: expected pass, not run",
		"hs-v1-basic: expected pass, got fail",
		"new-scenario: not in the baseline, got warn",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Equal(b["hs-v1-ipv6"], []Verdict{Pass, Inconclusive}) {
		t.Fatalf("alternatives parsed as %v", b["hs-v1-ipv6"])
	}
}

func TestReadBaselineErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"hs-v1-basic\n", "line 1"},
		{"hs-v1-basic pass extra\n", "line 1"},
		{"# c\nhs-v1-basic passed\n", `line 2: unknown verdict "passed"`},
		{"hs-v1-basic pass|\n", `unknown verdict ""`},
		{"a pass\na fail\n", "line 2: scenario a listed twice"},
		{"a " + strings.Repeat("x", maxBaselineLine) + "\n", "line 1"},
	} {
		_, err := ReadBaseline(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadBaseline(%.30q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}

// FuzzReadBaseline: any input parses or fails cleanly, and what parses
// writes back to a file that reads as the same baseline.
func FuzzReadBaseline(f *testing.F) {
	f.Add("hs-v1-basic pass\nhs-v1-ipv6 pass|inconclusive\n# c\n")
	f.Add("a fail|fail\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		b, err := ReadBaseline(strings.NewReader(in))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := b.Write(&buf); err != nil {
			t.Fatal(err)
		}
		b2, err := ReadBaseline(&buf)
		if err != nil {
			t.Fatalf("written baseline does not read back: %v\n%s", err, buf.String())
		}
		if len(b2) != len(b) {
			t.Fatalf("%d scenarios became %d", len(b), len(b2))
		}
		for id, want := range b {
			if !slices.Equal(b2[id], want) {
				t.Fatalf("%s: %v became %v", id, want, b2[id])
			}
		}
	})
}
