// Package queuebox is the Go pull client of QueueBox: it takes the messages of one
// consumption: pull inbox source from the database, runs your handler for each in a
// transaction, and completes, retries or dead-letters the row.
//
// A worker claims up to Options.BatchSize rows of its source in a transaction that holds the
// claim and nothing else, and commits it before any handler starts. It renews the lease of
// every row it holds every third of the lease duration, on a connection of its own. For each
// row it opens a transaction, calls the Handler with the Message and that transaction, runs the
// completion in the same transaction and commits, so the handler's writes and the completion
// commit together or not at all. A completion that changes no row means that another worker
// owns the row: the writes roll back. A renewal that changes no row, or that fails with an
// error, loses the lease: it cancels the handler's context, which rolls its writes back, and
// nothing is written to the row. The handler's context also ends at the row's local deadline: the time the
// worker sent the claim or the last renewal that succeeded, plus the lease, minus a fifth of the
// lease (at most 10 seconds). That comes before the lease can end on the database's clock, so a
// worker cut off from the database stops its handler before another worker can take the row;
// a row whose deadline has passed is not handed to a handler, nothing is committed after it,
// and no attempt is spent. A handler error rolls back, and the RetryPolicy then retries the row after a
// delay or moves it to dead, in a transaction of its own. Every log line and every last_error
// passes through the redaction of QueueBox (Sanitize, SanitizeError). The handler never sees
// the claim token.
//
// The claim holds at most one row of each (source, aggregate) under a live lease, across every
// worker of the source; two sources never block each other.
//
// The library runs exactly the statements of the SQL contract in examples/pull/sql of the
// QueueBox repository (embedded copies), rendered for the dialect and for a mapped Schema. It
// imports only the standard library: the application registers the database/sql driver (pgx's
// stdlib for PostgreSQL, go-mssqldb for SQL Server). It needs the QueueBox schema V10 or later,
// which adds the inbox headers column; it writes no schema.
package queuebox
