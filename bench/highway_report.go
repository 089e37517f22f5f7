package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// A document's run sections name the stored run they are generated from,
// so that `quiver bench report --doc FILE` regenerates each of them, and
// its charts, with no other argument:
//
//	<!-- begin: quiver bench report of docs/runs/sweep-mtu-20261205.json.gz -->
//	…generated…
//	<!-- end: quiver bench report of docs/runs/sweep-mtu-20261205.json.gz -->
//
// The run's path is relative to the directory the command runs in (the
// repository's root); charts go to img/ beside the document.
const (
	runSectionBegin = "<!-- begin: quiver bench report of "
	runSectionEnd   = "<!-- end: quiver bench report of "
	sectionClose    = " -->"
)

// ChartDir is the folder, beside a document, that its charts go to.
const ChartDir = "img"

// RegenerateDoc rewrites every run section of doc from the run it names,
// read by read, and returns the new document with the charts (SVG, by
// file name in ChartDir) the sections link to.
func RegenerateDoc(doc []byte, read func(file string) (StoredResult, error)) ([]byte, map[string][]byte, error) {
	charts := map[string][]byte{}
	var out bytes.Buffer
	rest := doc
	n := 0
	for {
		i := bytes.Index(rest, []byte(runSectionBegin))
		if i < 0 {
			break
		}
		j := bytes.Index(rest[i:], []byte(sectionClose))
		if j < 0 {
			return nil, nil, errors.New("a run section's begin marker does not end with -->")
		}
		file := string(rest[i+len(runSectionBegin) : i+j])
		if file == "" || strings.ContainsAny(file, "\n<>") {
			return nil, nil, fmt.Errorf("run section names %q", file)
		}
		end := runSectionEnd + file + sectionClose
		k := bytes.Index(rest[i:], []byte(end))
		if k < 0 {
			return nil, nil, fmt.Errorf("run section of %s has no %q", file, end)
		}
		r, err := read(file)
		if err != nil {
			return nil, nil, err
		}
		var sec bytes.Buffer
		if err := writeRunSection(&sec, r, func(name string, svg []byte) string {
			charts[name] = svg
			return ChartDir + "/" + name
		}); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
		out.Write(rest[:i+j+len(sectionClose)])
		out.WriteString("\n\n")
		out.Write(bytes.TrimSpace(sec.Bytes()))
		out.WriteString("\n\n")
		out.WriteString(end)
		rest = rest[i+k+len(end):]
		n++
	}
	if n == 0 {
		return nil, nil, errors.New("the document has no '" + runSectionBegin + "FILE -->' section")
	}
	out.Write(rest)
	return out.Bytes(), charts, nil
}

// writeRunSection writes one stored run's tables (and charts, through
// chart, which stores an SVG and returns its link).
func writeRunSection(w io.Writer, r StoredResult, chart func(name string, svg []byte) string) error {
	if r.Kind == "sweep" {
		writeSweepReport(w, r, chart)
		return nil
	}
	return WriteAckFreqReport(w, []StoredResult{r})
}

// shortConfig drops what every configuration of a veth sweep shares.
func shortConfig(c string) string {
	return strings.TrimSuffix(strings.TrimPrefix(c, "veth-"), "/veth")
}

// runBase names a run's charts after its file (docs/runs/x.json.gz: x).
func runBase(file string) string {
	b := filepath.Base(file)
	b = strings.TrimSuffix(b, ".gz")
	return strings.TrimSuffix(b, ".json")
}

// writeSweepReport writes a sweep: goodput per configuration and pair
// (median, min–max), the CPU per byte beside it, a bar chart with
// whiskers, and per pair a chart of CPU second by second in the median
// run of the first configuration.
func writeSweepReport(w io.Writer, r StoredResult, chart func(string, []byte) string) {
	var configs []string
	var pairs []Pair
	for _, s := range r.Summaries {
		if !slices.Contains(configs, s.Config) {
			configs = append(configs, s.Config)
		}
		if !slices.Contains(pairs, s.Pair) {
			pairs = append(pairs, s.Pair)
		}
	}
	runs := 0
	for _, s := range r.Summaries {
		runs = max(runs, s.Rate.N+s.Failed)
	}
	find := func(cfg string, p Pair) *Summary {
		i := slices.IndexFunc(r.Summaries, func(s Summary) bool { return s.Config == cfg && s.Pair == p })
		if i < 0 || r.Summaries[i].Rate.N == 0 {
			return nil
		}
		return &r.Summaries[i]
	}
	fmt.Fprintf(w, "### Run `%s`\n\n", r.File)
	fmt.Fprintf(w, "`%s` — started %s on %s; %d runs per cell, alternating. Goodput Mbit/s, median (min–max); "+
		"CPU s/GB server + client, medians; – not run.\n\n", r.Command, r.Started.Format("2006-01-02 15:04 UTC"), r.Host, runs)
	var names []string
	for _, p := range pairs {
		names = append(names, p.String())
	}
	fmt.Fprintf(w, "| configuration | %s | CPU s/GB (%s) |\n|---|", strings.Join(names, " | "), strings.Join(names, " / "))
	for range pairs {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w, "---|")
	var groups []svgGroup
	for _, cfg := range configs {
		fmt.Fprintf(w, "| %s |", shortConfig(cfg))
		g := svgGroup{Label: shortConfig(cfg)}
		var cpu []string
		for _, p := range pairs {
			s := find(cfg, p)
			if s == nil {
				fmt.Fprint(w, " – |")
				cpu = append(cpu, "–")
				g.Bars = append(g.Bars, svgBar{Missing: true})
				continue
			}
			fmt.Fprintf(w, " %.0f (%.0f–%.0f) |", s.Rate.Median, s.Rate.Min, s.Rate.Max)
			cpu = append(cpu, fmt.Sprintf("%.1f+%.1f", s.ServerCPU.Median, s.ClientCPU.Median))
			g.Bars = append(g.Bars, svgBar{Median: s.Rate.Median, Min: s.Rate.Min, Max: s.Rate.Max})
		}
		fmt.Fprintf(w, " %s |\n", strings.Join(cpu, " / "))
		groups = append(groups, g)
	}
	for _, n := range r.Unsupported {
		fmt.Fprintf(w, "\nNot run: %s %s: %s.\n", shortConfig(n.Config), n.Pair, firstLine(n.Reason))
	}
	base := runBase(r.File)
	fmt.Fprintf(w, "\n![goodput per configuration, median with min–max whiskers](%s)\n",
		chart(base+"-goodput.svg", barChartSVG("Goodput, "+base, "goodput Mbit/s (median, min–max)", names, groups)))
	if len(configs) == 0 {
		return
	}
	for _, p := range pairs {
		run := medianRun(r.Result, configs[0], p)
		if run == nil || run.CPUTrace == nil {
			continue
		}
		t := run.CPUTrace
		lines := []svgLine{{Label: "server", Y: t.Server}, {Label: "client", Y: t.Client}}
		if len(t.SoftIRQ) > 0 {
			lines = append(lines, svgLine{Label: "softirq (machine)", Y: t.SoftIRQ, Dashed: true}, svgLine{Label: "irq (machine)", Y: t.IRQ, Dashed: true})
		}
		name := base + "-cpu-" + safeName(p.String()) + ".svg"
		fmt.Fprintf(w, "\n![CPUs busy over time, %s, %s, run %d](%s)\n", p, shortConfig(configs[0]), run.Iter,
			chart(name, lineChartSVG(fmt.Sprintf("CPUs busy over time: %s, %s (run %d, %.0f Mbit/s)", p, shortConfig(configs[0]), run.Iter, run.GoodputMbps),
				"seconds into the transfer (end of each interval)", "CPUs busy", t.Interval.Seconds(), lines)))
	}
}

// medianRun is the successful run of a cell whose goodput is the median
// (the lower middle one for an even count).
func medianRun(res *Result, cfg string, p Pair) *Run {
	var ok []*Run
	for i := range res.Runs {
		r := &res.Runs[i]
		if r.Config == cfg && r.Pair == p && r.Err == "" {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	slices.SortStableFunc(ok, func(a, b *Run) int {
		switch {
		case a.GoodputMbps < b.GoodputMbps:
			return -1
		case a.GoodputMbps > b.GoodputMbps:
			return 1
		}
		return 0
	})
	return ok[(len(ok)-1)/2]
}
