package rpc

import (
	"net"
	"testing"
	"time"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func est(rtt time.Duration, loss float64) Estimate {
	return Estimate{RTT: rtt, Loss: loss, Up: true, Samples: 5}
}

func TestChooserHysteresisAndConfirm(t *testing.T) {
	c := chooser{hysteresis: 0.25, confirm: 3, cooldown: 10 * time.Second, current: "quic", lastSwitch: epoch}
	order := []string{"quic", "tcp"}
	now := epoch.Add(time.Minute)
	// 10% better is inside the hysteresis band: never a switch.
	for i := range 10 {
		if to, _, _ := c.decide(now.Add(time.Duration(i)*time.Second), map[string]Estimate{"quic": est(10*time.Millisecond, 0), "tcp": est(9*time.Millisecond, 0)}, order); to != "" {
			t.Fatalf("switched to %s on a 10%% difference", to)
		}
	}
	// Much better, but it must hold for 3 evaluations.
	m := map[string]Estimate{"quic": est(10*time.Millisecond, 0.2), "tcp": est(9*time.Millisecond, 0)}
	for i := range 2 {
		if to, _, _ := c.decide(now.Add(time.Duration(20+i)*time.Second), m, order); to != "" {
			t.Fatalf("switched after %d evaluations, want 3", i+1)
		}
	}
	if to, reason, _ := c.decide(now.Add(22*time.Second), m, order); to != "tcp" {
		t.Fatalf("third evaluation chose %q, want tcp", to)
	} else {
		t.Logf("switch reason: %s", reason)
	}
}

// TestChooserNoFlapping feeds estimates that alternate which candidate
// looks better every second for ten minutes: the cooldown caps switches.
func TestChooserNoFlapping(t *testing.T) {
	c := chooser{hysteresis: 0.25, confirm: 3, cooldown: 30 * time.Second, current: "quic", lastSwitch: epoch}
	order := []string{"quic", "tcp"}
	switches, held := 0, 0
	for i := range 600 {
		good, bad := est(5*time.Millisecond, 0), est(20*time.Millisecond, 0)
		m := map[string]Estimate{"quic": good, "tcp": bad}
		if (i/4)%2 == 1 {
			m = map[string]Estimate{"quic": bad, "tcp": good}
		}
		to, _, h := c.decide(epoch.Add(time.Duration(i)*time.Second), m, order)
		if to != "" {
			switches++
		}
		if h {
			held++
		}
	}
	if switches > 600/30+1 {
		t.Errorf("%d switches in 600s with a 30s cooldown", switches)
	}
	if held == 0 {
		t.Error("the cooldown never held a switch back")
	}
	t.Logf("%d switches, %d held by the cooldown", switches, held)
}

func TestChooserFailover(t *testing.T) {
	c := chooser{hysteresis: 0.25, confirm: 3, cooldown: time.Hour, current: "quic", lastSwitch: epoch}
	m := map[string]Estimate{"quic": {Up: false, Samples: 3}, "tcp": est(time.Millisecond, 0)}
	if to, _, _ := c.decide(epoch.Add(time.Second), m, []string{"quic", "tcp"}); to != "tcp" {
		t.Fatalf("with the current transport down the chooser picked %q, want tcp at once", to)
	}
}

// TestAdaptiveFallbackUDPBlocked points the QUIC candidate at a UDP socket
// that swallows every datagram: after FallbackAfter the first call flows
// over TCP, with one fallback and a connected event for tcp.
func TestAdaptiveFallbackUDPBlocked(t *testing.T) {
	m := startMulti(t, "tcp")
	hole, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	tcpAddr := m.ls["tcp"].Addr().String()
	ctx := testCtx(t)
	events := make(chan Event, 8)
	start := time.Now()
	a, err := NewAdaptive(ctx, AdaptiveConfig{
		Candidates: []Candidate{
			{Name: "quic", Dial: func() Transport { return DialQUIC(hole.LocalAddr().String(), clientTLS(t)) }},
			{Name: "tcp", Dial: func() Transport { return DialTCP(tcpAddr, clientTLS(t)) }},
		},
		FallbackAfter: 200 * time.Millisecond,
		ProbeInterval: time.Hour,
		OnEvent:       func(e Event) { events <- e },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := Call[echoReq, echoResp](ctx, a.Client(), "Echo.Echo", &echoReq{Msg: "x"}); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if a.Current() != "tcp" || a.Client().Transport().Name() != "tcp" {
		t.Fatalf("adaptive chose %s", a.Current())
	}
	if e := <-events; e.Kind != EventConnected || e.To != "tcp" || a.Fallbacks.Load() != 1 {
		t.Errorf("event %+v, fallbacks %d", e, a.Fallbacks.Load())
	}
	t.Logf("UDP blocked: first call over TCP after %v", elapsed)
}

// TestAdaptivePrefersQUIC: with both paths open, the preferred candidate
// wins the race; then measured estimates make the policy switch, and the
// decision is observable.
func TestAdaptivePrefersQUICThenSwitches(t *testing.T) {
	m := startMulti(t, "tcp", "quic")
	ctx := testCtx(t)
	a, err := NewAdaptive(ctx, AdaptiveConfig{
		Candidates: []Candidate{
			{Name: "quic", Dial: func() Transport { return m.dial(t, "quic") }},
			{Name: "tcp", Dial: func() Transport { return m.dial(t, "tcp") }},
		},
		FallbackAfter: 5 * time.Second,
		ProbeInterval: time.Hour,
		Confirm:       1,
		Cooldown:      time.Nanosecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Current() != "quic" {
		t.Fatalf("race chose %s, want quic", a.Current())
	}
	<-a.Events()
	// Probes run for real; then QUIC is made to look lossy.
	a.probeAll()
	if e := a.Estimates(); !e["quic"].Up || !e["tcp"].Up || e["tcp"].RTT <= 0 {
		t.Fatalf("estimates after probing: %+v", e)
	}
	a.mu.Lock()
	q := a.est["quic"]
	q.Loss = 0.5
	a.est["quic"] = q
	tcp := a.est["tcp"]
	tcp.RTT = q.RTT
	a.est["tcp"] = tcp
	a.mu.Unlock()
	a.evaluate(time.Now())
	if a.Current() != "tcp" || a.Switches.Load() != 1 {
		t.Fatalf("after QUIC loss the policy uses %s (%d switches)", a.Current(), a.Switches.Load())
	}
	if e := <-a.Events(); e.Kind != EventSwitched || e.From != "quic" || e.To != "tcp" {
		t.Errorf("event %+v", e)
	}
	if _, err := Call[echoReq, echoResp](ctx, a.Client(), "Echo.Echo", &echoReq{Msg: "x"}); err != nil || a.Client().Transport().Name() != "tcp" {
		t.Fatalf("call after switch: %v on %s", err, a.Client().Transport().Name())
	}
}
