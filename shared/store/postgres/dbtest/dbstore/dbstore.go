// Package dbstore gives tests a private migrated PostgreSQL database (dbtest.Migrated) with
// the PostgreSQL store (shared/store/postgres) on it.
//
// It is a package of its own because dbtest cannot build the store: the tests inside
// shared/store/postgres import dbtest, so dbtest importing shared/store/postgres would be an
// import cycle.
package dbstore

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// New creates a fresh migrated database for the test and returns a pool on it and the
// PostgreSQL store over that pool with the default table names. Both are released when the
// test ends.
func New(t testing.TB) (*pgxpool.Pool, store.Store) {
	t.Helper()
	pool, _ := dbtest.Migrated(t)
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		t.Fatalf("dbstore: postgres.New: %v", err)
	}
	return pool, st
}
