package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/quiver-quic/quiver/conformance/report"
)

func gridCommand() *command {
	return &command{
		name:    "grid",
		summary: "merge conformance reports of several implementations into one Markdown grid",
		usage:   "[NAME=]REPORT.json ...",
		examples: []string{
			"quiver grid quiver.json quic-go.json",
			"quiver grid quiver=a.json ngtcp2=b.json > grid.md",
		},
		run: func(ctx context.Context, env *cmdEnv, opts any, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("%w: grid needs at least one report (written by quiver test --json or quiver test-client --json)", errUsage)
			}
			var cols []report.GridColumn
			for _, a := range args {
				name, file, named := strings.Cut(a, "=")
				if !named {
					file = a
				}
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				rep, err := report.ReadJSON(f)
				f.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
				if !named {
					name = rep.Target.Name
					if name == "" {
						name = rep.Target.Address
					}
				}
				cols = append(cols, report.GridColumn{Name: name, Report: rep})
			}
			return report.WriteGrid(env.stdout, cols)
		},
	}
}
