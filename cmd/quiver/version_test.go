package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionBuildInfo: `quiver version` shows the module version and the
// commit that the Go toolchain records, from a checkout (vcs.* settings)
// and from `go install …@commit` (a pseudo-version, no vcs settings).
func TestVersionBuildInfo(t *testing.T) {
	defer func(old func() (*debug.BuildInfo, bool)) { readBuildInfo = old }(readBuildInfo)
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		want []string
	}{
		{"go install @commit", &debug.BuildInfo{Main: debug.Module{Path: "github.com/quiver-quic/quiver",
			Version: "v0.0.0-20261204173000-531867f1a2b3"}},
			[]string{"module github.com/quiver-quic/quiver v0.0.0-20261204173000-531867f1a2b3", "commit 531867f1a2b3"}},
		{"go install @tag", &debug.BuildInfo{Main: debug.Module{Path: "github.com/quiver-quic/quiver", Version: "v0.3.0"}},
			[]string{"module github.com/quiver-quic/quiver v0.3.0", "commit unknown"}},
		{"go build in a checkout", &debug.BuildInfo{Main: debug.Module{Path: "github.com/quiver-quic/quiver", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "531867f1a2b3c4d5"}, {Key: "vcs.time", Value: "2026-12-04T17:00:00Z"},
				{Key: "vcs.modified", Value: "true"}}},
			[]string{"module github.com/quiver-quic/quiver (devel)", "commit 531867f1a2b3c4d5 2026-12-04T17:00:00Z (with uncommitted changes)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			readBuildInfo = func() (*debug.BuildInfo, bool) { return tc.bi, true }
			out, _, code := quiver(t, "version")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "quiver ") || lines[1] != tc.want[0] || lines[2] != tc.want[1] {
				t.Fatalf("exit %d, output:\n%s\nwant lines 2-3:\n%s", code, out, strings.Join(tc.want, "\n"))
			}
		})
	}
	// The test binary itself carries build information.
	readBuildInfo = debug.ReadBuildInfo
	var out bytes.Buffer
	writeVersion(&out)
	if !strings.Contains(out.String(), "\nmodule ") {
		t.Errorf("real build info: %q", out.String())
	}
}

func TestPseudoVersionCommit(t *testing.T) {
	for v, want := range map[string]string{
		"v0.0.0-20261204173000-531867f1a2b3":              "531867f1a2b3",
		"v1.2.4-0.20261204173000-531867f1a2b3":            "531867f1a2b3",
		"v1.2.3-pre.0.20261204173000-531867f1a2b3":        "531867f1a2b3",
		"v2.0.0-20261204173000-531867f1a2b3+incompatible": "531867f1a2b3",
		"v1.2.3":                   "",
		"(devel)":                  "",
		"v1.2.3-rc-1":              "",
		"v1.2.3-beta1":             "",
		"v0.0.0-2026-531867f1a2b3": "",
	} {
		if got := pseudoVersionCommit(v); got != want {
			t.Errorf("pseudoVersionCommit(%q) = %q, want %q", v, got, want)
		}
	}
}
