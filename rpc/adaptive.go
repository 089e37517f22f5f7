package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Candidate is a transport the adaptive policy may choose.
type Candidate struct {
	Name string
	// Dial returns a fresh transport; the policy dials one to carry calls
	// and another to probe with.
	Dial func() Transport
}

// AdaptiveConfig configures an Adaptive client.
type AdaptiveConfig struct {
	// Candidates in order of preference; the first (typically QUIC) gets
	// a head start at connect.
	Candidates []Candidate
	// FallbackAfter is how long the preferred candidate may take to
	// connect before another that has connected is used. Default 250ms,
	// as Happy Eyeballs v3 suggests.
	FallbackAfter time.Duration
	// ProbeInterval is the time between probes of every candidate.
	// Default 1s.
	ProbeInterval time.Duration
	// ProbeTimeout counts a probe as lost. Default 1s.
	ProbeTimeout time.Duration
	// Hysteresis is how much better (as a fraction of the current score)
	// another candidate must be before the policy switches. Default 0.25.
	Hysteresis float64
	// Confirm is how many consecutive evaluations must agree. Default 3.
	Confirm int
	// Cooldown is the least time between two switches. Default 10s.
	Cooldown time.Duration
	// OnEvent, when set, is called with every decision.
	OnEvent func(Event)
	// ClientOptions configure the client that carries calls.
	ClientOptions []ClientOption
}

// EventKind says what the policy did.
type EventKind int

// Event kinds.
const (
	EventConnected EventKind = iota + 1 // chose the first transport
	EventSwitched                       // moved calls to another transport
	EventHeld                           // a better candidate was held back by the cooldown
)

// String returns "connected", "switched" or "held".
func (k EventKind) String() string {
	return [...]string{"?", "connected", "switched", "held"}[k]
}

// Event is one decision of the adaptive policy.
type Event struct {
	Time      time.Time
	Kind      EventKind
	From, To  string
	Reason    string
	Estimates map[string]Estimate
}

// Estimate is what the policy knows of one candidate.
type Estimate struct {
	RTT       time.Duration // smoothed probe round-trip time
	Loss      float64       // smoothed fraction of probes lost
	ErrorRate float64       // smoothed fraction of live calls failed by the transport
	Latency   time.Duration // smoothed latency of live calls
	Up        bool          // the last probe or connect succeeded
	Samples   int
}

// Score is the figure the policy minimises: the RTT inflated by loss and
// errors; a candidate that is down scores +Inf.
func (e Estimate) Score() float64 {
	if !e.Up || e.Samples == 0 {
		return math.Inf(1)
	}
	return float64(e.RTT) * (1 + 20*e.Loss + 20*e.ErrorRate)
}

const ewma = 0.2

func (e *Estimate) probe(rtt time.Duration, ok bool) {
	if !ok {
		e.Loss = (1-ewma)*e.Loss + ewma
		e.Up = false
		return
	}
	e.Loss = (1 - ewma) * e.Loss
	if e.Samples == 0 {
		e.RTT = rtt
	} else {
		e.RTT = time.Duration((1-ewma)*float64(e.RTT) + ewma*float64(rtt))
	}
	e.Up = true
	e.Samples++
}

func (e *Estimate) call(lat time.Duration, transportErr bool) {
	if transportErr {
		e.ErrorRate = (1-ewma)*e.ErrorRate + ewma
		return
	}
	e.ErrorRate = (1 - ewma) * e.ErrorRate
	if e.Latency == 0 {
		e.Latency = lat
	} else {
		e.Latency = time.Duration((1-ewma)*float64(e.Latency) + ewma*float64(lat))
	}
}

// chooser is the decision state, free of clocks and sockets so that it is
// tested alone: it is told the time and returns what to do.
type chooser struct {
	hysteresis float64
	confirm    int
	cooldown   time.Duration

	current    string
	lastSwitch time.Time
	streakTo   string
	streak     int
}

// decide returns the candidate to switch to ("" to stay) and why, and
// whether a switch was held back by the cooldown.
func (c *chooser) decide(now time.Time, est map[string]Estimate, order []string) (to, reason string, held bool) {
	cur := est[c.current]
	curScore := cur.Score()
	best, bestScore := "", math.Inf(1)
	for _, n := range order {
		if n == c.current {
			continue
		}
		if s := est[n].Score(); s < bestScore {
			best, bestScore = n, s
		}
	}
	if best == "" || math.IsInf(bestScore, 1) {
		c.streak = 0
		return "", "", false
	}
	failover := math.IsInf(curScore, 1)
	if !failover && bestScore >= curScore*(1-c.hysteresis) {
		c.streak = 0
		return "", "", false
	}
	if c.streakTo != best {
		c.streakTo, c.streak = best, 0
	}
	c.streak++
	if !failover && c.streak < c.confirm {
		return "", "", false
	}
	if !failover && now.Sub(c.lastSwitch) < c.cooldown {
		return "", "", true
	}
	if failover {
		reason = fmt.Sprintf("%s is down", c.current)
	} else {
		reason = fmt.Sprintf("score %.2fms < %.2fms × %.2f for %d evaluations", bestScore/1e6, curScore/1e6, 1-c.hysteresis, c.streak)
	}
	c.current, c.lastSwitch, c.streak = best, now, 0
	return best, reason, false
}

// Adaptive is a client whose transport is chosen by measurement: it races
// its candidates at connect, probes each one, learns from live calls, and
// switches with hysteresis and a cooldown.
type Adaptive struct {
	cfg    AdaptiveConfig
	client *Client
	order  []string
	events chan Event

	mu     sync.Mutex
	est    map[string]Estimate
	ch     chooser
	probes map[string]Transport

	// Counters.
	Switches      atomic.Int64
	Held          atomic.Int64
	Probes        atomic.Int64
	ProbeFailures atomic.Int64
	Fallbacks     atomic.Int64

	stop chan struct{}
	wg   sync.WaitGroup
}

// NewAdaptive races the candidates and returns a client on the winner:
// the first candidate if it connects within FallbackAfter, otherwise the
// first other one that connected.
func NewAdaptive(ctx context.Context, cfg AdaptiveConfig) (*Adaptive, error) {
	if len(cfg.Candidates) == 0 {
		return nil, errors.New("rpc: NewAdaptive needs candidates")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.FallbackAfter, 250*time.Millisecond)
	def(&cfg.ProbeInterval, time.Second)
	def(&cfg.ProbeTimeout, time.Second)
	def(&cfg.Cooldown, 10*time.Second)
	if cfg.Hysteresis == 0 {
		cfg.Hysteresis = 0.25
	}
	if cfg.Confirm == 0 {
		cfg.Confirm = 3
	}
	a := &Adaptive{cfg: cfg, events: make(chan Event, 64), est: map[string]Estimate{}, probes: map[string]Transport{}, stop: make(chan struct{})}
	a.ch = chooser{hysteresis: cfg.Hysteresis, confirm: cfg.Confirm, cooldown: cfg.Cooldown}
	for _, c := range cfg.Candidates {
		a.order = append(a.order, c.Name)
	}

	type result struct {
		i   int
		t   Transport
		rtt time.Duration
		err error
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan result, len(cfg.Candidates))
	for i, c := range cfg.Candidates {
		go func() {
			t := c.Dial()
			start := time.Now()
			err := t.Connect(rctx)
			results <- result{i, t, time.Since(start), err}
		}()
	}
	var won *result
	var ready []result
	fallback := time.NewTimer(cfg.FallbackAfter)
	defer fallback.Stop()
	pending := len(cfg.Candidates)
	fellBack := false
	for won == nil && pending > 0 {
		select {
		case r := <-results:
			pending--
			a.mu.Lock()
			e := a.est[cfg.Candidates[r.i].Name]
			e.probe(r.rtt, r.err == nil)
			a.est[cfg.Candidates[r.i].Name] = e
			a.mu.Unlock()
			if r.err != nil {
				r.t.Close()
				continue
			}
			if r.i == 0 || fellBack {
				won = &r
				break
			}
			ready = append(ready, r)
		case <-fallback.C:
			fellBack = true
			if len(ready) > 0 {
				won = &ready[0]
				ready = ready[1:]
			}
		}
		if won == nil && pending == 0 && len(ready) > 0 {
			won = &ready[0]
			ready = ready[1:]
		}
	}
	cancel()
	// Transports that lost the race are closed; the probes use their own.
	for _, r := range ready {
		r.t.Close()
	}
	for range pending {
		if r := <-results; r.err == nil {
			r.t.Close()
		}
	}
	if won == nil {
		return nil, Errorf(Unavailable, "no candidate transport connected")
	}
	name := cfg.Candidates[won.i].Name
	if won.i != 0 {
		a.Fallbacks.Add(1)
	}
	opts := append([]ClientOption{withObserver(a.observe)}, cfg.ClientOptions...)
	a.client = NewClient(won.t, opts...)
	a.mu.Lock()
	a.ch.current, a.ch.lastSwitch = name, time.Now()
	a.mu.Unlock()
	reason := "preferred transport connected"
	if won.i != 0 {
		reason = fmt.Sprintf("%s did not connect within %v", cfg.Candidates[0].Name, cfg.FallbackAfter)
	}
	a.emit(Event{Kind: EventConnected, To: name, Reason: reason})
	a.wg.Add(1)
	go a.probeLoop()
	return a, nil
}

// Client is the client whose transport the policy manages.
func (a *Adaptive) Client() *Client { return a.client }

// Current names the transport carrying new calls.
func (a *Adaptive) Current() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ch.current
}

// Events delivers decisions; when nobody reads, old events are dropped.
func (a *Adaptive) Events() <-chan Event { return a.events }

// Estimates returns a copy of the per-candidate estimates.
func (a *Adaptive) Estimates() map[string]Estimate {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]Estimate, len(a.est))
	for k, v := range a.est {
		out[k] = v
	}
	return out
}

func (a *Adaptive) emit(e Event) {
	e.Time = time.Now()
	e.Estimates = a.Estimates()
	if a.cfg.OnEvent != nil {
		a.cfg.OnEvent(e)
	}
	select {
	case a.events <- e:
	default:
	}
}

func (a *Adaptive) observe(name string, lat time.Duration, err error) {
	transportErr := err != nil && CodeOf(err) == Unavailable
	a.mu.Lock()
	e := a.est[name]
	e.call(lat, transportErr)
	a.est[name] = e
	a.mu.Unlock()
}

func (a *Adaptive) probeLoop() {
	defer a.wg.Done()
	t := time.NewTicker(a.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			a.probeAll()
			a.evaluate(time.Now())
		}
	}
}

func (a *Adaptive) probeAll() {
	var wg sync.WaitGroup
	for _, c := range a.cfg.Candidates {
		a.mu.Lock()
		pt := a.probes[c.Name]
		if pt == nil {
			pt = c.Dial()
			a.probes[c.Name] = pt
		}
		a.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ProbeTimeout)
			defer cancel()
			start := time.Now()
			err := pt.Connect(ctx)
			if err == nil {
				var rs ResponseStream
				rs, err = pt.RoundTrip(ctx, &Request{Method: PingMethod, Timeout: a.cfg.ProbeTimeout})
				if err == nil {
					_, err = rs.Recv()
					rs.Close()
					if err == io.EOF {
						err = nil
					}
				}
			}
			a.Probes.Add(1)
			if err != nil {
				a.ProbeFailures.Add(1)
			}
			a.mu.Lock()
			e := a.est[c.Name]
			e.probe(time.Since(start), err == nil)
			a.est[c.Name] = e
			a.mu.Unlock()
		}()
	}
	wg.Wait()
}

// evaluate runs one decision and carries it out.
func (a *Adaptive) evaluate(now time.Time) {
	a.mu.Lock()
	from := a.ch.current
	to, reason, held := a.ch.decide(now, a.est, a.order)
	a.mu.Unlock()
	if held {
		a.Held.Add(1)
		a.emit(Event{Kind: EventHeld, From: from, Reason: "cooldown"})
		return
	}
	if to == "" {
		return
	}
	var cand Candidate
	for _, c := range a.cfg.Candidates {
		if c.Name == to {
			cand = c
		}
	}
	if err := a.client.SwitchAsync(cand.Dial(), 30*time.Second); err != nil {
		a.mu.Lock()
		a.ch.current = from
		a.mu.Unlock()
		return
	}
	a.Switches.Add(1)
	a.emit(Event{Kind: EventSwitched, From: from, To: to, Reason: reason})
}

// Close stops probing and closes every transport.
func (a *Adaptive) Close() error {
	close(a.stop)
	a.wg.Wait()
	a.mu.Lock()
	probes := a.probes
	a.probes = nil
	a.mu.Unlock()
	for _, t := range probes {
		t.Close()
	}
	return a.client.Close()
}
