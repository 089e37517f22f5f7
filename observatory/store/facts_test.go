package store

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
)

func TestFacts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		r1, r2 := mustRun(t, s, 1), mustRun(t, s, 2)
		a := rec(r1.ID, "quic-go releases", "v0.40.1", "hs-v1-basic", "pass")
		a.Facts = []Fact{
			{Key: "tp.max_datagram_frame_size", Group: "tp", Type: FactInt, Value: "1200", Unit: "bytes"},
			{Key: "tp.disable_active_migration", Group: "tp", Type: FactFlag, Value: "present"},
		}
		idA := mustAdd(t, s, a)
		b := rec(r2.ID, "quic-go releases", "v0.41.0", "hs-v1-basic", "pass")
		b.Facts = []Fact{{Key: "tp.max_datagram_frame_size", Group: "tp", Type: FactInt, Value: "16383", Unit: "bytes"}}
		idB := mustAdd(t, s, b)
		noFacts := mustAdd(t, s, rec(r2.ID, "quic-go releases", "v0.41.0", "vn-cid-echo", "pass"))

		got, err := s.FactCells(ctx, FactFilter{Key: "tp.max_datagram_frame_size"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ResultID != idA || got[0].Value != "1200" || got[1].ResultID != idB || got[1].Value != "16383" ||
			got[1].Target.Version != "v0.41.0" || got[1].RunID != r2.ID || got[1].Unit != "bytes" || got[1].Group != "tp" {
			t.Errorf("FactCells(max_datagram_frame_size) = %+v", got)
		}
		all, err := s.FactCells(ctx, FactFilter{RunID: r1.ID})
		if err != nil || len(all) != 2 || all[0].Key != "tp.disable_active_migration" || all[0].Type != FactFlag {
			t.Errorf("FactCells(run 1) = %+v, %v", all, err)
		}

		// A backfill finds the result without facts, adds them once.
		todo, err := s.ResultsWithoutFacts(ctx, 0, 10)
		if err != nil || len(todo) != 1 || todo[0].ID != noFacts {
			t.Fatalf("ResultsWithoutFacts = %+v, %v; want result %d", todo, err, noFacts)
		}
		f := []Fact{{Key: "version.supported", Type: FactList, Value: `["0x00000001"]`}}
		for range 2 {
			if err := s.AddFacts(ctx, noFacts, f); err != nil {
				t.Fatal(err)
			}
		}
		if todo, err := s.ResultsWithoutFacts(ctx, 0, 10); err != nil || len(todo) != 0 {
			t.Errorf("after the backfill, ResultsWithoutFacts = %+v, %v", todo, err)
		}
		if got, _ := s.FactCells(ctx, FactFilter{Scenario: "vn-cid-echo"}); len(got) != 1 || got[0].Value != `["0x00000001"]` {
			t.Errorf("backfilled facts = %+v", got)
		}
		if err := s.AddFacts(ctx, 9999, f); !errors.Is(err, ErrNotFound) {
			t.Errorf("AddFacts to a missing result: %v, want ErrNotFound", err)
		}
	})
}

func TestFactsRejected(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		run := mustRun(t, s, 1)
		for _, f := range []Fact{
			{Key: "", Type: FactInt, Value: "1"},
			{Key: "k", Type: FactInt, Value: "1.5"},
			{Key: "k", Type: FactBool, Value: "maybe"},
			{Key: "k", Type: FactList, Value: `{"a":1}`},
			{Key: "k", Type: "blob", Value: "x"},
		} {
			r := rec(run.ID, "t", "", "s-"+f.Type+f.Value, "pass")
			r.Facts = []Fact{f}
			if _, err := s.AddResult(context.Background(), r); err == nil {
				t.Errorf("AddResult with fact %+v: no error", f)
			}
		}
		// A rejected fact leaves no result behind.
		if cells, _ := s.Cells(context.Background(), Filter{RunID: run.ID}); len(cells) != 0 {
			t.Errorf("rejected results were stored: %+v", cells)
		}
	})
}

func TestClaimCampaign(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		nr := NewRun{Campaign: "release quic-go v0.66.0", ToolVersion: "test", Started: epoch}
		// Four claimers at once: one creates the run, every one gets it.
		var wg sync.WaitGroup
		runs := make([]Run, 4)
		created := make([]bool, 4)
		errs := make([]error, 4)
		for i := range runs {
			wg.Go(func() { runs[i], created[i], errs[i] = s.ClaimCampaign(ctx, "release/quic-go/v0.66.0", nr) })
		}
		wg.Wait()
		n := 0
		for i := range runs {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if created[i] {
				n++
			}
			if runs[i].ID != runs[0].ID {
				t.Errorf("claim %d got run %d, claim 0 run %d", i, runs[i].ID, runs[0].ID)
			}
		}
		if n != 1 {
			t.Errorf("%d claims created the run, want 1", n)
		}
		if err := s.FinishRun(ctx, runs[0].ID, epoch.Add(1)); err != nil {
			t.Fatal(err)
		}
		again, created2, err := s.ClaimCampaign(ctx, "release/quic-go/v0.66.0", nr)
		if err != nil || created2 || again.ID != runs[0].ID || again.Finished.IsZero() {
			t.Errorf("claim after finishing = %+v, %v, %v", again, created2, err)
		}
		other, created3, err := s.ClaimCampaign(ctx, "release/quic-go/v0.67.0", nr)
		if err != nil || !created3 || other.ID == again.ID {
			t.Errorf("another key = %+v, %v, %v", other, created3, err)
		}
		keys, err := s.CampaignKeys(ctx, "release/quic-go/")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{"release/quic-go/v0.66.0": again.ID, "release/quic-go/v0.67.0": other.ID}
		gotIDs := map[string]int64{}
		for k, r := range keys {
			gotIDs[k] = r.ID
		}
		if !reflect.DeepEqual(gotIDs, want) {
			t.Errorf("CampaignKeys = %v, want %v", gotIDs, want)
		}
		if keys, _ := s.CampaignKeys(ctx, "schedule/"); len(keys) != 0 {
			t.Errorf("CampaignKeys(schedule/) = %v", keys)
		}
		runsAll, _ := s.ListRuns(ctx)
		if len(runsAll) != 2 {
			t.Errorf("%d runs after the claims, want 2 (a lost race leaves no run)", len(runsAll))
		}
	})
}
