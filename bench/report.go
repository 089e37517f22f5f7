package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// units names a result kind's rate and CPU units.
func units(kind string) (rate, cpu string) {
	if kind == "handshakes" {
		return "handshakes/s", "cpu-ms/handshake"
	}
	return "goodput-Mbps", "cpu-s/GB"
}

// benchName is the run's name in Go benchmark format; key=value parts let
// benchstat group by configuration, server and client.
func benchName(kind string, r Run) string {
	clean := func(s string) string { return strings.NewReplacer("/", "", " ", "_").Replace(s) }
	prefix := "BenchmarkGoodput"
	if kind == "handshakes" {
		prefix = "BenchmarkHandshakes"
	}
	return fmt.Sprintf("%s/config=%s/server=%s/client=%s", prefix, clean(r.Config), clean(r.Server), clean(r.Client))
}

// WriteBenchfmt writes one Go benchmark line per successful run, with a
// header benchstat understands.
func WriteBenchfmt(w io.Writer, res *Result) {
	fmt.Fprintf(w, "goos: linux\ngoarch: %s\npkg: github.com/quiver-quic/quiver/bench\ncpu: %s\n", runtime.GOARCH, res.Host.CPU)
	rate, cpu := units(res.Kind)
	for _, r := range res.Runs {
		if r.Err != "" {
			continue
		}
		if res.Kind == "handshakes" {
			fmt.Fprintf(w, "%s\t%d\t%.0f ns/op\t%.1f %s\t%.3f %s\n", benchName(res.Kind, r), r.Handshakes,
				float64(r.Wall.Nanoseconds())/float64(r.Handshakes), r.HandshakesS, rate,
				(r.ServerCPU.Total()+r.ClientCPU.Total()).Seconds()*1e3/float64(r.Handshakes), cpu)
			continue
		}
		fmt.Fprintf(w, "%s\t1\t%d ns/op\t%.1f %s\t%.3f %s\t%.3f server-%s\t%.3f client-%s\t%d rcvbuf-drops\n", benchName(res.Kind, r),
			r.Wall.Nanoseconds(), r.GoodputMbps, rate, r.CPUPerGB(r.ServerCPU)+r.CPUPerGB(r.ClientCPU), cpu,
			r.CPUPerGB(r.ServerCPU), cpu, r.CPUPerGB(r.ClientCPU), cpu, r.UDP.RcvbufErrors)
	}
}

// WriteTable writes the summary as an aligned text table.
func WriteTable(w io.Writer, res *Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	rate, cpu := units(res.Kind)
	base := baselineNames(res)
	fmt.Fprintf(tw, "config\tserver<-client\talpn\truns\tmedian %s\tmin\tmax\tspread\tserver %s\tclient %s\tdrops", rate, cpu, cpu)
	for _, b := range base {
		fmt.Fprintf(tw, "\t×%s\tcpu×%s", b, b)
	}
	fmt.Fprintln(tw, "\t")
	for _, s := range res.Summaries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%.1f\t%.1f\t%.1f\t%.0f%%\t%.3f\t%.3f\t%.0f", s.Config, s.Pair, s.ALPN,
			s.Rate.N, s.Rate.N+s.Failed, s.Rate.Median, s.Rate.Min, s.Rate.Max, s.Rate.Spread,
			s.ServerCPU.Median, s.ClientCPU.Median, s.Drops.Median)
		for _, b := range base {
			fmt.Fprintf(tw, "\t%s\t%s", ratio(s.Ratios, b), ratio(s.CPURatios, b))
		}
		fmt.Fprintln(tw, "\t")
	}
	tw.Flush()
	for _, n := range res.Unsupported {
		fmt.Fprintf(w, "not run: %s %s: %s\n", n.Config, n.Pair, firstLine(n.Reason))
	}
	if prof := profileRows(res); len(prof) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "config\tserver<-client\trole\tpacket I/O\tcrypto\tprotocol\tother\tsamples\t")
		for _, r := range prof {
			fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
		}
		tw.Flush()
	}
}

func ratio(m map[string]float64, b string) string {
	if v, ok := m[b]; ok {
		return fmt.Sprintf("%.2f", v)
	}
	return "–"
}

func baselineNames(res *Result) []string {
	var out []string
	for _, b := range Baselines {
		if slices.ContainsFunc(res.Summaries, func(s Summary) bool { return s.Pair == b && s.Rate.N > 0 }) {
			out = append(out, b.String())
		}
	}
	return out
}

func profileRows(res *Result) [][]string {
	var rows [][]string
	pct := func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) }
	for _, s := range res.Summaries {
		for _, role := range []string{"server", "client"} {
			sp, ok := s.Profiles[role]
			if !ok {
				continue
			}
			rows = append(rows, []string{s.Config, s.Pair.String(), role, pct(sp.PacketIO), pct(sp.Crypto), pct(sp.Protocol), pct(sp.Other), strconv.FormatInt(sp.Samples, 10)})
		}
	}
	return rows
}

// WriteJSON writes the whole result, runs included.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteCSV writes one row per run; the first line is a comment with the
// command line.
func WriteCSV(w io.Writer, res *Result) error {
	fmt.Fprintf(w, "# %s\n", res.Command)
	cw := csv.NewWriter(w)
	cw.Write([]string{"kind", "config", "server", "client", "alpn", "iter", "bytes", "handshakes", "wall_ns", "goodput_mbps", "handshakes_per_s",
		"server_user_s", "server_sys_s", "client_user_s", "client_sys_s", "server_cpu_s_per_gb", "client_cpu_s_per_gb",
		"udp_rcvbuf_errors", "udp_in_errors", "udp_in_datagrams", "server_io", "server_crypto", "server_protocol", "server_other",
		"client_io", "client_crypto", "client_protocol", "client_other", "error"})
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
	for _, r := range res.Runs {
		row := []string{res.Kind, r.Config, r.Server, r.Client, r.ALPN, strconv.Itoa(r.Iter), strconv.FormatInt(r.Bytes, 10),
			strconv.Itoa(r.Handshakes), strconv.FormatInt(r.Wall.Nanoseconds(), 10), f(r.GoodputMbps), f(r.HandshakesS),
			f(r.ServerCPU.User.Seconds()), f(r.ServerCPU.System.Seconds()), f(r.ClientCPU.User.Seconds()), f(r.ClientCPU.System.Seconds()),
			f(r.CPUPerGB(r.ServerCPU)), f(r.CPUPerGB(r.ClientCPU)),
			strconv.FormatInt(r.UDP.RcvbufErrors, 10), strconv.FormatInt(r.UDP.InErrors, 10), strconv.FormatInt(r.UDP.InDatagrams, 10)}
		for _, role := range []string{"server", "client"} {
			if sp, ok := r.Profiles[role]; ok {
				row = append(row, f(sp.PacketIO), f(sp.Crypto), f(sp.Protocol), f(sp.Other))
			} else {
				row = append(row, "", "", "", "")
			}
		}
		row = append(row, firstLine(r.Err))
		cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

// WriteMarkdown writes a report: the command, the host, the summary table,
// the CPU split and the unsupported configurations.
func WriteMarkdown(w io.Writer, res *Result, charts []string) {
	rate, cpu := units(res.Kind)
	fmt.Fprintf(w, "# quiver bench %s\n\n", res.Kind)
	fmt.Fprintf(w, "Command: `%s`\n\n", res.Command)
	h := res.Host
	fmt.Fprintf(w, "Host: %s, %d CPUs, Linux %s, %s, rmem_default %s, rmem_max %s; started %s.", h.CPU, h.CPUs, h.Kernel, h.GoVersion, h.RmemDef, h.RmemMax, res.Started.Format("2006-01-02 15:04 UTC"))
	if h.Contended {
		fmt.Fprintf(w, " Client and server share the machine's %d cores (contended).", h.CPUs)
	}
	fmt.Fprintf(w, "\n\n")
	base := baselineNames(res)
	fmt.Fprintf(w, "| config | server ← client | ALPN | runs | median %s | min–max | spread | server %s | client %s | socket drops |", rate, cpu, cpu)
	for _, b := range base {
		fmt.Fprintf(w, " × %s | CPU × %s |", b, b)
	}
	fmt.Fprintf(w, "\n|---|---|---|---|---|---|---|---|---|---|")
	for range base {
		fmt.Fprintf(w, "---|---|")
	}
	fmt.Fprintln(w)
	for _, s := range res.Summaries {
		fmt.Fprintf(w, "| %s | %s ← %s | %s | %d/%d | %.1f | %.1f–%.1f | %.0f %% | %.3f | %.3f | %.0f |", s.Config, s.Server, s.Client, s.ALPN,
			s.Rate.N, s.Rate.N+s.Failed, s.Rate.Median, s.Rate.Min, s.Rate.Max, s.Rate.Spread, s.ServerCPU.Median, s.ClientCPU.Median, s.Drops.Median)
		for _, b := range base {
			fmt.Fprintf(w, " %s | %s |", ratio(s.Ratios, b), ratio(s.CPURatios, b))
		}
		fmt.Fprintln(w)
	}
	if rows := profileRows(res); len(rows) > 0 {
		fmt.Fprintf(w, "\nWhere the CPU goes (share of profile samples; each sample counted in the category of the frame nearest its leaf that has one):\n\n")
		fmt.Fprintf(w, "| config | server ← client | role | packet I/O | crypto | protocol | other | samples |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
	}
	if res.Kind == "ackfreq" {
		writeAckFreqTable(w, res)
	}
	if len(res.Unsupported) > 0 {
		fmt.Fprintf(w, "\nNot run:\n\n")
		for _, n := range res.Unsupported {
			fmt.Fprintf(w, "- %s, %s: %s\n", n.Config, n.Pair, firstLine(n.Reason))
		}
	}
	var failed []Run
	for _, r := range res.Runs {
		if r.Err != "" {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\nFailed runs (excluded from the statistics):\n\n")
		for _, r := range failed {
			fmt.Fprintf(w, "- %s, %s, run %d: %s\n", r.Config, r.Pair, r.Iter, firstLine(r.Err))
		}
	}
	for _, c := range charts {
		fmt.Fprintf(w, "\n![%s](%s)\n", filepath.Base(c), filepath.Base(c))
	}
}

// WriteFiles writes NAME.json, NAME.csv, NAME.txt (benchmark lines),
// NAME.md and the charts into dir, and returns the paths.
func WriteFiles(dir, name string, res *Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := filepath.Join(dir, name)
	var paths []string
	write := func(path string, f func(io.Writer) error) error {
		file, err := os.Create(path)
		if err != nil {
			return err
		}
		err = f(file)
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		paths = append(paths, path)
		return err
	}
	if err := write(base+".json", func(w io.Writer) error { return WriteJSON(w, res) }); err != nil {
		return paths, err
	}
	if err := write(base+".csv", func(w io.Writer) error { return WriteCSV(w, res) }); err != nil {
		return paths, err
	}
	if err := write(base+".txt", func(w io.Writer) error { WriteBenchfmt(w, res); return nil }); err != nil {
		return paths, err
	}
	charts, err := writeCharts(base, res)
	if err != nil {
		return paths, err
	}
	paths = append(paths, charts...)
	err = write(base+".md", func(w io.Writer) error { WriteMarkdown(w, res, pngs(charts)); return nil })
	return paths, err
}

func pngs(paths []string) []string {
	var out []string
	for _, p := range paths {
		if strings.HasSuffix(p, ".svg") {
			out = append(out, p)
		}
	}
	return out
}

// writeAckFreqTable adds the return-path view: per path and ACK ratio, the
// datagrams and bytes the client sent back and their reduction against two
// baselines: the path's 1:2 row measured in the same run (Quiver without an
// ACK_FREQUENCY frame, whose receiver acknowledges once per receive batch,
// so it already sends fewer than one ACK per two packets when batches are
// large) and RFC 9000's one ACK per two ack-eliciting packets, computed as
// half the data datagrams. The expected reduction against the latter is
// N/2 for 1:N.
func writeAckFreqTable(w io.Writer, res *Result) {
	fmt.Fprintf(w, "\nReturn path (client to server) per transfer, medians. \"ACK packets\" and \"data packets\" are the receiver's own counts (the bench's Quiver client counts the 1-RTT packets it sends with an ACK frame and those it receives); the relay's counts follow: return datagrams (nearly all carry an ACK; the others are the request and the handshake) and \"≤ %d B\", the ACK-only datagrams by size, which misses ACKs whose frames grew with loss. \"RFC 9000 1:2\" is one ACK per two ack-eliciting packets, half the data packets; 1:N should send N/2 times fewer than that. \"measured 1:2\" is the path's 1:2 row of this run: Quiver's receiver acknowledges once per receive batch (RFC 9000 §13.2.2 allows it), so that row can already be well below one ACK per two packets when the emulator hands over bursts.\n\n", SmallDatagram)
	fmt.Fprintf(w, "| path | ACK ratio | goodput Mbit/s | goodput vs measured 1:2 | completion s | data packets | ACK packets | data packets per ACK | fewer ACKs than RFC 9000 1:2 (expected N/2) | fewer ACKs than measured 1:2 | return datagrams | ≤ %d B | return bytes | data lost | CPU s/GB server + client |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", SmallDatagram)
	// acks and data prefer the receiver's counts, else the relay's.
	counts := func(s Summary) (acks, data float64) {
		if s.AckPackets.N > 0 && s.DataPackets.N > 0 {
			return s.AckPackets.Median, s.DataPackets.Median
		}
		return s.UpDatagrams.Median, s.DownDatagrams.Median
	}
	for _, s := range res.Summaries {
		path, ratio, _ := strings.Cut(s.Config, "/")
		acks, data := counts(s)
		base := slices.IndexFunc(res.Summaries, func(b Summary) bool { return b.Config == path+"/1:2" })
		red, gp := "–", "–"
		if base >= 0 && res.Summaries[base].Rate.N > 0 && s.Rate.N > 0 {
			b := res.Summaries[base]
			if backs, _ := counts(b); acks > 0 {
				red = fmt.Sprintf("%.1f×", backs/acks)
			}
			gp = fmt.Sprintf("%+.1f %%", (s.Rate.Median/b.Rate.Median-1)*100)
		}
		per, rfc := "–", "–"
		if acks > 0 {
			per = fmt.Sprintf("%.1f", data/acks)
			rfc = fmt.Sprintf("%.1f×", data/2/acks)
			if n, err := strconv.Atoi(strings.TrimPrefix(ratio, "1:")); err == nil {
				rfc += fmt.Sprintf(" (%g)", float64(n)/2)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %.1f | %s | %.2f | %.0f | %.0f | %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.2f + %.2f |\n", path, ratio, s.Rate.Median, gp, s.Completion.Median,
			data, acks, per, rfc, red, s.UpDatagrams.Median, s.UpSmall.Median, s.UpBytes.Median, s.DownLost.Median, s.ServerCPU.Median, s.ClientCPU.Median)
	}
	for _, n := range res.Unsupported {
		path, ratio, _ := strings.Cut(n.Config, "/")
		fmt.Fprintf(w, "| %s | %s | not run: %s | | | | | | | | | | | | |\n", path, ratio, firstLine(n.Reason))
	}
}
