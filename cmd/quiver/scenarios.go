package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/quiver-quic/quiver/conformance"
)

type scenariosOpts struct {
	markdown bool
	role     string
}

func scenariosCommand() *command {
	return &command{
		name:    "scenarios",
		summary: "list the conformance scenarios (ID, area, role, title), or print the whole catalogue as Markdown",
		usage:   "[--role server|client] [PATTERN ...]",
		examples: []string{
			"quiver scenarios 'hs-*'",
			"quiver scenarios --markdown > docs/scenarios.md",
		},
		setFlags: func(fs *flag.FlagSet) any {
			o := &scenariosOpts{}
			fs.BoolVar(&o.markdown, "markdown", false, "print the catalogue of every scenario, with the requirements each quotes (docs/scenarios.md)")
			fs.StringVar(&o.role, "role", "", "only scenarios judging this side: server or client")
			return o
		},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			o := opts.(*scenariosOpts)
			if o.markdown {
				if len(args) > 0 || o.role != "" {
					return fmt.Errorf("%w: --markdown prints the whole catalogue; it takes no pattern or role", errUsage)
				}
				return conformance.WriteCatalogue(env.stdout)
			}
			var roles []conformance.Role
			switch o.role {
			case "":
				roles = []conformance.Role{conformance.ServerRole, conformance.ClientRole}
			case "server", "client":
				roles = []conformance.Role{conformance.Role(o.role)}
			default:
				return fmt.Errorf("%w: --role is server or client, not %q", errUsage, o.role)
			}
			var ss []*conformance.Scenario
			var firstErr error
			for _, r := range roles {
				got, err := conformance.Select(r, args)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				ss = append(ss, got...)
			}
			if len(ss) == 0 && firstErr != nil {
				return fmt.Errorf("%w: %v", errUsage, firstErr)
			}
			{
				for _, s := range ss {
					fmt.Fprintf(env.stdout, "%-40s %-20s %-6s %s\n", s.ID, conformance.Area(s.ID), s.Role, strings.TrimSuffix(s.Title, "."))
				}
			}
			return nil
		},
	}
}
