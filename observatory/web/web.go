// Package web is the observatory's dashboard: server-rendered pages over a
// [store.Store] — the grid of targets × scenarios, each target's history,
// feature adoption across versions and time, run diffs, changes, and the
// drill-down to a result's evidence and artifacts, and beside the grid the
// latest benchmark runs (/bench) — plus two JSON endpoints, /api/grid and
// /api/bench.
//
// Everything a target sent (close reasons, sentences built from them, even
// its name) is untrusted: pages go through html/template, which escapes it
// by context, and the Content-Security-Policy forbids scripts outright, so
// markup that slipped through would still not run. The pages need no
// JavaScript; charts are inline SVG drawn on the server.
package web

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"

	"github.com/quiver-quic/quiver/observatory/facts"
	"github.com/quiver-quic/quiver/observatory/results"
	"github.com/quiver-quic/quiver/observatory/store"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// App is the dashboard. Register it on a mux with RegisterOnMux.
type App struct {
	store     store.Store
	artifacts string // artifacts root; "" serves none
	// FlapWindow is the flapping window of the changes shown.
	FlapWindow int
	pages      map[string]*template.Template
}

// New returns the dashboard over st. artifactsDir is the folder the result
// rows' artifact paths are relative to; downloads never leave it.
func New(st store.Store, artifactsDir string) (*App, error) {
	a := &App{store: st, artifacts: artifactsDir, FlapWindow: results.DefaultFlapWindow, pages: map[string]*template.Template{}}
	funcs := template.FuncMap{"headline": benchHeadline, "inc": func(n int) int { return n + 1 }, "verdictMark": verdictMark}
	base, err := template.New("").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/changes.html", "templates/bench.html")
	if err != nil {
		return nil, err
	}
	for _, p := range []string{"grid", "changes", "targets", "target", "adoption", "runs", "run", "diff", "result", "error", "benchruns", "benchrun", "release"} {
		t, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if p != "changes" {
			if t, err = t.ParseFS(templateFiles, "templates/"+p+".html"); err != nil {
				return nil, err
			}
		}
		a.pages[p] = t
	}
	return a, nil
}

// RegisterOnMux adds the dashboard's routes to mux.
func (a *App) RegisterOnMux(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFiles, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", a.handle(a.grid))
	mux.HandleFunc("GET /targets", a.handle(a.targets))
	mux.HandleFunc("GET /target", a.handle(a.target))
	mux.HandleFunc("GET /adoption", a.handle(a.adoption))
	mux.HandleFunc("GET /runs", a.handle(a.runs))
	mux.HandleFunc("GET /runs/{id}", a.handle(a.run))
	mux.HandleFunc("GET /diff", a.handle(a.diff))
	mux.HandleFunc("GET /changes", a.handle(a.changes))
	mux.HandleFunc("GET /release", a.handle(a.release))
	mux.HandleFunc("GET /results/{id}", a.handle(a.result))
	mux.HandleFunc("GET /results/{id}/artifacts/{n}", a.artifact)
	mux.HandleFunc("GET /bench", a.handle(a.benchRuns))
	mux.HandleFunc("GET /bench/{id}", a.handle(a.benchRun))
	mux.HandleFunc("GET /api/grid", a.apiGrid)
	mux.HandleFunc("GET /api/bench", a.apiBench)
	mux.HandleFunc("GET /api/changes", a.apiChanges)
	mux.HandleFunc("GET /feed.atom", a.feed)
}

// page is what a handler returns: the template, the title and the data.
type page struct {
	name  string
	title string
	data  any
}

// httpError is an error with a status for the user.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &httpError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

func (a *App) handle(f func(r *http.Request) (page, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w)
		p, err := f(r)
		code := http.StatusOK
		if err != nil {
			var he *httpError
			switch {
			case errors.As(err, &he):
				code = he.code
			case errors.Is(err, store.ErrNotFound):
				code = http.StatusNotFound
			default:
				code = http.StatusInternalServerError
				log.Printf("web: %s: %v", r.URL.Path, err)
			}
			p = page{name: "error", title: http.StatusText(code), data: err.Error()}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(code)
		if err := a.pages[p.name].ExecuteTemplate(w, "layout", struct {
			Title string
			Data  any
		}{p.title, p.data}); err != nil {
			log.Printf("web: render %s: %v", p.name, err)
		}
	}
}

// gridData is the grid page.
type gridData struct {
	Grid    *results.Grid
	Changes []results.Change
	// FactChanges are the latest fact changes, newest first.
	FactChanges []facts.Change
	Bench       benchPanel
}

// Cell is used by the template; a missing cell is nil.
func (g gridData) Cell(target, scenario string) *store.Cell {
	if c, ok := g.Grid.Cell(target, scenario); ok {
		return &c
	}
	return nil
}

// Tally summarises a target's column.
func (g gridData) Tally(target string) string { return results.Tally(g.Grid.Counts(target)) }

// Areas groups the grid's scenarios by area.
func (g gridData) Areas() []area { return groupByArea(g.Grid.Scenarios) }

// Passing is how many of a target's scenarios pass, of how many.
func (g gridData) Passing(target string) string {
	n := 0
	for _, v := range g.Grid.Counts(target) {
		n += v
	}
	return fmt.Sprintf("%d / %d", g.Grid.Counts(target)[store.Pass], n)
}

func (a *App) grid(r *http.Request) (page, error) {
	cells, err := a.store.LatestGrid(r.Context())
	if err != nil {
		return page{}, err
	}
	all, err := a.store.Cells(r.Context(), store.Filter{})
	if err != nil {
		return page{}, err
	}
	ch := results.DetectChanges(all, a.FlapWindow)
	slices.Reverse(ch)
	if len(ch) > 10 {
		ch = ch[:10]
	}
	fcells, err := a.store.FactCells(r.Context(), store.FactFilter{})
	if err != nil {
		return page{}, err
	}
	fch := facts.DetectChanges(fcells)
	slices.Reverse(fch)
	if len(fch) > 10 {
		fch = fch[:10]
	}
	bp, err := a.benchPanel(r)
	if err != nil {
		return page{}, err
	}
	return page{"grid", "Targets × scenarios", gridData{Grid: results.NewGrid(cells), Changes: ch, FactChanges: fch, Bench: bp}}, nil
}

func (a *App) changes(r *http.Request) (page, error) {
	all, err := a.store.Cells(r.Context(), store.Filter{Target: r.URL.Query().Get("target")})
	if err != nil {
		return page{}, err
	}
	ch := results.DetectChanges(all, a.FlapWindow)
	slices.Reverse(ch)
	return page{"changes", "Changes", ch}, nil
}

func (a *App) targets(r *http.Request) (page, error) {
	ts, err := a.store.Targets(r.Context())
	return page{"targets", "Targets", ts}, err
}

// runColumn is one run in a target's history.
type runColumn struct {
	ID      int64
	Version string
}

type targetData struct {
	Runs      []runColumn
	Scenarios []string
	cells     map[int64]map[string]store.Cell
	Chart     chart
	Changes   []results.Change
}

func (d targetData) Cell(run int64, scenario string) *store.Cell {
	if c, ok := d.cells[run][scenario]; ok {
		return &c
	}
	return nil
}

func (a *App) target(r *http.Request) (page, error) {
	name := r.URL.Query().Get("name")
	if name == "" {
		return page{}, badRequest("which target? /target?name=NAME")
	}
	cells, err := a.store.History(r.Context(), name, "")
	if err != nil {
		return page{}, err
	}
	if len(cells) == 0 {
		return page{}, notFound("no results for target %q", name)
	}
	d := targetData{cells: map[int64]map[string]store.Cell{}}
	for _, c := range cells {
		if d.cells[c.RunID] == nil {
			d.cells[c.RunID] = map[string]store.Cell{}
			d.Runs = append(d.Runs, runColumn{ID: c.RunID, Version: c.Target.Version})
		}
		d.cells[c.RunID][c.Scenario] = c
		if !slices.Contains(d.Scenarios, c.Scenario) {
			d.Scenarios = append(d.Scenarios, c.Scenario)
		}
	}
	slices.Sort(d.Scenarios)
	var labels []string
	var ys []int
	for _, run := range d.Runs {
		n := 0
		for _, c := range d.cells[run.ID] {
			if c.Verdict == store.Pass {
				n++
			}
		}
		label := "run " + strconv.FormatInt(run.ID, 10)
		if run.Version != "" {
			label = run.Version
		}
		labels, ys = append(labels, label), append(ys, n)
	}
	d.Chart = lineChart("scenarios passing per run", labels, ys, len(d.Scenarios), 560, 180)
	d.Changes = results.DetectChanges(cells, a.FlapWindow)
	return page{"target", "Target " + name, d}, nil
}

func (a *App) runs(r *http.Request) (page, error) {
	runs, err := a.store.ListRuns(r.Context())
	d := struct {
		Runs []store.Run
		A, B int64
	}{Runs: runs}
	if len(runs) >= 2 {
		d.A, d.B = runs[1].ID, runs[0].ID
	}
	return page{"runs", "Runs", d}, err
}

func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("%q is not an id", r.PathValue("id"))
	}
	return id, nil
}

func (a *App) run(r *http.Request) (page, error) {
	id, err := pathID(r)
	if err != nil {
		return page{}, err
	}
	run, err := a.store.Run(r.Context(), id)
	if err != nil {
		return page{}, err
	}
	cells, err := a.store.Cells(r.Context(), store.Filter{RunID: id})
	return page{"run", fmt.Sprintf("Run %d", id), struct {
		Run   store.Run
		Cells []store.Cell
	}{run, cells}}, err
}

func (a *App) diff(r *http.Request) (page, error) {
	var ids [2]int64
	var sides [2][]store.Cell
	for i, k := range []string{"a", "b"} {
		id, err := strconv.ParseInt(r.URL.Query().Get(k), 10, 64)
		if err != nil {
			return page{}, badRequest("diff needs two run ids: /diff?a=1&b=2")
		}
		if _, err := a.store.Run(r.Context(), id); err != nil {
			return page{}, err
		}
		if sides[i], err = a.store.Cells(r.Context(), store.Filter{RunID: id}); err != nil {
			return page{}, err
		}
		ids[i] = id
	}
	return page{"diff", fmt.Sprintf("Run %d → run %d", ids[0], ids[1]), struct {
		A, B  int64
		Diffs []results.CellDiff
	}{ids[0], ids[1], results.DiffRuns(sides[0], sides[1])}}, nil
}

func (a *App) result(r *http.Request) (page, error) {
	id, err := pathID(r)
	if err != nil {
		return page{}, err
	}
	rec, err := a.store.Record(r.Context(), id)
	if err != nil {
		return page{}, err
	}
	// Evidence that does not decode still shows raw.
	res, _ := store.DecodeEvidence(rec)
	// The results before and after this one of the same target and
	// scenario, as QUIC-Tracker linked them.
	hist, err := a.store.History(r.Context(), rec.Target.Name, rec.Scenario)
	if err != nil {
		return page{}, err
	}
	var prev, next *store.Cell
	if i := slices.IndexFunc(hist, func(c store.Cell) bool { return c.ID == rec.ID }); i >= 0 {
		if i > 0 {
			prev = &hist[i-1]
		}
		if i+1 < len(hist) {
			next = &hist[i+1]
		}
	}
	fs, err := a.store.FactCells(r.Context(), store.FactFilter{RunID: rec.RunID, Target: rec.Target.Name, Scenario: rec.Scenario})
	if err != nil {
		return page{}, err
	}
	return page{"result", fmt.Sprintf("%s on %s", rec.Scenario, rec.Target.Name), struct {
		Record     store.Record
		Result     store.Evidence
		Prev, Next *store.Cell
		Facts      []store.FactCell
	}{rec, res, prev, next, fs}}, nil
}

// artifact serves one of a result's artifacts. Only files a result row
// names are served, and only from inside the artifacts folder: os.Root
// refuses paths that climb out of it, absolute paths, and symbolic links
// that lead out.
func (a *App) artifact(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	fail := func(code int, msg string) { http.Error(w, msg, code) }
	id, err := pathID(r)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil {
		fail(http.StatusBadRequest, "bad artifact number")
		return
	}
	rec, err := a.store.Record(r.Context(), id)
	if err != nil || n < 0 || n >= len(rec.Artifacts) {
		fail(http.StatusNotFound, "no such artifact")
		return
	}
	if a.artifacts == "" {
		fail(http.StatusNotFound, "this dashboard serves no artifacts (no artifacts folder given)")
		return
	}
	root, err := os.OpenRoot(a.artifacts)
	if err != nil {
		fail(http.StatusNotFound, "artifacts folder missing")
		return
	}
	defer root.Close()
	f, err := root.Open(rec.Artifacts[n].Path)
	if err != nil {
		fail(http.StatusNotFound, "artifact not found in the artifacts folder")
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		fail(http.StatusNotFound, "artifact is not a file")
		return
	}
	// Always a download, never rendered: an artifact holds target bytes.
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(rec.Artifacts[n].Path)))
	http.ServeContent(w, r, "", st.ModTime(), f)
}

// apiGrid is the one JSON endpoint: the latest grid.
func (a *App) apiGrid(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	cells, err := a.store.LatestGrid(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	g := results.NewGrid(cells)
	if cells == nil {
		cells = []store.Cell{}
	}
	w.Header().Set("Content-Type", "application/json")
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	e.Encode(struct {
		Targets   []string     `json:"targets"`
		Scenarios []string     `json:"scenarios"`
		Cells     []store.Cell `json:"cells"`
	}{orEmpty(g.Targets), orEmpty(g.Scenarios), cells})
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
