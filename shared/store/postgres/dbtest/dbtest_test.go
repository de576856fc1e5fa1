package dbtest

import (
	"context"
	"testing"
)

func TestMigratedDatabaseHasBothTables(t *testing.T) {
	t.Parallel()
	pool, _ := Migrated(t)
	var n int
	err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name IN ('outbox','inbox','queuebox_capture_state')`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("tables: got %d, want 3", n)
	}
}
