package facts

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quiver-quic/quiver/observatory/store"
)

// Kinds of fact change.
const (
	Changed  = "changed"  // the value differs from the previous result's
	Appeared = "appeared" // absent before (its group was there), present now
	Gone     = "gone"     // present before, absent now (its group is still there)
)

// Change is a fact that differs between two consecutive results of one
// target × scenario. The same change seen by several scenarios (the
// transport parameters, read by a few) is listed once with each scenario.
type Change struct {
	Kind           string    `json:"kind"`
	Target         string    `json:"target"`
	Implementation string    `json:"implementation,omitempty"`
	Key            string    `json:"key"`
	Unit           string    `json:"unit,omitempty"`
	From           string    `json:"from"` // "" when absent
	To             string    `json:"to"`
	FromVersion    string    `json:"from_version,omitempty"`
	ToVersion      string    `json:"to_version,omitempty"`
	FromRun        int64     `json:"from_run"`
	ToRun          int64     `json:"to_run"`
	FromResult     int64     `json:"from_result"`
	ToResult       int64     `json:"to_result"`
	Scenarios      []string  `json:"scenarios"`
	Time           time.Time `json:"time"`
}

// String is the change in one line: "quic-go v0.41.0: tp.max_datagram_frame_size 1200 → 16383 bytes".
func (c Change) String() string {
	who := cmp.Or(c.Implementation, c.Target)
	if c.ToVersion != "" {
		who += " " + c.ToVersion
	} else {
		who += fmt.Sprintf(" run %d", c.ToRun)
	}
	unit := ""
	if c.Unit != "" {
		unit = " " + c.Unit
	}
	def := ""
	if d, ok := Default(c.Key); ok {
		def = "; absent means " + d + unit
	}
	switch c.Kind {
	case Appeared:
		return fmt.Sprintf("%s: %s appeared (%s%s%s)", who, c.Key, c.To, unit, def)
	case Gone:
		return fmt.Sprintf("%s: %s no longer seen (was %s%s%s)", who, c.Key, c.From, unit, def)
	}
	return fmt.Sprintf("%s: %s %s → %s%s", who, c.Key, c.From, c.To, unit)
}

var (
	duration = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|us|ms|s)\b`)
	// A run of 8 or more hex digits not written as 0x… (a version, a
	// parameter ID) is a token or a connection ID.
	randomID = regexp.MustCompile(`(^|[^x0-9a-f])[0-9a-f]{8,}`)
	ackRatio = regexp.MustCompile(`\((\d+(\.\d+)?)\)`)
	// A number standing alone in a sentence ("3 of 3", "count 4;"), not
	// part of a name (v1, X25519, TLS_AES_128_GCM_SHA256).
	counted  = regexp.MustCompile(`(^|[\s(\[×=])\d+(\.\d+)?([\s,;:)\]%]|$)`)
	ecnCount = regexp.MustCompile(`(not-ECT|ECT\(0\)|ECT\(1\)|CE) (\d+)`)
	// grease versions (RFC 9000 §15: 0x?a?a?a?a) inside text.
	greaseText = regexp.MustCompile(`0x[0-9a-f]a[0-9a-f]a[0-9a-f]a[0-9a-f]a\b`)
)

// unstable names facts whose value differs from connection to connection
// on one build (sizes that carry greased or random fields, addresses with
// ephemeral ports); they are kept but not compared.
var unstable = []string{"handshake.server-bytes", "ipv6.address", "grease.tp", "grease.vn-versions", "grease.vn-unused-bits",
	// Packets counted while the tester floods a closing connection: they
	// depend on timing, not on the build (x/net's burst count went 50, 19, 50).
	"close.closing-answers",
	// quic-go's client picks its first Destination Connection ID's
	// length at random between 8 and 20 bytes on each connection.
	"cid.client-initial-dcid-length"}

// tpDefaults are the values of transport parameters a peer leaves out
// (RFC 9000 §18.2: "If this parameter is absent, a default value of 2 is
// assumed" for active_connection_id_limit; 65527 for max_udp_payload_size;
// 3 for ack_delay_exponent; 25 milliseconds for max_ack_delay; the other
// integer limits default to 0).
var tpDefaults = map[string]string{
	"tp.active_connection_id_limit": "2", "tp.max_udp_payload_size": "65527", "tp.ack_delay_exponent": "3", "tp.max_ack_delay": "25",
	"tp.initial_max_data": "0", "tp.initial_max_stream_data_bidi_local": "0", "tp.initial_max_stream_data_bidi_remote": "0",
	"tp.initial_max_stream_data_uni": "0", "tp.initial_max_streams_bidi": "0", "tp.initial_max_streams_uni": "0",
	"tp.max_idle_timeout": "0",
}

// Default is the value an absent fact stands for, when the protocol gives
// one (a transport parameter's default).
func Default(key string) (string, bool) {
	d, ok := tpDefaults[key]
	return d, ok
}

// constants are facts whose numbers are the implementation's own settings,
// the same on every connection: they are compared even in a sentence.
var constants = []string{"keyupdate.server-cadence"}

// Comparable returns the value a fact is compared by, and false for a
// fact that is not compared: a measured time or rate, a random value.
// ECN marks are compared by which codepoints were seen, not how many.
func Comparable(f store.Fact) (string, bool) {
	for _, u := range unstable {
		if f.Key == u || strings.HasPrefix(f.Key, u+".") {
			return "", false
		}
	}
	switch f.Type {
	case store.FactFloat:
		return "", false
	case store.FactInt:
		if f.Unit == "ms" && f.Group != "tp" || f.Unit == "us" && f.Group != "tp" {
			return "", false
		}
	case store.FactString, store.FactList:
		if strings.HasPrefix(f.Key, "ecn.") && ecnCount.MatchString(f.Value) {
			var seen []string
			for _, m := range ecnCount.FindAllStringSubmatch(f.Value, -1) {
				if m[2] != "0" {
					seen = append(seen, m[1])
				}
			}
			if len(seen) == 0 {
				return "none", true
			}
			return strings.Join(seen, "+"), true
		}
		// An ACK ratio is compared by the usual policy nearest to how
		// many packets one ACK covers: 26 ACKs for 50 packets and 19 for
		// 50 are both "every 2nd", 5 or 7 for 50 "every 10th", so that a
		// timer firing once more does not make a change.
		if m := ackRatio.FindStringSubmatch(f.Value); m != nil && strings.HasPrefix(f.Key, "ack.ratio") {
			r, err := strconv.ParseFloat(m[1], 64)
			if err != nil || r <= 0 {
				return "no ACK", true
			}
			return fmt.Sprintf("1 ACK per %d packets", AckPolicy(1/r)), true
		}
		v := f.Value
		if f.Type == store.FactList {
			v = dropGrease(v)
		}
		if duration.MatchString(v) || randomID.MatchString(greaseText.ReplaceAllString(v, "")) {
			return "", false
		}
		// A sentence with counts in it ("26 ACK packets for 50 …") is a
		// measurement; a label ("stays on v1 when v2 is offered") is not,
		// nor a count the implementation sets (its key-update interval).
		if f.Type == store.FactString && strings.Contains(v, " ") && counted.MatchString(v) && !slices.Contains(constants, f.Key) {
			return "", false
		}
		return v, true
	}
	return f.Value, true
}

// ackPolicies are the usual numbers of packets one ACK covers: every
// packet, every second (RFC 9000 §13.2.2's recommendation), every tenth
// (x/net past packet 100, or an ACK_FREQUENCY threshold of 9).
var ackPolicies = []int{1, 2, 10}

// AckPolicy returns the usual policy nearest to perAck packets per ACK,
// nearest on a log scale (2 and 10 meet at 4.5).
func AckPolicy(perAck float64) int {
	best, dist := ackPolicies[0], math.Inf(1)
	for _, p := range ackPolicies {
		if d := math.Abs(math.Log(perAck / float64(p))); d < dist {
			best, dist = p, d
		}
	}
	return best
}

// dropGrease removes greased versions from a list of strings.
func dropGrease(list string) string {
	var xs []string
	if json.Unmarshal([]byte(list), &xs) != nil {
		return list
	}
	keep := []string{}
	for _, x := range xs {
		if !greaseText.MatchString(x) {
			keep = append(keep, x)
		}
	}
	j, _ := json.Marshal(keep)
	return string(j)
}

// Noise: a fact that changes three times or more, at more than a third of
// the steps of its series or coming back to a value it had left, says more
// about the connection than about the implementation; its changes are not
// listed. (A regression and its fix, two changes, are still listed.)
const noisyMin = 4

func noisy(points int, steps []Change) bool {
	if len(steps) < 3 {
		return false
	}
	if points >= noisyMin && len(steps)*3 > points-1 {
		return true
	}
	seen := map[string]bool{steps[0].From: true}
	for _, s := range steps {
		if seen[s.To] {
			return true
		}
		seen[s.To] = true
	}
	return false
}

// DetectChanges finds the fact changes along each target × scenario in
// cells, which must be in history order (as Store.FactCells returns them).
func DetectChanges(cells []store.FactCell) []Change {
	type result struct {
		id, run  int64
		target   store.Target
		time     time.Time
		facts    map[string]store.Fact
		groups   map[string]bool
		scenario string
	}
	type series struct {
		target, scenario string
		results          []*result
	}
	var order []*series
	byKey := map[[2]string]*series{}
	byID := map[int64]*result{}
	for _, c := range cells {
		r := byID[c.ResultID]
		if r == nil {
			r = &result{id: c.ResultID, run: c.RunID, target: c.Target, time: c.Time, scenario: c.Scenario,
				facts: map[string]store.Fact{}, groups: map[string]bool{}}
			byID[c.ResultID] = r
			k := [2]string{c.Target.Name, c.Scenario}
			s := byKey[k]
			if s == nil {
				s = &series{target: c.Target.Name, scenario: c.Scenario}
				byKey[k] = s
				order = append(order, s)
			}
			s.results = append(s.results, r)
		}
		r.facts[c.Key] = c.Fact
		if c.Group != "" {
			r.groups[c.Group] = true
		}
	}
	var out []Change
	for _, s := range order {
		keys := map[string]store.Fact{}
		for _, r := range s.results {
			for k, f := range r.facts {
				if _, ok := keys[k]; !ok {
					keys[k] = f
				}
			}
		}
		for _, key := range slices.Sorted(mapKeys(keys)) {
			proto := keys[key]
			type point struct {
				r       *result
				present bool
				value   string
				shown   string
			}
			var pts []point
			compared := true
			for _, r := range s.results {
				f, ok := r.facts[key]
				switch {
				case ok:
					v, cmpOK := Comparable(f)
					if !cmpOK {
						compared = false
					}
					pts = append(pts, point{r, true, v, f.Value})
				case proto.Group != "" && r.groups[proto.Group]:
					pts = append(pts, point{r: r})
				}
			}
			if !compared || len(pts) < 2 {
				continue
			}
			var steps []Change
			for i := 1; i < len(pts); i++ {
				a, b := pts[i-1], pts[i]
				if a.present == b.present && a.value == b.value {
					continue
				}
				kind := Changed
				switch {
				case !a.present:
					kind = Appeared
				case !b.present:
					kind = Gone
				}
				from, to := a.value, b.value
				if a.value == a.shown && b.value == b.shown || !a.present || !b.present {
					from, to = a.shown, b.shown
				}
				steps = append(steps, Change{
					Kind: kind, Target: s.target, Implementation: b.r.target.Implementation, Key: key, Unit: proto.Unit,
					From: from, To: to, FromVersion: a.r.target.Version, ToVersion: b.r.target.Version,
					FromRun: a.r.run, ToRun: b.r.run, FromResult: a.r.id, ToResult: b.r.id,
					Scenarios: []string{s.scenario}, Time: b.r.time,
				})
			}
			if noisy(len(pts), steps) {
				continue
			}
			out = append(out, steps...)
		}
	}
	return merge(out)
}

// merge lists a change seen by several scenarios once.
func merge(cs []Change) []Change {
	type id struct {
		kind, target, key, from, to string
		fromRun, toRun              int64
	}
	var out []Change
	at := map[id]int{}
	for _, c := range cs {
		k := id{c.Kind, c.Target, c.Key, c.From, c.To, c.FromRun, c.ToRun}
		if i, ok := at[k]; ok {
			if !slices.Contains(out[i].Scenarios, c.Scenarios[0]) {
				out[i].Scenarios = append(out[i].Scenarios, c.Scenarios[0])
				slices.Sort(out[i].Scenarios)
			}
			continue
		}
		at[k] = len(out)
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.ToRun, b.ToRun), strings.Compare(a.Target, b.Target), strings.Compare(a.Key, b.Key))
	})
	return out
}

// WriteChanges prints fact changes, one a line.
func WriteChanges(w io.Writer, cs []Change) error {
	if len(cs) == 0 {
		_, err := fmt.Fprintln(w, "no fact changes")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fact change\ttarget\truns\tscenarios")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t%d→%d\t%s\n", printable(c.String()), printable(c.Target), c.FromRun, c.ToRun, strings.Join(c.Scenarios, ", "))
	}
	return tw.Flush()
}

// printable keeps control characters a target's name or a peer's value may
// carry off the terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}
