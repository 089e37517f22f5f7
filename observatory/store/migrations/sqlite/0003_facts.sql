-- Typed facts a result recorded (a transport parameter's value, a datagram
-- size, an error code), one row per fact, so that change detection and the
-- dashboard can follow a fact from release to release without decoding
-- every result's evidence. Facts belong to an immutable result; a row is
-- added with its result, or later from the result's evidence, never changed.

CREATE TABLE result_facts (
	result_id  INTEGER NOT NULL REFERENCES results(id),
	fact_key   TEXT NOT NULL,
	fact_group TEXT NOT NULL DEFAULT '',
	fact_type  TEXT NOT NULL,
	fact_value TEXT NOT NULL,
	unit       TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (result_id, fact_key)
);

CREATE INDEX result_facts_key ON result_facts (fact_key, result_id);

CREATE TRIGGER result_facts_no_update BEFORE UPDATE ON result_facts
BEGIN
	SELECT RAISE(ABORT, 'facts are immutable');
END;

CREATE TRIGGER result_facts_no_delete BEFORE DELETE ON result_facts
BEGIN
	SELECT RAISE(ABORT, 'facts are immutable');
END;
