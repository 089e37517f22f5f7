-- Runs, and the immutable result rows each run adds.

CREATE TABLE runs (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	campaign     TEXT NOT NULL DEFAULT '',
	tool_version TEXT NOT NULL,
	started_at   TIMESTAMP NOT NULL,
	finished_at  TIMESTAMP
);

-- One row per scenario run against one target. Rows are never changed or
-- deleted: history and change detection rest on them.
CREATE TABLE results (
	id             INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id         INTEGER NOT NULL REFERENCES runs(id),
	tool_version   TEXT NOT NULL,
	target_name    TEXT NOT NULL,
	target_address TEXT NOT NULL DEFAULT '',
	target_impl    TEXT NOT NULL DEFAULT '',
	target_version TEXT NOT NULL DEFAULT '',
	scenario       TEXT NOT NULL,
	verdict        TEXT NOT NULL,
	sentence       TEXT NOT NULL DEFAULT '',
	evidence       TEXT NOT NULL,
	artifacts      TEXT NOT NULL DEFAULT '[]',
	recorded_at    TIMESTAMP NOT NULL,
	-- A job that is retried (a worker killed after its insert) must not
	-- add a second row for the same cell of the same run.
	UNIQUE (run_id, target_name, scenario)
);

CREATE INDEX results_history ON results (target_name, scenario, run_id, id);

CREATE TRIGGER results_no_update BEFORE UPDATE ON results
BEGIN
	SELECT RAISE(ABORT, 'results are immutable');
END;

CREATE TRIGGER results_no_delete BEFORE DELETE ON results
BEGIN
	SELECT RAISE(ABORT, 'results are immutable');
END;
