package report

import (
	"time"

	"github.com/quiver-quic/quiver/conformance"
)

// sampleReport holds every verdict, in three families and both roles, with
// checks, a requirement, a tester error, a confirmed fail, a first run the
// re-run did not reproduce, a sentence over a table cell's width, line
// breaks and characters XML escapes: what the writers must render.
func sampleReport() *conformance.Report {
	start := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	must := &conformance.Requirement{Doc: "RFC 9000", Section: "17.2", Keyword: conformance.Must, Quote: "A client MUST <discard> & \"ignore\""}
	r := func(id, fam string, role conformance.Role, v conformance.Verdict, sentence string) conformance.Result {
		return conformance.Result{Scenario: id, Title: id, Family: fam, Role: role, Revision: 1, Verdict: v,
			Sentence: sentence, Started: start, Duration: 1500 * time.Millisecond}
	}
	fail := r("hs-fail", "A", conformance.ServerRole, conformance.Fail, "the server answered <nothing> & closed")
	fail.Checks = []conformance.CheckResult{
		{Name: "answer", Verdict: conformance.Fail, Sentence: "no Handshake packet in 3s", Requirement: must},
		{Name: "close", Verdict: conformance.Pass, Sentence: "closed with 0x0"},
	}
	fail.Confirmed = true
	flaky := r("hs-flaky", "A", conformance.ServerRole, conformance.Pass, "handshake completed")
	flaky.FirstRun = &conformance.FirstRun{Verdict: conformance.Fail, Sentence: "timed out", Parallel: 6}
	errored := r("sd-error", "D", conformance.ServerRole, conformance.Errored, "the tester could not connect")
	errored.Error = "dial udp: connection refused"
	long := r(
		"sd-long",
		"D",
		conformance.ServerRole,
		conformance.Warn,
		"a sentence that goes on\nover lines and past the width of a table cell, so that the table must cut it short with an ellipsis at the end of its cell",
	)
	return &conformance.Report{
		Schema:      conformance.SchemaVersion,
		ToolVersion: "0.0.0-test",
		Target:      conformance.Target{Name: "x", Address: "127.0.0.1:4433", ALPN: []string{"h3", "hq-interop"}},
		Started:     start,
		Finished:    start.Add(12345 * time.Millisecond),
		Results: []conformance.Result{
			fail, flaky, long, errored,
			r("sd-unsupported", "D", conformance.ServerRole, conformance.Unsupported, "no DATAGRAM"),
			r("sd-inconclusive", "D", conformance.ServerRole, conformance.Inconclusive, "too few samples"),
			r("cli-observed", "M", conformance.ClientRole, conformance.Observed, "the client sent 3 PINGs"),
			r("cli-pass", "M", conformance.ClientRole, conformance.Pass, "fine"),
		},
	}
}
