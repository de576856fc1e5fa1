package postgres

// HistoryExistsSQL is the statement of the migration backend that looks for the history table,
// for the migration tests of package postgres_test.
const HistoryExistsSQL = pgHistoryExists
