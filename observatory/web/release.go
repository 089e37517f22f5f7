package web

import (
	"net/http"
	"slices"

	"github.com/quiver-quic/quiver/observatory/facts"
	"github.com/quiver-quic/quiver/observatory/results"
	"github.com/quiver-quic/quiver/observatory/store"
)

// releaseData is the "what changed in release X" page.
type releaseData struct {
	Impl, Version  string
	Prev, Next     string // the releases either side, as measured
	Tally          string // verdicts of the release's results
	Changes        []results.Change
	FactChanges    []facts.Change
	Targets        []string // the targets that measured this release
	MeasuredBefore string   // the release the changes are counted from
}

// versionsOf lists the versions of impl measured in cells, in release
// order when they are all semantic versions.
func versionsOf(cells []store.Cell, impl string) []string {
	var vs []string
	for _, c := range cells {
		if c.Target.Implementation == impl && c.Target.Version != "" && !slices.Contains(vs, c.Target.Version) {
			vs = append(vs, c.Target.Version)
		}
	}
	if !slices.ContainsFunc(vs, func(v string) bool { return !results.IsVersion(v) }) {
		slices.SortFunc(vs, results.CompareVersions)
	}
	return vs
}

func (a *App) release(r *http.Request) (page, error) {
	impl, version := r.URL.Query().Get("impl"), r.URL.Query().Get("version")
	if impl == "" || version == "" {
		return page{}, badRequest("which release? /release?impl=quic-go&version=v0.41.0")
	}
	cells, err := a.store.Cells(r.Context(), store.Filter{})
	if err != nil {
		return page{}, err
	}
	vs := versionsOf(cells, impl)
	i := slices.Index(vs, version)
	if i < 0 {
		return page{}, notFound("no results for %s %s", impl, version)
	}
	d := releaseData{Impl: impl, Version: version}
	if i > 0 {
		d.Prev = vs[i-1]
	}
	if i+1 < len(vs) {
		d.Next = vs[i+1]
	}
	counts := map[string]int{}
	var targets []string
	for _, c := range cells {
		if c.Target.Implementation == impl && c.Target.Version == version {
			counts[c.Verdict]++
			if !slices.Contains(targets, c.Target.Name) {
				targets = append(targets, c.Target.Name)
			}
		}
	}
	d.Tally, d.Targets = results.Tally(counts), targets
	fcells, err := a.store.FactCells(r.Context(), store.FactFilter{})
	if err != nil {
		return page{}, err
	}
	for _, c := range results.DetectChanges(cells, a.FlapWindow) {
		if c.Kind != results.Flapping && c.To.Target.Implementation == impl && c.To.Target.Version == version {
			d.Changes = append(d.Changes, c)
			d.MeasuredBefore = c.From.Target.Version
		}
	}
	for _, c := range facts.DetectChanges(fcells) {
		if c.Implementation == impl && c.ToVersion == version {
			d.FactChanges = append(d.FactChanges, c)
			d.MeasuredBefore = c.FromVersion
		}
	}
	return page{"release", "What changed in " + impl + " " + version, d}, nil
}
