// Package observatory watches QUIC implementations over time: it runs
// campaigns (scenarios × targets) of the conformance suite, keeps every
// result in a [store.Store], starts local servers for them, and records
// benchmark JSON. Reading the store (grid, changes, diffs, text output)
// is package observatory/results, which the dashboard (observatory/web)
// uses without linking the suite or the engine.
package observatory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"

	"github.com/quiver-quic/quiver/conformance"
)

// TargetsFile is the JSON a targets file holds:
//
//	{"targets": [
//	  {"name": "quic-go local", "address": "127.0.0.1:4433", "sni": "localhost",
//	   "alpn": ["hq-interop"], "implementation": "quic-go", "version": "v0.59.0"}
//	]}
//
// A bare array of targets is accepted too.
type TargetsFile struct {
	Targets []conformance.Target `json:"targets"`
}

// LoadTargets reads and checks a targets file.
func LoadTargets(file string) ([]conformance.Target, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	ts, err := ParseTargets(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return ts, nil
}

// ParseTargets decodes a targets file and checks that every target has a
// unique name and a host:port address.
func ParseTargets(b []byte) ([]conformance.Target, error) {
	var ts []conformance.Target
	b = bytes.TrimSpace(b)
	dec := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		return d.Decode(v)
	}
	if len(b) > 0 && b[0] == '[' {
		if err := dec(&ts); err != nil {
			return nil, err
		}
	} else {
		var f TargetsFile
		if err := dec(&f); err != nil {
			return nil, err
		}
		ts = f.Targets
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("no targets (expected {\"targets\": [{\"name\": …, \"address\": \"host:port\"}]})")
	}
	seen := map[string]bool{}
	for i, t := range ts {
		if t.Name == "" {
			return nil, fmt.Errorf("target %d has no name", i+1)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("target name %q appears twice; names identify a target's history", t.Name)
		}
		seen[t.Name] = true
		if _, _, err := net.SplitHostPort(t.Address); err != nil {
			return nil, fmt.Errorf("target %q: address %q is not host:port", t.Name, t.Address)
		}
	}
	return ts, nil
}
