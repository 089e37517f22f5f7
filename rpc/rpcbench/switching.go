package rpcbench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiver-quic/quiver/rpc"
)

// SwitchConfig configures the switching experiment.
type SwitchConfig struct {
	Conc, Size int
	// Every is the time between swaps (tcp -> quic -> tcp ...).
	Every time.Duration
	// Swaps and Calls are the least the run makes: it ends when both are
	// reached.
	Swaps, Calls int
	// Window: a call that overlaps [swap start - Window, swap end +
	// Window] counts as "near" a swap, the others as "far".
	Window time.Duration
}

// SwitchReport is what the switching experiment measured.
type SwitchReport struct {
	Config    SwitchConfig
	Swaps     int
	SwapTimes []time.Duration // how long each Switch call took (dial, swap, drain)
	Calls     int
	Failed    int
	FirstErr  error
	Near, Far Result // calls near a swap and far from every swap
	MaxNear   time.Duration
	Elapsed   time.Duration
}

// P99Ratio is p99 near swaps over p99 far from them (the goal:
// at most 1.5).
func (r SwitchReport) P99Ratio() float64 {
	if r.Far.P99 == 0 {
		return 0
	}
	return float64(r.Near.P99) / float64(r.Far.P99)
}

type callRecord struct {
	start, lat time.Duration
	err        bool
}

// Switching runs a closed-loop load of Conc workers on one client while
// another goroutine swaps its transport between TCP+TLS and QUIC every
// cfg.Every, with Client.Switch (which connects the new transport before
// moving calls to it, and lets calls in flight finish on the old one).
func Switching(ctx context.Context, s *Server, cfg SwitchConfig) (SwitchReport, error) {
	tcp, _ := s.Dialer("tcp")
	quic, _ := s.Dialer("quic")
	c := rpc.NewClient(tcp(), rpc.WithCodec(rpc.Proto))
	defer c.Close()
	if err := c.Transport().Connect(ctx); err != nil {
		return SwitchReport{}, err
	}
	call := EchoCall(c, cfg.Size)
	rep := SwitchReport{Config: cfg}
	var (
		stop     = make(chan struct{})
		calls    atomic.Int64
		recs     = make([][]callRecord, cfg.Conc)
		firstErr atomic.Pointer[error]
		wg       sync.WaitGroup
	)
	t0 := time.Now()
	for w := range cfg.Conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				st := time.Now()
				err := call(ctx)
				recs[w] = append(recs[w], callRecord{st.Sub(t0), time.Since(st), err != nil})
				calls.Add(1)
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	type span struct{ from, to time.Duration }
	var swaps []span
	tick := time.NewTicker(cfg.Every)
	for len(swaps) < cfg.Swaps || calls.Load() < int64(cfg.Calls) {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		if ctx.Err() != nil {
			break
		}
		next := tcp
		if c.Transport().Name() == "tcp" {
			next = quic
		}
		st := time.Now()
		if err := c.Switch(ctx, next()); err != nil {
			tick.Stop()
			close(stop)
			wg.Wait()
			return rep, fmt.Errorf("swap %d: %w", len(swaps)+1, err)
		}
		swaps = append(swaps, span{st.Sub(t0), time.Since(t0)})
		rep.SwapTimes = append(rep.SwapTimes, time.Since(st))
	}
	tick.Stop()
	close(stop)
	wg.Wait()
	rep.Elapsed = time.Since(t0)
	rep.Swaps = len(swaps)
	if p := firstErr.Load(); p != nil {
		rep.FirstErr = *p
	}
	var near, far []time.Duration
	var nearSpan, farSpan time.Duration
	for _, rs := range recs {
		for _, r := range rs {
			rep.Calls++
			if r.err {
				rep.Failed++
				continue
			}
			isNear := false
			for _, sw := range swaps {
				if r.start <= sw.to+cfg.Window && r.start+r.lat >= sw.from-cfg.Window {
					isNear = true
					break
				}
			}
			if isNear {
				near = append(near, r.lat)
			} else {
				far = append(far, r.lat)
			}
		}
	}
	// The time each class covers, for a calls/s figure.
	for i, sw := range swaps {
		from, to := max(0, sw.from-cfg.Window), min(rep.Elapsed, sw.to+cfg.Window)
		if i > 0 {
			from = max(from, swaps[i-1].to+cfg.Window)
		}
		if to > from {
			nearSpan += to - from
		}
	}
	farSpan = rep.Elapsed - nearSpan
	rep.Near = summary("quiver/switch-near", cfg, near, nearSpan)
	rep.Far = summary("quiver/switch-far", cfg, far, farSpan)
	if len(near) > 0 {
		rep.MaxNear = slices.Max(near)
	}
	return rep, nil
}

func summary(name string, cfg SwitchConfig, lat []time.Duration, span time.Duration) Result {
	slices.Sort(lat)
	r := Result{Name: name, Concurrency: cfg.Conc, Size: cfg.Size, Calls: len(lat), Elapsed: span}
	if len(lat) > 0 {
		pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
		r.P50, r.P99, r.P999 = pct(0.50), pct(0.99), pct(0.999)
	}
	return r
}

// Print writes the report.
func (r SwitchReport) Print(w io.Writer) {
	fmt.Fprintln(w, r.Near.BenchLine())
	fmt.Fprintln(w, r.Far.BenchLine())
	slices.Sort(r.SwapTimes)
	fmt.Fprintf(w, "switching tcp<->quic every %v, conc=%d size=%d: %d swaps, %d calls, %d failed in %v\n",
		r.Config.Every, r.Config.Conc, r.Config.Size, r.Swaps, r.Calls, r.Failed, r.Elapsed.Round(time.Millisecond))
	if r.FirstErr != nil {
		fmt.Fprintf(w, "  first failure: %v\n", r.FirstErr)
	}
	if len(r.SwapTimes) > 0 {
		fmt.Fprintf(w, "  Switch call took median %v, max %v (dial new transport, move calls, drain old)\n",
			median(r.SwapTimes).Round(time.Microsecond), r.SwapTimes[len(r.SwapTimes)-1].Round(time.Microsecond))
	}
	fmt.Fprintf(w, "  p99 within ±%v of a swap: %v (%d calls, max %v); p99 elsewhere: %v (%d calls)\n",
		r.Config.Window, r.Near.P99.Round(time.Microsecond), r.Near.Calls, r.MaxNear.Round(time.Microsecond), r.Far.P99.Round(time.Microsecond), r.Far.Calls)
	fmt.Fprintf(w, "switching p99 near swaps / p99 far from swaps: %.2fx (goal <= 1.5x); failed calls: %d (goal 0)\n", r.P99Ratio(), r.Failed)
}
