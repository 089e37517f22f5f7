package web

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/quiver-quic/quiver/observatory/results"
	"github.com/quiver-quic/quiver/observatory/store"
)

// chart is a small line chart drawn as inline SVG by the layout's "chart"
// template. Only numbers and labels reach the SVG, and the template escapes
// the labels like any other text.
type chart struct {
	Label                    string
	Width, Height            int
	Left, Right, Top, Bottom int
	YMax                     int
	Points                   string
	Dots                     []chartPoint
	Ticks                    []chartPoint
}

type chartPoint struct {
	X, Y  int
	Label string
}

// lineChart plots ys (one per label) from 0 to ymax.
func lineChart(label string, labels []string, ys []int, ymax, width, height int) chart {
	c := chart{Label: label, Width: width, Height: height, Left: 24, Right: width - 10, Top: 8, Bottom: height - 18, YMax: ymax}
	if ymax <= 0 {
		ymax = 1
	}
	n := len(ys)
	var pts []string
	// Tick labels would overlap on long series: show about eight.
	every := max(1, (n+7)/8)
	for i, y := range ys {
		x := c.Left + (c.Right-c.Left)/2
		if n > 1 {
			x = c.Left + i*(c.Right-c.Left)/(n-1)
		}
		py := c.Bottom - y*(c.Bottom-c.Top)/ymax
		pts = append(pts, strconv.Itoa(x)+","+strconv.Itoa(py))
		c.Dots = append(c.Dots, chartPoint{X: x, Y: py, Label: fmt.Sprintf("%s: %d", labels[i], y)})
		if i%every == 0 || i == n-1 {
			c.Ticks = append(c.Ticks, chartPoint{X: x, Y: height - 4, Label: labels[i]})
		}
	}
	c.Points = strings.Join(pts, " ")
	return c
}

// adoptionRow is one scenario's adoption over time: per run, how many
// targets passed it.
type adoptionRow struct {
	ID     string
	Cells  []shareCell
	Latest string
}

// shareCell is one run of one scenario in the over-time heatmap.
type shareCell struct {
	Measured bool
	Pass, Of int
	Share    int // 0 (none) … 4 (all), the cell's shade
}

// implVersions is one implementation's scenarios × versions.
type implVersions struct {
	Name     string
	Versions []string
	Rows     []versionRow
	Areas    []versionArea
}

// versionArea is one area's rows of the heatmap.
type versionArea struct {
	Name string
	Rows []versionRow
}

// verdictMark is a verdict's letter in a heatmap cell (the colour says it
// too, the letter is for those who do not see it).
func verdictMark(v string) string {
	switch v {
	case "unsupported":
		return "–"
	case "inconclusive":
		return "?"
	case "":
		return "·"
	}
	return strings.ToUpper(v[:1])
}

type versionRow struct {
	Scenario string
	Cells    []store.Cell // one per version; a zero cell when not measured
}

func (a *App) adoption(r *http.Request) (page, error) {
	cells, err := a.store.Cells(r.Context(), store.Filter{})
	if err != nil {
		return page{}, err
	}
	// Over time: for each scenario, how many targets passed in each run
	// that measured it.
	var scenarios []string
	var runs []int64
	targets := map[string]bool{}
	passes := map[string]map[int64]int{}
	measured := map[string]map[int64]bool{}
	for _, c := range cells {
		if !slices.Contains(scenarios, c.Scenario) {
			scenarios = append(scenarios, c.Scenario)
			passes[c.Scenario] = map[int64]int{}
			measured[c.Scenario] = map[int64]bool{}
		}
		if !slices.Contains(runs, c.RunID) {
			runs = append(runs, c.RunID)
		}
		targets[c.Target.Name] = true
		measured[c.Scenario][c.RunID] = true
		if c.Verdict == store.Pass {
			passes[c.Scenario][c.RunID]++
		}
	}
	slices.Sort(scenarios)
	var rows []adoptionRow
	for _, s := range scenarios {
		row := adoptionRow{ID: s}
		last := 0
		for _, run := range runs {
			if !measured[s][run] {
				row.Cells = append(row.Cells, shareCell{})
				continue
			}
			n := passes[s][run]
			row.Cells = append(row.Cells, shareCell{Measured: true, Pass: n, Of: len(targets), Share: 4 * n / max(len(targets), 1)})
			last = n
		}
		row.Latest = fmt.Sprintf("%d of %d targets", last, len(targets))
		rows = append(rows, row)
	}

	// Across versions: per implementation, each scenario's verdict in
	// each version, versions in the order they were first measured (a
	// sweep measures them in release order).
	var impls []*implVersions
	byName := map[string]*implVersions{}
	latest := map[[3]string]store.Cell{}
	implScen := map[string][]string{}
	for _, c := range cells {
		name := c.Target.Implementation
		if name == "" {
			continue
		}
		iv := byName[name]
		if iv == nil {
			iv = &implVersions{Name: name}
			byName[name] = iv
			impls = append(impls, iv)
		}
		v := c.Target.Version
		if v == "" {
			v = "(unversioned)"
		}
		if !slices.Contains(iv.Versions, v) {
			iv.Versions = append(iv.Versions, v)
		}
		if !slices.Contains(implScen[name], c.Scenario) {
			implScen[name] = append(implScen[name], c.Scenario)
		}
		latest[[3]string{name, v, c.Scenario}] = c
	}
	for _, iv := range impls {
		// Versions go in release order when they are all semantic
		// versions, whatever order they were measured in.
		if !slices.ContainsFunc(iv.Versions, func(v string) bool { return !results.IsVersion(v) }) {
			slices.SortFunc(iv.Versions, results.CompareVersions)
		}
		ss := implScen[iv.Name]
		slices.Sort(ss)
		for _, s := range ss {
			row := versionRow{Scenario: s}
			for _, v := range iv.Versions {
				row.Cells = append(row.Cells, latest[[3]string{iv.Name, v, s}])
			}
			iv.Rows = append(iv.Rows, row)
		}
		for _, a := range groupByArea(ss) {
			va := versionArea{Name: a.Name}
			for _, row := range iv.Rows {
				if areaOf(row.Scenario) == a.Name {
					va.Rows = append(va.Rows, row)
				}
			}
			iv.Areas = append(iv.Areas, va)
		}
	}
	slices.SortFunc(impls, func(x, y *implVersions) int { return strings.Compare(x.Name, y.Name) })
	return page{"adoption", "Feature adoption", struct {
		Scenarios []adoptionRow
		Impls     []*implVersions
		Runs      []int64
	}{rows, impls, runs}}, nil
}
