package bench

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAckFreqReport regenerates a document's tables from a stored result:
// the cells with their spread, the 25 ms against RTT/4 comparison, and
// the text outside the markers untouched; a document without markers is
// an error, never silently appended to.
func TestAckFreqReport(t *testing.T) {
	res := &Result{Kind: "ackfreq", Command: "quiver bench ackfreq --paths geo --ratios 2,10,10@25ms --runs 2", Started: time.Unix(1_800_000_000, 0).UTC(),
		Options: Options{Configs: []Config{{Name: "geo/1:2"}, {Name: "geo/1:10"}, {Name: "geo/1:10@25ms"}}}}
	add := func(cfg string, mbps float64, acks, data uint64, fail bool) {
		r := Run{Config: cfg, Pair: Pair{"quiver", "quiver"}, Bytes: 10e6, GoodputMbps: mbps, Acks: &AckStats{ACKPackets: acks, DataPackets: data}}
		if fail {
			r.Err = "timeout"
		}
		res.Runs = append(res.Runs, r)
	}
	add("geo/1:2", 8, 3000, 7000, false)
	add("geo/1:2", 10, 3000, 7000, false)
	add("geo/1:10", 9, 700, 7000, false)
	add("geo/1:10", 9, 700, 7000, true)
	add("geo/1:10@25ms", 6, 350, 7000, false)
	add("geo/1:10@25ms", 6, 350, 7000, false)
	dir := t.TempDir()
	file := filepath.Join(dir, "ackfreq.json")
	b, _ := json.Marshal(res) // as stored: summaries recomputed when absent
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(b)
	zw.Close()
	if err := os.WriteFile(file+".gz", gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	stored, err := ReadResults([]string{file})
	if err != nil {
		t.Fatal(err)
	}
	zipped, err := ReadResults([]string{file + ".gz"})
	if err != nil || len(zipped[0].Runs) != len(res.Runs) {
		t.Fatalf("gzipped result: %v", err)
	}
	var out bytes.Buffer
	if err := WriteAckFreqReport(&out, stored); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"| geo | 1:2 | 2/2 | 9.0 (8.0–10.0, ±11 %) | — | 7000 | 3000 | 2.3 | 1.2× (1) | – |",
		"| geo | 1:10 | 1/2 | 9.0 (9.0–9.0, ±0 %) | +0.0 % | 7000 | 700 | 10.0 | 5.0× (5) | – |",
		"| geo | 1:10@25ms | 2/2 |",
		"| geo | 1:10 | 700 / 350 | 10.0 / 20.0 | 9.0 (9.0–9.0, ±0 %) / 6.0 (6.0–6.0, ±0 %) | -33.3 % |",
		res.Command,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	doc := []byte("# Title\n\nprose before\n\n" + ReportBegin + "\nold table\n" + ReportEnd + "\n\nprose after\n")
	nd, err := ReplaceReport(doc, out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	s := string(nd)
	if strings.Contains(s, "old table") || !strings.Contains(s, "prose before") || !strings.Contains(s, "prose after") || !strings.Contains(s, "| geo | 1:10 |") {
		t.Errorf("regenerated document:\n%s", s)
	}
	if _, err := ReplaceReport([]byte("# no markers\n"), out.Bytes()); err == nil {
		t.Error("a document without markers was accepted")
	}
	res.Kind = "sweep"
	if err := WriteAckFreqReport(&out, []StoredResult{{File: file, Result: res}}); err == nil {
		t.Error("a sweep result was reported as ACK frequency")
	}
}

// TestPairMatrixReport checks the goodput matrix: servers as rows, clients
// as columns, a dash for a pair not run, and the best/worst client ratio.
func TestPairMatrixReport(t *testing.T) {
	pairs := []Pair{{"quiver", "quiver"}, {"quiver", "quic-go"}, {"quic-go", "quiver"}, {"quic-go", "quic-go"}}
	res := &Result{Kind: "goodput", Command: "quiver bench goodput --pairs ...", Options: Options{Pairs: pairs}}
	for i, p := range pairs {
		for _, m := range []float64{100, 200} {
			res.Runs = append(res.Runs, Run{Config: "default", Pair: p, Bytes: 1e8, GoodputMbps: m * float64(i+1)})
		}
	}
	res.Runs[6].Err = "failed" // quic-go<-quic-go keeps one run
	res.Runs[7].Err = "failed" // and then none
	res.Summaries = summarize(res)
	var out bytes.Buffer
	if err := WriteAckFreqReport(&out, []StoredResult{{File: "x/goodput.json", Result: res}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| server \\ client | quiver | quic-go | best / worst client |",
		"| quiver | 150 (±33 %) | 300 (±33 %) | 2.00× |",
		"| quic-go | 450 (±33 %) | – | 1.00× |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("matrix lacks %q:\n%s", want, out.String())
		}
	}
}
