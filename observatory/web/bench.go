package web

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/quiver-quic/quiver/observatory/store"
)

// benchPanelRuns is how many of the latest benchmark runs the grid page
// lists beside the grid.
const benchPanelRuns = 8

// benchPanel is the "Benchmarks" panel of the grid page: the latest runs,
// and a chart of the newest one.
type benchPanel struct {
	Runs   []store.BenchRun
	Latest *store.BenchRun
	Chart  barChart
}

func (a *App) benchPanel(r *http.Request) (benchPanel, error) {
	runs, err := a.store.BenchRuns(r.Context(), benchPanelRuns)
	if err != nil || len(runs) == 0 {
		return benchPanel{}, err
	}
	p := benchPanel{Runs: runs, Latest: &runs[0]}
	p.Chart = benchChart(&runs[0], 420)
	return p, nil
}

// benchHeadline is a run's best row, for the table: the largest median of its
// first metric.
func benchHeadline(b store.BenchRun) string {
	best := -1
	for i, row := range b.Summary {
		if row.Runs > 0 && (best < 0 || row.Median > b.Summary[best].Median) && row.Metric == b.Summary[0].Metric {
			best = i
		}
	}
	if best < 0 {
		return "no successful runs"
	}
	row := b.Summary[best]
	label := row.Subject
	if row.Config != "" && row.Config != "default" {
		label = row.Config + " " + label
	}
	return fmt.Sprintf("%s: %s %s", clip(label, 40), num(row.Median), row.Metric)
}

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// barChart is a horizontal bar chart drawn as inline SVG by the layout's
// "bars" template: one bar per summary row (median), with a min–max
// whisker. Only numbers and labels reach the SVG; the template escapes the
// labels.
type barChart struct {
	Label         string
	Metric        string
	Width, Height int
	Left, Right   int
	Bars          []bar
	Max           string
}

type bar struct {
	Y, W, H    int
	Lo, Hi     int // whisker ends (x)
	Label      string
	Value      string
	TextY      int
	ValueX     int
	Unmeasured bool
}

// benchChart plots the rows of b that share its first metric.
func benchChart(b *store.BenchRun, width int) barChart {
	const rowH, gap, top = 16, 4, 4
	c := barChart{Label: b.Kind + ": " + firstMetric(b), Metric: firstMetric(b), Width: width, Left: 170, Right: width - 48}
	vmax := 0.0
	for _, row := range b.Summary {
		if row.Metric == c.Metric && row.Runs > 0 {
			vmax = math.Max(vmax, math.Max(row.Max, row.Median))
		}
	}
	if vmax <= 0 {
		vmax = 1
	}
	c.Max = num(vmax)
	span := float64(c.Right - c.Left)
	x := func(v float64) int { return c.Left + int(math.Round(v/vmax*span)) }
	y := top
	for _, row := range b.Summary {
		if row.Metric != c.Metric {
			continue
		}
		label := rowLabel(b, row)
		label = clip(label, 28)
		br := bar{Y: y, H: rowH, Label: label, TextY: y + rowH - 4, Unmeasured: row.Runs == 0}
		if row.Runs > 0 {
			br.W = x(row.Median) - c.Left
			br.Lo, br.Hi = x(row.Min), x(row.Max)
			br.Value = num(row.Median)
			br.ValueX = min(x(math.Max(row.Max, row.Median))+4, width-44)
		} else {
			br.Value, br.ValueX = "failed", c.Left+4
		}
		c.Bars = append(c.Bars, br)
		y += rowH + gap
	}
	c.Height = y + 16
	return c
}

// rowLabel names a row in a chart: its configuration and subject, or only
// the configuration when every row has the same subject (an ACK frequency
// run is all quiver<-quiver).
func rowLabel(b *store.BenchRun, row store.BenchRow) string {
	one := true
	for _, r := range b.Summary {
		one = one && r.Subject == row.Subject
	}
	switch {
	case row.Config == "" || row.Config == "default":
		return row.Subject
	case one:
		return row.Config
	}
	return row.Config + " " + row.Subject
}

func firstMetric(b *store.BenchRun) string {
	if len(b.Summary) == 0 {
		return ""
	}
	return b.Summary[0].Metric
}

func (a *App) benchRuns(r *http.Request) (page, error) {
	runs, err := a.store.BenchRuns(r.Context(), 0)
	return page{"benchruns", "Benchmark runs", runs}, err
}

func (a *App) benchRun(r *http.Request) (page, error) {
	id, err := pathID(r)
	if err != nil {
		return page{}, err
	}
	b, err := a.store.BenchRun(r.Context(), id)
	if err != nil {
		return page{}, err
	}
	return page{"benchrun", fmt.Sprintf("Benchmark run %d: %s", id, b.Kind), struct {
		Run   store.BenchRun
		Chart barChart
	}{b, benchChart(&b, 640)}}, nil
}

// apiBench lists the latest benchmark runs with their summaries as JSON.
func (a *App) apiBench(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	runs, err := a.store.BenchRuns(r.Context(), 50)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if runs == nil {
		runs = []store.BenchRun{}
	}
	w.Header().Set("Content-Type", "application/json")
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	e.Encode(runs)
}
