package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	// The two drivers, registered with database/sql as "sqlite" and "pgx".
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// dialect is what differs between the backends: the SQL is otherwise the
// same, written with ? placeholders.
type dialect struct {
	name string // also the migrations folder
	// dollar rewrites ? placeholders as $1, $2… (PostgreSQL).
	dollar bool
	// lock, when set, runs first in each migration transaction so that two
	// processes opening a fresh database do not both migrate it.
	lock string
}

var (
	sqliteDialect   = dialect{name: "sqlite"}
	postgresDialect = dialect{name: "postgres", dollar: true, lock: "SELECT pg_advisory_xact_lock(7710001)"}
)

// sqlStore implements Store over database/sql for both backends.
type sqlStore struct {
	db *sql.DB
	d  dialect
}

// OpenSQLite opens or creates the SQLite store in file.
func OpenSQLite(ctx context.Context, file string) (Store, error) {
	if file == "" {
		return nil, errors.New("open store: empty file name")
	}
	// WAL lets the dashboard read while a campaign writes; the busy timeout
	// makes concurrent writers wait instead of failing; immediate
	// transactions take the write lock up front, so a migration never
	// starts and then finds another process migrating.
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+file+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", file, err)
	}
	return openSQL(ctx, db, sqliteDialect, file)
}

// OpenPostgres opens the PostgreSQL store at dsn, migrating it as needed.
func OpenPostgres(ctx context.Context, dsn string) (Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return openSQL(ctx, db, postgresDialect, redact(dsn))
}

func openSQL(ctx context.Context, db *sql.DB, d dialect, name string) (Store, error) {
	s := &sqlStore{db: db, d: d}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	if err := migrate(ctx, db, d); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	return s, nil
}

// redact hides a password in a DSN for error messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres database"
	}
	return u.Redacted()
}

// q rewrites placeholders for the store's dialect.
func (s *sqlStore) q(query string) string { return s.d.q(query) }

// q rewrites ? placeholders for the dialect.
func (d dialect) q(query string) string {
	if !d.dollar {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (s *sqlStore) Close() error { return s.db.Close() }

// utc normalises times to what both backends keep: UTC, microseconds.
func utc(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func (s *sqlStore) CreateRun(ctx context.Context, r NewRun) (Run, error) {
	started := utc(r.Started)
	var id int64
	err := s.db.QueryRowContext(ctx, s.q(`INSERT INTO runs (campaign, tool_version, started_at) VALUES (?, ?, ?) RETURNING id`),
		r.Campaign, r.ToolVersion, started).Scan(&id)
	if err != nil {
		return Run{}, fmt.Errorf("create run: %w", err)
	}
	return Run{ID: id, Campaign: r.Campaign, ToolVersion: r.ToolVersion, Started: started}, nil
}

func (s *sqlStore) FinishRun(ctx context.Context, id int64, finished time.Time) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE runs SET finished_at = ? WHERE id = ?`), utc(finished), id)
	if err != nil {
		return fmt.Errorf("finish run %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("finish run %d: %w", id, ErrNotFound)
	}
	return nil
}

func (s *sqlStore) AddResult(ctx context.Context, r Record) (int64, error) {
	if r.Target.Name == "" || r.Scenario == "" {
		return 0, errors.New("add result: target name and scenario are required")
	}
	if !json.Valid(r.Evidence) {
		return 0, fmt.Errorf("add result %s/%s: evidence is not valid JSON", r.Target.Name, r.Scenario)
	}
	arts := r.Artifacts
	if arts == nil {
		arts = []Artifact{}
	}
	aj, err := json.Marshal(arts)
	if err != nil {
		return 0, err
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	// ON CONFLICT DO NOTHING returns no row for a duplicate, which tells it
	// apart without decoding either driver's error codes.
	for _, f := range r.Facts {
		if err := f.valid(); err != nil {
			return 0, fmt.Errorf("add result %s/%s: %w", r.Target.Name, r.Scenario, err)
		}
	}
	// The row and its facts go in together, so a result is never seen
	// without the facts it came with.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("add result %s/%s to run %d: %w", r.Target.Name, r.Scenario, r.RunID, err)
	}
	defer tx.Rollback()
	var id int64
	err = tx.QueryRowContext(ctx, s.q(`INSERT INTO results
		(run_id, tool_version, target_name, target_address, target_impl, target_version,
		 scenario, verdict, sentence, evidence, artifacts, recorded_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, target_name, scenario) DO NOTHING
		RETURNING id`),
		r.RunID, r.ToolVersion, r.Target.Name, r.Target.Address, r.Target.Implementation, r.Target.Version,
		r.Scenario, string(r.Verdict), r.Sentence, string(r.Evidence), string(aj), utc(r.Time)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("add result %s/%s to run %d: %w", r.Target.Name, r.Scenario, r.RunID, ErrDuplicate)
	}
	if err == nil {
		err = s.insertFacts(ctx, tx, id, r.Facts)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return 0, fmt.Errorf("add result %s/%s to run %d: %w", r.Target.Name, r.Scenario, r.RunID, err)
	}
	return id, nil
}

const runColumns = `r.id, r.campaign, r.tool_version, r.started_at, r.finished_at,
	(SELECT COUNT(*) FROM results x WHERE x.run_id = r.id)`

func scanRun(sc interface{ Scan(...any) error }) (Run, error) {
	var r Run
	var fin sql.NullTime
	if err := sc.Scan(&r.ID, &r.Campaign, &r.ToolVersion, &r.Started, &fin, &r.Results); err != nil {
		return Run{}, err
	}
	r.Started = r.Started.UTC()
	if fin.Valid {
		r.Finished = fin.Time.UTC()
	}
	return r, nil
}

func (s *sqlStore) Run(ctx context.Context, id int64) (Run, error) {
	r, err := scanRun(s.db.QueryRowContext(ctx, s.q(`SELECT `+runColumns+` FROM runs r WHERE r.id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("run %d: %w", id, err)
	}
	return r, nil
}

func (s *sqlStore) ListRuns(ctx context.Context) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+runColumns+` FROM runs r ORDER BY r.id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

const recordColumns = `id, run_id, tool_version, target_name, target_address, target_impl, target_version,
	scenario, verdict, sentence, evidence, artifacts, recorded_at`

func scanRecord(sc interface{ Scan(...any) error }) (Record, error) {
	var r Record
	var evidence, arts string
	err := sc.Scan(&r.ID, &r.RunID, &r.ToolVersion, &r.Target.Name, &r.Target.Address, &r.Target.Implementation,
		&r.Target.Version, &r.Scenario, &r.Verdict, &r.Sentence, &evidence, &arts, &r.Time)
	if err != nil {
		return Record{}, err
	}
	r.Evidence = json.RawMessage(evidence)
	r.Time = r.Time.UTC()
	if err := json.Unmarshal([]byte(arts), &r.Artifacts); err != nil {
		return Record{}, fmt.Errorf("result %d: artifacts: %w", r.ID, err)
	}
	if len(r.Artifacts) == 0 {
		r.Artifacts = nil
	}
	return r, nil
}

func (s *sqlStore) Results(ctx context.Context, runID int64) ([]Record, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+recordColumns+` FROM results WHERE run_id = ? ORDER BY id`), runID)
	if err != nil {
		return nil, fmt.Errorf("results of run %d: %w", runID, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("results of run %d: %w", runID, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *sqlStore) Record(ctx context.Context, id int64) (Record, error) {
	r, err := scanRecord(s.db.QueryRowContext(ctx, s.q(`SELECT `+recordColumns+` FROM results WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, fmt.Errorf("result %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("result %d: %w", id, err)
	}
	return r, nil
}

const cellColumns = `id, run_id, target_name, target_address, target_impl, target_version, scenario, verdict, sentence, recorded_at`

func (s *sqlStore) cells(ctx context.Context, query string, args ...any) ([]Cell, error) {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Cell
	for rows.Next() {
		var c Cell
		if err := rows.Scan(&c.ID, &c.RunID, &c.Target.Name, &c.Target.Address, &c.Target.Implementation,
			&c.Target.Version, &c.Scenario, &c.Verdict, &c.Sentence, &c.Time); err != nil {
			return nil, err
		}
		c.Time = c.Time.UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}

func (s *sqlStore) Cells(ctx context.Context, f Filter) ([]Cell, error) {
	var where []string
	var args []any
	if f.RunID != 0 {
		where, args = append(where, "run_id = ?"), append(args, f.RunID)
	}
	if f.Target != "" {
		where, args = append(where, "target_name = ?"), append(args, f.Target)
	}
	if f.Scenario != "" {
		where, args = append(where, "scenario = ?"), append(args, f.Scenario)
	}
	query := `SELECT ` + cellColumns + ` FROM results`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY run_id, id`
	out, err := s.cells(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("cells: %w", err)
	}
	return out, nil
}

func (s *sqlStore) History(ctx context.Context, target, scenario string) ([]Cell, error) {
	if target == "" {
		return nil, errors.New("history: a target name is required")
	}
	return s.Cells(ctx, Filter{Target: target, Scenario: scenario})
}

func (s *sqlStore) LatestGrid(ctx context.Context) ([]Cell, error) {
	out, err := s.cells(ctx, `SELECT `+cellColumns+` FROM (
		SELECT *, ROW_NUMBER() OVER (PARTITION BY target_name, scenario ORDER BY run_id DESC, id DESC) AS n
		FROM results) latest
		WHERE n = 1 ORDER BY target_name, scenario`)
	if err != nil {
		return nil, fmt.Errorf("latest grid: %w", err)
	}
	return out, nil
}

func (s *sqlStore) Targets(ctx context.Context) ([]TargetInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT t.target_name, t.target_address, t.target_impl, t.target_version,
		t.recorded_at, c.n, c.runs
		FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY target_name ORDER BY run_id DESC, id DESC) AS k FROM results) t
		JOIN (SELECT target_name, COUNT(*) AS n, COUNT(DISTINCT run_id) AS runs FROM results GROUP BY target_name) c
		ON c.target_name = t.target_name
		WHERE t.k = 1 ORDER BY t.target_name`)
	if err != nil {
		return nil, fmt.Errorf("targets: %w", err)
	}
	defer rows.Close()
	var out []TargetInfo
	for rows.Next() {
		var ti TargetInfo
		if err := rows.Scan(&ti.Target.Name, &ti.Target.Address, &ti.Target.Implementation, &ti.Target.Version,
			&ti.LastSeen, &ti.Results, &ti.Runs); err != nil {
			return nil, fmt.Errorf("targets: %w", err)
		}
		ti.LastSeen = ti.LastSeen.UTC()
		out = append(out, ti)
	}
	return out, rows.Err()
}

func (s *sqlStore) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return int(v.Int64), nil
}
