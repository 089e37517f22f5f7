// Package cliargs parses command-line flags the way people type them:
// before, between or after the positional arguments, with "--" ending the
// flags. It is the one such parser, shared by cmd/quiver and
// interop/endpoint.
//
// Where to start: [Parse] with a flag.FlagSet.
package cliargs

import (
	"flag"
	"strings"
)

// Parse parses fs's flags wherever they stand among args — before,
// between or after the positional arguments, as in
// "quiver test 127.0.0.1:4433 --json r.json" — and returns the positional
// arguments in order. "--" ends the flags: everything after it is
// positional. A flag that takes a value takes the next argument whatever it
// is ("--name=value" works too); a lone "-" is positional.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		if name := strings.TrimLeft(a, "-"); !strings.Contains(name, "=") && TakesValue(fs.Lookup(name)) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(flags); err != nil {
		return nil, err
	}
	return pos, nil
}

// TakesValue reports whether f is a flag that takes the next argument as
// its value (any known flag but a boolean one).
func TakesValue(f *flag.Flag) bool {
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}
