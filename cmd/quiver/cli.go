package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// version is the tool version recorded with every result; release builds set
// it with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// command is one subcommand: its name, a one-line summary, an example, and
// the function that runs it. setFlags declares its flags so that --help can
// list them without running anything.
type command struct {
	name     string
	summary  string
	usage    string // the argument synopsis after "quiver NAME"
	examples []string
	notes    string // printed after the examples in --help (exit statuses)
	setFlags func(fs *flag.FlagSet) any
	run      func(ctx context.Context, env *cmdEnv, opts any, args []string) error
}

// cmdEnv is what a subcommand may touch of the outside world.
type cmdEnv struct {
	stdout, stderr io.Writer
}

// errUsage marks an error that is the user's to fix; run prints the usage
// line after it and exits with status 2.
var errUsage = errors.New("usage")

// exitError carries a specific exit status (for example 1 when a conformance
// scenario fails) without an extra message.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func commands() []*command {
	// Listed in the order a newcomer meets them.
	return []*command{
		demoCommand(), testCommand(), testClientCommand(), serveCommand(), getCommand(),
		interopCommand(), trackCommand(), workerCommand(), webCommand(), benchCommand(), gridCommand(), scenariosCommand(), versionCommand(),
	}
}

// run is the whole command line: it returns the process exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env := &cmdEnv{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		printTopUsage(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && name == "help" {
			if c := lookup(args[1]); c != nil {
				printCommandUsage(stdout, c)
				return 0
			}
		}
		printTopUsage(stdout)
		return 0
	case "-version", "--version":
		name = "version"
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(stderr, "quiver: unknown command %q\n\n", name)
		printTopUsage(stderr)
		return 2
	}
	fs := flag.NewFlagSet("quiver "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var opts any
	if c.setFlags != nil {
		opts = c.setFlags(fs)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandUsage(stdout, c)
			return 0
		}
		fmt.Fprintf(stderr, "quiver %s: %v\n", c.name, err)
		fmt.Fprintf(stderr, "run 'quiver %s --help' for usage\n", c.name)
		return 2
	}
	err := c.run(ctx, env, opts, fs.Args())
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "quiver %s: %v\n", c.name, err)
		fmt.Fprintf(stderr, "run 'quiver %s --help' for usage\n", c.name)
		return 2
	default:
		fmt.Fprintf(stderr, "quiver %s: %v\n", c.name, err)
		return 1
	}
}

func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func printTopUsage(w io.Writer) {
	fmt.Fprintf(w, "Quiver tells how a QUIC implementation really behaves.\n\n")
	fmt.Fprintf(w, "Usage: quiver COMMAND [flags] [arguments]\n\nCommands:\n")
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'quiver COMMAND --help' for a command's flags and examples.\n")
}

func printCommandUsage(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: quiver %s %s\n\n%s\n", c.name, c.usage, c.summary)
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	if c.setFlags != nil {
		c.setFlags(fs)
	}
	var b strings.Builder
	fs.SetOutput(&b)
	fs.VisitAll(func(f *flag.Flag) {
		name, use := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(&b, " %s", name)
		}
		fmt.Fprintf(&b, "\n    \t%s", strings.ReplaceAll(use, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			if isStringFlag(f) {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %s)", f.DefValue)
			}
		}
		b.WriteString("\n")
	})
	if b.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", b.String())
	}
	if len(c.examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if c.notes != "" {
		fmt.Fprintf(w, "\n%s", c.notes)
	}
}

// notBuilt is what a command prints while the part of Quiver it fronts has
// not landed yet: it names the issue that brings it, so nobody mistakes the
// message for a result.
func notBuilt(env *cmdEnv, what, issue string) error {
	fmt.Fprintf(env.stderr, "quiver: %s is not built yet (it lands with %s).\n", what, issue)
	return exitError{code: 3}
}

// isStringFlag reports whether f holds a string, whose default is quoted
// in the help (numbers and durations are not).
func isStringFlag(f *flag.Flag) bool {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return true
	}
	_, isString := g.Get().(string)
	return isString
}
