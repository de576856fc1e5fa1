package store

// TrackTables is implemented by a store whose statements use tables of QueueBox's own migration
// track that a database may lack: with database.migrate false, a schema applied by hand without
// migrations/queuebox. The start check decides once which of them are missing
// (migrate.StartResult.Missing) and calls SetMissingTables before any statement runs; the store
// then leaves those tables out instead of failing:
//
//   - without ReplayGenerationTable, a replay moves the rows without raising their generation,
//     and OutboxReplayGenerations answers generation 0 for every row (the row id is the
//     deduplication id, as before that table existed);
//   - without RevokedSessionTable, RevokeSession and SessionRevoked answer
//     ErrNoRevokedSessions at once, without a statement; the console then clears the
//     browser's cookie only.
//
// Nothing else changes; a table that the call does not name is used as usual.
type TrackTables interface {
	// SetMissingTables names the tables of the QueueBox track that the database lacks. Call it
	// once, at start, before the store is used.
	SetMissingTables(tables []string)
}
