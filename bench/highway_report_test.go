package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// svgCounts parses an SVG as XML and counts its elements by class.
func svgCounts(t *testing.T, svg []byte) map[string]int {
	t.Helper()
	n := map[string]int{}
	d := xml.NewDecoder(bytes.NewReader(svg))
	root := true
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root && (se.Name.Local != "svg" || se.Name.Space != "http://www.w3.org/2000/svg") {
				t.Fatalf("root element %v", se.Name)
			}
			root = false
			for _, a := range se.Attr {
				if a.Name.Local == "class" {
					n[se.Name.Local+"."+a.Value]++
				}
			}
		}
	}
	return n
}

// sweepFixture is a sweep of two configurations and two pairs, one cell
// of which never succeeded, with a CPU trace in every run.
func sweepFixture() *Result {
	res := &Result{Kind: "sweep", Command: "quiver bench sweep --param mtu --topology veth --impls quiver,tcp --runs 3",
		Started: time.Unix(1_800_000_000, 0).UTC()}
	pairs := []Pair{{"quiver", "quiver"}, {"tcp", "tcp"}}
	for _, cfg := range []string{"veth-mtu1500", "veth-mtu9000"} {
		for i, p := range pairs {
			for it, m := range []float64{900, 1000, 1300} {
				r := Run{Config: cfg, Pair: p, Iter: it, Bytes: 1e8, GoodputMbps: m * float64(i+1),
					CPUTrace: &CPUTrace{Interval: time.Second, Server: []float64{0.5, 0.75}, Client: []float64{0.25, 1}, SoftIRQ: []float64{0.1, 0.2}, IRQ: []float64{0, 0}, Host: "local"}}
				if cfg == "veth-mtu9000" && p.Server == "tcp" {
					r.Err = "failed"
				}
				res.Runs = append(res.Runs, r)
			}
		}
	}
	res.Summaries = summarize(res)
	return res
}

// TestReportCharts renders a sweep's report from a fixture: its table,
// a goodput chart with one bar and one whisker per measured cell, and a
// CPU chart per pair with the endpoints and the machine-wide lines.
func TestReportCharts(t *testing.T) {
	charts := map[string][]byte{}
	var out bytes.Buffer
	err := writeRunSection(&out, StoredResult{File: "docs/runs/sweep-mtu-x.json.gz", Result: sweepFixture()}, func(name string, svg []byte) string {
		charts[name] = svg
		return "img/" + name
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| configuration | quiver<-quiver | tcp<-tcp | CPU s/GB (quiver<-quiver / tcp<-tcp) |",
		"| mtu1500 | 1000 (900–1300) | 2000 (1800–2600) |",
		"| mtu9000 | 1000 (900–1300) | – |",
		"![goodput per configuration, median with min–max whiskers](img/sweep-mtu-x-goodput.svg)",
		"(img/sweep-mtu-x-cpu-quiver-quiver.svg)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	g := svgCounts(t, charts["sweep-mtu-x-goodput.svg"])
	if g["rect.bar"] != 3 || g["line.whisker"] != 3 || g["rect.legend"] != 2 {
		t.Errorf("goodput chart: %v, want 3 bars, 3 whiskers, 2 legend entries", g)
	}
	for _, p := range []string{"quiver-quiver", "tcp-tcp"} {
		c, ok := charts["sweep-mtu-x-cpu-"+p+".svg"]
		if !ok {
			t.Fatalf("no CPU chart for %s: %v", p, charts)
		}
		if n := svgCounts(t, c)["polyline.series"]; n != 4 {
			t.Errorf("CPU chart of %s: %d lines, want server, client, softirq, irq", p, n)
		}
	}
	again := map[string][]byte{}
	writeRunSection(io.Discard, StoredResult{File: "docs/runs/sweep-mtu-x.json.gz", Result: sweepFixture()}, func(name string, svg []byte) string {
		again[name] = svg
		return name
	})
	for name, b := range charts {
		if !bytes.Equal(b, again[name]) {
			t.Errorf("%s differs between two renderings of the same runs", name)
		}
	}
}

// TestHighwayDocRegenerates regenerates docs/highway.md's run sections and
// charts from the stored runs they name: the result is the document and
// the charts as committed, byte for byte.
func TestHighwayDocRegenerates(t *testing.T) {
	t.Chdir("..") // the runs are named from the repository's root
	const doc = "docs/highway.md"
	old, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	out, charts, err := RegenerateDoc(old, func(file string) (StoredResult, error) {
		rs, err := ReadResults([]string{file})
		if err != nil {
			return StoredResult{}, err
		}
		return rs[0], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, old) {
		t.Errorf("%s does not regenerate identically; run quiver bench report --doc %s", doc, doc)
	}
	for name, b := range charts {
		on, err := os.ReadFile(filepath.Join("docs", ChartDir, name))
		if err != nil || !bytes.Equal(on, b) {
			t.Errorf("chart %s: %v, or differs from its regeneration", name, err)
		}
	}
}

// TestRegenerateDocRefuses: a document without run sections, or with a
// section whose end is missing, is an error, not a silent rewrite.
func TestRegenerateDocRefuses(t *testing.T) {
	read := func(string) (StoredResult, error) { return StoredResult{File: "x", Result: sweepFixture()}, nil }
	for _, doc := range []string{
		"# nothing generated\n",
		runSectionBegin + "docs/runs/x.json.gz" + sectionClose + "\ntext\n",
		runSectionBegin + "docs/runs/x.json.gz\n",
	} {
		if _, _, err := RegenerateDoc([]byte(doc), read); err == nil {
			t.Errorf("%q accepted", doc)
		}
	}
	doc := "a\n" + runSectionBegin + "r" + sectionClose + "\nold\n" + runSectionEnd + "r" + sectionClose + "\nb\n"
	out, charts, err := RegenerateDoc([]byte(doc), read)
	if err != nil || !strings.HasPrefix(string(out), "a\n") || !strings.HasSuffix(string(out), runSectionEnd+"r"+sectionClose+"\nb\n") ||
		strings.Contains(string(out), "old") || len(charts) != 3 {
		t.Errorf("regenerated %q (%d charts), %v", out, len(charts), err)
	}
}
