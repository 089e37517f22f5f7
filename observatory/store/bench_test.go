package store

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

func benchRun(kind string, i int) BenchRun {
	return BenchRun{
		Kind: kind, Command: "quiver bench " + kind + " --runs 3", ToolVersion: "test", Host: "2 CPUs, Linux",
		Started: epoch.Add(time.Duration(i) * time.Minute), Recorded: epoch.Add(time.Hour),
		Summary: []BenchRow{
			{Config: "default", Subject: "quiver<-quiver", Metric: "goodput Mbit/s", Median: 1411.5, Min: 1100, Max: 1643, Runs: 3, CPU: 6.84, CPUMetric: "CPU s/GB", Note: "1.65x quic-go"},
			{Config: "default", Subject: "tcp<-tcp", Metric: "goodput Mbit/s", Median: 1914, Min: 1316, Max: 3142, Runs: 2, Failed: 1},
		},
		// Key order and spacing as the bench wrote them, to check that
		// the JSON reads back byte for byte.
		Result: json.RawMessage(`{"kind":"` + kind + `",  "runs": [1, 2]}`),
	}
}

func TestBenchRuns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		if bs, err := s.BenchRuns(ctx, 0); err != nil || len(bs) != 0 {
			t.Fatalf("empty store: %v, %v", bs, err)
		}
		var ids []int64
		for i, kind := range []string{"goodput", "ackfreq", "rpc"} {
			id, err := s.AddBenchRun(ctx, benchRun(kind, i))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		// Importing the same run again adds nothing.
		if _, err := s.AddBenchRun(ctx, benchRun("ackfreq", 1)); !errors.Is(err, ErrDuplicate) {
			t.Errorf("second AddBenchRun = %v, want ErrDuplicate", err)
		}
		for _, bad := range []BenchRun{{Started: epoch}, {Kind: "x"}, {Kind: "x", Started: epoch, Result: json.RawMessage("{")}} {
			if _, err := s.AddBenchRun(ctx, bad); err == nil {
				t.Errorf("AddBenchRun(%+v) succeeded", bad)
			}
		}

		latest, err := s.BenchRuns(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(latest) != 2 || latest[0].Kind != "rpc" || latest[1].Kind != "ackfreq" || latest[0].ID != ids[2] {
			t.Fatalf("latest two = %+v, want rpc then ackfreq", latest)
		}
		if latest[0].Result != nil {
			t.Errorf("BenchRuns returned the whole JSON")
		}
		want := benchRun("rpc", 2)
		if !reflect.DeepEqual(latest[0].Summary, want.Summary) || !latest[0].Started.Equal(want.Started) || latest[0].Command != want.Command || latest[0].Host != want.Host {
			t.Errorf("read back %+v, want %+v", latest[0], want)
		}
		all, err := s.BenchRuns(ctx, 0)
		if err != nil || len(all) != 3 {
			t.Fatalf("all runs: %d, %v", len(all), err)
		}

		one, err := s.BenchRun(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if string(one.Result) != string(benchRun("goodput", 0).Result) || one.Kind != "goodput" {
			t.Errorf("BenchRun = %+v (result %s)", one, one.Result)
		}
		if _, err := s.BenchRun(ctx, 9999); !errors.Is(err, ErrNotFound) {
			t.Errorf("missing run: %v, want ErrNotFound", err)
		}

		db := s.(*sqlStore).db
		if _, err := db.ExecContext(ctx, `UPDATE bench_runs SET kind = 'x'`); err == nil {
			t.Error("UPDATE of a bench run succeeded")
		}
		if _, err := db.ExecContext(ctx, `DELETE FROM bench_runs`); err == nil {
			t.Error("DELETE of a bench run succeeded")
		}
	})
}
