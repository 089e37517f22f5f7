package bench

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The markers around the part of a document that `quiver bench report`
// regenerates; the text outside them is left as it is.
const (
	ReportBegin = "<!-- begin: quiver bench report (generated from stored runs; do not edit by hand) -->"
	ReportEnd   = "<!-- end: quiver bench report -->"
)

// StoredResult is a result read back from its JSON file.
type StoredResult struct {
	File string
	*Result
}

// ReadResults reads stored result files (ackfreq.json and the like, also
// gzipped: name.json.gz).
func ReadResults(files []string) ([]StoredResult, error) {
	var out []StoredResult
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(f, ".gz") {
			// Stored runs are kept gzipped in the repository.
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if b, err = io.ReadAll(io.LimitReader(zr, 256<<20)); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
		}
		var r Result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if len(r.Runs) == 0 {
			return nil, fmt.Errorf("%s: no runs", f)
		}
		if len(r.Summaries) == 0 {
			r.Summaries = summarize(&r)
		}
		out = append(out, StoredResult{File: f, Result: &r})
	}
	return out, nil
}

// ratioOf splits an ACK frequency configuration name ("geo/1:10@25ms")
// into path, ratio N (0 for adaptive) and delay suffix ("" for RTT/4).
func ratioOf(config string) (path string, n int, delay string) {
	path, rest, _ := strings.Cut(config, "/")
	rest, delay, _ = strings.Cut(rest, "@")
	n, _ = strconv.Atoi(strings.TrimPrefix(rest, "1:"))
	return path, n, delay
}

// ackCounts are the receiver's ACK and data packets of a summary, else the
// relay's datagrams.
func ackCounts(s Summary) (acks, data float64) {
	if s.AckPackets.N > 0 && s.DataPackets.N > 0 {
		return s.AckPackets.Median, s.DataPackets.Median
	}
	return s.UpDatagrams.Median, s.DownDatagrams.Median
}

func spreadCell(st Stat) string {
	if st.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f (%.1f–%.1f, ±%.0f %%)", st.Median, st.Min, st.Max, st.Spread/2)
}

// WriteAckFreqReport writes the tables of stored results: for ackfreq, per
// run file, every cell with its spread, and the fixed 25 ms delay beside
// RTT/4 for each path and ratio measured both ways; for goodput, the pair
// matrix (servers × clients). Every table names the file and the command
// that produced it.
func WriteAckFreqReport(w io.Writer, results []StoredResult) error {
	for _, r := range results {
		if r.Kind == "goodput" {
			writePairMatrix(w, r)
			continue
		}
		if r.Kind != "ackfreq" {
			return fmt.Errorf("%s: a %q result, neither ackfreq nor goodput", r.File, r.Kind)
		}
		runs := 0
		for _, s := range r.Summaries {
			runs = max(runs, s.Rate.N+s.Failed)
		}
		fmt.Fprintf(w, "### Run `%s`\n\n", r.File)
		fmt.Fprintf(w, "`%s` — started %s on %s; %d runs per cell, alternating. Goodput: median (min–max, ± half the spread).\n\n",
			r.Command, r.Started.Format("2006-01-02 15:04 UTC"), r.Host, runs)
		fmt.Fprintln(w, "| path | ratio | runs ok | goodput Mbit/s | vs 1:2 | data packets | ACK packets | data per ACK |"+
			" fewer ACKs than RFC 9000 1:2 (expected N/2) | fewer ACKs than strict 1:2 | CPU s/GB server + client |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
		for _, s := range r.Summaries {
			path, n, _ := ratioOf(s.Config)
			_, ratio, _ := strings.Cut(s.Config, "/")
			acks, data := ackCounts(s)
			vs := "—"
			if b := findSummary(r.Summaries, path+"/1:2"); b != nil && b.Rate.N > 0 && s.Rate.N > 0 && s.Config != path+"/1:2" {
				vs = fmt.Sprintf("%+.1f %%", (s.Rate.Median/b.Rate.Median-1)*100)
			}
			per, rfc := "–", "–"
			if acks > 0 {
				per = fmt.Sprintf("%.1f", data/acks)
				rfc = fmt.Sprintf("%.1f×", data/2/acks)
				if n > 0 {
					rfc += fmt.Sprintf(" (%g)", float64(n)/2)
				}
			}
			strict := "–"
			if b := findSummary(r.Summaries, path+"/strict"); b != nil && b.Rate.N > 0 && acks > 0 {
				if sa, _ := ackCounts(*b); sa > 0 {
					strict = fmt.Sprintf("%.1f×", sa/acks)
				}
			}
			fmt.Fprintf(w, "| %s | %s | %d/%d | %s | %s | %.0f | %.0f | %s | %s | %s | %.1f + %.1f |\n", path, ratio, s.Rate.N, s.Rate.N+s.Failed,
				spreadCell(s.Rate), vs, data, acks, per, rfc, strict, s.ServerCPU.Median, s.ClientCPU.Median)
		}
		writeDelayTable(w, r)
		fmt.Fprintln(w)
	}
	return nil
}

// writeDelayTable compares, for every path and ratio measured with both,
// the fixed delay ("@25ms") with the RTT/4 default.
func writeDelayTable(w io.Writer, r StoredResult) {
	var rows []string
	for _, s := range r.Summaries {
		path, _, delay := ratioOf(s.Config)
		if delay == "" {
			continue
		}
		base, _, _ := strings.Cut(s.Config, "@")
		b := findSummary(r.Summaries, base)
		if b == nil || b.Rate.N == 0 || s.Rate.N == 0 {
			continue
		}
		ba, bd := ackCounts(*b)
		fa, fd := ackCounts(s)
		_, ratio, _ := strings.Cut(base, "/")
		rows = append(rows, fmt.Sprintf("| %s | %s | %.0f / %.0f | %.1f / %.1f | %s / %s | %+.1f %% |", path, ratio, ba, fa,
			bd/max(ba, 1), fd/max(fa, 1), spreadCell(b.Rate), spreadCell(s.Rate), (s.Rate.Median/b.Rate.Median-1)*100))
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nRequested Max Ack Delay: smoothed RTT / 4 (the default here, ack-frequency.md §10.6) against a fixed delay (the study's 25 ms), same run:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| path | ratio | ACK packets RTT/4 / fixed | data per ACK RTT/4 / fixed | goodput Mbit/s RTT/4 / fixed | fixed vs RTT/4 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, row := range rows {
		fmt.Fprintln(w, row)
	}
}

func findSummary(ss []Summary, config string) *Summary {
	i := slices.IndexFunc(ss, func(s Summary) bool { return s.Config == config })
	if i < 0 {
		return nil
	}
	return &ss[i]
}

// ReplaceReport puts report between the markers of doc, keeping the rest.
func ReplaceReport(doc, report []byte) ([]byte, error) {
	i := bytes.Index(doc, []byte(ReportBegin))
	j := bytes.Index(doc, []byte(ReportEnd))
	if i < 0 || j < i {
		return nil, errors.New("the document has no '" + ReportBegin + "' … '" + ReportEnd + "' section to regenerate")
	}
	var b bytes.Buffer
	b.Write(doc[:i+len(ReportBegin)])
	b.WriteString("\n\n")
	b.Write(bytes.TrimSpace(report))
	b.WriteString("\n\n")
	b.Write(doc[j:])
	return b.Bytes(), nil
}

// writePairMatrix writes a goodput result as a matrix of servers (rows)
// and clients (columns), each cell the median with ± half the spread, and
// per server the ratio of its best to its worst client: the pairing
// effect, to be read against the spreads.
func writePairMatrix(w io.Writer, r StoredResult) {
	var servers, clients []string
	for _, p := range r.Options.Pairs {
		if !slices.Contains(servers, p.Server) {
			servers = append(servers, p.Server)
		}
		if !slices.Contains(clients, p.Client) {
			clients = append(clients, p.Client)
		}
	}
	runs := 0
	for _, s := range r.Summaries {
		runs = max(runs, s.Rate.N+s.Failed)
	}
	fmt.Fprintf(w, "### Run `%s`\n\n", r.File)
	fmt.Fprintf(w, "`%s` — started %s on %s; %d runs per pair, alternating. Goodput Mbit/s, median (± half the spread); "+
		"rows are servers, columns clients; – not run (no shared protocol, or not installed).\n\n",
		r.Command, r.Started.Format("2006-01-02 15:04 UTC"), r.Host, runs)
	fmt.Fprintf(w, "| server \\ client | %s | best / worst client |\n|---|", strings.Join(clients, " | "))
	for range clients {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w, "---|")
	for _, srv := range servers {
		fmt.Fprintf(w, "| %s |", srv)
		lo, hi := 0.0, 0.0
		for _, cli := range clients {
			i := slices.IndexFunc(r.Summaries, func(s Summary) bool { return s.Server == srv && s.Client == cli })
			if i < 0 || r.Summaries[i].Rate.N == 0 {
				fmt.Fprint(w, " – |")
				continue
			}
			st := r.Summaries[i].Rate
			fmt.Fprintf(w, " %.0f (±%.0f %%) |", st.Median, st.Spread/2)
			if lo == 0 || st.Median < lo {
				lo = st.Median
			}
			hi = max(hi, st.Median)
		}
		if lo > 0 {
			fmt.Fprintf(w, " %.2f× |\n", hi/lo)
		} else {
			fmt.Fprintln(w, " – |")
		}
	}
}
