// Package store keeps the observatory's results: runs, and the immutable
// result rows each run adds (one per scenario run against one target).
//
// Everything goes through the [Store] interface. Two backends implement it
// with the same SQL and the same versioned migrations: SQLite in one file
// (the default, pure Go through modernc.org/sqlite) and PostgreSQL (through
// pgx) when several machines share the work. [Open] picks one from its
// argument: a PostgreSQL URL (postgres:// or postgresql://) or a file name.
//
// Raw rows are kept apart from what is derived from them: change detection,
// adoption series and the grid are computed from [Cell] lists by the
// callers, never stored.
//
// Where to start: [Open] a store (it creates and migrates the schema),
// [Store.CreateRun], one [Store.AddResult] per result, [Store.FinishRun];
// read back with [Store.Results], [Store.Cells], [Store.History] and
// [Store.LatestGrid]. Benchmark runs go in with [Store.AddBenchRun]. The
// package example records a run in SQLite and reads it back.
package store
