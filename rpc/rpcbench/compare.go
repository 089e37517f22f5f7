package rpcbench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"
)

// Compare measures every target at every concurrency and size, repeats
// times, alternating: within a cell the targets take turns, and the order
// rotates from one repeat to the next so that none always runs first.
// Each run's line is written to w as it ends; the result of every run is
// returned with its Repeat set.
func Compare(ctx context.Context, w io.Writer, targets []Target, concs, sizes []int, d time.Duration, repeats int) ([]Result, error) {
	var out []Result
	for _, size := range sizes {
		for _, conc := range concs {
			for rep := range repeats {
				for i := range targets {
					t := targets[(i+rep)%len(targets)]
					call, closeFn, err := t.Open(ctx, size)
					if err != nil {
						return out, fmt.Errorf("%s: %w", t.Name, err)
					}
					r := Run(ctx, t.Name, conc, size, d, call)
					closeFn()
					r.Repeat = rep
					fmt.Fprintln(w, r.BenchLine())
					out = append(out, r)
					if ctx.Err() != nil {
						return out, ctx.Err()
					}
				}
			}
		}
	}
	return out, nil
}

type cellKey struct {
	name       string
	conc, size int
}

// Summarise folds the repeats of each (target, concurrency, size) into
// one result: median throughput and median percentiles; calls and errors
// are summed.
func Summarise(rs []Result) []Result {
	var order []cellKey
	groups := map[cellKey][]Result{}
	for _, r := range rs {
		k := cellKey{r.Name, r.Concurrency, r.Size}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]Result, 0, len(order))
	for _, k := range order {
		g := groups[k]
		s := Result{Name: k.name, Concurrency: k.conc, Size: k.size, Runs: len(g)}
		var tp []float64
		var p50, p99, p999 []time.Duration
		for _, r := range g {
			s.Calls += r.Calls
			s.Errors += r.Errors
			s.Elapsed += r.Elapsed
			s.CPU += r.CPU
			tp = append(tp, r.Throughput())
			p50, p99, p999 = append(p50, r.P50), append(p99, r.P99), append(p999, r.P999)
		}
		s.Rate = median(tp)
		s.P50, s.P99, s.P999 = median(p50), median(p99), median(p999)
		out = append(out, s)
	}
	return out
}

func median[T int64 | float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Ratio is the throughput of one target over another's, paired run by
// run (the two runs of a repeat ran next to each other).
type Ratio struct {
	Num, Den   string
	Conc, Size int
	Median     float64
	Min, Max   float64
	Pairs      int
	CPU        bool // a ratio of calls per CPU-second
}

// Ratios pairs the runs of num and den repeat by repeat in every cell
// where both ran.
func Ratios(rs []Result, num, den string) []Ratio {
	type key struct{ conc, size, rep int }
	d := map[key]Result{}
	for _, r := range rs {
		if r.Name == den {
			d[key{r.Concurrency, r.Size, r.Repeat}] = r
		}
	}
	var order []cellKey
	vals := map[cellKey][]float64{}
	for _, r := range rs {
		if r.Name != num {
			continue
		}
		b, ok := d[key{r.Concurrency, r.Size, r.Repeat}]
		if !ok || b.Throughput() == 0 {
			continue
		}
		k := cellKey{"", r.Concurrency, r.Size}
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = append(vals[k], r.Throughput()/b.Throughput())
	}
	var out []Ratio
	for _, k := range order {
		v := vals[k]
		out = append(out, Ratio{Num: num, Den: den, Conc: k.conc, Size: k.size, Median: median(v),
			Min: slices.Min(v), Max: slices.Max(v), Pairs: len(v)})
	}
	return out
}

// CPURatios pairs runs like Ratios but compares CPU time per call (den
// over num, so that above 1 means num is cheaper).
func CPURatios(rs []Result, num, den string) []Ratio {
	inv := make([]Result, len(rs))
	for i, r := range rs {
		// Throughput of the inverse: calls per CPU second.
		inv[i] = r
		inv[i].Runs, inv[i].Rate = 0, 0
		inv[i].Elapsed = r.CPU
	}
	out := Ratios(inv, num, den)
	for i := range out {
		out[i].CPU = true
	}
	return out
}

// String states the ratio, its kind (throughput or calls per CPU-second), the cell and the spread of the paired runs.
func (r Ratio) String() string {
	if r.CPU {
		return fmt.Sprintf("%s / %s calls per CPU-second at conc=%d size=%d: %.2fx (median of %d paired runs, range %.2f-%.2f)",
			r.Num, r.Den, r.Conc, r.Size, r.Median, r.Pairs, r.Min, r.Max)
	}
	return fmt.Sprintf("%s / %s throughput at conc=%d size=%d: %.2fx (median of %d paired runs, range %.2f-%.2f)",
		r.Num, r.Den, r.Conc, r.Size, r.Median, r.Pairs, r.Min, r.Max)
}
