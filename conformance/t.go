package conformance

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// T is the per-scenario context a Scenario's Run receives: the target
// profile, the timing helpers, the connections it dials (every packet
// recorded as evidence), and the reporting of checks and facts.
//
// Like testing.T, the shortcuts that end a scenario (Unsupported,
// Inconclusive, Errorf) stop the scenario's goroutine with runtime.Goexit,
// so Run must call them from its own goroutine.
type T struct {
	sc      *Scenario
	profile *Profile
	rec     *recorder
	started time.Time
	dir     string // artifacts directory of this scenario, "" for none

	mu      sync.Mutex
	checks  []CheckResult
	facts   []Fact
	closers []func()
	rtt     time.Duration
	control *controlResult
	errMsg  string
	suites  []uint16 // TLS 1.3 suites engine connections offer (withSuites); nil: crypto/tls's
	ownLog  bool     // fails rest on the scenario's own log, not the record (ownEvidence)
}

// Profile is what the suite knows of the target before the scenarios run
// (docs/conformance-model.md, Target profile): where it is, which application protocols it speaks,
// and what to fetch.
type Profile struct {
	Target Target
	// ALPNs the target accepted during discovery, in preference order.
	ALPNs []string
	// SmallPath is the small resource ("/" when the operator gave none).
	SmallPath string
	// Reachable is false when discovery got no answer at all.
	Reachable bool
	// Client is the client under test in client-facing runs.
	Client *ClientTarget
}

// who names the side under test in sentences.
func (t *T) who() string {
	if t.sc != nil && t.sc.Role == ClientRole {
		return "client"
	}
	return "server"
}

// HasALPN reports whether the target speaks proto.
func (p *Profile) HasALPN(proto string) bool {
	for _, a := range p.ALPNs {
		if a == proto {
			return true
		}
	}
	return false
}

// ALPN returns the application protocol scenarios use by default.
func (p *Profile) ALPN() string {
	if len(p.ALPNs) == 0 {
		return "hq-interop"
	}
	return p.ALPNs[0]
}

// Profile returns the target profile.
func (t *T) Profile() *Profile { return t.profile }

// Scenario returns the scenario being run.
func (t *T) Scenario() *Scenario { return t.sc }

// Check records one check. A fail must rest on MUST or MUST NOT and a warn
// on SHOULD, SHOULD NOT or RECOMMENDED (docs/conformance-model.md, Verdicts rules 1–2); a check
// that breaks this is a tester bug and is recorded as error. In an
// observation-only scenario, and for requirements cited from knowledge,
// judgements become observed (§1.2, §2.7).
func (t *T) Check(name string, v Verdict, req Requirement, sentence string, evs ...PacketEvent) {
	cr := CheckResult{Name: name, Verdict: v, Sentence: sentence, Events: evs}
	if req.Quote != "" {
		r := req
		cr.Requirement = &r
	}
	switch v {
	case Fail:
		if req.Keyword != Must && req.Keyword != MustNot {
			cr.Verdict = Errored
			cr.Sentence = fmt.Sprintf("tester bug: check %q failed on a %q requirement (only MUST can fail): %s", name, req.Keyword, sentence)
		}
	case Warn:
		if req.Keyword != Should && req.Keyword != ShouldNot && req.Keyword != Recommended {
			cr.Verdict = Errored
			cr.Sentence = fmt.Sprintf("tester bug: check %q warned on a %q requirement (only SHOULD can warn): %s", name, req.Keyword, sentence)
		}
	}
	if (t.sc.ObservationOnly || req.FromKnowledge) && (cr.Verdict == Pass || cr.Verdict == Fail || cr.Verdict == Warn) {
		cr.Sentence = fmt.Sprintf("(observed, would be %s) %s", cr.Verdict, cr.Sentence)
		cr.Verdict = Observed
	}
	t.mu.Lock()
	t.checks = append(t.checks, cr)
	t.mu.Unlock()
}

// Pass, Fail, Warn and Observe are Check with the verdict spelled out.
func (t *T) Pass(name string, req Requirement, sentence string, evs ...PacketEvent) {
	t.Check(name, Pass, req, sentence, evs...)
}

// Fail records a failing check; req must say MUST or MUST NOT.
func (t *T) Fail(name string, req Requirement, sentence string, evs ...PacketEvent) {
	t.Check(name, Fail, req, sentence, evs...)
}

// Warn records a warning; req must say SHOULD, SHOULD NOT or RECOMMENDED.
func (t *T) Warn(name string, req Requirement, sentence string, evs ...PacketEvent) {
	t.Check(name, Warn, req, sentence, evs...)
}

// Observe records an observation, never a judgement.
func (t *T) Observe(name string, sentence string, evs ...PacketEvent) {
	t.Check(name, Observed, Requirement{}, sentence, evs...)
}

// Fact records an observed fact (docs/conformance-model.md, Observed facts).
func (t *T) Fact(key string, v any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, f := range t.facts {
		if f.Key == key {
			t.facts[i] = NewFact(key, v)
			return
		}
	}
	t.facts = append(t.facts, NewFact(key, v))
}

// Unsupported ends the scenario as unsupported: the target lacks what the
// scenario needs. The sentence names the advertisement or answer that
// showed it.
func (t *T) Unsupported(sentence string, evs ...PacketEvent) {
	t.Check("needs", Unsupported, Requirement{}, sentence, evs...)
	runtime.Goexit()
}

// Inconclusive ends the scenario as inconclusive: no answer, condition not
// provoked, control failed, or environment lacking.
func (t *T) Inconclusive(sentence string, evs ...PacketEvent) {
	t.Check("outcome", Inconclusive, Requirement{}, sentence, evs...)
	runtime.Goexit()
}

// Errorf ends the scenario with verdict error: the tester itself failed.
func (t *T) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.mu.Lock()
	t.errMsg = msg
	t.mu.Unlock()
	t.Check("tester", Errored, Requirement{}, "The tester failed: "+msg)
	runtime.Goexit()
}

// Done reports whether any check was recorded yet.
func (t *T) hasChecks() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.checks) > 0
}

// cleanup registers f to run when the scenario ends.
func (t *T) cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closers = append(t.closers, f)
}

func (t *T) runCleanups() {
	t.mu.Lock()
	cs := t.closers
	t.closers = nil
	t.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// noteRTT records the first RTT sample of the scenario.
func (t *T) noteRTT(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rtt == 0 && d > 0 {
		t.rtt = d
	}
}

// RTT returns the round-trip time measured in the scenario's first
// handshake, or RFC 9002's initial 333 ms before any.
func (t *T) RTT() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rtt == 0 {
		return 333 * time.Millisecond
	}
	return t.rtt
}

// PTO is smoothed_rtt + max(4 × rttvar, 1 ms) + max_ack_delay (RFC 9002
// §6.2.1) after one sample, where rttvar is half the sample; the target's
// max_ack_delay is taken as the default 25 ms.
func (t *T) PTO() time.Duration {
	rtt := t.RTT()
	return rtt + max(2*rtt, time.Millisecond) + 25*time.Millisecond
}

// Settle is the settle window, max(3 × PTO, 1 s) (docs/conformance-model.md, Timing).
func (t *T) Settle() time.Duration {
	return max(3*t.PTO(), time.Second)
}

// sleep waits d or until ctx ends; it reports whether the full time passed.
func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// received returns the target's packets on connection conn recorded after
// index from.
func received(ps []*packet, conn, from int) []*packet {
	var out []*packet
	for i, p := range ps {
		if i >= from && !p.sent && (conn < 0 || p.conn == conn) {
			out = append(out, p)
		}
	}
	return out
}

// firstClose returns the first received packet carrying CONNECTION_CLOSE.
func firstClose(ps []*packet) *packet {
	for _, p := range ps {
		if !p.sent && p.closeFrame() != nil {
			return p
		}
	}
	return nil
}

// closeCode describes a CONNECTION_CLOSE frame for a sentence.
func closeCode(cc *wire.ConnectionCloseFrame) string {
	if cc.Application {
		return fmt.Sprintf("application error 0x%x (frame type 0x1d)", cc.ErrorCode)
	}
	return wire.TransportErrorCode(cc.ErrorCode).String()
}
