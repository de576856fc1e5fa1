package outboxbench

import (
	"context"
	"fmt"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// benchDatabase is the private database of one bench run (see benchdb), with the statements
// of this bench.
type benchDatabase struct {
	*benchdb.Database
}

// createDatabase creates and migrates the bench database.
func createDatabase(ctx context.Context, server string) (*benchDatabase, error) {
	db, err := benchdb.Create(ctx, server, 4, logf)
	if err != nil {
		return nil, err
	}
	return &benchDatabase{db}, nil
}

// The bench database is migrated with the default names, so its statements name the outbox
// table and its columns as the migrations create them.

// resetOutbox empties the outbox and its sequence between runs, so every run starts from the
// same table.
func (db *benchDatabase) resetOutbox(ctx context.Context) error {
	if _, err := db.Admin.Exec(ctx, `TRUNCATE outbox`); err != nil {
		return fmt.Errorf("truncating the outbox: %w", err)
	}
	return nil
}

// insertBacklog writes rows pending outbox rows in one statement. With keys above 0 the key
// of row g is 'k' || (g % keys); otherwise the key is null. The rows share one created_at and
// scheduled_at (one transaction), the hardest case for the claim's ordered scan. The table is
// vacuumed and analysed afterwards, so every run starts with the same statistics.
func (db *benchDatabase) insertBacklog(ctx context.Context, rows, keys int) error {
	_, err := db.Admin.Exec(ctx, `
INSERT INTO outbox (topic, key, payload)
SELECT 'orders.created',
       CASE WHEN $2::int > 0 THEN 'k' || (g % $2::int) END,
       jsonb_build_object('orderId', g, 'amount', 1999, 'currency', 'EUR')
FROM generate_series(1, $1::int) AS g`, rows, keys)
	if err != nil {
		return fmt.Errorf("inserting the backlog: %w", err)
	}
	if _, err := db.Admin.Exec(ctx, `VACUUM ANALYZE outbox`); err != nil {
		return fmt.Errorf("vacuuming the outbox: %w", err)
	}
	return nil
}

// vacuum vacuums and analyses the outbox.
func (db *benchDatabase) vacuum(ctx context.Context) error {
	if _, err := db.Admin.Exec(ctx, `VACUUM ANALYZE outbox`); err != nil {
		return fmt.Errorf("vacuuming the outbox: %w", err)
	}
	return nil
}

// stateCounts returns the number of outbox rows per state.
func (db *benchDatabase) stateCounts(ctx context.Context) (map[string]int, error) {
	rows, err := db.Admin.Query(ctx, `SELECT state, count(*)::int FROM outbox GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("counting outbox rows: %w", err)
	}
	out := map[string]int{}
	var state string
	var n int
	err = pgtool.ForEachRow(rows, []any{&state, &n}, func() error {
		out[state] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("counting outbox rows: %w", err)
	}
	return out, nil
}
