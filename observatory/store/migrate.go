package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Migrations are SQL files named NNNN_what.sql, one folder per backend, applied
// in order, each in its own transaction together with its row in
// schema_migrations. A migration, once released, never changes: a new
// schema is a new file.
//
//go:embed migrations
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the dialect's migrations in version order.
func migrations(d dialect) ([]migration, error) {
	dir := path.Join("migrations", d.name)
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_what.sql", name)
		}
		body, err := fs.ReadFile(migrationFiles, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(name, ".sql"), sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.name, i+1)
		}
	}
	return out, nil
}

// migrate brings the database up to the newest migration this build knows,
// and refuses a database that a newer build has migrated further.
func migrate(ctx context.Context, db *sql.DB, d dialect) error {
	ms, err := migrations(d)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL)`); err != nil {
		// Two PostgreSQL sessions may race on CREATE TABLE IF NOT EXISTS
		// (a unique violation on the catalogue); the loser finds the table.
		if _, err2 := db.ExecContext(ctx, `SELECT 1 FROM schema_migrations`); err2 != nil {
			return fmt.Errorf("schema_migrations: %w", err)
		}
	}
	for _, m := range ms {
		if err := applyOne(ctx, db, d, m); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	var newest sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&newest); err != nil {
		return err
	}
	if int(newest.Int64) > len(ms) {
		return fmt.Errorf("the database is at schema version %d but this quiver knows only %d: upgrade quiver", newest.Int64, len(ms))
	}
	return nil
}

func applyOne(ctx context.Context, db *sql.DB, d dialect, m migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if d.lock != "" {
		if _, err := tx.ExecContext(ctx, d.lock); err != nil {
			return err
		}
	}
	// Checked inside the transaction, after the lock, so that of two
	// processes only one applies it.
	var n int
	if err := tx.QueryRowContext(ctx, d.q(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), m.version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, d.q(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`), m.version, m.name, time.Now().UTC().Format(time.RFC3339)); err != nil {
		return err
	}
	return tx.Commit()
}
