package variants

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestTable: every variant names its RFC text, a role and a change, and
// the combined targets hold every variant of their role exactly once.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range All {
		if seen[v.Name] {
			t.Errorf("%s: listed twice", v.Name)
		}
		seen[v.Name] = true
		if !strings.HasPrefix(v.RFC, "RFC ") || len(v.Quote) < 20 {
			t.Errorf("%s: no permitting RFC text (%q, %q)", v.Name, v.RFC, v.Quote)
		}
		if !v.Server && !v.Client {
			t.Errorf("%s: runs in no role", v.Name)
		}
		if v.Edit == nil && v.Delay == 0 {
			t.Errorf("%s: changes nothing", v.Name)
		}
		if v.Config() == "" {
			t.Errorf("%s: no configuration text", v.Name)
		}
	}
	server, client := Combined()
	for _, c := range []struct {
		role    string
		targets []Target
		in      func(*Variant) bool
	}{{"server", server, func(v *Variant) bool { return v.Server }}, {"client", client, func(v *Variant) bool { return v.Client }}} {
		count := map[string]int{}
		for _, tg := range c.targets {
			delays := 0
			for _, v := range tg.Variants {
				count[v.Name]++
				if v.Delay > 0 {
					delays++
				}
			}
			if delays > 1 {
				t.Errorf("%s target %s combines %d delays", c.role, tg.Name(), delays)
			}
		}
		for _, v := range All {
			if want := map[bool]int{true: 1}[c.in(v)]; count[v.Name] != want {
				t.Errorf("%s: variant %s in %d combined targets, want %d", c.role, v.Name, count[v.Name], want)
			}
		}
	}
}

// TestCompare: only a pass of the default lost to fail, warn,
// inconclusive or error is a finding; an exception explains it only for
// its variant, scenario and verdicts.
func TestCompare(t *testing.T) {
	rep := func(vs map[string]conformance.Verdict) *conformance.Report {
		r := &conformance.Report{}
		for id, v := range vs {
			r.Results = append(r.Results, conformance.Result{Scenario: id, Verdict: v})
		}
		return r
	}
	def := rep(map[string]conformance.Verdict{"a": conformance.Pass, "b": conformance.Pass, "c": conformance.Fail,
		"fc-blocked-signalled": conformance.Pass, "e": conformance.Pass})
	nb, _ := Find("no-blocked")
	retry, _ := Find("retry")
	got := rep(map[string]conformance.Verdict{"a": conformance.Unsupported, "b": conformance.Inconclusive, "c": conformance.Fail,
		"fc-blocked-signalled": conformance.Warn, "e": conformance.Pass})
	fs := compare(conformance.ServerRole, def, got, Target{Variants: []*Variant{nb}})
	if len(fs) != 2 {
		t.Fatalf("findings %+v, want b and fc-blocked-signalled", fs)
	}
	for _, f := range fs {
		switch f.Scenario {
		case "b":
			if f.Expected != nil || !f.False() {
				t.Errorf("b: %+v, want a false verdict", f)
			}
		case "fc-blocked-signalled":
			if f.Expected == nil || f.False() {
				t.Errorf("fc-blocked-signalled with no-blocked: %+v, want expected", f)
			}
		default:
			t.Errorf("unexpected finding %+v", f)
		}
	}
	// The same warn on another variant is a false verdict.
	fs = compare(conformance.ServerRole, def, got, Target{Variants: []*Variant{retry}})
	for _, f := range fs {
		if f.Scenario == "fc-blocked-signalled" && !f.False() {
			t.Errorf("fc-blocked-signalled warn with retry explained by %+v", f.Expected)
		}
	}
	// A verdict that passes alone is no false verdict, nor one the
	// default does no better on alone, nor unsupported alone.
	for _, f := range []Finding{
		{Verdict: conformance.Fail, Alone: conformance.Pass},
		{Verdict: conformance.Warn, Alone: conformance.Warn, DefaultAlone: conformance.Warn},
		{Verdict: conformance.Inconclusive, Alone: conformance.Unsupported},
	} {
		if f.False() {
			t.Errorf("%+v counted as a false verdict", f)
		}
	}
	for _, f := range []Finding{
		{Verdict: conformance.Fail, Alone: conformance.Fail, DefaultAlone: conformance.Pass},
		{Verdict: conformance.Fail},
	} {
		if !f.False() {
			t.Errorf("%+v not counted as a false verdict", f)
		}
	}
}

// TestMatrix runs the combined matrix: the server suite against Quiver's
// server and the client suite against Quiver's client, the default and a
// few targets that together take every variant, and fails on any pass of
// the default that a variant loses without a listed reason. `quiver
// variants` runs every variant on its own.
func TestMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the matrix takes minutes")
	}
	server, client := Combined()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	m, err := Run(ctx, Options{Server: server, Client: client, Parallel: 8, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	m.WriteText(&sb)
	t.Logf("\n%s", sb.String())
	if os.Getenv("QUIVER_VARIANTS_REPORT") != "" {
		os.WriteFile(os.Getenv("QUIVER_VARIANTS_REPORT"), []byte(sb.String()), 0o644)
	}
	for _, f := range m.FalseVerdicts() {
		t.Errorf("%s %s on %s: %s where the default passes (alone: %s): %s", f.Role, f.Scenario, f.Target, f.Verdict, f.Alone, f.Sentence)
	}
}
