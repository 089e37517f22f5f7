package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/conformance"
)

// TestGrid: one row per scenario of any report, servers first, "—" where a
// report lacks it, and the counts per column.
func TestGrid(t *testing.T) {
	a := &conformance.Report{Schema: conformance.SchemaVersion, Results: []conformance.Result{
		{Scenario: "hs-b", Role: conformance.ServerRole, Verdict: conformance.Pass},
		{Scenario: "cli-a", Role: conformance.ClientRole, Verdict: conformance.Fail},
		{Scenario: "hs-a", Role: conformance.ServerRole, Verdict: conformance.Warn},
	}}
	b := &conformance.Report{Schema: conformance.SchemaVersion, Results: []conformance.Result{
		{Scenario: "hs-a", Role: conformance.ServerRole, Verdict: conformance.Unsupported},
	}}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, a); err != nil {
		t.Fatal(err)
	}
	ra, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteGrid(&out, []GridColumn{{"x", ra}, {"y", b}}); err != nil {
		t.Fatal(err)
	}
	want := "| scenario | x | y |\n|---|---|---|\n" +
		"| `hs-a` | warn | unsupported |\n" +
		"| `hs-b` | pass | — |\n" +
		"| `cli-a` | fail | — |\n" +
		"| **counts** | 1 pass, 1 fail, 1 warn | 1 unsupported |\n"
	if out.String() != want {
		t.Errorf("grid:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestReadJSONRefusesOtherSchema: a grid never mixes report schemas.
func TestReadJSONRefusesOtherSchema(t *testing.T) {
	_, err := ReadJSON(strings.NewReader(`{"schema": 99, "results": []}`))
	if err == nil || !strings.Contains(err.Error(), "schema 99") {
		t.Errorf("err = %v, want a schema error", err)
	}
	if _, err := ReadJSON(strings.NewReader(`{"schema": `)); err == nil {
		t.Error("truncated report accepted")
	}
}

// FuzzReadJSON: any bytes either fail to read or give a report the grid
// renders; nothing panics.
func FuzzReadJSON(f *testing.F) {
	f.Add([]byte(`{"schema": 1, "results": [{"scenario": "hs-a", "verdict": "pass"}]}`))
	f.Add([]byte(`{"schema": 99, "results": []}`))
	f.Add([]byte(`{"schema": `))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := ReadJSON(bytes.NewReader(b))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteGrid(&out, []GridColumn{{"x", rep}}); err != nil {
			t.Fatal(err)
		}
	})
}
