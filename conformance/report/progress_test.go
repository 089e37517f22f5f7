package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/conformance"
)

// TestProgressLine: piped output gets no progress at all; a terminal gets
// one line rewritten per scenario, with the tally so far, and cleared
// after the last.
func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	if p := ProgressLine(&buf, false); p != nil {
		t.Fatal("a progress function for piped output")
	}
	p := ProgressLine(&buf, true)
	p(1, 2, conformance.Result{Scenario: "hs-a", Verdict: conformance.Pass})
	if got := buf.String(); got != "\r\033[K[1/2] 1 pass · hs-a pass" {
		t.Errorf("first line %q", got)
	}
	buf.Reset()
	p(2, 2, conformance.Result{Scenario: "hs-b", Verdict: conformance.Fail})
	if got := buf.String(); !strings.HasPrefix(got, "\r\033[K[2/2] 1 pass, 1 fail · hs-b fail") || !strings.HasSuffix(got, "\r\033[K") {
		t.Errorf("last line %q", got)
	}
}
