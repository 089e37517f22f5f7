-- Benchmark runs (quiver bench goodput, handshakes, sweep, ackfreq, rpc):
-- one row per run, with its summary rows for the dashboard and the bench's
-- own JSON kept whole. Like results, rows are never changed or deleted.
-- json, not jsonb, so that the bench's JSON reads back byte for byte.

CREATE TABLE bench_runs (
	id           BIGSERIAL PRIMARY KEY,
	kind         TEXT NOT NULL,
	command      TEXT NOT NULL DEFAULT '',
	tool_version TEXT NOT NULL DEFAULT '',
	host         TEXT NOT NULL DEFAULT '',
	started_at   TIMESTAMPTZ NOT NULL,
	recorded_at  TIMESTAMPTZ NOT NULL,
	summary      JSON NOT NULL,
	result       JSON NOT NULL,
	-- The same run imported twice (quiver track import of one file) is
	-- recorded once.
	UNIQUE (kind, started_at, command)
);

CREATE INDEX bench_runs_latest ON bench_runs (started_at, id);

CREATE FUNCTION bench_runs_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'bench runs are immutable';
END;
$$;

CREATE TRIGGER bench_runs_no_change BEFORE UPDATE OR DELETE ON bench_runs
	FOR EACH ROW EXECUTE FUNCTION bench_runs_immutable();
