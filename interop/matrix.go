package interop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/peers"
)

// Matrix configures a run of test cases over every server × client pair.
type Matrix struct {
	Servers, Clients []peers.Impl
	Tests            []*TestCase
	// LogDir is the log folder; the run goes to LogDir/<run>, as the established runner lays out its logs.
	LogDir string
	Seed   uint64
	Strict bool
	// Engine is the link engine (Runner.Engine).
	Engine string
	// Version is the runner's version, recorded in the extensions.
	Version string
	// Progress, if set, is called before (res nil) and after each cell.
	Progress func(done, total int, server, client string, tc *TestCase, res *CellResult)
}

// Result is result.json: the established runner's fields plus the
// "quiver" extensions.
type Result struct {
	Servers      []string            `json:"servers"`
	Clients      []string            `json:"clients"`
	LogDir       string              `json:"log_dir"`
	StartTime    int64               `json:"start_time"`
	EndTime      float64             `json:"end_time"`
	QUICVersion  string              `json:"quic_version"`
	URLs         map[string]string   `json:"urls"`
	Tests        map[string]TestDesc `json:"tests"`
	Results      [][]TestOutcome     `json:"results"`
	Measurements [][]MeasureOutcome  `json:"measurements"`
	Quiver       Extensions          `json:"quiver"`
}

// TestDesc names a test case in result.json.
type TestDesc struct {
	Name string `json:"name"`
	Desc string `json:"desc"`
}

// TestOutcome is one test case of one pair; Result is nil when not run.
type TestOutcome struct {
	Abbr   string  `json:"abbr"`
	Name   string  `json:"name"`
	Result *string `json:"result"`
}

// MeasureOutcome is one measurement of one pair.
type MeasureOutcome struct {
	Name    string  `json:"name"`
	Abbr    string  `json:"abbr"`
	Result  *string `json:"result"`
	Details string  `json:"details"`
}

// Extensions is the "quiver" key of result.json.
type Extensions struct {
	Format          int                      `json:"format"`
	Runner          map[string]string        `json:"runner"`
	Host            map[string]any           `json:"host"`
	Seed            uint64                   `json:"seed"`
	Strict          bool                     `json:"strict"`
	Implementations map[string]ImplRecord    `json:"implementations"`
	Cells           []map[string]*CellResult `json:"cells"`
	Baselines       map[string]any           `json:"baselines,omitempty"`
}

// ImplRecord is what the run records about an implementation.
type ImplRecord struct {
	Notes   string   `json:"notes,omitempty"`
	VNProbe *VNProbe `json:"vn_probe,omitempty"`
}

// Run runs the matrix, writing every cell's artifacts, result.json, the
// HTML matrix page and logs.json. It returns the result and the run folder.
func (m *Matrix) Run(ctx context.Context) (*Result, string, error) {
	start := time.Now()
	name := start.UTC().Format("2006-01-02T15:04")
	dir := filepath.Join(m.LogDir, name)
	for i := 2; ; i++ {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			break
		}
		name = fmt.Sprintf("%s-%d", start.UTC().Format("2006-01-02T15:04"), i)
		dir = filepath.Join(m.LogDir, name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	res := &Result{
		LogDir: name, StartTime: start.Unix(), QUICVersion: "0x1",
		URLs: map[string]string{}, Tests: map[string]TestDesc{},
		Quiver: Extensions{
			Format: 1, Runner: map[string]string{"version": m.Version}, Seed: m.Seed, Strict: m.Strict,
			Host: map[string]any{"engine": engineName(m.Engine), "go": runtime.Version(), "cpus": runtime.NumCPU(), "os": runtime.GOOS + "/" + runtime.GOARCH,
				"kernel": kernelRelease()},
			Implementations: map[string]ImplRecord{},
		},
	}
	for _, im := range m.Servers {
		res.Servers = append(res.Servers, im.Name)
		res.URLs[im.Name] = im.URL
		res.Quiver.Implementations[im.Name] = ImplRecord{Notes: im.Notes}
	}
	for _, im := range m.Clients {
		res.Clients = append(res.Clients, im.Name)
		res.URLs[im.Name] = im.URL
		res.Quiver.Implementations[im.Name] = ImplRecord{Notes: im.Notes}
	}
	for _, tc := range m.Tests {
		res.Tests[tc.Abbr] = TestDesc{Name: tc.Name, Desc: tc.Desc}
	}
	n := len(m.Servers) * len(m.Clients)
	res.Results = make([][]TestOutcome, n)
	res.Measurements = make([][]MeasureOutcome, n)
	res.Quiver.Cells = make([]map[string]*CellResult, n)
	for i := range n {
		res.Results[i], res.Measurements[i], res.Quiver.Cells[i] = []TestOutcome{}, []MeasureOutcome{}, map[string]*CellResult{}
	}
	runner := &Runner{Dir: dir, Seed: m.Seed, Strict: m.Strict, Engine: m.Engine}
	probed := map[string]bool{}
	total, done := n*len(m.Tests), 0
	for ci, client := range m.Clients {
		for si, server := range m.Servers {
			idx := ci*len(m.Servers) + si
			for _, tc := range m.Tests {
				if ctx.Err() != nil {
					break
				}
				if m.Progress != nil {
					m.Progress(done, total, server.Name, client.Name, tc, nil)
				}
				runner.Probe = !probed[server.Name]
				cr := runner.RunCell(ctx, server, client, tc)
				if cr.VNProbe != nil {
					probed[server.Name] = true
					rec := res.Quiver.Implementations[server.Name]
					rec.VNProbe = cr.VNProbe
					res.Quiver.Implementations[server.Name] = rec
				}
				done++
				r := cr.Result
				res.Quiver.Cells[idx][tc.Abbr] = cr
				if tc.Measurement {
					res.Measurements[idx] = append(res.Measurements[idx], MeasureOutcome{Name: tc.Name, Abbr: tc.Abbr, Result: &r, Details: cr.Details})
				} else {
					res.Results[idx] = append(res.Results[idx], TestOutcome{Abbr: tc.Abbr, Name: tc.Name, Result: &r})
				}
				if m.Progress != nil {
					m.Progress(done, total, server.Name, client.Name, tc, cr)
				}
				// Keep what has been run so far on disk, so an
				// interrupted run still leaves a readable result.
				res.EndTime = float64(time.Now().UnixNano()) / 1e9
				if err := res.write(dir); err != nil {
					return res, dir, err
				}
			}
		}
	}
	res.EndTime = float64(time.Now().UnixNano()) / 1e9
	if err := res.write(dir); err != nil {
		return res, dir, err
	}
	if err := writeLogsIndex(m.LogDir, name); err != nil {
		return res, dir, err
	}
	return res, dir, ctx.Err()
}

func (r *Result) write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return writeHTML(filepath.Join(dir, "index.html"), r)
}

// writeLogsIndex updates logs.json, the list of runs with the newest as
// "latest", as the established runner does.
func writeLogsIndex(logDir, run string) error {
	path := filepath.Join(logDir, "logs.json")
	var idx struct {
		Runs   []string `json:"runs"`
		Latest string   `json:"latest"`
	}
	if b, err := os.ReadFile(path); err == nil {
		json.Unmarshal(b, &idx)
	}
	idx.Runs = append(idx.Runs, run)
	idx.Latest = run
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Cell returns the extension record of a pair and test, or nil.
func (r *Result) Cell(server, client, abbr string) *CellResult {
	si, ci := -1, -1
	for i, s := range r.Servers {
		if s == server {
			si = i
		}
	}
	for i, c := range r.Clients {
		if c == client {
			ci = i
		}
	}
	if si < 0 || ci < 0 {
		return nil
	}
	return r.Quiver.Cells[ci*len(r.Servers)+si][abbr]
}

// engineName is the engine recorded for a run; each cell's link.json
// says which one it ran on.
func engineName(e string) string {
	if e == "" {
		return EngineAuto
	}
	return e
}
