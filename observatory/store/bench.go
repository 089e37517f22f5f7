package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

func (s *sqlStore) AddBenchRun(ctx context.Context, b BenchRun) (int64, error) {
	if b.Kind == "" {
		return 0, errors.New("add bench run: a kind is required")
	}
	if b.Started.IsZero() {
		return 0, fmt.Errorf("add bench run %s: a start time is required", b.Kind)
	}
	if len(b.Result) == 0 {
		b.Result = json.RawMessage("{}")
	}
	if !json.Valid(b.Result) {
		return 0, fmt.Errorf("add bench run %s: result is not valid JSON", b.Kind)
	}
	rows := b.Summary
	if rows == nil {
		rows = []BenchRow{}
	}
	sj, err := json.Marshal(rows)
	if err != nil {
		return 0, err
	}
	if b.Recorded.IsZero() {
		b.Recorded = time.Now()
	}
	var id int64
	err = s.db.QueryRowContext(ctx, s.q(`INSERT INTO bench_runs
		(kind, command, tool_version, host, started_at, recorded_at, summary, result)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (kind, started_at, command) DO NOTHING
		RETURNING id`),
		b.Kind, b.Command, b.ToolVersion, b.Host, utc(b.Started), utc(b.Recorded), string(sj), string(b.Result)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("add bench run %s of %s: %w", b.Kind, utc(b.Started).Format(time.RFC3339), ErrDuplicate)
	}
	if err != nil {
		return 0, fmt.Errorf("add bench run %s: %w", b.Kind, err)
	}
	return id, nil
}

const benchColumns = `id, kind, command, tool_version, host, started_at, recorded_at, summary`

func scanBench(sc interface{ Scan(...any) error }, withResult bool) (BenchRun, error) {
	var b BenchRun
	var summary, result string
	dest := []any{&b.ID, &b.Kind, &b.Command, &b.ToolVersion, &b.Host, &b.Started, &b.Recorded, &summary}
	if withResult {
		dest = append(dest, &result)
	}
	if err := sc.Scan(dest...); err != nil {
		return BenchRun{}, err
	}
	b.Started, b.Recorded = b.Started.UTC(), b.Recorded.UTC()
	if err := json.Unmarshal([]byte(summary), &b.Summary); err != nil {
		return BenchRun{}, fmt.Errorf("bench run %d: summary: %w", b.ID, err)
	}
	if withResult {
		b.Result = json.RawMessage(result)
	}
	return b, nil
}

func (s *sqlStore) BenchRuns(ctx context.Context, limit int) ([]BenchRun, error) {
	query := `SELECT ` + benchColumns + ` FROM bench_runs ORDER BY started_at DESC, id DESC`
	var args []any
	if limit > 0 {
		query += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("bench runs: %w", err)
	}
	defer rows.Close()
	var out []BenchRun
	for rows.Next() {
		b, err := scanBench(rows, false)
		if err != nil {
			return nil, fmt.Errorf("bench runs: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

func (s *sqlStore) BenchRun(ctx context.Context, id int64) (BenchRun, error) {
	b, err := scanBench(s.db.QueryRowContext(ctx, s.q(`SELECT `+benchColumns+`, result FROM bench_runs WHERE id = ?`), id), true)
	if errors.Is(err, sql.ErrNoRows) {
		return BenchRun{}, fmt.Errorf("bench run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return BenchRun{}, fmt.Errorf("bench run %d: %w", id, err)
	}
	return b, nil
}
