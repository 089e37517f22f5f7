package conformance

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// healthTimeout bounds each liveness handshake.
const healthTimeout = 2 * time.Second

// health watches whether the target still completes handshakes during a
// run. A probe that crashes the target (ngtcp2 0.12.1 aborts on a TLS
// KeyUpdate message, for one) would otherwise turn every later scenario
// into an inconclusive "no answer" and hide which probe did it.
//
// Scenarios run under gate's read lock; reviving the target takes the
// write lock, so no scenario runs while the target restarts. Each revival
// starts a new epoch; a scenario that ended inconclusive while its epoch's
// target was dead is a suspect and is run again alone afterwards.
type health struct {
	prof   *Profile
	revive func(context.Context) error

	gate sync.RWMutex

	mu      sync.Mutex
	epoch   int
	dead    map[int]bool // epochs in which the target stopped answering
	down    bool         // dead with no way to revive: skip what remains
	downWhy string
}

func newHealth(prof *Profile, revive func(context.Context) error) *health {
	return &health{prof: prof, revive: revive, dead: map[int]bool{}}
}

// alive reports whether a normal handshake with the target completes,
// trying twice.
func (h *health) alive(ctx context.Context) bool {
	for range 2 {
		if ctx.Err() != nil {
			return false
		}
		now := time.Now()
		t := &T{sc: &Scenario{ID: "health", Family: "-"}, profile: h.prof, rec: newRecorder(now), started: now}
		_, err := t.Dial(ctx, DialOptions{Label: "health", HandshakeTimeout: healthTimeout})
		t.runCleanups()
		if err == nil {
			return true
		}
	}
	return false
}

// begin is called before a scenario starts: it returns the epoch the
// scenario runs in, or a reason to skip it when the target is down for
// good.
func (h *health) begin() (epoch int, skip string) {
	h.gate.RLock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		h.gate.RUnlock()
		return 0, h.downWhy
	}
	return h.epoch, ""
}

// end is called after a scenario of epoch ended with verdict v. An
// inconclusive scenario makes it check the target; the first to find it
// dead revives it (or declares it down). It reports whether the scenario
// is a suspect, to be run again alone.
func (h *health) end(ctx context.Context, id string, epoch int, v Verdict) (suspect bool) {
	h.gate.RUnlock()
	if v != Inconclusive || !h.prof.Reachable {
		return false
	}
	h.mu.Lock()
	known, cur := h.dead[epoch], h.epoch
	h.mu.Unlock()
	if known || epoch != cur {
		// Its epoch's target was already found dead (and maybe revived).
		return true
	}
	if h.alive(ctx) {
		return false
	}
	h.mu.Lock()
	first := !h.dead[epoch] && h.epoch == epoch
	h.dead[epoch] = true
	h.mu.Unlock()
	if first {
		h.restart(ctx, fmt.Sprintf("the target stopped completing handshakes during the run (found after %s)", id))
	}
	return true
}

// restart revives the target with no scenario running, or declares it
// down when it cannot be revived.
func (h *health) restart(ctx context.Context, why string) bool {
	h.gate.Lock()
	defer h.gate.Unlock()
	var err error
	if h.revive == nil {
		err = fmt.Errorf("no way to restart it")
	} else if err = h.revive(ctx); err == nil && !h.alive(ctx) {
		err = fmt.Errorf("it still does not answer after the restart")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.down = true
		h.downWhy = fmt.Sprintf("Not run: %s, and %v.", why, err)
		return false
	}
	h.epoch++
	return true
}

// isDown reports whether the target is down for good.
func (h *health) isDown() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}

// downReason is the sentence of scenarios skipped because the target is
// down.
func (h *health) downReason() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.downWhy
}

// crashNote is the check added to a scenario after which the target
// stopped answering even when the scenario ran alone.
func crashNote(revived bool) CheckResult {
	s := "The target stopped completing handshakes right after this scenario, which ran alone: its probe probably crashed the target."
	if revived {
		s += " The tester restarted the target to go on."
	}
	return CheckResult{Name: "target-alive", Verdict: Inconclusive, Sentence: s}
}
