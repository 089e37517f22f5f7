package conformance

import (
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestRegistry checks every registered scenario against the catalogue's
// rules: a unique kebab-case ID, a title, a family, at least one
// requirement with a quote, and requirement keywords that the verdicts can
// rest on.
func TestRegistry(t *testing.T) {
	scs := Scenarios()
	if len(scs) == 0 {
		t.Fatal("no scenario registered")
	}
	seen := map[string]bool{}
	for _, s := range scs {
		if seen[s.ID] {
			t.Errorf("%s: duplicate ID", s.ID)
		}
		seen[s.ID] = true
		if !kebab.MatchString(s.ID) {
			t.Errorf("%s: ID is not kebab-case", s.ID)
		}
		if s.Title == "" {
			t.Errorf("%s: no title", s.ID)
		}
		if _, ok := families[s.Family]; !ok {
			t.Errorf("%s: unknown family %q", s.ID, s.Family)
		}
		if s.Run == nil {
			t.Errorf("%s: no Run", s.ID)
		}
		if len(s.Requirements) == 0 {
			t.Errorf("%s: no requirement", s.ID)
		}
		judged := false
		for _, r := range s.Requirements {
			if r.Quote == "" || r.Doc == "" || r.Section == "" {
				t.Errorf("%s: incomplete requirement %+v", s.ID, r)
			}
			if strings.ContainsAny(r.Quote, "“”") {
				t.Errorf("%s: quote carries its own quotation marks: %q", s.ID, r.Quote)
			}
			switch r.Keyword {
			case Must, MustNot, Should, ShouldNot, Recommended:
				judged = true
				// The keyword must appear in the quoted text itself.
				if !r.FromKnowledge && !strings.Contains(r.Quote, string(r.Keyword)) {
					t.Errorf("%s: requirement keyword %s does not appear in %q", s.ID, r.Keyword, r.Quote)
				}
			case May, Descriptive:
			default:
				t.Errorf("%s: unknown keyword %q", s.ID, r.Keyword)
			}
		}
		if !s.ObservationOnly && !s.PassOnly && !judged {
			t.Errorf("%s: judged scenario without a MUST or SHOULD requirement", s.ID)
		}
	}
	t.Logf("%d scenarios registered", len(scs))
}

// TestFailNeedsMust checks the safety net: a fail on a SHOULD, or a warn on
// a MUST, is turned into a tester error.
func TestFailNeedsMust(t *testing.T) {
	tt := &T{sc: &Scenario{ID: "x"}}
	tt.Fail("a", rfc9000("1", Should, "x SHOULD y"), "s")
	tt.Warn("b", rfc9000("1", Must, "x MUST y"), "s")
	tt.Fail("c", rfc9000("1", MustNot, "x MUST NOT y"), "s")
	want := []Verdict{Errored, Errored, Fail}
	for i, c := range tt.checks {
		if c.Verdict != want[i] {
			t.Errorf("check %s: %s, want %s", c.Name, c.Verdict, want[i])
		}
	}
	obs := &T{sc: &Scenario{ID: "y", ObservationOnly: true}}
	obs.Pass("a", rfc9000("1", Must, "x MUST y"), "s")
	if obs.checks[0].Verdict != Observed {
		t.Errorf("observation-only pass gave %s", obs.checks[0].Verdict)
	}
}

func TestSelect(t *testing.T) {
	if _, err := Select(ServerRole, []string{"no-such-*"}); err == nil {
		t.Error("a pattern matching nothing was accepted")
	}
	scs, err := Select(ServerRole, []string{"vn-*"})
	if err != nil || len(scs) == 0 {
		t.Fatalf("vn-*: %d, %v", len(scs), err)
	}
	for _, s := range scs {
		if !strings.HasPrefix(s.ID, "vn-") {
			t.Errorf("vn-* selected %s", s.ID)
		}
	}
	fam, err := Select(ServerRole, []string{"A"})
	if err != nil || len(fam) < len(scs) {
		t.Errorf("family A: %d, %v", len(fam), err)
	}
}
