// Package specsql checks that the SQL examples of the product documentation run against the migrated schema.
//
// The package has no code of its own. Its test reads the handbook pages (../../../shared/spec
// beside the checkout, or the folder that QUEUEBOX_SPEC_DIR names), extracts every sql block,
// skips the SQL Server ones, fills the placeholders (:message_id, :topic, :limit, ...), and
// runs each PostgreSQL block on a fresh migrated database with seeded rows.
package specsql
