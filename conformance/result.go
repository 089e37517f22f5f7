package conformance

import (
	"encoding/json"
	"fmt"
	"time"
)

// SchemaVersion is the version of the JSON report. It changes whenever a
// field changes meaning or disappears; adding a field does not change it.
const SchemaVersion = 1

// Verdict is the outcome of a check or a scenario (docs/conformance-model.md, Verdicts).
type Verdict string

// Verdicts, as the catalogue defines them.
const (
	Pass         Verdict = "pass"         // the target did what the requirement asks
	Fail         Verdict = "fail"         // a MUST or MUST NOT was violated
	Warn         Verdict = "warn"         // a SHOULD, SHOULD NOT or RECOMMENDED was not followed
	Unsupported  Verdict = "unsupported"  // the target lacks the optional feature the scenario needs
	Inconclusive Verdict = "inconclusive" // no answer, condition not provoked, or environment lacking; never a pass
	Errored      Verdict = "error"        // the tester itself failed; says nothing about the target
	Observed     Verdict = "observed"     // observation only: facts, no judgement
)

// rank orders verdicts for combining checks (docs/conformance-model.md, Verdicts rule 5):
// error > fail > inconclusive > warn > pass > observed.
func (v Verdict) rank() int {
	switch v {
	case Errored:
		return 6
	case Fail:
		return 5
	case Inconclusive:
		return 4
	case Warn:
		return 3
	case Pass:
		return 2
	case Observed:
		return 1
	}
	return 0
}

// Worst combines check verdicts into a scenario verdict. Unsupported
// replaces the whole scenario as soon as it is known.
func Worst(vs ...Verdict) Verdict {
	best := Verdict("")
	for _, v := range vs {
		if v == Unsupported {
			return Unsupported
		}
		if v.rank() > best.rank() {
			best = v
		}
	}
	if best == "" {
		return Inconclusive
	}
	return best
}

// Keyword is the requirement strength a check rests on (RFC 2119).
type Keyword string

// Keywords. Only MUST and MUST NOT may produce a fail; only SHOULD, SHOULD
// NOT and RECOMMENDED may produce a warn; the rest feed observations.
const (
	Must        Keyword = "MUST"
	MustNot     Keyword = "MUST NOT"
	Should      Keyword = "SHOULD"
	ShouldNot   Keyword = "SHOULD NOT"
	Recommended Keyword = "RECOMMENDED"
	May         Keyword = "MAY"
	Descriptive Keyword = "descriptive"
)

// Requirement is a quoted requirement from a specification.
type Requirement struct {
	Doc           string  `json:"doc"`     // e.g. "RFC 9000", "ACK-FREQ"
	Section       string  `json:"section"` // e.g. "7.2"
	Keyword       Keyword `json:"keyword"`
	Quote         string  `json:"quote"`
	FromKnowledge bool    `json:"from_knowledge,omitempty"` // paraphrase, not checked against the published text
}

func (r Requirement) String() string {
	return fmt.Sprintf("%s §%s, %s: “%s”", r.Doc, r.Section, r.Keyword, r.Quote)
}

// Role says which side is under test.
type Role string

// Roles.
const (
	ServerRole Role = "server" // Quiver acts as the client and probes a server
	ClientRole Role = "client" // Quiver acts as the server and a client connects to it
)

// EventRole says why a packet event is part of the evidence (docs/conformance-model.md, Evidence).
type EventRole string

// Event roles.
const (
	Trigger  EventRole = "trigger"  // what the tester sent to provoke the behaviour
	Response EventRole = "response" // what the target sent that decides the check
	Context  EventRole = "context"  // packets around them
)

// PacketEvent is one packet seen or sent by the tester, as evidence.
type PacketEvent struct {
	Time       time.Duration `json:"time_ns"`   // since the scenario started
	Direction  string        `json:"direction"` // "sent" or "received"
	Role       EventRole     `json:"role,omitempty"`
	PacketType string        `json:"packet_type"` // initial, handshake, 0RTT, 1RTT, retry, version_negotiation, stateless_reset, unparsed
	Version    uint32        `json:"version,omitempty"`
	Number     int64         `json:"packet_number"`  // -1 when it has none
	DCID       string        `json:"dcid,omitempty"` // hex
	SCID       string        `json:"scid,omitempty"`
	KeyPhase   int           `json:"key_phase,omitempty"`
	ECN        string        `json:"ecn,omitempty"`
	Path       string        `json:"path,omitempty"` // the tester's socket, when it uses more than one
	Size       int           `json:"size"`
	Frames     []string      `json:"frames,omitempty"` // one short textual rendering per frame
}

// Fact is an observed fact: informational, never a verdict (docs/conformance-model.md, Observed facts).
type Fact struct {
	Key   string          `json:"key"` // e.g. "retry.policy", "tp.max_idle_timeout"
	Value json.RawMessage `json:"value"`
}

// NewFact encodes v as a fact's value.
func NewFact(key string, v any) Fact {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(fmt.Sprint(v))
	}
	return Fact{Key: key, Value: b}
}

// CheckResult is one check of a scenario with its own verdict.
type CheckResult struct {
	Name         string             `json:"name"`
	Verdict      Verdict            `json:"verdict"`
	Sentence     string             `json:"sentence"` // one sentence a person can act on, built from measured values
	Requirement  *Requirement       `json:"requirement,omitempty"`
	Events       []PacketEvent      `json:"events,omitempty"`
	Measurements map[string]float64 `json:"measurements,omitempty"`
}

// Artifacts names the raw material kept for a scenario, relative to the
// artifacts directory.
type Artifacts struct {
	Pcapng string   `json:"pcapng,omitempty"`
	Keylog string   `json:"keylog,omitempty"`
	Qlogs  []string `json:"qlogs,omitempty"`
}

// Result is the outcome of one scenario against one target. It is a
// self-contained record: nobody should need to rerun the scenario to
// understand it.
type Result struct {
	Scenario  string        `json:"scenario"` // stable ID
	Title     string        `json:"title"`
	Family    string        `json:"family"` // "A" … "M"
	Role      Role          `json:"role"`
	Revision  int           `json:"revision"`
	Verdict   Verdict       `json:"verdict"`
	Sentence  string        `json:"sentence"` // the deciding check's sentence
	Checks    []CheckResult `json:"checks,omitempty"`
	Facts     []Fact        `json:"facts,omitempty"`
	Error     string        `json:"error,omitempty"` // for verdict error: the tester's own failure
	Started   time.Time     `json:"started"`
	Duration  time.Duration `json:"duration_ns"`
	Artifacts *Artifacts    `json:"artifacts,omitempty"`
	// Confirmed is set on a fail, and on a warn or inconclusive of a
	// timing-based scenario, that came out the same when the runner ran the scenario
	// again alone at the end of the run (docs/conformance-model.md,
	// Verdicts rule 7).
	Confirmed bool `json:"confirmed,omitempty"`
	// FirstRun, when set, is the verdict of a first run that the re-run
	// alone did not reproduce; the result is the re-run's.
	FirstRun *FirstRun `json:"first_run,omitempty"`

	// passive holds what the run-wide passive checks found on this
	// scenario's connections, and passiveConns how many they judged; the
	// runner moves them to the passive scenarios' results (passive.go).
	passive      []passiveFinding
	passiveConns int
}

// FirstRun is the verdict of a scenario's first run, kept when the re-run
// alone said otherwise.
type FirstRun struct {
	Verdict  Verdict `json:"verdict"`
	Sentence string  `json:"sentence"`
	// Parallel is how many scenarios could run at once during the first
	// run.
	Parallel int `json:"parallel"`
}

// Target describes the implementation under test (docs/conformance-model.md, Target profile).
type Target struct {
	Name           string   `json:"name"`
	Address        string   `json:"address"` // host:port
	SNI            string   `json:"sni,omitempty"`
	ALPN           []string `json:"alpn,omitempty"`
	Implementation string   `json:"implementation,omitempty"` // e.g. "quic-go"
	Version        string   `json:"version,omitempty"`        // e.g. "v0.65.0"
	SmallPath      string   `json:"small_path,omitempty"`
	LargePath      string   `json:"large_path,omitempty"`
}

// Report is the versioned JSON report of one run of the suite.
type Report struct {
	Schema      int    `json:"schema"`
	ToolVersion string `json:"tool_version"`
	Target      Target `json:"target"`
	// Client is the client under test in a client-facing run.
	Client   *ClientTarget `json:"client,omitempty"`
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Results  []Result      `json:"results"`
}

// Counts tallies the verdicts of a report.
func (r *Report) Counts() map[Verdict]int {
	m := make(map[Verdict]int)
	for _, res := range r.Results {
		m[res.Verdict]++
	}
	return m
}
