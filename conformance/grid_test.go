package conformance

import (
	"bytes"
	"strings"
	"testing"
)

func TestGrid(t *testing.T) {
	a := &Report{Schema: SchemaVersion, Results: []Result{
		{Scenario: "hs-b", Role: ServerRole, Verdict: Pass},
		{Scenario: "cli-a", Role: ClientRole, Verdict: Fail},
		{Scenario: "hs-a", Role: ServerRole, Verdict: Warn},
	}}
	b := &Report{Schema: SchemaVersion, Results: []Result{
		{Scenario: "hs-a", Role: ServerRole, Verdict: Unsupported},
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

func TestReadJSONRefusesOtherSchema(t *testing.T) {
	_, err := ReadJSON(strings.NewReader(`{"schema": 99, "results": []}`))
	if err == nil || !strings.Contains(err.Error(), "schema 99") {
		t.Errorf("err = %v, want a schema error", err)
	}
	if _, err := ReadJSON(strings.NewReader(`{"schema": `)); err == nil {
		t.Error("truncated report accepted")
	}
}
