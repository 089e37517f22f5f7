// Package dataset keeps the observatory's history in the repository: the
// results of version sweeps as compact files (gzip-compressed JSON, one
// per implementation) that the store imports, so that a fresh clone's
// dashboard shows how implementations changed, release by release.
//
// A dataset holds, per run, each scenario's verdict, sentence and the facts
// it recorded, not its packet events: that is what change detection and
// the dashboard read. Import is idempotent: each run is a keyed campaign
// ("dataset/NAME/VERSION"), imported once.
package dataset

import (
	"bytes"
	"compress/gzip"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/observatory/facts"
	"github.com/quiver-quic/quiver/observatory/results"
	"github.com/quiver-quic/quiver/observatory/store"
)

// Schema names the format of a dataset file.
const Schema = "quiver-dataset/1"

// Dataset is one target's history.
type Dataset struct {
	Schema string `json:"schema"`
	// Name is the target the runs are stored under ("quic-go releases").
	Name string `json:"name"`
	// Command and Commit say how the data was measured and with which
	// Quiver; Measured when.
	Command  string    `json:"command"`
	Commit   string    `json:"commit"`
	Measured time.Time `json:"measured"`
	// Sources are the earlier measurements merged into the dataset (track
	// export --merge), each with its command and commit; a result names
	// the one that measured it (Result.Source).
	Sources []Source `json:"sources,omitempty"`
	// MixedCommits says the results were measured at more than one Quiver
	// commit and merged anyway (track export --merge --mixed-commits): a
	// change along such a series may be the suite's, not the release's.
	MixedCommits bool  `json:"mixed_commits,omitempty"`
	Runs         []Run `json:"runs"`
}

// Source is one measurement: the command that ran and the Quiver commit
// that ran it.
type Source struct {
	Command string `json:"command"`
	Commit  string `json:"commit"`
}

// Run is one run of the history (a release, in a sweep).
type Run struct {
	Campaign       string    `json:"campaign"`
	ToolVersion    string    `json:"tool_version"`
	Implementation string    `json:"implementation"`
	Version        string    `json:"version"`
	Started        time.Time `json:"started"`
	Finished       time.Time `json:"finished,omitzero"`
	Results        []Result  `json:"results"`
}

// Result is one scenario's outcome, as much of the suite's result as the
// dashboard and change detection read.
type Result struct {
	Scenario string          `json:"scenario"`
	Title    string          `json:"title,omitempty"`
	Verdict  string          `json:"verdict"`
	Sentence string          `json:"sentence"`
	Facts    json.RawMessage `json:"facts,omitempty"` // the suite's facts: [{"key", "value"}]
	Error    string          `json:"error,omitempty"`
	// Source is 1 + the index in Dataset.Sources of the measurement that
	// made this result; 0 is the dataset's own Command and Commit.
	Source int `json:"source,omitempty"`
}

// SourceOf returns the measurement that made a result of ds.
func (ds *Dataset) SourceOf(res Result) Source {
	if res.Source > 0 && res.Source <= len(ds.Sources) {
		return ds.Sources[res.Source-1]
	}
	return Source{Command: ds.Command, Commit: ds.Commit}
}

// SameCommit tells whether two commit names are one commit: equal, or one
// an abbreviation of the other ("7b3f39a" and its 40-character hash). An
// unknown commit ("") is the same as none.
func SameCommit(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}

// Commits returns the distinct commits that measured ds's results, in the
// order they are first met (an abbreviation counts as its full hash).
// Each measurement of an unknown commit ("") counts as one more.
func (ds *Dataset) Commits() []string {
	var out []string
	seen := map[int]bool{}
	for _, r := range ds.Runs {
		for _, x := range r.Results {
			if seen[x.Source] {
				continue
			}
			seen[x.Source] = true
			c := ds.SourceOf(x).Commit
			if i := slices.IndexFunc(out, func(o string) bool { return SameCommit(o, c) }); i >= 0 {
				if len(c) > len(out[i]) {
					out[i] = c
				}
				continue
			}
			out = append(out, c)
		}
	}
	return out
}

// ErrMixedCommits is Merge's refusal to put results measured at different
// Quiver commits into one series.
var ErrMixedCommits = errors.New("results measured at different Quiver commits")

// Merge adds the runs of add (a newer measurement of the same target) to
// old and returns the merged dataset: its Command and Commit are add's,
// and old's measurements become Sources that its results keep naming. A
// release in both keeps old's results of the scenarios add did not
// measure and takes add's for the others; releases stay in release order.
//
// A series is only comparable along itself when one version of the suite
// judged every release: if the merged results would come from more than
// one commit, Merge refuses (ErrMixedCommits) unless mixedCommits is set,
// and then the dataset records it (MixedCommits).
func Merge(old, add *Dataset, mixedCommits bool) (*Dataset, error) {
	if old.Name != add.Name {
		return nil, fmt.Errorf("dataset %q cannot merge into %q", add.Name, old.Name)
	}
	out := &Dataset{Schema: Schema, Name: add.Name, Command: add.Command, Commit: add.Commit, Measured: add.Measured}
	if old.Measured.After(out.Measured) {
		out.Measured = old.Measured
	}
	// index finds or adds a measurement; 0 is add's own.
	index := func(src Source) int {
		if src == (Source{Command: add.Command, Commit: add.Commit}) {
			return 0
		}
		for i, s := range out.Sources {
			if s == src {
				return i + 1
			}
		}
		out.Sources = append(out.Sources, src)
		return len(out.Sources)
	}
	byVersion := map[string]int{}
	for _, from := range []*Dataset{old, add} {
		for _, r := range from.Runs {
			res := make([]Result, len(r.Results))
			for i, x := range r.Results {
				x.Source = index(from.SourceOf(x))
				res[i] = x
			}
			i, ok := byVersion[r.Version]
			if !ok || r.Version == "" {
				r.Results = res
				byVersion[r.Version] = len(out.Runs)
				out.Runs = append(out.Runs, r)
				continue
			}
			m := &out.Runs[i]
			for _, x := range res {
				if j := slices.IndexFunc(m.Results, func(y Result) bool { return y.Scenario == x.Scenario }); j >= 0 {
					m.Results[j] = x
				} else {
					m.Results = append(m.Results, x)
				}
			}
			m.ToolVersion = r.ToolVersion
			if r.Finished.After(m.Finished) {
				m.Finished = r.Finished
			}
		}
	}
	if !slices.ContainsFunc(out.Runs, func(r Run) bool { return !results.IsVersion(r.Version) }) {
		slices.SortStableFunc(out.Runs, func(a, b Run) int { return results.CompareVersions(a.Version, b.Version) })
	}
	// A measurement whose every result was measured again is dropped.
	used := make([]bool, len(out.Sources)+1)
	for _, r := range out.Runs {
		for _, x := range r.Results {
			used[x.Source] = true
		}
	}
	renum := make([]int, len(out.Sources)+1)
	var kept []Source
	for i, src := range out.Sources {
		if used[i+1] {
			kept = append(kept, src)
			renum[i+1] = len(kept)
		}
	}
	out.Sources = kept
	for ri := range out.Runs {
		for xi := range out.Runs[ri].Results {
			out.Runs[ri].Results[xi].Source = renum[out.Runs[ri].Results[xi].Source]
		}
	}
	if cs := out.Commits(); len(cs) > 1 {
		if !mixedCommits {
			return nil, fmt.Errorf("%w: %q would hold results of %s: sweep the rest again at one commit, or merge with --mixed-commits (the dataset then says so)",
				ErrMixedCommits, out.Name, commitList(cs))
		}
		out.MixedCommits = true
	}
	return out, nil
}

// commitList names commits for a message ("" is an unknown one).
func commitList(cs []string) string {
	q := make([]string, len(cs))
	for i, c := range cs {
		if c == "" {
			c = "an unknown commit"
		}
		q[i] = c
	}
	return strings.Join(q, ", ")
}

// Export reads target's runs from st, in history order. A run that did
// not finish (a sweep stopped in the middle of a release) is left out:
// its missing scenarios would read as changes.
func Export(ctx context.Context, st store.Store, target string) (*Dataset, error) {
	cells, err := st.History(ctx, target, "")
	if err != nil {
		return nil, err
	}
	if len(cells) == 0 {
		return nil, fmt.Errorf("no results for target %q", target)
	}
	ds := &Dataset{Schema: Schema, Name: target}
	byRun := map[int64]int{}
	unfinished := map[int64]bool{}
	for _, c := range cells {
		if unfinished[c.RunID] {
			continue
		}
		i, ok := byRun[c.RunID]
		if !ok {
			run, err := st.Run(ctx, c.RunID)
			if err != nil {
				return nil, err
			}
			if run.Finished.IsZero() {
				unfinished[c.RunID] = true
				continue
			}
			i = len(ds.Runs)
			byRun[c.RunID] = i
			ds.Runs = append(ds.Runs, Run{Campaign: run.Campaign, ToolVersion: run.ToolVersion, Implementation: c.Target.Implementation,
				Version: c.Target.Version, Started: run.Started, Finished: run.Finished})
		}
		rec, err := st.Record(ctx, c.ID)
		if err != nil {
			return nil, err
		}
		var ev struct {
			Title string          `json:"title"`
			Facts json.RawMessage `json:"facts"`
			Error string          `json:"error"`
		}
		if err := json.Unmarshal(rec.Evidence, &ev); err != nil {
			return nil, fmt.Errorf("result %d: %w", rec.ID, err)
		}
		if string(ev.Facts) == "null" {
			ev.Facts = nil
		}
		ds.Runs[i].Results = append(ds.Runs[i].Results, Result{Scenario: rec.Scenario, Title: ev.Title, Verdict: rec.Verdict,
			Sentence: rec.Sentence, Facts: ev.Facts, Error: ev.Error})
	}
	// Releases swept later (unlisted ones, asked for by name) go in
	// release order, which is the order history follows once imported;
	// a release swept twice (more scenarios the second time) is one run,
	// its first result of each scenario kept.
	if !slices.ContainsFunc(ds.Runs, func(r Run) bool { return !results.IsVersion(r.Version) }) {
		slices.SortStableFunc(ds.Runs, func(a, b Run) int { return results.CompareVersions(a.Version, b.Version) })
		var merged []Run
		for _, r := range ds.Runs {
			if n := len(merged); n > 0 && merged[n-1].Version == r.Version {
				m := &merged[n-1]
				for _, res := range r.Results {
					if !slices.ContainsFunc(m.Results, func(x Result) bool { return x.Scenario == res.Scenario }) {
						m.Results = append(m.Results, res)
					}
				}
				if r.Finished.After(m.Finished) {
					m.Finished = r.Finished
				}
				continue
			}
			merged = append(merged, r)
		}
		ds.Runs = merged
	}
	return ds, nil
}

// Write writes ds gzip-compressed.
func Write(w io.Writer, ds *Dataset) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	e := json.NewEncoder(zw)
	if err := e.Encode(ds); err != nil {
		return err
	}
	return zw.Close()
}

// maxSize bounds a dataset once decompressed.
const maxSize = 256 << 20

// Read reads a gzip-compressed dataset.
func Read(r io.Reader) (*Dataset, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(zr, maxSize+1))
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	if len(b) > maxSize {
		return nil, fmt.Errorf("dataset: over %d bytes", maxSize)
	}
	return Decode(b)
}

// Decode parses a dataset's JSON and checks it.
func Decode(b []byte) (*Dataset, error) {
	var ds Dataset
	if err := json.Unmarshal(b, &ds); err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	if ds.Schema != Schema {
		return nil, fmt.Errorf("dataset: schema %q, want %q", ds.Schema, Schema)
	}
	if ds.Name == "" {
		return nil, errors.New("dataset: no target name")
	}
	for i, r := range ds.Runs {
		if r.Version == "" && r.Campaign == "" {
			return nil, fmt.Errorf("dataset %s: run %d has neither a version nor a campaign", ds.Name, i)
		}
		for _, res := range r.Results {
			if res.Scenario == "" || res.Verdict == "" {
				return nil, fmt.Errorf("dataset %s: run %d has a result without a scenario or verdict", ds.Name, i)
			}
			if res.Source < 0 || res.Source > len(ds.Sources) {
				return nil, fmt.Errorf("dataset %s: %s: source %d of %d", ds.Name, res.Scenario, res.Source, len(ds.Sources))
			}
			if len(res.Facts) > 0 && !json.Valid(res.Facts) {
				return nil, fmt.Errorf("dataset %s: %s: facts are not JSON", ds.Name, res.Scenario)
			}
		}
	}
	// A series measured at several commits says so, or its changes
	// would read as the releases' when they may be the suite's.
	if cs := ds.Commits(); len(cs) > 1 && !ds.MixedCommits {
		return nil, fmt.Errorf("dataset %s: results measured at %s without mixed_commits", ds.Name, commitList(cs))
	}
	return &ds, nil
}

// key is a run's campaign key.
func (ds *Dataset) key(i int) string {
	r := ds.Runs[i]
	if r.Version != "" {
		return "dataset/" + ds.Name + "/" + r.Version
	}
	return fmt.Sprintf("dataset/%s/%d", ds.Name, i)
}

// Import stores the dataset's runs in st, in order; a run imported before
// (its key is claimed and its run finished) is skipped. It returns how
// many runs it imported.
func Import(ctx context.Context, st store.Store, ds *Dataset) (int, error) {
	n := 0
	for i, r := range ds.Runs {
		run, _, err := st.ClaimCampaign(ctx, ds.key(i), store.NewRun{Campaign: r.Campaign, ToolVersion: r.ToolVersion, Started: r.Started})
		if err != nil {
			return n, err
		}
		if !run.Finished.IsZero() {
			continue
		}
		for _, res := range r.Results {
			ev, err := json.Marshal(struct {
				Scenario string          `json:"scenario"`
				Title    string          `json:"title,omitempty"`
				Verdict  string          `json:"verdict"`
				Sentence string          `json:"sentence"`
				Facts    json.RawMessage `json:"facts,omitempty"`
				Error    string          `json:"error,omitempty"`
				Started  time.Time       `json:"started"`
			}{res.Scenario, res.Title, res.Verdict, res.Sentence, res.Facts, res.Error, r.Started})
			if err != nil {
				return n, err
			}
			fs, err := facts.FromEvidence(ev)
			if err != nil {
				return n, fmt.Errorf("%s %s: %w", ds.Name, res.Scenario, err)
			}
			_, err = st.AddResult(ctx, store.Record{
				RunID: run.ID, ToolVersion: r.ToolVersion, Scenario: res.Scenario, Verdict: res.Verdict, Sentence: res.Sentence,
				Target:   store.Target{Name: ds.Name, Implementation: r.Implementation, Version: r.Version},
				Evidence: ev, Facts: fs, Time: r.Started,
			})
			if err != nil && !errors.Is(err, store.ErrDuplicate) {
				return n, err
			}
		}
		fin := r.Finished
		if fin.IsZero() {
			fin = r.Started
		}
		if err := st.FinishRun(ctx, run.ID, fin); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

//go:embed data/*.json.gz
var embedded embed.FS

// Embedded returns the datasets kept in the repository.
func Embedded() ([]*Dataset, error) {
	entries, err := fs.ReadDir(embedded, "data")
	if err != nil {
		return nil, err
	}
	var out []*Dataset
	for _, e := range entries {
		if path.Ext(e.Name()) != ".gz" {
			continue
		}
		b, err := fs.ReadFile(embedded, path.Join("data", e.Name()))
		if err != nil {
			return nil, err
		}
		ds, err := Read(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		out = append(out, ds)
	}
	return out, nil
}

// ImportEmbedded imports the repository's datasets into st (those already
// there are skipped) and returns how many runs it imported.
func ImportEmbedded(ctx context.Context, st store.Store) (int, error) {
	dss, err := Embedded()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ds := range dss {
		k, err := Import(ctx, st, ds)
		n += k
		if err != nil {
			return n, fmt.Errorf("dataset %s: %w", ds.Name, err)
		}
	}
	return n, nil
}
