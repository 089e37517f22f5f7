package web

import (
	"encoding/json"
	"net/http"

	"github.com/quiver-quic/quiver/observatory/facts"
	"github.com/quiver-quic/quiver/observatory/results"
	"github.com/quiver-quic/quiver/observatory/store"
)

// allChanges is every verdict change and every fact change in the store,
// of one target when target is set, oldest first.
func (a *App) allChanges(r *http.Request, target string) ([]results.Change, []facts.Change, error) {
	cells, err := a.store.Cells(r.Context(), store.Filter{Target: target})
	if err != nil {
		return nil, nil, err
	}
	fcells, err := a.store.FactCells(r.Context(), store.FactFilter{Target: target})
	if err != nil {
		return nil, nil, err
	}
	return results.DetectChanges(cells, a.FlapWindow), facts.DetectChanges(fcells), nil
}

// apiChanges serves the verdict and fact changes as JSON (?target=NAME for
// one target), oldest first; the same document as quiver track changes --json.
func (a *App) apiChanges(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	ch, fch, err := a.allChanges(r, r.URL.Query().Get("target"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if ch == nil {
		ch = []results.Change{}
	}
	if fch == nil {
		fch = []facts.Change{}
	}
	w.Header().Set("Content-Type", "application/json")
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	e.Encode(struct {
		Changes     []results.Change `json:"changes"`
		FactChanges []facts.Change   `json:"fact_changes"`
	}{ch, fch})
}
