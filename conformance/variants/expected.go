package variants

import (
	"path"

	"github.com/quiver-quic/quiver/conformance"
)

// Kinds of Exception.
const (
	// KindShould: the scenario judges that very choice at SHOULD level,
	// so a warn is the right verdict.
	KindShould = "judges this SHOULD"
	// KindTesterBug: a false verdict already known and fixed in the
	// scenario elsewhere (issue 14, item 1); listed so that the matrix
	// tells new false verdicts from known ones.
	KindTesterBug = "known tester bug"
)

// An Exception says why a variant may get a worse verdict than the
// default on a scenario.
type Exception struct {
	Scenario string // ID or glob
	Variant  string
	// Verdicts are the verdicts this explains; empty: any.
	Verdicts []conformance.Verdict
	Kind     string
	Reason   string
}

// Expected lists every known reason for a variant's verdict to differ
// from the default's.
var Expected = []Exception{
	{Scenario: "fc-blocked-signalled", Variant: "no-blocked", Verdicts: []conformance.Verdict{conformance.Warn}, Kind: KindShould,
		Reason: "RFC 9000 §4.1: \"A sender SHOULD send a STREAM_DATA_BLOCKED or DATA_BLOCKED frame\"; the variant sends none, a warn is right"},
}

// expected returns the exception that explains verdict v of scenario id
// on target t, or nil.
func expected(id string, t Target, v conformance.Verdict) *Exception {
	for i := range Expected {
		e := &Expected[i]
		if !t.Has(e.Variant) {
			continue
		}
		if ok, _ := path.Match(e.Scenario, id); !ok {
			continue
		}
		if len(e.Verdicts) > 0 && !containsVerdict(e.Verdicts, v) {
			continue
		}
		return e
	}
	return nil
}

func containsVerdict(vs []conformance.Verdict, v conformance.Verdict) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}
