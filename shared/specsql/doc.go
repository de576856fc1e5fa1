// Package specsql reads the code blocks of Markdown documentation and checks that SQL
// examples run against the migrated schema.
//
// Blocks extracts the fenced blocks of one language, and Commands
// splits a shell block into its commands, also when the page lost the block's line breaks.
// test/tutorials runs the shell blocks of the tutorials of docs/tutorials with them.
//
// The package's test finds the pages with shared/specdocs (skipped when they are absent),
// extracts every sql block, skips the SQL Server ones, fills the
// placeholders (:message_id, :topic, :limit, ...), and runs each PostgreSQL block on a fresh
// migrated database with seeded rows.
package specsql
