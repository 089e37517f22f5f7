package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// valid checks a fact before it is stored: a key, a known type, and a
// value that reads as that type.
func (f Fact) valid() error {
	if f.Key == "" {
		return errors.New("fact without a key")
	}
	var err error
	switch f.Type {
	case FactInt:
		_, err = strconv.ParseInt(f.Value, 10, 64)
	case FactFloat:
		_, err = strconv.ParseFloat(f.Value, 64)
	case FactBool:
		_, err = strconv.ParseBool(f.Value)
	case FactList:
		if !json.Valid([]byte(f.Value)) || !strings.HasPrefix(f.Value, "[") {
			err = errors.New("not a JSON array")
		}
	case FactString, FactFlag:
	default:
		return fmt.Errorf("fact %s: unknown type %q", f.Key, f.Type)
	}
	if err != nil {
		return fmt.Errorf("fact %s: %q is not a %s", f.Key, f.Value, f.Type)
	}
	return nil
}

// execer is what insertFacts needs: a transaction or the database.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (s *sqlStore) insertFacts(ctx context.Context, db execer, resultID int64, facts []Fact) error {
	for _, f := range facts {
		if _, err := db.ExecContext(ctx, s.q(`INSERT INTO result_facts (result_id, fact_key, fact_group, fact_type, fact_value, unit)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (result_id, fact_key) DO NOTHING`),
			resultID, f.Key, f.Group, f.Type, f.Value, f.Unit); err != nil {
			return fmt.Errorf("fact %s: %w", f.Key, err)
		}
	}
	return nil
}

func (s *sqlStore) AddFacts(ctx context.Context, resultID int64, facts []Fact) error {
	for _, f := range facts {
		if err := f.valid(); err != nil {
			return fmt.Errorf("add facts to result %d: %w", resultID, err)
		}
	}
	if _, err := s.Record(ctx, resultID); err != nil {
		return fmt.Errorf("add facts: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.insertFacts(ctx, tx, resultID, facts); err != nil {
		return fmt.Errorf("add facts to result %d: %w", resultID, err)
	}
	return tx.Commit()
}

func (s *sqlStore) FactCells(ctx context.Context, f FactFilter) ([]FactCell, error) {
	var where []string
	var args []any
	if f.RunID != 0 {
		where, args = append(where, "r.run_id = ?"), append(args, f.RunID)
	}
	if f.Target != "" {
		where, args = append(where, "r.target_name = ?"), append(args, f.Target)
	}
	if f.Scenario != "" {
		where, args = append(where, "r.scenario = ?"), append(args, f.Scenario)
	}
	if f.Key != "" {
		where, args = append(where, "f.fact_key = ?"), append(args, f.Key)
	}
	query := `SELECT r.id, r.run_id, r.target_name, r.target_address, r.target_impl, r.target_version, r.scenario, r.verdict,
		r.recorded_at, f.fact_key, f.fact_group, f.fact_type, f.fact_value, f.unit
		FROM result_facts f JOIN results r ON r.id = f.result_id`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY r.run_id, r.id, f.fact_key`
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	defer rows.Close()
	var out []FactCell
	for rows.Next() {
		var c FactCell
		if err := rows.Scan(&c.ResultID, &c.RunID, &c.Target.Name, &c.Target.Address, &c.Target.Implementation, &c.Target.Version,
			&c.Scenario, &c.Verdict, &c.Time, &c.Key, &c.Group, &c.Type, &c.Value, &c.Unit); err != nil {
			return nil, fmt.Errorf("facts: %w", err)
		}
		c.Time = c.Time.UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}

func (s *sqlStore) ResultsWithoutFacts(ctx context.Context, after int64, limit int) ([]Record, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+recordColumns+` FROM results
		WHERE id > ? AND NOT EXISTS (SELECT 1 FROM result_facts f WHERE f.result_id = results.id)
		ORDER BY id LIMIT ?`), after, limit)
	if err != nil {
		return nil, fmt.Errorf("results without facts: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("results without facts: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *sqlStore) ClaimCampaign(ctx context.Context, key string, r NewRun) (Run, bool, error) {
	if key == "" {
		return Run{}, false, errors.New("claim campaign: empty key")
	}
	if run, err := s.campaignRun(ctx, key); err == nil || !errors.Is(err, ErrNotFound) {
		return run, false, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Run{}, false, fmt.Errorf("claim campaign %q: %w", key, err)
	}
	defer tx.Rollback()
	started := utc(r.Started)
	var id int64
	if err := tx.QueryRowContext(ctx, s.q(`INSERT INTO runs (campaign, tool_version, started_at) VALUES (?, ?, ?) RETURNING id`),
		r.Campaign, r.ToolVersion, started).Scan(&id); err != nil {
		return Run{}, false, fmt.Errorf("claim campaign %q: %w", key, err)
	}
	var got int64
	err = tx.QueryRowContext(ctx, s.q(`INSERT INTO campaign_keys (key, run_id, created_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO NOTHING RETURNING run_id`), key, id, utc(time.Now())).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		// Another process claimed it between the look-up and the insert:
		// drop this run and take that one.
		tx.Rollback()
		run, err := s.campaignRun(ctx, key)
		return run, false, err
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return Run{}, false, fmt.Errorf("claim campaign %q: %w", key, err)
	}
	return Run{ID: id, Campaign: r.Campaign, ToolVersion: r.ToolVersion, Started: started}, true, nil
}

func (s *sqlStore) campaignRun(ctx context.Context, key string) (Run, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT run_id FROM campaign_keys WHERE key = ?`), key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("campaign %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("campaign %q: %w", key, err)
	}
	return s.Run(ctx, id)
}

func (s *sqlStore) CampaignKeys(ctx context.Context, prefix string) (map[string]Run, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT k.key, `+runColumns+` FROM campaign_keys k JOIN runs r ON r.id = k.run_id
		WHERE substr(k.key, 1, ?) = ? ORDER BY k.key`), len(prefix), prefix)
	if err != nil {
		return nil, fmt.Errorf("campaign keys: %w", err)
	}
	defer rows.Close()
	out := map[string]Run{}
	for rows.Next() {
		var key string
		var r Run
		var fin sql.NullTime
		if err := rows.Scan(&key, &r.ID, &r.Campaign, &r.ToolVersion, &r.Started, &fin, &r.Results); err != nil {
			return nil, fmt.Errorf("campaign keys: %w", err)
		}
		r.Started = r.Started.UTC()
		if fin.Valid {
			r.Finished = fin.Time.UTC()
		}
		out[key] = r
	}
	return out, rows.Err()
}
