package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/quiver-quic/quiver/bench"
)

// benchReport is `quiver bench report`: the ACK frequency tables and the
// pair matrix from stored runs (ackfreq.json, goodput.json files),
// printed or written into a document between its report markers; with
// --doc alone, every section of the document that names its stored run
// (sweeps with their SVG charts too).
func benchReport(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("quiver bench report", flag.ContinueOnError)
	doc := fs.String("doc", "", "Markdown `file` whose generated section (between the report markers) is rewritten; alone, every section "+
		"that names its stored run is, with its charts written to img/ beside the file; "+
		"default: print the tables (ackfreq.json: every cell and 25 ms against RTT/4; goodput.json: the pair matrix)")
	fs.SetOutput(env.stderr)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() == 0 && *doc != "" {
		return regenerateDoc(env, *doc)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: quiver bench report [--doc FILE] ackfreq.json... (e.g. --doc docs/ack-frequency-results.md docs/runs/ackfreq-*.json), "+
			"or quiver bench report --doc FILE alone: every section naming its run (e.g. docs/highway.md)", errUsage)
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

// regenerateDoc rewrites every run section of doc from the stored run it
// names, and writes the sections' charts to img/ beside it.
func regenerateDoc(env *cmdEnv, doc string) error {
	old, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	out, charts, err := bench.RegenerateDoc(old, func(file string) (bench.StoredResult, error) {
		rs, err := bench.ReadResults([]string{file})
		if err != nil {
			return bench.StoredResult{}, err
		}
		return rs[0], nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	dir := filepath.Join(filepath.Dir(doc), bench.ChartDir)
	if len(charts) > 0 {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	names := slices.Sorted(maps.Keys(charts))
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), charts[name], 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(doc, out, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "regenerated the run sections of %s; %d chart(s) in %s\n", doc, len(charts), dir)
	return nil
}
