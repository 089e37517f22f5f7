// Package facts turns what a conformance result recorded (its "facts":
// keys with JSON values) into typed facts the store keeps, and finds the
// facts that changed from one release to the next.
//
// It reads results as JSON and knows nothing of the engine, so that the
// dashboard can use it without linking the suite.
package facts

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/quiver-quic/quiver/observatory/store"
)

// rawFact is a fact as the suite writes it in a result.
type rawFact struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// FromEvidence reads the facts of a result's evidence (the whole
// conformance result as JSON) and types them.
func FromEvidence(evidence []byte) ([]store.Fact, error) {
	var res struct {
		Facts []rawFact `json:"facts"`
	}
	if err := json.Unmarshal(evidence, &res); err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	var out []store.Fact
	for _, f := range res.Facts {
		out = append(out, Flatten(f.Key, f.Value)...)
	}
	// One key once: the first wins (a fact flattened from a map may meet
	// a fact recorded under the same name).
	slices.SortStableFunc(out, func(a, b store.Fact) int { return strings.Compare(a.Key, b.Key) })
	out = slices.CompactFunc(out, func(a, b store.Fact) bool { return a.Key == b.Key })
	return out, nil
}

// maxDepth bounds how far objects are flattened; deeper values are kept as
// compact JSON text.
const maxDepth = 2

// Flatten types one recorded fact. An object becomes one fact per member
// ("key.member", grouped under key); transport parameters (the facts "tp"
// and "tp.raw", name → hex value) are decoded by name.
func Flatten(key string, value json.RawMessage) []store.Fact {
	if key == "" {
		return nil
	}
	if key == "tp" || key == "tp.raw" {
		var m map[string]string
		if json.Unmarshal(value, &m) == nil {
			return transportParameters(m)
		}
	}
	return flatten(key, "", value, 0)
}

var hexish = regexp.MustCompile(`[0-9a-f]{8,}`)

func flatten(key, group string, value json.RawMessage, depth int) []store.Fact {
	d := json.NewDecoder(bytes.NewReader(value))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || v == nil {
		return nil
	}
	f := store.Fact{Key: key, Group: group, Unit: unitOf(key)}
	switch x := v.(type) {
	case bool:
		f.Type, f.Value = store.FactBool, strconv.FormatBool(x)
	case json.Number:
		if _, err := strconv.ParseInt(x.String(), 10, 64); err == nil {
			f.Type, f.Value = store.FactInt, x.String()
		} else if _, err := strconv.ParseFloat(x.String(), 64); err == nil {
			f.Type, f.Value = store.FactFloat, x.String()
		} else {
			f.Type, f.Value = store.FactString, x.String()
		}
	case string:
		f.Type, f.Value = store.FactString, x
	case []any:
		f.Type, f.Value = store.FactList, compact(value)
	case map[string]any:
		// Members named by a random value (a token, a connection ID)
		// would give every run new keys: such an object stays whole.
		random := false
		for k := range x {
			if hexish.MatchString(k) {
				random = true
			}
		}
		if depth < maxDepth && !random {
			var m map[string]json.RawMessage
			if json.Unmarshal(value, &m) == nil {
				var out []store.Fact
				for _, k := range slices.Sorted(mapKeys(m)) {
					out = append(out, flatten(key+"."+k, key, m[k], depth+1)...)
				}
				return out
			}
		}
		f.Type, f.Value = store.FactString, compact(value)
	default:
		return nil
	}
	return []store.Fact{f}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func compact(v json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}

// unitOf guesses a unit from a fact's name.
func unitOf(key string) string {
	switch {
	case strings.HasSuffix(key, "-ms") || strings.HasSuffix(key, "_ms"):
		return "ms"
	case strings.HasSuffix(key, "_us") || strings.HasSuffix(key, "-us"):
		return "us"
	case strings.HasSuffix(key, "bytes") || strings.HasSuffix(key, "-size") || strings.HasSuffix(key, "length"):
		return "bytes"
	}
	return ""
}

// Transport parameters (RFC 9000 §18.2): "Each transport parameter is
// encoded as an (identifier, length, value) tuple"; the integer ones carry
// a variable-length integer as their value.
var tpInts = map[string]string{
	"max_idle_timeout":                    "ms",
	"max_udp_payload_size":                "bytes",
	"initial_max_data":                    "bytes",
	"initial_max_stream_data_bidi_local":  "bytes",
	"initial_max_stream_data_bidi_remote": "bytes",
	"initial_max_stream_data_uni":         "bytes",
	"initial_max_streams_bidi":            "streams",
	"initial_max_streams_uni":             "streams",
	"ack_delay_exponent":                  "",
	"max_ack_delay":                       "ms",
	"active_connection_id_limit":          "",
	"max_datagram_frame_size":             "bytes",
	"min_ack_delay":                       "us",
}

// tpConnectionIDs are per-connection values: only their length says
// something about the implementation.
var tpConnectionIDs = []string{"original_destination_connection_id", "initial_source_connection_id", "retry_source_connection_id"}

// resetStreamAtIDs are the identifiers the reset_stream_at transport
// parameter (draft-ietf-quic-reliable-stream-reset, RESET_STREAM_AT) has
// been sent under: a provisional one of the drafts and 0x1d. They are one
// fact, tp.reset_stream_at, whose value lists the identifiers present, so
// that a move from one to the other, or to both, is one change.
var resetStreamAtIDs = []string{"0x17f7586d2cb571", "0x1d"}

func transportParameters(m map[string]string) []store.Fact {
	var out []store.Fact
	grease := 0
	var resetAt []string
	add := func(name, typ, value, unit string) {
		out = append(out, store.Fact{Key: "tp." + name, Group: "tp", Type: typ, Value: value, Unit: unit})
	}
	for _, name := range slices.Sorted(mapKeys(m)) {
		raw, err := hex.DecodeString(m[name])
		if err != nil {
			add(name, store.FactString, m[name], "")
			continue
		}
		if slices.Contains(resetStreamAtIDs, name) {
			resetAt = append(resetAt, name)
			continue
		}
		if id, ok := strings.CutPrefix(name, "0x"); ok {
			// RFC 9000 §18.1: "Transport parameters with an identifier of
			// the form 31 * N + 27 for integer values of N are reserved to
			// exercise the requirement that unknown transport parameters
			// be ignored." Their identifiers are random: they are counted.
			if n, err := strconv.ParseUint(id, 16, 64); err == nil && n >= 27 && (n-27)%31 == 0 {
				grease++
				continue
			}
			add(name, store.FactFlag, "present", "")
			continue
		}
		switch {
		case tpInts[name] != "" || name == "ack_delay_exponent" || name == "active_connection_id_limit":
			if v, n := varint(raw); n == len(raw) && n > 0 {
				add(name, store.FactInt, strconv.FormatUint(v, 10), tpInts[name])
			} else {
				add(name, store.FactString, m[name], "")
			}
		case slices.Contains(tpConnectionIDs, name):
			add(name+".length", store.FactInt, strconv.Itoa(len(raw)), "bytes")
		case name == "version_information":
			add(name, store.FactList, versionList(raw), "")
		case len(raw) == 0 || name == "stateless_reset_token" || name == "preferred_address":
			// A flag, or a value that differs on every connection.
			add(name, store.FactFlag, "present", "")
		default:
			add(name, store.FactString, m[name], "")
		}
	}
	if len(resetAt) > 0 {
		j, _ := json.Marshal(resetAt)
		add("reset_stream_at", store.FactList, string(j), "")
	}
	add("grease", store.FactInt, strconv.Itoa(grease), "")
	// Sorted by key, as FromEvidence keeps them.
	slices.SortStableFunc(out, func(a, b store.Fact) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// varint decodes a QUIC variable-length integer (RFC 9000 §16); n is 0 if
// b is too short.
func varint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	n := 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0
	}
	v := uint64(b[0] & 0x3f)
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
	}
	return v, n
}

// versionList renders version_information (RFC 9368 §3: Chosen Version,
// then Available Versions, 32 bits each) as a JSON list, greased versions
// left out.
func versionList(b []byte) string {
	vs := []string{}
	for i := 0; i+4 <= len(b); i += 4 {
		v := uint32(b[i])<<24 | uint32(b[i+1])<<16 | uint32(b[i+2])<<8 | uint32(b[i+3])
		if !greaseVersion(v) {
			vs = append(vs, fmt.Sprintf("0x%08x", v))
		}
	}
	j, _ := json.Marshal(vs)
	return string(j)
}

// greaseVersion: RFC 9000 §15 "Versions that follow the pattern
// 0x?a?a?a?a are reserved for use in forcing version negotiation to be
// exercised".
func greaseVersion(v uint32) bool { return v&0x0f0f0f0f == 0x0a0a0a0a }
