package variants

import (
	"path"

	"github.com/quiver-quic/quiver/conformance"
)

// Kinds of Exception.
const (
	// KindShould: the scenario judges that very choice at SHOULD level,
	// so a warn is the right verdict.
	KindShould = "judges this SHOULD"
	// KindDeparts: the variant departs from a SHOULD, and the departure
	// leaves the tester unable to judge (an inconclusive is right).
	KindDeparts = "variant departs from a SHOULD"
	// KindTesterBug: a false verdict already known and fixed in the
	// scenario elsewhere (issue 14, item 1); listed so that the matrix
	// tells new false verdicts from known ones.
	KindTesterBug = "known tester bug"
	// KindOpen: a false verdict this matrix found that is not fixed yet;
	// listed so that CI catches new ones (docs/variants.md).
	KindOpen = "open tester bug"
)

// An Exception says why a variant may get a worse verdict than the
// default on a scenario.
type Exception struct {
	Scenario string // ID or glob
	Variant  string
	// Verdicts are the verdicts this explains; empty: any.
	Verdicts []conformance.Verdict
	Kind     string
	Reason   string
}

// Expected lists every known reason for a variant's verdict to differ
// from the default's.
var Expected = []Exception{
	{Scenario: "fc-blocked-signalled", Variant: "no-blocked", Verdicts: warn, Kind: KindShould,
		Reason: "RFC 9000 §4.1: \"A sender SHOULD send a STREAM_DATA_BLOCKED or DATA_BLOCKED frame\"; the variant sends none, a warn is right"},
	{Scenario: "close-handshake-both-levels", Variant: "close-above-initial", Verdicts: warn, Kind: KindShould,
		Reason: "RFC 9000 §10.2.3: \"a server SHOULD send a CONNECTION_CLOSE frame in both Handshake and Initial packets\"; the variant leaves out the Initial one"},
	{Scenario: "ack-every-second-packet", Variant: "ack-every-10", Verdicts: warn, Kind: KindShould,
		Reason: "RFC 9000 §13.2.2: \"A receiver SHOULD send an ACK frame after receiving at least two ack-eliciting packets\"; the variant waits for ten"},
	{Scenario: "tls-0rtt-limit-violation", Variant: "close-above-initial", Verdicts: inconclusive, Kind: KindDeparts, Reason: closeBeforeHello},
	{Scenario: "tls-crypto-in-0rtt", Variant: "close-above-initial", Verdicts: inconclusive, Kind: KindDeparts, Reason: closeBeforeHello},
	{Scenario: "pkt-ack-in-0rtt", Variant: "close-above-initial", Verdicts: inconclusive, Kind: KindDeparts, Reason: closeBeforeHello},
	{Scenario: "rec-server-handshake-probe", Variant: "retry", Kind: KindTesterBug,
		Reason: "the scenario expects the Retry to be probed again; a Retry creates no state (RFC 9000 §17.2.5), issue 14 item 5"},
	{Scenario: "rec-initial-window", Variant: "iw-32", Verdicts: warn, Kind: KindShould,
		Reason: "RFC 9002 §7.2: \"Endpoints SHOULD use an initial congestion window of ten times the maximum datagram size\"; the variant uses 32"},
	{Scenario: "rec-loss-reduces-flight", Variant: "slow-server", Kind: KindTesterBug,
		Reason: "judges one flight instead of the window (RFC 9002 §7.3.2 asks for a window reduction), issue 14 item 6"},
	{Scenario: "af-ce-immediate", Variant: "key-update-100", Verdicts: inconclusive, Kind: KindOpen,
		Reason: "the server acknowledges at once around its own key updates, so the baseline run shows no delayed ACK; the scenario could retry instead of giving up"},
	{Scenario: "inv-coalesce-same-cid", Variant: "zero-padding", Kind: KindTesterBug,
		Reason: "the zero bytes after the last packet are read as a coalesced packet; RFC 9000 §14.1 allows them, issue 14 item 4"},
}

var (
	warn         = []conformance.Verdict{conformance.Warn}
	inconclusive = []conformance.Verdict{conformance.Inconclusive}
)

// closeBeforeHello: the server finds the 0-RTT offence in the datagram
// that carries the ClientHello and closes before its ServerHello leaves;
// without an Initial copy of the close the tester holds no key to read
// it.
const closeBeforeHello = "the server closes on the 0-RTT offence before its ServerHello leaves, in a Handshake packet only " +
	"(RFC 9000 §10.2.3: \"a server SHOULD send a CONNECTION_CLOSE frame in both Handshake and Initial packets\"); " +
	"the tester holds no Handshake keys, so nothing can be judged"

// expected returns the exception that explains verdict v of scenario id
// on target t, or nil.
func expected(id string, t Target, v conformance.Verdict) *Exception {
	for i := range Expected {
		e := &Expected[i]
		if !t.Has(e.Variant) {
			continue
		}
		if ok, _ := path.Match(e.Scenario, id); !ok {
			continue
		}
		if len(e.Verdicts) > 0 && !containsVerdict(e.Verdicts, v) {
			continue
		}
		return e
	}
	return nil
}

func containsVerdict(vs []conformance.Verdict, v conformance.Verdict) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}
