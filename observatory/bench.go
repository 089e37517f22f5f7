package observatory

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/bench"
	"github.com/quiver-quic/quiver/observatory/store"
	"github.com/quiver-quic/quiver/rpc/rpcbench"
)

// BenchRecord turns the JSON a benchmark wrote (a bench.Result from
// `quiver bench goodput`, `handshakes`, `sweep` or `ackfreq`, or an
// rpcbench.Report from `quiver bench rpc`) into a store row: one summary
// row per configuration and subject, and the JSON kept whole.
func BenchRecord(data []byte, toolVersion string) (store.BenchRun, error) {
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return store.BenchRun{}, fmt.Errorf("benchmark JSON: %w", err)
	}
	switch head.Kind {
	case "":
		return store.BenchRun{}, errors.New("benchmark JSON: no kind; is this a file quiver bench wrote (goodput.json, sweep-*.json, ackfreq.json, rpc.json)?")
	case "rpc":
		var r RPCReport
		if err := json.Unmarshal(data, &r); err != nil {
			return store.BenchRun{}, fmt.Errorf("rpc benchmark JSON: %w", err)
		}
		b := RPCBenchRecord(&r, toolVersion)
		b.Result = json.RawMessage(data)
		return b, nil
	}
	var res bench.Result
	if err := json.Unmarshal(data, &res); err != nil {
		return store.BenchRun{}, fmt.Errorf("%s benchmark JSON: %w", head.Kind, err)
	}
	b := BenchResultRecord(&res, toolVersion)
	b.Result = json.RawMessage(data)
	return b, nil
}

// BenchResultRecord summarises a goodput, handshake, sweep or ACK
// frequency run; the caller sets Result.
func BenchResultRecord(res *bench.Result, toolVersion string) store.BenchRun {
	b := store.BenchRun{Kind: res.Kind, Command: res.Command, ToolVersion: toolVersion, Started: res.Started, Host: res.Host.String()}
	if res.Kind == "sweep" {
		if p := sweepParam(res); p != "" {
			b.Kind = "sweep-" + p
		}
	}
	metric, cpu := "goodput Mbit/s", "CPU s/GB"
	if res.Kind == "handshakes" {
		metric, cpu = "handshakes/s", "CPU ms/handshake"
	}
	for _, s := range res.Summaries {
		row := store.BenchRow{
			Config: s.Config, Subject: s.Pair.String(), Metric: metric,
			Median: s.Rate.Median, Min: s.Rate.Min, Max: s.Rate.Max, Runs: s.Rate.N, Failed: s.Failed,
			CPU: s.ServerCPU.Median + s.ClientCPU.Median, CPUMetric: cpu + " (server + client)",
		}
		var notes []string
		for _, base := range bench.Baselines {
			if r, ok := s.Ratios[base.String()]; ok && base != s.Pair {
				notes = append(notes, fmt.Sprintf("%.2f× %s", r, base))
			}
		}
		if res.Kind == "ackfreq" {
			// The return path, against RFC 9000's one ACK per two
			// ack-eliciting packets: the receiver's own counts when it
			// reported them, else the relay's.
			acks, data := s.AckPackets.Median, s.DataPackets.Median
			if s.AckPackets.N == 0 || s.DataPackets.N == 0 {
				acks, data = s.UpDatagrams.Median, s.DownDatagrams.Median
			}
			if acks > 0 && data > 0 {
				notes = append(notes, fmt.Sprintf("%.1f data packets per ACK, %.1f× fewer ACKs than RFC 9000 1:2", data/acks, data/2/acks))
			}
		}
		row.Note = strings.Join(notes, "; ")
		b.Summary = append(b.Summary, row)
	}
	return b
}

// sweepParam names the parameter a sweep varied, from its configuration
// names ("rcvbuf=0.5x", "veth-1gbit").
func sweepParam(res *bench.Result) string {
	var params []string
	for _, c := range res.Options.Configs {
		p, _, ok := strings.Cut(c.Name, "=")
		if !ok {
			if c.Rate > 0 || strings.HasPrefix(c.Name, "veth-") {
				p = "rate"
			} else {
				p = "topology"
			}
		}
		if !slices.Contains(params, p) {
			params = append(params, p)
		}
	}
	return strings.Join(params, ",")
}

// RPCReport is a whole run of `quiver bench rpc` as written to rpc.json:
// every measured run (Go benchmark lines parsed back) with the command.
type RPCReport struct {
	Kind    string            `json:"kind"` // always "rpc"
	Command string            `json:"command"`
	Started time.Time         `json:"started"`
	Host    string            `json:"host"`
	Results []rpcbench.Result `json:"results"`
}

// RPCBenchRecord summarises an RPC run: median calls per second by
// transport, concurrency and payload size over the repeats; the caller
// sets Result.
func RPCBenchRecord(r *RPCReport, toolVersion string) store.BenchRun {
	b := store.BenchRun{Kind: "rpc", Command: r.Command, ToolVersion: toolVersion, Started: r.Started, Host: r.Host}
	for _, x := range rpcbench.Summarise(r.Results) {
		lo, hi := math.Inf(1), 0.0
		for _, y := range r.Results {
			if y.Name == x.Name && y.Concurrency == x.Concurrency && y.Size == x.Size {
				lo, hi = math.Min(lo, y.Throughput()), math.Max(hi, y.Throughput())
			}
		}
		if math.IsInf(lo, 1) {
			lo = 0
		}
		b.Summary = append(b.Summary, store.BenchRow{
			Config: fmt.Sprintf("conc=%d size=%d", x.Concurrency, x.Size), Subject: x.Name, Metric: "calls/s",
			Median: x.Throughput(), Min: lo, Max: hi, Runs: max(x.Runs, 1),
			Note: fmt.Sprintf("p50 %s, p99 %s", x.P50, x.P99),
		})
	}
	return b
}
