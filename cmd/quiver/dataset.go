package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/quiver-quic/quiver/observatory/dataset"
	"github.com/quiver-quic/quiver/observatory/store"
)

// trackExport writes a target's history as a dataset file (gzip JSON) that
// track import, quiver demo and quiver web load.
func trackExport(ctx context.Context, env *cmdEnv, o *trackOpts, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: track export takes the output file (e.g. observatory/dataset/data/quic-go.json.gz)", errUsage)
	}
	if o.target == "" {
		return fmt.Errorf("%w: track export needs --target NAME (e.g. 'quic-go releases')", errUsage)
	}
	st, err := openStore(ctx, o.db, false)
	if err != nil {
		return err
	}
	defer st.Close()
	ds, err := dataset.Export(ctx, st, o.target)
	if err != nil {
		return err
	}
	// Measured: when the latest run started.
	ds.Command, ds.Commit = o.command, o.commit
	for _, r := range ds.Runs {
		if r.Started.After(ds.Measured) {
			ds.Measured = r.Started
		}
	}
	if o.merge {
		// Per-release or per-role sweeps of one target, in several
		// stores, go into one file; each result keeps its measurement.
		if f, err := os.Open(args[0]); err == nil {
			old, rerr := dataset.Read(f)
			f.Close()
			if rerr != nil {
				return fmt.Errorf("%s: %w", args[0], rerr)
			}
			if ds, err = dataset.Merge(old, ds, o.mixedCommits); err != nil {
				return err
			}
		} else if !os.IsNotExist(err) {
			return err
		}
	}
	var buf bytes.Buffer
	if err := dataset.Write(&buf, ds); err != nil {
		return err
	}
	if err := os.WriteFile(args[0], buf.Bytes(), 0o644); err != nil {
		return err
	}
	n := 0
	for _, r := range ds.Runs {
		n += len(r.Results)
	}
	fmt.Fprintf(env.stdout, "%s: %d runs, %d results of %q (%d bytes)\n", args[0], len(ds.Runs), n, o.target, buf.Len())
	return nil
}

// isDataset tells a dataset file from a benchmark JSON file.
func isDataset(file string) bool { return strings.HasSuffix(file, ".json.gz") }

// importDataset loads one dataset file into st.
func importDataset(ctx context.Context, env *cmdEnv, st store.Store, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	ds, err := dataset.Read(f)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	n, err := dataset.Import(ctx, st, ds)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	fmt.Fprintf(env.stdout, "%s: %d of %d runs of %q imported (the others were already there)\n", file, n, len(ds.Runs), ds.Name)
	return nil
}

// importHistory loads the repository's datasets into st (quiver demo and
// quiver web do it, so a fresh clone shows real history).
func importHistory(ctx context.Context, env *cmdEnv, st store.Store) {
	start := time.Now()
	n, err := dataset.ImportEmbedded(ctx, st)
	if err != nil {
		fmt.Fprintf(env.stderr, "history dataset: %v\n", err)
		return
	}
	if n > 0 {
		fmt.Fprintf(env.stderr, "imported %d runs of release history in %v\n", n, time.Since(start).Round(time.Millisecond))
	}
}
