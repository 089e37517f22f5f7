package main

import (
	"bytes"
	"context"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDispatchSubcommands: one dispatch for commands and subcommands; the
// parent's flags may precede the subcommand's name, and "--" keeps a
// subcommand's name as an argument.
func TestDispatchSubcommands(t *testing.T) {
	type opts struct{ db string }
	var got []string
	flags := func(fs *flag.FlagSet) any {
		o := &opts{}
		fs.StringVar(&o.db, "db", "", "")
		return o
	}
	sub := func(name string) *command {
		return &command{name: name, setFlags: flags, run: func(_ context.Context, _ *cmdEnv, o any, args []string) error {
			got = append([]string{name, o.(*opts).db}, args...)
			return nil
		}}
	}
	own := &command{name: "raw", ownFlags: true, run: func(_ context.Context, _ *cmdEnv, o any, args []string) error {
		got = append([]string{"raw"}, args...)
		return nil
	}}
	parent := &command{name: "p", setFlags: flags, subs: []*command{sub("list"), sub("show"), own},
		run: func(_ context.Context, _ *cmdEnv, o any, args []string) error {
			got = append([]string{"p", o.(*opts).db}, args...)
			return nil
		}}
	for _, tc := range []struct{ args, want []string }{
		{[]string{"list", "--db", "x"}, []string{"list", "x"}},
		{[]string{"--db", "x", "list"}, []string{"list", "x"}},
		{[]string{"--db=x", "show", "3"}, []string{"show", "x", "3"}},
		{[]string{"show", "3", "--db", "list"}, []string{"show", "list", "3"}},
		{[]string{"--db", "list", "show"}, []string{"show", "list"}}, // "list" is the flag's value
		{[]string{"raw", "--anything", "x"}, []string{"raw", "--anything", "x"}},
		{[]string{"--", "list"}, []string{"p", "", "list"}},
		{[]string{"other", "--db", "y"}, []string{"p", "y", "other"}},
	} {
		got = nil
		var out, errb bytes.Buffer
		if code := dispatch(context.Background(), &cmdEnv{stdout: &out, stderr: &errb}, parent, "quiver p", tc.args); code != 0 {
			t.Errorf("%q: exit %d: %s", tc.args, code, errb.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q ran %q, want %q", tc.args, got, tc.want)
		}
	}
	noRun := &command{name: "q", subs: []*command{sub("list")}}
	var errb bytes.Buffer
	if code := dispatch(context.Background(), &cmdEnv{stdout: &bytes.Buffer{}, stderr: &errb}, noRun, "quiver q", []string{"frob"}); code != 2 ||
		!strings.Contains(errb.String(), "name a subcommand: list") {
		t.Errorf("unknown subcommand: exit %d, %q", code, errb.String())
	}
}

// TestFlagsAfterArguments runs real command lines with the flags after the
// positional arguments, and the same with them before: both are parsed.
func TestFlagsAfterArguments(t *testing.T) {
	// The scenario pattern is read from after the address: the suite
	// refuses it before any packet is sent.
	for _, args := range [][]string{
		{"test", "127.0.0.1:1", "--scenarios", "nosuch-x", "--json", filepath.Join(t.TempDir(), "r.json")},
		{"test", "--scenarios", "nosuch-x", "127.0.0.1:1"},
	} {
		if _, errs, code := quiver(t, args...); code != 2 || !strings.Contains(errs, `no server-facing scenario matches "nosuch-x"`) {
			t.Errorf("quiver %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
		}
	}
	db := filepath.Join(t.TempDir(), "none.db")
	for _, args := range [][]string{{"track", "list", "--db", db}, {"track", "--db", db, "list"}} {
		if _, errs, code := quiver(t, args...); code != 1 || !strings.Contains(errs, "no result store at "+db) {
			t.Errorf("quiver %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
		}
	}
	if out, _, code := quiver(t, "bench", "goodput", "--help"); code != 0 || !strings.Contains(out, "-size") {
		t.Errorf("bench goodput --help: exit %d\n%s", code, out)
	}
	if out, _, code := quiver(t, "bench", "rpc", "--help"); code != 0 || !strings.Contains(out, "--transports") {
		t.Errorf("bench rpc --help: exit %d\n%s", code, out)
	}
	if _, errs, code := quiver(t, "test", "127.0.0.1:1", "--", "--json"); code != 2 || !strings.Contains(errs, "test takes one HOST:PORT") {
		t.Errorf("after --, --json is an argument: exit %d, stderr %q", code, errs)
	}
}
