package variants

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quiver-quic/quiver/conformance"
	"github.com/quiver-quic/quiver/conformance/report"
)

// Options configure a run of the matrix.
type Options struct {
	// Server and Client are the targets of each role; the default target
	// runs first in each role that has any.
	Server, Client []Target
	// ServerScenarios and ClientScenarios select scenarios (IDs or globs;
	// empty: all of the role).
	ServerScenarios, ClientScenarios []string
	// Parallel is how many scenarios run at once in each suite run.
	Parallel int
	// Timeout is each scenario's deadline (the suite's default when 0).
	Timeout time.Duration
	// Log, when set, receives progress lines.
	Log func(format string, args ...any)
	// ReportDir, when set, receives each suite run's JSON report
	// (ROLE-TARGET.json).
	ReportDir string
	// ToolVersion is written into the reports (conformance.Options).
	ToolVersion string
}

// Column is one suite run of the matrix.
type Column struct {
	Role   conformance.Role
	Target Target
	Report *conformance.Report
}

// Finding is a scenario whose verdict on a variant is worse than on the
// default, where the default passed.
type Finding struct {
	Role     conformance.Role
	Scenario string
	Target   string
	Verdict  conformance.Verdict
	Sentence string
	// Alone is the verdict of the scenario run again alone against the
	// same target; a pass there means the first verdict came from load.
	Alone conformance.Verdict
	// DefaultAlone is the default's verdict on the scenario run alone
	// beside it, when Alone is still bad: a default that does no better
	// alone makes the difference the scenario's instability, not the
	// variant's.
	DefaultAlone conformance.Verdict
	// Expected, when set, is why the difference is right (or a known
	// tester bug fixed elsewhere).
	Expected *Exception
}

// False reports whether the finding is a false verdict of the suite: a
// confirmed regression from pass that no exception explains.
func (f Finding) False() bool {
	// Unsupported alone: the variant lacks what the scenario needs (a
	// zero-length connection ID has nothing to retire), which is no
	// judgement of the tester's.
	return f.Expected == nil && (f.Alone == "" || bad(f.Alone)) && (f.DefaultAlone == "" || f.DefaultAlone == conformance.Pass)
}

// Matrix is the outcome of a run.
type Matrix struct {
	Columns  []Column
	Findings []Finding
	Duration time.Duration
}

// bad verdicts are those a compliant variant must not get where the
// default passes.
func bad(v conformance.Verdict) bool {
	return v == conformance.Fail || v == conformance.Warn || v == conformance.Inconclusive || v == conformance.Errored
}

// Run runs the matrix: in each role, the suite against the default, then
// against every target, and compares.
func Run(ctx context.Context, opts Options) (*Matrix, error) {
	start := time.Now()
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	root, err := os.MkdirTemp("", "quiver-variants-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	if err := writeRoot(root); err != nil {
		return nil, err
	}
	suiteOpts := func(role conformance.Role) conformance.Options {
		o := conformance.Options{Parallel: opts.Parallel, Timeout: opts.Timeout, ToolVersion: opts.ToolVersion}
		if role == conformance.ServerRole {
			o.Scenarios = opts.ServerScenarios
		} else {
			o.Scenarios = opts.ClientScenarios
		}
		return o
	}
	m := &Matrix{}
	for _, role := range []conformance.Role{conformance.ServerRole, conformance.ClientRole} {
		targets := opts.Server
		if role == conformance.ClientRole {
			targets = opts.Client
		}
		if len(targets) == 0 {
			continue
		}
		run := func(t Target) (*conformance.Report, error) {
			t0 := time.Now()
			var rep *conformance.Report
			var err error
			if role == conformance.ServerRole {
				rep, err = runServerSuite(ctx, t, root, suiteOpts(role))
			} else {
				rep, err = conformance.RunClient(ctx, client(t), suiteOpts(role))
			}
			if err == nil {
				logf("%s %s: %s in %v", role, t.Name(), counts(rep), time.Since(t0).Round(time.Second))
				err = saveReport(opts.ReportDir, role, t, rep)
			}
			return rep, err
		}
		def, err := run(Target{})
		if err != nil {
			return nil, err
		}
		m.Columns = append(m.Columns, Column{Role: role, Report: def})
		for _, t := range targets {
			if role == conformance.ServerRole && !t.serves() || role == conformance.ClientRole && !t.clients() {
				continue
			}
			rep, err := run(t)
			if err != nil {
				return nil, err
			}
			m.Columns = append(m.Columns, Column{Role: role, Target: t, Report: rep})
			fs := compare(role, def, rep, t)
			if len(fs) > 0 {
				confirm(ctx, role, t, root, fs, opts.Timeout)
				for _, f := range fs {
					logf("  %s %s: %s (alone: %s, default alone: %s)%s", f.Scenario, t.Name(), f.Verdict, f.Alone, f.DefaultAlone, expectedNote(f))
				}
			}
			m.Findings = append(m.Findings, fs...)
		}
	}
	m.Duration = time.Since(start)
	return m, nil
}

// saveReport writes rep as JSON into dir, when dir is set.
func saveReport(dir string, role conformance.Role, t Target, rep *conformance.Report) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s.json", role, t.Name())))
	if err != nil {
		return err
	}
	if err := report.WriteJSON(f, rep); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func expectedNote(f Finding) string {
	if f.Expected == nil {
		return ""
	}
	return " expected: " + f.Expected.Reason
}

// compare lists the scenarios the default passed and the target did not.
func compare(role conformance.Role, def, got *conformance.Report, t Target) []Finding {
	pass := map[string]bool{}
	for _, r := range def.Results {
		if r.Verdict == conformance.Pass {
			pass[r.Scenario] = true
		}
	}
	var out []Finding
	for _, r := range got.Results {
		if !pass[r.Scenario] || !bad(r.Verdict) {
			continue
		}
		out = append(out, Finding{Role: role, Scenario: r.Scenario, Target: t.Name(), Verdict: r.Verdict, Sentence: r.Sentence,
			Expected: expected(r.Scenario, t, r.Verdict)})
	}
	return out
}

// confirm runs each finding's scenario again alone against the target: a
// verdict that does not reproduce came from running scenarios side by
// side on a loaded machine, not from the variant.
//
// A verdict that depends on timing can also fail alone on a machine busy
// with other work; what does not pass alone gets a second try, and only a
// verdict that comes back both times stands.
func confirm(ctx context.Context, role conformance.Role, t Target, root string, fs []Finding, timeout time.Duration) {
	// Expected differences need no confirming.
	for try := 0; try < 2; try++ {
		var ids []string
		for _, f := range fs {
			if f.Expected == nil && (f.Alone == "" || bad(f.Alone)) {
				ids = append(ids, f.Scenario)
			}
		}
		if len(ids) == 0 {
			return
		}
		var rep *conformance.Report
		var err error
		if role == conformance.ServerRole {
			rep, err = rerunServer(ctx, t, root, ids, timeout)
		} else {
			rep, err = conformance.RunClient(ctx, client(t), conformance.Options{Scenarios: ids, Parallel: 1, Timeout: timeout})
		}
		if err != nil {
			return
		}
		alone := map[string]conformance.Verdict{}
		for _, r := range rep.Results {
			alone[r.Scenario] = r.Verdict
		}
		for i := range fs {
			if v, ok := alone[fs[i].Scenario]; ok {
				fs[i].Alone = v
			}
		}
	}
	// What is still bad alone: does the default pass it alone too?
	var ids []string
	for _, f := range fs {
		if f.Expected == nil && bad(f.Alone) {
			ids = append(ids, f.Scenario)
		}
	}
	if len(ids) == 0 {
		return
	}
	var rep *conformance.Report
	var err error
	if role == conformance.ServerRole {
		rep, err = rerunServer(ctx, Target{}, root, ids, timeout)
	} else {
		rep, err = conformance.RunClient(ctx, client(Target{}), conformance.Options{Scenarios: ids, Parallel: 1, Timeout: timeout})
	}
	if err != nil {
		return
	}
	for _, r := range rep.Results {
		for i := range fs {
			if fs[i].Scenario == r.Scenario && fs[i].Expected == nil && bad(fs[i].Alone) {
				fs[i].DefaultAlone = r.Verdict
			}
		}
	}
}

func counts(rep *conformance.Report) string {
	c := rep.Counts()
	var parts []string
	for _, v := range []conformance.Verdict{conformance.Pass, conformance.Fail, conformance.Warn, conformance.Inconclusive,
		conformance.Unsupported, conformance.Errored, conformance.Observed} {
		if c[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[v], v))
		}
	}
	return strings.Join(parts, ", ")
}

// FalseVerdicts returns the findings that are false verdicts of the
// suite.
func (m *Matrix) FalseVerdicts() []Finding {
	var out []Finding
	for _, f := range m.Findings {
		if f.False() {
			out = append(out, f)
		}
	}
	return out
}

// WriteText writes the matrix's columns and findings.
func (m *Matrix) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "role\ttarget\tverdicts\n")
	for _, c := range m.Columns {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Role, c.Target.Name(), counts(c.Report))
	}
	tw.Flush()
	fs := slices.Clone(m.Findings)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Scenario < fs[j].Scenario })
	fmt.Fprintf(w, "\nDefault pass, variant not (%d):\n", len(fs))
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\ttarget\tverdict\talone\tjudgement\n")
	for _, f := range fs {
		j := "FALSE VERDICT: " + trim(f.Sentence, 140)
		switch {
		case f.Expected != nil:
			j = f.Expected.Kind + ": " + f.Expected.Reason
		case !f.False() && bad(f.Alone):
			j = "default " + string(f.DefaultAlone) + " alone too (unstable scenario): " + trim(f.Sentence, 100)
		case !f.False():
			j = string(f.Alone) + " alone (load): " + trim(f.Sentence, 100)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Scenario, f.Target, f.Verdict, f.Alone, j)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d false verdict(s) in %v\n", len(m.FalseVerdicts()), m.Duration.Round(time.Second))
	return nil
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// WriteMarkdown writes the variant table: each variant, its
// configuration, the RFC text that permits it, and what the suite said in
// each role (the differences from the default, judged).
func (m *Matrix) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "| variant | configuration | permitted by | server suite | client suite |\n|---|---|---|---|---|\n")
	ran := map[conformance.Role]map[string]bool{conformance.ServerRole: {}, conformance.ClientRole: {}}
	for _, c := range m.Columns {
		for _, v := range c.Target.Variants {
			ran[c.Role][v.Name] = true
		}
	}
	for _, v := range All {
		quote := v.RFC + ": \"" + v.Quote + "\""
		if v.Should != "" {
			quote += " (departs from " + v.Should + ")"
		}
		cell := func(role conformance.Role) string {
			if !ran[role][v.Name] {
				if role == conformance.ServerRole && v.NotCompliantServer {
					return "not compliant as a server of many clients (RFC 9000 §5.1: \"An endpoint MUST NOT use the same IP address and port " +
						"for multiple concurrent connections with zero-length connection IDs\"), not run"
				}
				return "not run"
			}
			var parts []string
			nFalse, nLoad := 0, 0
			for _, f := range m.Findings {
				if f.Role != role || !strings.Contains("+"+f.Target+"+", "+"+v.Name+"+") {
					continue
				}
				switch {
				case f.Expected != nil:
					parts = append(parts, fmt.Sprintf("`%s` %s (%s)", f.Scenario, f.Verdict, f.Expected.Kind))
				case !f.False():
					nLoad++
				default:
					nFalse++
					parts = append(parts, fmt.Sprintf("**`%s` %s: false verdict**", f.Scenario, f.Verdict))
				}
			}
			head := "every pass kept"
			if nFalse > 0 {
				head = fmt.Sprintf("%d false verdict(s)", nFalse)
			}
			if nLoad > 0 {
				head += fmt.Sprintf("; %d difference(s) that do not hold alone (load, or the default no better alone)", nLoad)
			}
			if len(parts) > 0 {
				head += ": " + strings.Join(parts, "; ")
			}
			return head
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", v.Name, v.Config(), strings.ReplaceAll(quote, "|", "\\|"),
			cell(conformance.ServerRole), cell(conformance.ClientRole))
	}
	return nil
}
