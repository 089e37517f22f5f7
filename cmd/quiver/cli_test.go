package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGolden runs command lines in-process and compares stdout, stderr and
// the exit status with testdata/NAME.golden.
func TestGolden(t *testing.T) {
	version = "0.0.0-test" // keep golden files independent of releases
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"help", []string{"--help"}, 0},
		{"noargs", nil, 2},
		{"unknown", []string{"frobnicate"}, 2},
		{"demo-help", []string{"demo", "--help"}, 0},
		{"demo-badarg", []string{"demo", "extra"}, 2},
		{"test-help", []string{"test", "--help"}, 0},
		{"test-noarg", []string{"test"}, 2},
		{"test-badflag", []string{"test", "--bogus", "x"}, 2},
		{"test-client-help", []string{"test-client", "--help"}, 0},
		{"test-client-noarg", []string{"test-client"}, 2},
		{"serve-help", []string{"serve", "-h"}, 0},
		{"get-help", []string{"get", "--help"}, 0},
		{"get-noarg", []string{"get"}, 2},
		{"interop-help", []string{"interop", "--help"}, 0},
		{"track-help", []string{"track", "--help"}, 0},
		{"track-noarg", []string{"track"}, 2},
		{"worker-help", []string{"worker", "--help"}, 0},
		{"worker-nodb", []string{"worker"}, 2},
		{"web-help", []string{"web", "--help"}, 0},
		{"bench-help", []string{"bench", "--help"}, 0},
		{"bench-noarg", []string{"bench"}, 2},
		{"grid-help", []string{"grid", "--help"}, 0},
		{"grid-noarg", []string{"grid"}, 2},
		{"grid-missing", []string{"grid", "/nonexistent/r.json"}, 1},
		{"version-help", []string{"help", "version"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errb)
			if code != tc.code {
				t.Errorf("exit status %d, want %d (stderr: %s)", code, tc.code, errb.String())
			}
			got := "$ quiver " + strings.Join(tc.args, " ") + "\n--- stdout\n" + out.String() + "--- stderr\n" + errb.String()
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s:\n got:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	version = "9.9.9"
	var out bytes.Buffer
	if code := run(context.Background(), []string{"version"}, &out, &out); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.HasPrefix(out.String(), "quiver 9.9.9 (go") {
		t.Errorf("version output %q", out.String())
	}
}

// TestEveryCommandHasHelpAndExample keeps the README promise: every command
// documents itself with at least one example.
func TestEveryCommandHasHelpAndExample(t *testing.T) {
	for _, c := range commands() {
		if c.summary == "" || len(c.examples) == 0 {
			t.Errorf("command %s lacks a summary or an example", c.name)
		}
		for _, s := range c.subs {
			if !s.hidden && (s.summary == "" || len(s.examples) == 0) {
				t.Errorf("command %s %s lacks a summary or an example", c.name, s.name)
			}
		}
	}
}
