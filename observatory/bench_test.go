package observatory

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/bench"
)

func TestBenchRecordAckFreqAndSweep(t *testing.T) {
	res := bench.Result{Kind: "ackfreq", Command: "quiver bench ackfreq --paths geo"}
	res.Options.Configs = []bench.Config{{Name: "geo/1:2"}, {Name: "geo/1:10"}}
	for i, ups := range []float64{2000, 400} {
		res.Summaries = append(res.Summaries, bench.Summary{Config: res.Options.Configs[i].Name, Pair: bench.Pair{Server: "quiver", Client: "quiver"},
			Rate: bench.Stat{N: 2, Median: 8}, DownDatagrams: bench.Stat{N: 2, Median: 8000}, UpDatagrams: bench.Stat{N: 2, Median: ups + 10}})
	}
	// The receiver's own counts win over the relay's.
	res.Summaries[1].AckPackets, res.Summaries[1].DataPackets = bench.Stat{N: 2, Median: 400}, bench.Stat{N: 2, Median: 8000}
	data, _ := json.Marshal(res)
	b, err := BenchRecord(data, "v")
	if err != nil {
		t.Fatal(err)
	}
	if b.Kind != "ackfreq" || len(b.Summary) != 2 || string(b.Result) != string(data) {
		t.Fatalf("record %+v", b)
	}
	// 8000 data datagrams against 400 ACKs: 20 per ACK, and RFC 9000's
	// 1:2 would have sent 4000, 10× as many.
	if n := b.Summary[1].Note; !strings.Contains(n, "20.0 data packets per ACK") || !strings.Contains(n, "10.0× fewer ACKs than RFC 9000 1:2") {
		t.Errorf("note %q", n)
	}

	res = bench.Result{Kind: "sweep"}
	res.Options.Configs = []bench.Config{{Name: "veth-1gbit", Rate: 1e9}, {Name: "veth-unshaped"}}
	data, _ = json.Marshal(res)
	if b, err = BenchRecord(data, "v"); err != nil || b.Kind != "sweep-rate" {
		t.Errorf("rate sweep recorded as %q, %v", b.Kind, err)
	}
	for _, bad := range []string{`{}`, `[1]`, `{"kind": "rpc", "results": 3}`} {
		if _, err := BenchRecord([]byte(bad), "v"); err == nil {
			t.Errorf("BenchRecord(%s) succeeded", bad)
		}
	}
}
