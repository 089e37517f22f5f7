package web

import (
	"strings"
)

// areaNames names the areas of the suite by their scenario ID prefix.
var areaNames = map[string]string{
	"hs": "handshake", "vn": "version negotiation", "v2": "QUIC version 2", "tls": "TLS", "retry": "Retry", "token": "tokens",
	"ack": "acknowledgments", "af": "ACK frequency", "amp": "amplification limit", "cid": "connection IDs", "close": "closing",
	"dgram": "datagrams", "ecn": "ECN", "fc": "flow control", "grease": "greasing", "h3": "HTTP/3", "qpack": "QPACK",
	"idle": "idle timeout", "inv": "invalid frames", "path": "path validation and migration", "pkt": "packets",
	"prefaddr": "preferred address", "probe": "probes", "rec": "loss recovery", "sr": "stateless reset", "stream": "streams",
	"cli": "client-facing", "health": "health", "discovery": "discovery",
}

// areaOf is a scenario's area: its ID prefix, named when known.
func areaOf(scenario string) string {
	p, _, _ := strings.Cut(scenario, "-")
	if n, ok := areaNames[p]; ok {
		return n
	}
	return p
}

// area is one area's scenarios, in the order given.
type area struct {
	Name      string
	Scenarios []string
}

// groupByArea groups sorted scenarios by area, areas in order of first
// appearance.
func groupByArea(scenarios []string) []area {
	var out []area
	at := map[string]int{}
	for _, s := range scenarios {
		a := areaOf(s)
		i, ok := at[a]
		if !ok {
			i = len(out)
			at[a] = i
			out = append(out, area{Name: a})
		}
		out[i].Scenarios = append(out[i].Scenarios, s)
	}
	return out
}
