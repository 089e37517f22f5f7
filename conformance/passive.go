package conformance

import (
	"fmt"

	"github.com/quiver-quic/quiver/conformance/rawquic"
	"github.com/quiver-quic/quiver/quic/wire"
)

// Passive checks over every connection of a run (docs/conformance-model.md, Passive checks): after
// each server-facing scenario, the checks below judge every connection it
// made, whatever it sent; the runner then reports what they found under
// the passive scenario's ID, naming the scenario and connection where it
// was seen. Only checks on what the server sends on its own are run this
// way: rules that depend on what the tester sent (such as
// ack-includes-largest) would misfire on the scenarios that send invalid
// packets on purpose, so they judge only their own connections.

// connRecord is one connection's packets, as a passive check sees them.
type connRecord struct {
	scenario string
	conn     int
	label    string
	packets  []*packet // received and sent, in order
	// ledger holds what remains of the packets the recorder did not
	// keep (recorder_keep.go), each placed before a kept packet.
	ledger []ledgerEntry
}

// passiveFinding is one violation found on one connection.
type passiveFinding struct {
	id       string // the passive scenario
	verdict  Verdict
	req      Requirement
	sentence string
	events   []PacketEvent
}

// passiveCheck judges one connection for the passive scenario id; it
// returns the offending packets and a sentence, or nil.
type passiveCheck struct {
	id    string
	req   int // index into the scenario's requirements
	warn  bool
	judge func(c connRecord) (string, []*packet)
}

var runWideChecks = []passiveCheck{
	{id: "inv-pn-monotonic", judge: judgePNMonotonic},
	{id: "inv-frames-permitted", judge: judgeFramesPermitted},
	{id: "close-reason-utf8", warn: true, judge: judgeCloseUTF8},
	{id: "tls-no-tls-keyupdate", judge: func(c connRecord) (string, []*packet) {
		return judgeNoTLSMessage(c, tlsKeyUpdate, "KeyUpdate")
	}},
	{id: "tls-no-post-handshake-auth", judge: func(c connRecord) (string, []*packet) {
		return judgeNoTLSMessage(c, tlsCertificateRequest, "CertificateRequest")
	}},
}

// runWideIDs reports whether id is judged over every connection.
func runWideIDs() map[string]bool {
	m := map[string]bool{}
	for _, pc := range runWideChecks {
		m[pc.id] = true
	}
	return m
}

// records splits a scenario's recorded packets by connection.
func (t *T) records() []connRecord {
	t.rec.mu.Lock()
	conns := make([]connRecord, len(t.rec.conns))
	for i, c := range t.rec.conns {
		conns[i] = connRecord{scenario: t.sc.ID, conn: i, label: c.label}
	}
	ps := append([]*packet(nil), t.rec.packets...)
	ledgers := ledgerFor(t.rec.keep.ledger, ps, len(conns))
	t.rec.mu.Unlock()
	for _, p := range ps {
		if p.conn >= 0 && p.conn < len(conns) {
			conns[p.conn].packets = append(conns[p.conn].packets, p)
		}
	}
	for i := range conns {
		conns[i].ledger = ledgers[i]
	}
	return conns
}

// passiveFindings runs the run-wide checks over the scenario's
// connections. It returns the findings and how many connections it judged.
func (t *T) passiveFindings() ([]passiveFinding, int) {
	if t.sc.Role != ServerRole {
		return nil, 0
	}
	var out []passiveFinding
	n := 0
	for _, c := range t.records() {
		if len(c.packets) == 0 && len(c.ledger) == 0 {
			continue
		}
		n++
		for _, pc := range runWideChecks {
			if pc.id == t.sc.ID {
				continue // the passive scenario judges its own connections
			}
			sc := Lookup(pc.id)
			if sc == nil || pc.req >= len(sc.Requirements) {
				continue
			}
			sentence, ps := pc.judge(c)
			if sentence == "" {
				continue
			}
			v := Fail
			if pc.warn {
				v = Warn
			}
			out = append(out, passiveFinding{id: pc.id, verdict: v, req: sc.Requirements[pc.req],
				sentence: fmt.Sprintf("Seen in scenario %s, connection %d (%s): %s", c.scenario, c.conn, c.label, sentence),
				events:   events(Response, ps...)})
		}
	}
	return out, n
}

// mergePassive adds the run-wide findings to the passive scenarios'
// results: each finding becomes a check, at most three per scenario with
// a count of the rest, and a scenario with none gets a passing check
// that says how many connections were judged.
func mergePassive(results []Result, found [][]passiveFinding, judged int) {
	byID := map[string][]passiveFinding{}
	for _, fs := range found {
		for _, f := range fs {
			byID[f.id] = append(byID[f.id], f)
		}
	}
	wide := runWideIDs()
	for i := range results {
		r := &results[i]
		if !wide[r.Scenario] || r.Verdict == Unsupported || judged == 0 {
			continue
		}
		sc := Lookup(r.Scenario)
		if sc == nil || len(sc.Requirements) == 0 {
			continue
		}
		fs := byID[r.Scenario]
		if len(fs) == 0 {
			req := sc.Requirements[0]
			r.Checks = append(r.Checks, CheckResult{Name: "run-wide", Verdict: Pass, Requirement: &req,
				Sentence: fmt.Sprintf("No violation on any of the %d connections of the run's other scenarios.", judged)})
		}
		for j, f := range fs {
			if j == 3 {
				r.Checks = append(r.Checks, CheckResult{Name: "run-wide", Verdict: Observed,
					Sentence: fmt.Sprintf("%d more connections of the run show the same.", len(fs)-3)})
				break
			}
			req := f.req
			r.Checks = append(r.Checks, CheckResult{Name: "run-wide", Verdict: f.verdict, Requirement: &req, Sentence: f.sentence, Events: f.events})
		}
		r.Verdict, r.Sentence = combine(r.Checks)
	}
}

func judgeNoTLSMessage(c connRecord, typ byte, name string) (string, []*packet) {
	var buf rawquic.CryptoBuffer
	var last *packet
	for _, p := range c.packets {
		if p.sent || p.space != 2 {
			continue
		}
		for _, f := range p.frames {
			if cf, ok := f.(*wire.CryptoFrame); ok {
				buf.Add(cf.Offset, cf.Data)
				last = p
			}
		}
	}
	for _, m := range tlsMessages(buf.Contiguous()) {
		if m[0] == typ {
			return fmt.Sprintf("the server sent a TLS %s message in 1-RTT CRYPTO data.", name), []*packet{last}
		}
	}
	return "", nil
}
