package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/quiver-quic/quiver/bench"
)

// benchReport is `quiver bench report`: the ACK frequency tables from
// stored runs (ackfreq.json files), printed or written into a document
// between its report markers.
func benchReport(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("quiver bench report", flag.ContinueOnError)
	doc := fs.String("doc", "", "Markdown `file` whose generated section (between the report markers) is rewritten; "+
		"default: print the tables (ackfreq.json: every cell and 25 ms against RTT/4; goodput.json: the pair matrix)")
	fs.SetOutput(env.stderr)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: quiver bench report [--doc FILE] ackfreq.json... (e.g. --doc docs/ack-frequency-results.md docs/runs/ackfreq-*.json)", errUsage)
	}
	results, err := bench.ReadResults(fs.Args())
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := bench.WriteAckFreqReport(&b, results); err != nil {
		return err
	}
	if *doc == "" {
		_, err := env.stdout.Write(b.Bytes())
		return err
	}
	old, err := os.ReadFile(*doc)
	if err != nil {
		return err
	}
	out, err := bench.ReplaceReport(old, b.Bytes())
	if err != nil {
		return fmt.Errorf("%s: %w", *doc, err)
	}
	if err := os.WriteFile(*doc, out, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "rewrote the generated section of %s from %d stored result(s)\n", *doc, len(results))
	return nil
}
