package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Errors a Store returns.
var (
	// ErrNotFound means no run or result has the id asked for.
	ErrNotFound = errors.New("not found")
	// ErrDuplicate means the run already holds a result for that target and
	// scenario. Result rows are immutable, so a retried job gets this error
	// instead of a second row.
	ErrDuplicate = errors.New("result already recorded for this run, target and scenario")
)

// Target identifies what a result was measured on. Name is the identity
// that history follows; the implementation and version may change from run
// to run (a target upgraded in place, or a version sweep).
type Target struct {
	Name           string `json:"name"`
	Address        string `json:"address,omitempty"`
	Implementation string `json:"implementation,omitempty"`
	Version        string `json:"version,omitempty"`
}

// NewRun is what CreateRun needs to start a run.
type NewRun struct {
	Campaign    string // a free label, e.g. "demo" or "sweep quic-go"
	ToolVersion string
	Started     time.Time
}

// Run is one execution of a campaign. Runs are numbered in the order they
// were created, and history follows that order.
type Run struct {
	ID          int64     `json:"id"`
	Campaign    string    `json:"campaign"`
	ToolVersion string    `json:"tool_version"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished,omitzero"` // zero while the run goes on (or if it died)
	Results     int       `json:"results"`           // rows recorded so far
}

// Artifact is a file kept for a result, named relative to the artifacts
// directory. Kind is "pcapng", "keylog" or "qlog".
type Artifact struct {
	Kind string `json:"kind"`
	Path string `json:"path"`
}

// Record is one immutable result row. The store knows nothing of the
// conformance suite: the verdict is its string, the evidence opaque JSON.
type Record struct {
	ID          int64  `json:"id"`
	RunID       int64  `json:"run_id"`
	ToolVersion string `json:"tool_version"`
	Target      Target `json:"target"`
	Scenario    string `json:"scenario"`
	Verdict     string `json:"verdict"`
	Sentence    string `json:"sentence"`
	// Evidence is the whole conformance.Result as JSON: checks, packet
	// events, facts, requirement quotes.
	Evidence  json.RawMessage `json:"evidence"`
	Artifacts []Artifact      `json:"artifacts,omitempty"`
	Time      time.Time       `json:"time"`
	// Facts are the typed facts of the result, stored beside it with
	// AddResult (Record and Results do not read them back: FactCells does).
	Facts []Fact `json:"facts,omitempty"`
}

// Cell is a result row without its evidence: what grids, histories, diffs
// and change detection need.
type Cell struct {
	ID       int64     `json:"id"`
	RunID    int64     `json:"run_id"`
	Target   Target    `json:"target"`
	Scenario string    `json:"scenario"`
	Verdict  string    `json:"verdict"`
	Sentence string    `json:"sentence"`
	Time     time.Time `json:"time"`
}

// TargetInfo summarises a target as last seen.
type TargetInfo struct {
	Target   Target    `json:"target"` // address, implementation and version of its latest result
	Results  int       `json:"results"`
	Runs     int       `json:"runs"`
	LastSeen time.Time `json:"last_seen"`
}

// BenchRun is one recorded benchmark run (quiver bench goodput,
// handshakes, sweep, ackfreq or rpc). The store knows nothing of the
// bench: Summary is what the dashboard shows, Result the bench's own JSON
// kept whole.
type BenchRun struct {
	ID   int64  `json:"id"`
	Kind string `json:"kind"` // e.g. goodput, sweep-rcvbuf, ackfreq, rpc
	// Command is the command line that made the run.
	Command     string     `json:"command"`
	ToolVersion string     `json:"tool_version"`
	Host        string     `json:"host"` // one line: CPU, cores, kernel, Go
	Started     time.Time  `json:"started"`
	Recorded    time.Time  `json:"recorded"`
	Summary     []BenchRow `json:"summary"`
	// Result is the bench's whole JSON; BenchRuns leaves it empty.
	Result json.RawMessage `json:"result,omitempty"`
}

// BenchRow is one line of a benchmark run's summary: a metric of one
// subject (an implementation pair, an RPC transport) in one configuration.
type BenchRow struct {
	Config  string  `json:"config,omitempty"`
	Subject string  `json:"subject"`
	Metric  string  `json:"metric"` // what Median measures, with its unit: "goodput Mbit/s"
	Median  float64 `json:"median"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Runs    int     `json:"runs"`
	Failed  int     `json:"failed,omitempty"`
	// CPU is a second metric when the bench has one (CPU s/GB, both
	// ends), with its unit in CPUMetric.
	CPU       float64 `json:"cpu,omitempty"`
	CPUMetric string  `json:"cpu_metric,omitempty"`
	// Note is a short remark: a ratio against a baseline, a reduction.
	Note string `json:"note,omitempty"`
}

// Fact types: how Value is to be read.
const (
	FactInt    = "int"    // a decimal integer
	FactFloat  = "float"  // a decimal number
	FactBool   = "bool"   // true or false
	FactString = "string" // text
	FactList   = "list"   // a JSON array, compact
	FactFlag   = "flag"   // present (a transport parameter without a value)
)

// Fact is one typed fact a result recorded: what the scenario saw, as a
// value that can be followed from release to release.
type Fact struct {
	// Key names the fact, e.g. "tp.max_datagram_frame_size".
	Key string `json:"key"`
	// Group, when set, is the fact the key was flattened from ("tp" for
	// every transport parameter): a key missing from a result that has
	// other facts of its group is absent, not unobserved.
	Group string `json:"group,omitempty"`
	Type  string `json:"type"`
	Value string `json:"value"`
	// Unit is what an int or float counts: "bytes", "ms", "us",
	// "packets"; empty when it has none.
	Unit string `json:"unit,omitempty"`
}

// FactCell is a fact with the result it belongs to.
type FactCell struct {
	ResultID int64     `json:"result_id"`
	RunID    int64     `json:"run_id"`
	Target   Target    `json:"target"`
	Scenario string    `json:"scenario"`
	Verdict  string    `json:"verdict"`
	Time     time.Time `json:"time"`
	Fact
}

// FactFilter selects facts; empty fields match everything.
type FactFilter struct {
	RunID    int64
	Target   string
	Scenario string
	Key      string
}

// Filter selects cells; empty fields match everything.
type Filter struct {
	RunID    int64
	Target   string
	Scenario string
}

// Store is the observatory's storage. Cells and records come back in
// history order: by run, then by insertion within a run.
type Store interface {
	// CreateRun starts a run and returns it with its id.
	CreateRun(ctx context.Context, r NewRun) (Run, error)
	// FinishRun records when a run ended.
	FinishRun(ctx context.Context, id int64, finished time.Time) error
	// AddResult adds an immutable row and returns its id; ErrDuplicate if
	// the run already holds that target × scenario.
	AddResult(ctx context.Context, r Record) (int64, error)

	// Run returns one run; ErrNotFound if there is none with that id.
	Run(ctx context.Context, id int64) (Run, error)
	// ListRuns returns every run, newest first.
	ListRuns(ctx context.Context) ([]Run, error)
	// Results returns the full rows of a run.
	Results(ctx context.Context, runID int64) ([]Record, error)
	// Record returns one full row; ErrNotFound if there is none.
	Record(ctx context.Context, id int64) (Record, error)
	// Cells returns the rows that match f, without evidence.
	Cells(ctx context.Context, f Filter) ([]Cell, error)
	// History returns a target's results for one scenario (or all when
	// scenario is empty), oldest first.
	History(ctx context.Context, target, scenario string) ([]Cell, error)
	// Targets lists every target that has results, by name.
	Targets(ctx context.Context) ([]TargetInfo, error)
	// LatestGrid returns the latest result of each target × scenario,
	// ordered by target then scenario.
	LatestGrid(ctx context.Context) ([]Cell, error)

	// AddFacts adds facts to a stored result (facts derived later from
	// its evidence); facts it already holds are left as they are.
	AddFacts(ctx context.Context, resultID int64, facts []Fact) error
	// FactCells returns the facts that match f, in history order (by run,
	// then result, then key).
	FactCells(ctx context.Context, f FactFilter) ([]FactCell, error)
	// ResultsWithoutFacts returns up to limit full rows with an id above
	// after that hold no fact, in id order: what a backfill reads.
	ResultsWithoutFacts(ctx context.Context, after int64, limit int) ([]Record, error)

	// ClaimCampaign returns the run of the campaign started under key,
	// creating it from r when there is none (created is then true). A
	// campaign's key gets one run, ever: a retried or resumed campaign
	// finds its run, finished or not.
	ClaimCampaign(ctx context.Context, key string, r NewRun) (run Run, created bool, err error)
	// CampaignKeys lists the keys whose prefix is prefix, with their runs.
	CampaignKeys(ctx context.Context, prefix string) (map[string]Run, error)

	// AddBenchRun records a benchmark run and returns its id;
	// ErrDuplicate if a run of the same kind, start time and command is
	// already recorded.
	AddBenchRun(ctx context.Context, b BenchRun) (int64, error)
	// BenchRuns returns the latest benchmark runs, newest first, at most
	// limit of them (all when limit <= 0), without their whole JSON.
	BenchRuns(ctx context.Context, limit int) ([]BenchRun, error)
	// BenchRun returns one benchmark run with its whole JSON; ErrNotFound
	// if there is none with that id.
	BenchRun(ctx context.Context, id int64) (BenchRun, error)

	// SchemaVersion is the highest migration applied.
	SchemaVersion(ctx context.Context) (int, error)
	Close() error
}

// Open opens (creating and migrating as needed) the store named by dsn: a
// PostgreSQL URL (postgres://… or postgresql://…) or the name of a SQLite
// file.
func Open(ctx context.Context, dsn string) (Store, error) {
	if IsPostgres(dsn) {
		return OpenPostgres(ctx, dsn)
	}
	return OpenSQLite(ctx, dsn)
}

// IsPostgres reports whether dsn names a PostgreSQL database rather than a
// SQLite file.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}
