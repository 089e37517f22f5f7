package bench

import (
	"bytes"
	"fmt"
	"html"
	"math"
)

// The report's charts are SVG written here, byte for byte the same from
// the same numbers, so that a document's charts regenerate identically
// from its stored runs (gonum's plots, chart.go, are the bench's own
// output folder's).

// svgColors are the series' colours (the bench's palette).
var svgColors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// svgBar is one bar: the median with min–max whiskers.
type svgBar struct {
	Median, Min, Max float64
	// Missing marks a bar that was not measured (drawn as nothing).
	Missing bool
}

// svgGroup is one position on the x axis with a bar per series.
type svgGroup struct {
	Label string
	Bars  []svgBar
}

// svgLine is one line of a line chart: a value per x step.
type svgLine struct {
	Label string
	Y     []float64
	// Dashed draws the line dashed (machine-wide series).
	Dashed bool
}

const (
	svgW, svgH                        = 760, 360
	svgLeft, svgRight, svgTop, svgBot = 70, 180, 40, 70
)

type svgDoc struct{ b bytes.Buffer }

func newSVG(title string) *svgDoc {
	d := &svgDoc{}
	fmt.Fprintf(&d.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&d.b, `<rect x="0" y="0" width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	d.text(svgW/2, 22, "middle", 15, title)
	return d
}

func (d *svgDoc) text(x, y float64, anchor string, size int, s string) {
	fmt.Fprintf(&d.b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-size="%d">%s</text>`+"\n", x, y, anchor, size, html.EscapeString(s))
}

func (d *svgDoc) bytes() []byte {
	d.b.WriteString("</svg>\n")
	return d.b.Bytes()
}

// niceMax rounds a maximum up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// axes draws the y axis from 0 to top with five gridlines, and returns
// the function from a value to its y coordinate.
func (d *svgDoc) axes(ylabel string, top float64) func(float64) float64 {
	plotH := float64(svgH - svgTop - svgBot)
	y := func(v float64) float64 { return float64(svgTop) + plotH*(1-v/top) }
	for i := 0; i <= 5; i++ {
		v := top * float64(i) / 5
		fmt.Fprintf(&d.b, `<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", svgLeft, y(v), svgW-svgRight, y(v))
		d.text(svgLeft-6, y(v)+4, "end", 11, fmt.Sprintf("%g", v))
	}
	fmt.Fprintf(&d.b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n",
		float64(svgTop)+plotH/2, float64(svgTop)+plotH/2, html.EscapeString(ylabel))
	fmt.Fprintf(&d.b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", svgLeft, svgH-svgBot, svgW-svgRight, svgH-svgBot)
	return y
}

func (d *svgDoc) legend(names []string, dashed []bool) {
	for i, n := range names {
		y := float64(svgTop + 10 + 18*i)
		x := float64(svgW - svgRight + 12)
		dash := ""
		if i < len(dashed) && dashed[i] {
			dash = ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(&d.b, `<rect class="legend" x="%.1f" y="%.1f" width="12" height="4" fill="%s" stroke="%s"%s/>`+"\n", x, y-4, svgColors[i%len(svgColors)], svgColors[i%len(svgColors)], dash)
		d.text(x+18, y+1, "start", 11, n)
	}
}

// barChartSVG draws grouped bars: groups along the x axis, a bar per
// series in each, with min–max whiskers.
func barChartSVG(title, ylabel string, series []string, groups []svgGroup) []byte {
	d := newSVG(title)
	top := 0.0
	for _, g := range groups {
		for _, b := range g.Bars {
			if !b.Missing {
				top = max(top, b.Max, b.Median)
			}
		}
	}
	y := d.axes(ylabel, niceMax(top))
	plotW := float64(svgW - svgLeft - svgRight)
	gw := plotW / float64(max(len(groups), 1))
	bw := gw * 0.8 / float64(max(len(series), 1))
	for gi, g := range groups {
		x0 := float64(svgLeft) + gw*float64(gi) + gw*0.1
		for si, b := range g.Bars {
			if b.Missing {
				continue
			}
			x := x0 + bw*float64(si)
			c := svgColors[si%len(svgColors)]
			fmt.Fprintf(&d.b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.1f (%.1f–%.1f)</title></rect>`+"\n",
				x, y(b.Median), bw*0.9, y(0)-y(b.Median), c, html.EscapeString(g.Label), html.EscapeString(series[si%len(series)]), b.Median, b.Min, b.Max)
			cx := x + bw*0.45
			fmt.Fprintf(&d.b, `<line class="whisker" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", cx, y(b.Min), cx, y(b.Max))
			for _, v := range []float64{b.Min, b.Max} {
				fmt.Fprintf(&d.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", cx-bw*0.2, y(v), cx+bw*0.2, y(v))
			}
		}
		d.text(x0+gw*0.4, float64(svgH-svgBot+16), "middle", 11, g.Label)
	}
	d.legend(series, nil)
	return d.bytes()
}

// lineChartSVG draws lines over steps 1..n, the step i labelled i×step.
func lineChartSVG(title, xlabel, ylabel string, step float64, lines []svgLine) []byte {
	d := newSVG(title)
	top, n := 0.0, 0
	for _, l := range lines {
		n = max(n, len(l.Y))
		for _, v := range l.Y {
			top = max(top, v)
		}
	}
	y := d.axes(ylabel, niceMax(top))
	plotW := float64(svgW - svgLeft - svgRight)
	x := func(i int) float64 {
		if n <= 1 {
			return float64(svgLeft) + plotW/2
		}
		return float64(svgLeft) + plotW*float64(i)/float64(n-1)
	}
	for i := 0; i < n; i++ {
		if n <= 20 || (i+1)%((n+19)/20) == 0 {
			d.text(x(i), float64(svgH-svgBot+16), "middle", 11, fmt.Sprintf("%g", math.Round(float64(i+1)*step*100)/100))
		}
	}
	d.text(float64(svgLeft)+plotW/2, float64(svgH-svgBot+36), "middle", 12, xlabel)
	var names []string
	var dashed []bool
	for li, l := range lines {
		names = append(names, l.Label)
		dashed = append(dashed, l.Dashed)
		c := svgColors[li%len(svgColors)]
		var pts bytes.Buffer
		for i, v := range l.Y {
			if i > 0 {
				pts.WriteByte(' ')
			}
			fmt.Fprintf(&pts, "%.1f,%.1f", x(i), y(v))
		}
		dash := ""
		if l.Dashed {
			dash = ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(&d.b, `<polyline class="series" points="%s" fill="none" stroke="%s" stroke-width="2"%s><title>%s</title></polyline>`+"\n",
			pts.String(), c, dash, html.EscapeString(l.Label))
	}
	d.legend(names, dashed)
	return d.bytes()
}
