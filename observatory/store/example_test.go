package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/quiver-quic/quiver/observatory/store"
)

// Record a run of two scenarios against one target in a SQLite file, then
// read it back: the run, its full rows, and one scenario's history.
// Open takes a file name for SQLite or a postgres:// URL for PostgreSQL;
// both backends behave the same.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "quiver-store")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	st, err := store.Open(ctx, filepath.Join(dir, "quiver.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	started := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	run, err := st.CreateRun(ctx, store.NewRun{Campaign: "nightly", ToolVersion: "0.1.0", Started: started})
	if err != nil {
		log.Fatal(err)
	}
	target := store.Target{Name: "my-server", Address: "127.0.0.1:4433", Implementation: "quic-go", Version: "v0.65.0"}
	for _, r := range []struct{ scenario, verdict, sentence string }{
		{"hs-v1-basic", "pass", "Every server Initial packet carried the same Source Connection ID."},
		{"stream-overlap-different-data", "fail", "The server accepted different data for bytes it already had."},
	} {
		// Evidence is opaque JSON to the store: the conformance suite puts
		// its whole Result there.
		evidence, _ := json.Marshal(map[string]string{"scenario": r.scenario, "verdict": r.verdict})
		if _, err := st.AddResult(ctx, store.Record{RunID: run.ID, ToolVersion: run.ToolVersion, Target: target,
			Scenario: r.scenario, Verdict: r.verdict, Sentence: r.sentence, Evidence: evidence, Time: started}); err != nil {
			log.Fatal(err)
		}
	}
	if err := st.FinishRun(ctx, run.ID, started.Add(30*time.Second)); err != nil {
		log.Fatal(err)
	}

	got, err := st.Run(ctx, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("run %d (%s): %d results in %v\n", got.ID, got.Campaign, got.Results, got.Finished.Sub(got.Started))
	rows, err := st.Results(ctx, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rows {
		fmt.Printf("  %s %s %s: %s\n", r.Target.Name, r.Scenario, r.Verdict, r.Sentence)
	}
	hist, err := st.History(ctx, "my-server", "stream-overlap-different-data")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("history of stream-overlap-different-data on my-server: %d cell(s), latest %s\n", len(hist), hist[len(hist)-1].Verdict)
	// Output:
	// run 1 (nightly): 2 results in 30s
	//   my-server hs-v1-basic pass: Every server Initial packet carried the same Source Connection ID.
	//   my-server stream-overlap-different-data fail: The server accepted different data for bytes it already had.
	// history of stream-overlap-different-data on my-server: 1 cell(s), latest fail
}
