package bench

import (
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// palette colours the configurations of a chart.
var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

// errBars are min–max whiskers around the medians of one bar series.
type errBars struct {
	x, y, lo, hi []float64
}

func (e errBars) Len() int                        { return len(e.x) }
func (e errBars) XY(i int) (float64, float64)     { return e.x[i], e.y[i] }
func (e errBars) YError(i int) (float64, float64) { return e.y[i] - e.lo[i], e.hi[i] - e.y[i] }

// groupedBars draws one bar per pair and configuration: pairs along the x
// axis, configurations side by side in colour, with min–max whiskers.
func groupedBars(title, ylabel string, res *Result, value func(Summary) Stat) (*plot.Plot, error) {
	var pairs, configs []string
	for _, s := range res.Summaries {
		if !slices.Contains(pairs, s.Pair.String()) {
			pairs = append(pairs, s.Pair.String())
		}
		if !slices.Contains(configs, s.Config) {
			configs = append(configs, s.Config)
		}
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	width := vg.Points(min(60, 360/float64(max(1, len(pairs)*len(configs)))))
	for ci, cfg := range configs {
		vals := make(plotter.Values, len(pairs))
		eb := errBars{x: make([]float64, len(pairs)), y: make([]float64, len(pairs)), lo: make([]float64, len(pairs)), hi: make([]float64, len(pairs))}
		for pi, pair := range pairs {
			eb.x[pi] = float64(pi)
			for _, s := range res.Summaries {
				if s.Config == cfg && s.Pair.String() == pair {
					st := value(s)
					vals[pi], eb.y[pi], eb.lo[pi], eb.hi[pi] = st.Median, st.Median, st.Min, st.Max
				}
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		offset := (float64(ci) - float64(len(configs)-1)/2) * float64(width)
		bars.Offset = vg.Length(offset)
		bars.Color = palette[ci%len(palette)]
		bars.LineStyle.Width = 0
		p.Add(bars)
		if len(configs) > 1 {
			p.Legend.Add(cfg, bars)
		}
		// Bars of several configurations are offset in points, which
		// have no fixed x-axis value, so whiskers are drawn only when
		// the bars are centred (one configuration).
		if len(configs) == 1 {
			yb, err := plotter.NewYErrorBars(eb)
			if err != nil {
				return nil, err
			}
			p.Add(yb)
		}
	}
	p.NominalX(pairs...)
	p.Legend.Top = true
	return p, nil
}

// writeCharts draws the rate and the CPU cost as SVG and PNG.
func writeCharts(base string, res *Result) ([]string, error) {
	if len(res.Summaries) == 0 {
		return nil, nil
	}
	rate, cpu := units(res.Kind)
	var paths []string
	charts := []struct {
		suffix, title, ylabel string
		value                 func(Summary) Stat
	}{
		{"-rate", "median " + rate + " (whiskers: min–max)", rate, func(s Summary) Stat { return s.Rate }},
		{"-cpu", "server + client " + cpu + " (median)", cpu, func(s Summary) Stat {
			t := s.ServerCPU.Median + s.ClientCPU.Median
			return Stat{Median: t, Min: t, Max: t}
		}},
	}
	for _, c := range charts {
		p, err := groupedBars(c.title, c.ylabel, res, c.value)
		if err != nil {
			return paths, err
		}
		w := vg.Length(max(6, 1.2*float64(len(res.Summaries)))) * vg.Inch
		for _, ext := range []string{".svg", ".png"} {
			path := base + c.suffix + ext
			if err := p.Save(min(w, 16*vg.Inch), 4*vg.Inch, path); err != nil {
				return paths, fmt.Errorf("chart %s: %w", path, err)
			}
			paths = append(paths, path)
		}
	}
	return paths, nil
}
