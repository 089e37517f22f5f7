-- Runs, and the immutable result rows each run adds.

CREATE TABLE runs (
	id           BIGSERIAL PRIMARY KEY,
	campaign     TEXT NOT NULL DEFAULT '',
	tool_version TEXT NOT NULL,
	started_at   TIMESTAMPTZ NOT NULL,
	finished_at  TIMESTAMPTZ
);

-- One row per scenario run against one target. Rows are never changed or
-- deleted: history and change detection rest on them. The evidence is json,
-- not jsonb, so that it reads back byte for byte as it was written.
CREATE TABLE results (
	id             BIGSERIAL PRIMARY KEY,
	run_id         BIGINT NOT NULL REFERENCES runs(id),
	tool_version   TEXT NOT NULL,
	target_name    TEXT NOT NULL,
	target_address TEXT NOT NULL DEFAULT '',
	target_impl    TEXT NOT NULL DEFAULT '',
	target_version TEXT NOT NULL DEFAULT '',
	scenario       TEXT NOT NULL,
	verdict        TEXT NOT NULL,
	sentence       TEXT NOT NULL DEFAULT '',
	evidence       JSON NOT NULL,
	artifacts      JSON NOT NULL DEFAULT '[]',
	recorded_at    TIMESTAMPTZ NOT NULL,
	-- A job that is retried (a worker killed after its insert) must not
	-- add a second row for the same cell of the same run.
	UNIQUE (run_id, target_name, scenario)
);

CREATE INDEX results_history ON results (target_name, scenario, run_id, id);

CREATE FUNCTION results_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'results are immutable';
END;
$$;

CREATE TRIGGER results_no_change BEFORE UPDATE OR DELETE ON results
	FOR EACH ROW EXECUTE FUNCTION results_immutable();
