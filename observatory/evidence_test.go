package observatory

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/observatory/store"
)

// TestStoreVerdictsAreTheSuites: the store's verdict strings, which the
// readers of the store use without linking the suite, are the suite's.
func TestStoreVerdictsAreTheSuites(t *testing.T) {
	for suite, st := range map[conformance.Verdict]string{
		conformance.Pass: store.Pass, conformance.Fail: store.Fail, conformance.Warn: store.Warn,
		conformance.Unsupported: store.Unsupported, conformance.Inconclusive: store.Inconclusive,
		conformance.Errored: store.Errored, conformance.Observed: store.Observed,
	} {
		if string(suite) != st {
			t.Errorf("store verdict %q, suite verdict %q", st, suite)
		}
	}
}

// TestEvidenceDecodesSuiteResult: a suite result stored by RecordOf
// decodes into store.Evidence with every field the dashboard shows.
func TestEvidenceDecodesSuiteResult(t *testing.T) {
	res := conformance.Result{Scenario: "hs-v1-basic", Title: "handshake", Verdict: conformance.Fail, Error: "tester broke",
		Checks: []conformance.CheckResult{{Name: "c", Verdict: conformance.Fail, Sentence: "s",
			Requirement:  &conformance.Requirement{Doc: "RFC 9000", Section: "7.2", Keyword: conformance.Must, Quote: "q"},
			Events:       []conformance.PacketEvent{{Time: time.Millisecond, Direction: "sent", Role: "trigger", PacketType: "initial", Number: 3, Size: 1200, Frames: []string{"PING"}}},
			Measurements: map[string]float64{"m": 1.5}}},
		Facts: []conformance.Fact{conformance.NewFact("k", 7)}}
	rec, err := RecordOf(1, "test", conformance.Target{Name: "t"}, res, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.DecodeEvidence(rec)
	if err != nil {
		t.Fatal(err)
	}
	c, e := res.Checks[0], res.Checks[0].Events[0]
	want := store.Evidence{Title: res.Title, Error: res.Error, Facts: []store.EvidenceFact{{Key: "k", Value: json.RawMessage("7")}},
		Checks: []store.EvidenceCheck{{Name: c.Name, Verdict: string(c.Verdict), Sentence: c.Sentence, Measurements: c.Measurements,
			Requirement: &store.EvidenceRequirement{Doc: "RFC 9000", Section: "7.2", Keyword: string(c.Requirement.Keyword), Quote: "q"},
			Events: []store.EvidenceEvent{{Time: e.Time, Direction: e.Direction, Role: string(e.Role), PacketType: e.PacketType,
				Number: e.Number, Size: e.Size, Frames: e.Frames}}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %+v\nwant %+v", got, want)
	}
}
