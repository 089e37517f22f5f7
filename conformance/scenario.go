package conformance

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Scenario is one entry of docs/scenarios.md: a
// stable ID, what it rests on, what it needs from the target, and the probe
// itself.
type Scenario struct {
	// ID is the stable kebab-case identifier; it never changes meaning.
	ID    string
	Title string
	// Family is the catalogue family letter, "A" … "M".
	Family string
	// Role is the side under test.
	Role Role
	// Revision goes up when the scenario's checks change without changing
	// their meaning.
	Revision int
	// Requirements are quoted verbatim from the catalogue.
	Requirements []Requirement
	// Needs are the catalogue's needs tags (§2.2): app, hq, h3, v2, …
	Needs []string
	// Passive scenarios send nothing special; they judge what every
	// connection of the scenario shows (§2.6).
	Passive bool
	// ObservationOnly scenarios report observed, never pass, fail or warn.
	ObservationOnly bool
	// Long selects the 60 s budget of transfer and timing scenarios.
	Long bool
	// Timing scenarios judge delays, rates or amounts of data per round
	// trip, which load on the tester's host can distort: a warn or
	// inconclusive of theirs is confirmed by a re-run alone before it is
	// reported, like every fail (docs/conformance-model.md, Verdicts rule 7).
	Timing bool
	// PassOnly scenarios rest on descriptive text (a capability the RFC
	// allows, such as a cipher suite): they pass or are unsupported, never
	// fail or warn.
	PassOnly bool
	// Run probes the target. It reports through t and returns when the
	// verdict is decided or ctx ends.
	Run func(ctx context.Context, t *T)
}

// timingScenarios are the scenarios whose verdicts rest on delays, rates
// or data per round trip (Scenario.Timing), kept in one list so that the
// scenario files need not change. TestTimingScenariosExist keeps it true.
var timingScenarios = map[string]bool{
	// ACK delays: "immediately", max_ack_delay, ACK decimation.
	"ack-1rtt-max-ack-delay": true, "ack-ce-immediate": true, "ack-handshake-immediate": true,
	"ack-reorder-immediate": true, "ack-every-second-packet": true,
	// ACK frequency: thresholds and IMMEDIATE_ACK judged by ACK timing.
	"af-ce-immediate": true, "af-immediate-ack": true, "af-reordering-threshold": true,
	"af-reordering-threshold-zero": true, "af-threshold-large": true, "af-threshold-zero": true,
	// Loss recovery and congestion control: PTO schedules, windows, bursts.
	"rec-blackhole-recovery": true, "rec-burst-limit": true, "rec-initial-window": true,
	"rec-loss-reduces-flight": true, "rec-pto-backoff": true, "rec-server-handshake-probe": true,
	"rec-transfer-with-loss": true, "path-cc-reset-on-address-change": true,
	// Idle timeouts and rate limits.
	"idle-no-early-abandon": true, "idle-timeout-min-3pto": true, "idle-timeout-observed": true,
	"close-closing-state": true,
	// Client-facing: PTO probes and ACK frequency.
	"cli-anti-deadlock-probe": true, "cli-initial-retransmit": true, "cli-ackfreq-honoured": true,
}

// Needs tags (docs/conformance-model.md, Needs) the suite knows how to decide.
const (
	NeedApp = "app"
	NeedHQ  = "hq"
	NeedH3  = "h3"
	NeedV2  = "v2"
	// NeedLarge is the profile's large resource (at least 1 MiB).
	NeedLarge = "large"
)

var (
	registryMu sync.Mutex
	registry   = map[string]*Scenario{}
)

var kebab = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Register adds s to the registry. It panics on a duplicate or malformed ID,
// since that is a programming error found by the first test run.
func Register(s *Scenario) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if !kebab.MatchString(s.ID) {
		panic(fmt.Sprintf("conformance: scenario ID %q is not kebab-case", s.ID))
	}
	if _, dup := registry[s.ID]; dup {
		panic(fmt.Sprintf("conformance: scenario %q registered twice", s.ID))
	}
	if s.Role == "" {
		s.Role = ServerRole
	}
	if s.Revision == 0 {
		s.Revision = 1
	}
	if timingScenarios[s.ID] {
		s.Timing = true
	}
	registry[s.ID] = s
}

// Scenarios returns every registered scenario, ordered by family then ID.
func Scenarios() []*Scenario {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]*Scenario, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Scenario) int {
		if c := strings.Compare(a.Family, b.Family); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Lookup returns the scenario with the given ID, or nil.
func Lookup(id string) *Scenario {
	registryMu.Lock()
	defer registryMu.Unlock()
	return registry[id]
}

// Select returns the scenarios of role whose ID matches one of patterns: an
// exact ID, a glob ("hs-*", "vn-?-*"), or a family letter ("A", "K"). No
// pattern selects everything. A pattern that matches nothing is an error,
// so that a typo does not silently run an empty suite.
func Select(role Role, patterns []string) ([]*Scenario, error) {
	all := Scenarios()
	var out []*Scenario
	used := make([]bool, len(patterns))
	for _, s := range all {
		if s.Role != role {
			continue
		}
		if len(patterns) == 0 {
			out = append(out, s)
			continue
		}
		for i, p := range patterns {
			if matchScenario(p, s) {
				used[i] = true
				out = append(out, s)
				break
			}
		}
	}
	for i, p := range patterns {
		if !used[i] {
			// It may have matched a scenario already taken by an earlier
			// pattern; check before complaining.
			found := false
			for _, s := range out {
				if matchScenario(p, s) {
					found = true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("no %s-facing scenario matches %q (see the catalogue IDs, or use a family letter such as A)", role, p)
			}
		}
	}
	return out, nil
}

func matchScenario(p string, s *Scenario) bool {
	p = strings.TrimSpace(p)
	if p == "" {
		return false
	}
	if len(p) == 1 && strings.EqualFold(p, s.Family) {
		return true
	}
	if p == s.ID {
		return true
	}
	ok, err := path.Match(p, s.ID)
	return err == nil && ok
}

// budget is the scenario's deadline (docs/conformance-model.md, Timing).
func (s *Scenario) budget(opts Options) time.Duration {
	if opts.Timeout > 0 {
		if s.Long && opts.Timeout < 60*time.Second {
			return 60 * time.Second
		}
		return opts.Timeout
	}
	if s.Long {
		return 60 * time.Second
	}
	return 10 * time.Second
}

// Requirement helpers keep the scenario files close to the catalogue's text.

func rfc(doc, section string, kw Keyword, quote string) Requirement {
	return Requirement{Doc: doc, Section: section, Keyword: kw, Quote: quote}
}

func rfc9000(section string, kw Keyword, quote string) Requirement {
	return rfc("RFC 9000", section, kw, quote)
}

func rfc9001(section string, kw Keyword, quote string) Requirement {
	return rfc("RFC 9001", section, kw, quote)
}

func rfc9114(section string, kw Keyword, quote string) Requirement {
	return rfc("RFC 9114", section, kw, quote)
}

func rfc9002(section string, kw Keyword, quote string) Requirement {
	return rfc("RFC 9002", section, kw, quote)
}

func rfc9221(section string, kw Keyword, quote string) Requirement {
	return rfc("RFC 9221", section, kw, quote)
}

// ackFreq cites draft-ietf-quic-ack-frequency (docs/conformance-model.md, Requirements: ACK-FREQ).
func ackFreq(section string, kw Keyword, quote string) Requirement {
	return rfc("ACK-FREQ", section, kw, quote)
}

// fromKnowledge cites RFC 9287 or RFC 9368, which the project does not
// keep: the text is a paraphrase and the check reports observed until it
// is verified against the published RFC (docs/conformance-model.md, Requirements).
func fromKnowledge(doc, section string, kw Keyword, paraphrase string) Requirement {
	r := rfc(doc, section, kw, paraphrase)
	r.FromKnowledge = true
	return r
}

// The provoked-error pattern's own requirements (docs/conformance-model.md, Provoked errors).
var (
	reqCloseSignalled   = rfc9000("11.1", Must, "Errors that result in the connection being unusable … MUST be signaled using a CONNECTION_CLOSE frame")
	reqMostAppropriate  = rfc9000("11", Should, "The most appropriate error code … SHOULD be included in the frame that signals the error.")
	reqNoResetWithState = rfc9000("11", MustNot, "A stateless reset MUST NOT be used by an endpoint that has the state necessary to send a frame on the connection.")
)
