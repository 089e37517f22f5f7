package bench

import (
	"math"
	"slices"
)

// Stat is the distribution of one metric over the successful runs.
type Stat struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// Spread is (max-min)/median in percent.
	Spread float64 `json:"spread_pct"`
}

func stat(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	st := Stat{N: len(s), Min: s[0], Max: s[len(s)-1], Median: median(s)}
	if st.Median != 0 {
		st.Spread = (st.Max - st.Min) / st.Median * 100
	}
	return st
}

// median of sorted values.
func median(s []float64) float64 {
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Summary aggregates the runs of one pair in one configuration.
type Summary struct {
	Config string `json:"config"`
	Pair
	ALPN   string `json:"alpn"`
	Failed int    `json:"failed"`
	// Rate is goodput in Mbit/s, or handshakes per second.
	Rate Stat `json:"rate"`
	// ServerCPU and ClientCPU are CPU seconds per GB (goodput) or CPU
	// milliseconds per handshake (handshakes).
	ServerCPU Stat `json:"server_cpu"`
	ClientCPU Stat `json:"client_cpu"`
	// Drops is the client namespace's UDP RcvbufErrors per run.
	Drops Stat `json:"rcvbuf_errors"`
	// Profiles is the median CPU split of each role over the runs.
	Profiles map[string]Split `json:"profiles,omitempty"`
	// Ratios compares the median rate with the baselines measured in the
	// same run and configuration, by baseline pair name.
	Ratios map[string]float64 `json:"ratios,omitempty"`
	// CPURatios compares total CPU per byte (or per handshake) likewise.
	CPURatios map[string]float64 `json:"cpu_ratios,omitempty"`
	// On the relay topology: the client's completion time in seconds, and
	// the return path's datagrams, bytes and small (ACK-only) datagrams
	// per run.
	Completion  Stat `json:"completion_s"`
	UpDatagrams Stat `json:"up_datagrams"`
	UpBytes     Stat `json:"up_bytes"`
	UpSmall     Stat `json:"up_small"`
	DownLost    Stat `json:"down_lost"`
	// DownDatagrams is the data direction's datagrams per run.
	DownDatagrams Stat `json:"down_datagrams"`
	// AckPackets and DataPackets are the data receiver's own counts (the
	// bench's Quiver client): 1-RTT packets it sent with an ACK frame, and
	// 1-RTT packets it received.
	AckPackets  Stat `json:"ack_packets"`
	DataPackets Stat `json:"data_packets"`
}

// Baselines are the pairs every other is compared with, when measured.
var Baselines = []Pair{{"quic-go", "quic-go"}, {"tcp", "tcp"}}

func summarize(res *Result) []Summary {
	type key struct {
		cfg  string
		pair Pair
	}
	var order []key
	groups := map[key][]Run{}
	for _, r := range res.Runs {
		k := key{r.Config, r.Pair}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	// Keep the order of the options: configurations, then pairs.
	rank := func(k key) int {
		ci := slices.IndexFunc(res.Options.Configs, func(c Config) bool { return c.Name == k.cfg })
		pi := slices.Index(res.Options.Pairs, k.pair)
		return ci*1000 + pi
	}
	slices.SortStableFunc(order, func(a, b key) int { return rank(a) - rank(b) })
	var out []Summary
	for _, k := range order {
		runs := groups[k]
		s := Summary{Config: k.cfg, Pair: k.pair, ALPN: runs[0].ALPN}
		var rate, scpu, ccpu, drops, compl, upd, upb, ups, lost, downd, acks, datap []float64
		splits := map[string][]Split{}
		for _, r := range runs {
			if r.Err != "" {
				s.Failed++
				continue
			}
			if r.Handshakes > 0 {
				rate = append(rate, r.HandshakesS)
				scpu = append(scpu, r.ServerCPU.Total().Seconds()*1e3/float64(r.Handshakes))
				ccpu = append(ccpu, r.ClientCPU.Total().Seconds()*1e3/float64(r.Handshakes))
			} else {
				rate = append(rate, r.GoodputMbps)
				scpu = append(scpu, r.CPUPerGB(r.ServerCPU))
				ccpu = append(ccpu, r.CPUPerGB(r.ClientCPU))
			}
			drops = append(drops, float64(r.UDP.RcvbufErrors))
			if r.Link != nil {
				compl = append(compl, r.Wall.Seconds())
				upd = append(upd, float64(r.Link.Up.Offered))
				upb = append(upb, float64(r.Link.Up.OfferedBytes))
				ups = append(ups, float64(r.Link.UpSmall))
				lost = append(lost, float64(r.Link.Down.Dropped()))
				downd = append(downd, float64(r.Link.Down.Offered))
			}
			if r.Acks != nil {
				acks = append(acks, float64(r.Acks.ACKPackets))
				datap = append(datap, float64(r.Acks.DataPackets))
			}
			for role, sp := range r.Profiles {
				splits[role] = append(splits[role], sp)
			}
		}
		s.Rate, s.ServerCPU, s.ClientCPU, s.Drops = stat(rate), stat(scpu), stat(ccpu), stat(drops)
		s.Completion, s.UpDatagrams, s.UpBytes, s.UpSmall, s.DownLost = stat(compl), stat(upd), stat(upb), stat(ups), stat(lost)
		s.DownDatagrams = stat(downd)
		s.AckPackets, s.DataPackets = stat(acks), stat(datap)
		if len(splits) > 0 {
			s.Profiles = map[string]Split{}
			for role, sps := range splits {
				s.Profiles[role] = medianSplit(sps)
			}
		}
		out = append(out, s)
	}
	for i := range out {
		for _, b := range Baselines {
			j := slices.IndexFunc(out, func(s Summary) bool { return s.Config == out[i].Config && s.Pair == b })
			if j < 0 || out[j].Rate.N == 0 || out[i].Rate.N == 0 {
				continue
			}
			if out[i].Ratios == nil {
				out[i].Ratios, out[i].CPURatios = map[string]float64{}, map[string]float64{}
			}
			out[i].Ratios[b.String()] = out[i].Rate.Median / out[j].Rate.Median
			if bc := out[j].ServerCPU.Median + out[j].ClientCPU.Median; bc > 0 {
				out[i].CPURatios[b.String()] = (out[i].ServerCPU.Median + out[i].ClientCPU.Median) / bc
			}
		}
	}
	return out
}
