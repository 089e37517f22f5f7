-- Benchmark runs (quiver bench goodput, handshakes, sweep, ackfreq, rpc):
-- one row per run, with its summary rows for the dashboard and the bench's
-- own JSON kept whole. Like results, rows are never changed or deleted.

CREATE TABLE bench_runs (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	kind         TEXT NOT NULL,
	command      TEXT NOT NULL DEFAULT '',
	tool_version TEXT NOT NULL DEFAULT '',
	host         TEXT NOT NULL DEFAULT '',
	started_at   TIMESTAMP NOT NULL,
	recorded_at  TIMESTAMP NOT NULL,
	summary      TEXT NOT NULL,
	result       TEXT NOT NULL,
	-- The same run imported twice (quiver track import of one file) is
	-- recorded once.
	UNIQUE (kind, started_at, command)
);

CREATE INDEX bench_runs_latest ON bench_runs (started_at, id);

CREATE TRIGGER bench_runs_no_update BEFORE UPDATE ON bench_runs
BEGIN
	SELECT RAISE(ABORT, 'bench runs are immutable');
END;

CREATE TRIGGER bench_runs_no_delete BEFORE DELETE ON bench_runs
BEGIN
	SELECT RAISE(ABORT, 'bench runs are immutable');
END;
