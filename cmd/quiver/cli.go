package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/quiver-quic/quiver/internal/cliargs"
)

// version is the tool version recorded with every result; release builds set
// it with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// command is one subcommand: its name, a one-line summary, an example, and
// the function that runs it. setFlags declares its flags so that --help can
// list them without running anything. Every command, and every subcommand
// (bench goodput, track run, interop endpoint), is a command and goes
// through dispatch: flags may stand before or after the arguments, and
// "--" ends them (parseArgs).
type command struct {
	name     string
	summary  string
	usage    string // the argument synopsis after "quiver NAME"
	examples []string
	notes    string // printed after the examples in --help (exit statuses)
	setFlags func(fs *flag.FlagSet) any
	run      func(ctx context.Context, env *cmdEnv, opts any, args []string) error
	// subs are subcommands: the first argument that is not one of this
	// command's flags names one, and the rest of the line is its. A
	// command with subs and a run runs itself when no subcommand is named.
	subs []*command
	// ownFlags: run gets the arguments as they are and parses its own
	// flags (with parseArgs); opts is nil.
	ownFlags bool
	// hidden commands are not listed: endpoints Quiver starts itself.
	hidden bool
}

// cmdEnv is what a subcommand may touch of the outside world.
type cmdEnv struct {
	stdout, stderr io.Writer
	line           []string // the whole command line after "quiver", as typed
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
		demoCommand(), testCommand(), testClientCommand(), variantsCommand(), serveCommand(), getCommand(),
		interopCommand(), trackCommand(), workerCommand(), webCommand(), benchCommand(), agentCommand(), gridCommand(), scenariosCommand(), versionCommand(),
	}
}

// run is the whole command line: it returns the process exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env := &cmdEnv{stdout: stdout, stderr: stderr, line: args}
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
	return dispatch(ctx, env, c, "quiver "+c.name, args[1:])
}

// dispatch runs command c, named path on the command line, with the
// arguments after its name, and returns the exit status.
func dispatch(ctx context.Context, env *cmdEnv, c *command, path string, args []string) int {
	if len(c.subs) > 0 {
		if i := subcommandAt(c, args); i >= 0 {
			sub := findCommand(c.subs, args[i])
			rest := append(append([]string{}, args[:i]...), args[i+1:]...)
			return dispatch(ctx, env, sub, path+" "+sub.name, rest)
		}
		if c.run == nil {
			if slices.ContainsFunc(args, isHelpFlag) {
				printCommandUsage(env.stdout, c)
				return 0
			}
			var names []string
			for _, s := range c.subs {
				if !s.hidden {
					names = append(names, s.name)
				}
			}
			fmt.Fprintf(env.stderr, "%s: name a subcommand: %s\n", path, strings.Join(names, ", "))
			fmt.Fprintf(env.stderr, "run '%s --help' for usage\n", path)
			return 2
		}
	}
	var opts any
	pos := args
	if !c.ownFlags {
		fs := flag.NewFlagSet(path, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if c.setFlags != nil {
			opts = c.setFlags(fs)
		}
		var err error
		if pos, err = parseArgs(fs, args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printCommandUsage(env.stdout, c)
				return 0
			}
			fmt.Fprintf(env.stderr, "%s: %v\n", path, err)
			fmt.Fprintf(env.stderr, "run '%s --help' for usage\n", path)
			return 2
		}
	}
	err := c.run(ctx, env, opts, pos)
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, errUsage):
		fmt.Fprintf(env.stderr, "%s: %v\n", path, err)
		fmt.Fprintf(env.stderr, "run '%s --help' for usage\n", path)
		return 2
	default:
		fmt.Fprintf(env.stderr, "%s: %v\n", path, err)
		return 1
	}
}

// parseArgs parses fs's flags wherever they stand among the arguments and
// returns the positional ones; "--" ends the flags (cliargs.Parse, which
// interop endpoint shares).
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) { return cliargs.Parse(fs, args) }

// subcommandAt returns the index in args of the subcommand's name: the
// first argument that is neither one of c's flags nor a flag's value, if
// it names one of c.subs; -1 otherwise.
func subcommandAt(c *command, args []string) int {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	if c.setFlags != nil {
		c.setFlags(fs)
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return -1
		case len(a) >= 2 && a[0] == '-':
			if name := strings.TrimLeft(a, "-"); !strings.Contains(name, "=") && cliargs.TakesValue(fs.Lookup(name)) {
				i++
			}
		case findCommand(c.subs, a) != nil:
			return i
		default:
			return -1
		}
	}
	return -1
}

func isHelpFlag(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "--h" }

func findCommand(cs []*command, name string) *command {
	for _, c := range cs {
		if c.name == name {
			return c
		}
	}
	return nil
}

func lookup(name string) *command { return findCommand(commands(), name) }

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
	if len(c.subs) > 0 {
		fmt.Fprintf(w, "\nSubcommands (each lists its own flags with --help):\n")
		for _, s := range c.subs {
			if !s.hidden {
				fmt.Fprintf(w, "  %-12s %s\n", s.name, s.summary)
			}
		}
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
