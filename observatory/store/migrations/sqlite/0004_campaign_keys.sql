-- Idempotent campaigns: a campaign started under a key (a scheduled slot, a
-- release to sweep) gets one run, once. A watcher killed mid-campaign finds
-- the key with its unfinished run on restart and completes that run instead
-- of starting another.

CREATE TABLE campaign_keys (
	key        TEXT PRIMARY KEY,
	run_id     INTEGER NOT NULL UNIQUE REFERENCES runs(id),
	created_at TIMESTAMP NOT NULL
);
