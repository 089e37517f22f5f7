package cliargs

import (
	"bytes"
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestParse: flags are parsed wherever they stand, "--" ends them, and
// bad flags are errors.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		pos     []string
		json    string
		verbose bool
		err     string
	}{
		{args: []string{"127.0.0.1:4433", "--json", "r.json"}, pos: []string{"127.0.0.1:4433"}, json: "r.json"},
		{args: []string{"--json", "r.json", "127.0.0.1:4433"}, pos: []string{"127.0.0.1:4433"}, json: "r.json"},
		{args: []string{"a", "-v", "b", "--json=r.json", "c"}, pos: []string{"a", "b", "c"}, json: "r.json", verbose: true},
		{args: []string{"a", "--", "--json", "x", "-v"}, pos: []string{"a", "--json", "x", "-v"}},
		{args: []string{"--json", "-v", "a"}, pos: []string{"a"}, json: "-v"}, // a value is the next argument, whatever it is
		{args: []string{"-", "-v"}, pos: []string{"-"}, verbose: true},
		{args: []string{"-v=false", "a"}, pos: []string{"a"}},
		{args: []string{"a", "--json"}, err: "flag needs an argument"},
		{args: []string{"a", "--bogus", "b"}, err: "not defined"},
		{args: []string{"a", "--help"}, err: flag.ErrHelp.Error()},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		json := fs.String("json", "", "")
		verbose := fs.Bool("v", false, "")
		pos, err := Parse(fs, tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, want error %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(pos, tc.pos) || *json != tc.json || *verbose != tc.verbose {
			t.Errorf("Parse(%q) = %q, %v, json %q, v %v; want %q, json %q, v %v", tc.args, pos, err, *json, *verbose, tc.pos, tc.json, tc.verbose)
		}
	}
}
