package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiver-quic/quiver/internal/leakcheck"
	"github.com/quiver-quic/quiver/observatory/internal/pgtest"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// backend opens a fresh, empty store of one kind; the same suite runs
// against each.
type backend struct {
	name string
	dsn  func(t *testing.T) string
}

var backends = []backend{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "quiver.db") }},
	{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
}

func forEachBackend(t *testing.T, f func(t *testing.T, dsn string)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b.dsn(t)) })
	}
}

func open(t *testing.T, dsn string) Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)

func rec(run int64, target, version, scenario, verdict string) Record {
	ev, _ := json.Marshal(map[string]any{"scenario": scenario, "verdict": verdict, "checks": []any{}})
	return Record{
		RunID: run, ToolVersion: "test", Scenario: scenario, Verdict: verdict,
		Target:   Target{Name: target, Address: "127.0.0.1:4433", Implementation: "impl", Version: version},
		Sentence: scenario + " was " + verdict, Evidence: ev, Time: epoch,
	}
}

func mustRun(t *testing.T, s Store, i int) Run {
	t.Helper()
	r, err := s.CreateRun(context.Background(), NewRun{Campaign: "c", ToolVersion: "test", Started: epoch.Add(time.Duration(i) * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustAdd(t *testing.T, s Store, r Record) int64 {
	t.Helper()
	id, err := s.AddResult(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestMigrations(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		v, err := s.SchemaVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := migrations(s.(*sqlStore).d)
		if err != nil {
			t.Fatal(err)
		}
		if v != len(ms) || v < 1 {
			t.Fatalf("schema version %d, want %d", v, len(ms))
		}
		run := mustRun(t, s, 0)
		mustAdd(t, s, rec(run.ID, "a", "v1", "s1", "pass"))

		// Opening again, even from several processes at once (goroutines
		// here), applies nothing twice and keeps the data.
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				s2, err := Open(ctx, dsn)
				if err != nil {
					errs <- err
					return
				}
				s2.Close()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("concurrent open: %v", err)
		}
		var n int
		if err := s.(*sqlStore).db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != len(ms) {
			t.Errorf("schema_migrations has %d rows, want %d", n, len(ms))
		}
		if cells, _ := s.Cells(ctx, Filter{}); len(cells) != 1 {
			t.Errorf("after reopening: %d cells, want 1", len(cells))
		}

		// A database migrated by a newer quiver is refused, with advice.
		d := s.(*sqlStore).d
		if _, err := s.(*sqlStore).db.ExecContext(ctx, d.q(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future', 'x')`), len(ms)+1); err != nil {
			t.Fatal(err)
		}
		if s3, err := Open(ctx, dsn); err == nil {
			s3.Close()
			t.Error("opening a database from a newer schema succeeded")
		} else if !strings.Contains(err.Error(), "upgrade quiver") {
			t.Errorf("newer schema: %v, want advice to upgrade", err)
		}
	})
}

func TestRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		run := mustRun(t, s, 0)
		r := rec(run.ID, "quic-go <local>", "v0.50.0", "handshake-basic", "fail")
		// Evidence must come back byte for byte (PostgreSQL's jsonb would
		// reorder these keys).
		r.Evidence = json.RawMessage(`{"z":1,"a":"<script>alert(1)</script>","m":[1,2]}`)
		r.Artifacts = []Artifact{{Kind: "pcapng", Path: "run1/a/x.pcapng"}, {Kind: "qlog", Path: "run1/a/x.qlog"}}
		id := mustAdd(t, s, r)

		got, err := s.Record(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		r.ID = id
		if !reflect.DeepEqual(got, r) {
			t.Errorf("Record(%d):\n got %+v\nwant %+v", id, got, r)
		}
		rs, err := s.Results(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || !reflect.DeepEqual(rs[0], r) {
			t.Errorf("Results(%d) = %+v, want [%+v]", run.ID, rs, r)
		}
		if _, err := s.Record(ctx, id+100); !errors.Is(err, ErrNotFound) {
			t.Errorf("Record(missing) = %v, want ErrNotFound", err)
		}
		if _, err := s.Run(ctx, run.ID+100); !errors.Is(err, ErrNotFound) {
			t.Errorf("Run(missing) = %v, want ErrNotFound", err)
		}
		bad := rec(run.ID, "x", "", "s", "pass")
		bad.Evidence = json.RawMessage(`{not json`)
		if _, err := s.AddResult(ctx, bad); err == nil {
			t.Error("AddResult accepted evidence that is not JSON")
		}
	})
}

func TestResultsAreImmutable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		run := mustRun(t, s, 0)
		mustAdd(t, s, rec(run.ID, "a", "v1", "s1", "fail"))

		// The same cell of the same run cannot be recorded twice: a
		// retried job gets ErrDuplicate and the first row stays.
		if _, err := s.AddResult(ctx, rec(run.ID, "a", "v1", "s1", "pass")); !errors.Is(err, ErrDuplicate) {
			t.Errorf("second AddResult = %v, want ErrDuplicate", err)
		}
		db := s.(*sqlStore).db
		if _, err := db.ExecContext(ctx, `UPDATE results SET verdict = 'pass'`); err == nil {
			t.Error("UPDATE of a result row succeeded")
		}
		if _, err := db.ExecContext(ctx, `DELETE FROM results`); err == nil {
			t.Error("DELETE of a result row succeeded")
		}
		cells, err := s.Cells(ctx, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(cells) != 1 || cells[0].Verdict != "fail" {
			t.Errorf("cells after the attempts: %+v, want the one fail", cells)
		}
	})
}

func TestQueries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		r1 := mustRun(t, s, 0)
		r2 := mustRun(t, s, 1)
		r3 := mustRun(t, s, 2)
		// Added out of order on purpose: history follows the run order,
		// not the insertion order.
		mustAdd(t, s, rec(r2.ID, "b", "v2", "s1", "pass"))
		mustAdd(t, s, rec(r1.ID, "b", "v1", "s1", "fail"))
		mustAdd(t, s, rec(r1.ID, "a", "v1", "s1", "pass"))
		mustAdd(t, s, rec(r1.ID, "a", "v1", "s2", "unsupported"))
		mustAdd(t, s, rec(r3.ID, "a", "v3", "s2", "pass"))
		mustAdd(t, s, rec(r2.ID, "a", "v2", "s2", "warn"))
		if err := s.FinishRun(ctx, r1.ID, epoch.Add(30*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishRun(ctx, 9999, epoch); !errors.Is(err, ErrNotFound) {
			t.Errorf("FinishRun(missing) = %v, want ErrNotFound", err)
		}

		runs, err := s.ListRuns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		var counts []int
		for _, r := range runs {
			ids, counts = append(ids, r.ID), append(counts, r.Results)
		}
		if !reflect.DeepEqual(ids, []int64{r3.ID, r2.ID, r1.ID}) || !reflect.DeepEqual(counts, []int{1, 2, 3}) {
			t.Errorf("ListRuns: ids %v counts %v", ids, counts)
		}
		got1, err := s.Run(ctx, r1.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got1.Finished.Equal(epoch.Add(30*time.Minute)) || !got1.Started.Equal(epoch) || got1.Campaign != "c" {
			t.Errorf("Run(%d) = %+v", r1.ID, got1)
		}
		if !runs[0].Finished.IsZero() {
			t.Errorf("unfinished run has Finished %v", runs[0].Finished)
		}

		verdicts := func(cs []Cell) string {
			var v []string
			for _, c := range cs {
				v = append(v, fmt.Sprintf("%s/%s/%s@%s", c.Target.Name, c.Scenario, c.Verdict, c.Target.Version))
			}
			return strings.Join(v, " ")
		}
		h, err := s.History(ctx, "a", "s2")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := verdicts(h), "a/s2/unsupported@v1 a/s2/warn@v2 a/s2/pass@v3"; got != want {
			t.Errorf("History(a, s2) = %s, want %s", got, want)
		}
		h, _ = s.History(ctx, "a", "")
		if len(h) != 4 {
			t.Errorf("History(a, all) has %d cells, want 4", len(h))
		}
		grid, err := s.LatestGrid(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := verdicts(grid), "a/s1/pass@v1 a/s2/pass@v3 b/s1/pass@v2"; got != want {
			t.Errorf("LatestGrid = %s, want %s", got, want)
		}
		c, _ := s.Cells(ctx, Filter{RunID: r1.ID, Target: "a"})
		if got, want := verdicts(c), "a/s1/pass@v1 a/s2/unsupported@v1"; got != want {
			t.Errorf("Cells(run 1, a) = %s, want %s", got, want)
		}
		ts, err := s.Targets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 2 || ts[0].Target.Name != "a" || ts[0].Target.Version != "v3" || ts[0].Results != 4 || ts[0].Runs != 3 ||
			ts[1].Target.Name != "b" || ts[1].Target.Version != "v2" || ts[1].Runs != 2 {
			t.Errorf("Targets = %+v", ts)
		}
	})
}

// Many writers at once (a campaign's jobs) must all land: SQLite waits on
// its lock instead of failing with "database is locked".
func TestConcurrentWriters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		run := mustRun(t, s, 0)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for w := range 8 {
			wg.Go(func() {
				// Each writer has its own handle, as separate processes would.
				s2, err := Open(ctx, dsn)
				if err != nil {
					errs <- err
					return
				}
				defer s2.Close()
				for i := range 8 {
					if _, err := s2.AddResult(ctx, rec(run.ID, fmt.Sprintf("t%d", w), "v", fmt.Sprintf("s%d", i), "pass")); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		cells, err := s.Cells(ctx, Filter{RunID: run.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(cells) != 64 {
			t.Errorf("%d results recorded, want 64", len(cells))
		}
	})
}
