package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/quiver-quic/quiver/observatory/facts"
	"github.com/quiver-quic/quiver/observatory/results"
)

// namedChange is a change known from an implementation's release notes or
// source (issue 15 names thirteen), which a sweep should find: a fact
// change of Key, or a verdict change of Scenario, on Target at Release.
// Unobservable says why no sweep can see it, when that is so.
type namedChange struct {
	Target, What, Release string
	Key, Scenario         string
	Unobservable          string
	// IfMissing says what may hide the change when no sweep finds it.
	IfMissing string
}

// namedChanges are the changes issue 15 names, checked against the
// datasets each time docs/evolution.md is made.
var namedChanges = []namedChange{
	{Target: "quic-go releases", What: "max_datagram_frame_size 1200 → 16383", Release: "v0.41.0", Key: "tp.max_datagram_frame_size"},
	{Target: "quic-go releases", What: "ECN marking on sent packets", Release: "v0.40.1", Key: "ecn.marking"},
	{Target: "quic-go clients", What: "the client's first Initial datagram 1252 → 1280 bytes", Release: "v0.44.0", Key: "initial.client-first-datagram-size"},
	{Target: "quic-go releases", What: "disable_active_migration no longer sent", Release: "v0.52.0", Key: "tp.disable_active_migration"},
	{Target: "quic-go releases", What: "the server's ACK-only Initial disappears", Release: "v0.58.0", Key: "handshake.server-ack-only-initials",
		IfMissing: "timing decides whether an ACK goes alone, so the count varies from connection to connection, and change detection leaves out a fact whose value comes back to one it had"},
	{Target: "quic-go releases", What: "RESET_STREAM_AT's transport parameter: 0x17f7586d2cb571, then 0x1d (v0.61.0), then both (v0.62.0)", Release: "v0.61.0", Key: "tp.reset_stream_at"},
	{Target: "quic-go releases", What: "CONNECTION_REFUSED when the server refuses a connection", Release: "v0.42.0",
		Unobservable: "the adapter's server accepts every connection at once, so no scenario can make it refuse one"},
	{Target: "quic-go releases", What: "PATH_CHALLENGE answered once for a duplicated packet, then not at all", Release: "v0.51.0", Scenario: "pkt-duplicate-packet"},
	{Target: "quic-go releases", What: "Config.Tracer", Release: "v0.56.0",
		Unobservable: "an API change (how a program attaches a tracer); nothing on the wire differs"},
	{Target: "go-x-net releases", What: "an ACK for every 10th packet above packet number 100", Release: "v0.22.0", Key: "ack.ratio-above-pn-100"},
	{Target: "go-x-net releases", What: "the first key update at packet ~101 instead of ~1001", Release: "v0.25.0", Key: "keyupdate.server-cadence"},
	{Target: "go-x-net releases", What: "ECN counts in ACK frames", Release: "v0.47.0", Scenario: "ecn-feedback"},
	{Target: "go-x-net releases", What: "active_connection_id_limit 2 → 4", Release: "v0.62.0", Key: "tp.active_connection_id_limit"},
}

// writeNamedChanges says, for each named change, at which release the
// datasets show it: at the named release, at the first swept release
// after it (the releases between were not swept), elsewhere, or not at all.
func writeNamedChanges(w io.Writer, fch map[string][]facts.Change, vch map[string][]results.Change, swept map[string][]string) {
	found, right := 0, 0
	var rows []string
	for _, n := range namedChanges {
		var at []string
		status := ""
		switch {
		case n.Unobservable != "":
			status = "not observable: " + n.Unobservable
		case len(swept[n.Target]) == 0:
			status = "not found: no dataset of " + n.Target
		default:
			for _, c := range fch[n.Target] {
				if n.Key != "" && c.Key == n.Key {
					at = append(at, fmt.Sprintf("%s (after %s: %s → %s)", c.ToVersion, c.FromVersion, orAbsent(c.From), orAbsent(c.To)))
				}
			}
			for _, c := range vch[n.Target] {
				if n.Scenario != "" && c.Scenario == n.Scenario && c.Kind != results.Flapping {
					at = append(at, fmt.Sprintf("%s (%s: %s → %s)", c.To.Target.Version, c.Kind.Describe(), c.From.Verdict, c.To.Verdict))
				}
			}
			first := firstSweptFrom(swept[n.Target], n.Release)
			before := sweptBefore(swept[n.Target], n.Release)
			switch {
			case len(at) == 0 && n.IfMissing != "":
				status = "**not found**: " + n.IfMissing
			case len(at) == 0:
				status = "**not found**"
			case strings.HasPrefix(at[0], n.Release+" ") || strings.Contains(strings.Join(at, " "), n.Release+" ("):
				status, right = "found at the named release", right+1
			case first != "" && strings.Contains(strings.Join(at, " "), first+" ("):
				status, right = "found at the first swept release after it ("+first+")", right+1
			case before != "" && strings.HasPrefix(at[0], before+" "):
				// The named release is the first the proxy lists; the sweep
				// also built the one before it by name, which has it.
				status, right = "found one swept release earlier ("+before+", swept by name), so the named first listed release is not the first that has it", right+1
			default:
				status = "found at another release"
			}
			if len(at) > 0 {
				found++
			}
			if len(at) > 1 {
				status += fmt.Sprintf("; %d changes of it along the releases", len(at))
			}
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s |", mdCell(n.Target), mdCell(n.What), n.Release, mdCell(strings.Join(at, "; ")), mdCell(status)))
	}
	fmt.Fprintln(w, "\n## The changes named in issue 15")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Checked against the datasets above each time this page is made: %d of %d found, %d at the named release or at the\n", found, len(namedChanges), right)
	fmt.Fprintln(w, "first swept release after it. A release the module proxy does not list, and that no sweep named, is not in the")
	fmt.Fprintln(w, "datasets, so \"first swept\" can be later than the release that brought the change; one that was swept by name can")
	fmt.Fprintln(w, "show a change earlier than the release notes' first listed one.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | change | named release | seen by the sweep at | status |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
}

func orAbsent(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

// sweptBefore is the last swept release before v.
func sweptBefore(swept []string, v string) string {
	prev := ""
	for _, s := range swept {
		if results.CompareVersions(s, v) >= 0 {
			break
		}
		prev = s
	}
	return prev
}

// firstSweptFrom is the first swept release at or after v.
func firstSweptFrom(swept []string, v string) string {
	for _, s := range swept {
		if results.CompareVersions(s, v) >= 0 {
			return s
		}
	}
	return ""
}
