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
// same table, and gives the table back to autovacuum (a burst run takes it away).
func (db *benchDatabase) resetOutbox(ctx context.Context) error {
	if _, err := db.Admin.Exec(ctx, `TRUNCATE outbox`); err != nil {
		return fmt.Errorf("truncating the outbox: %w", err)
	}
	if _, err := db.Admin.Exec(ctx, `ALTER TABLE outbox RESET (autovacuum_enabled)`); err != nil {
		return fmt.Errorf("giving the outbox back to autovacuum: %w", err)
	}
	return nil
}

// forgetStatistics makes the empty outbox look never analysed, as in a new database: it
// removes the table's column statistics (which needs a superuser, as the bench's server
// connection is) and keeps autovacuum away from it, so that no analyse comes during the run.
// TRUNCATE has already set its row estimate to unknown.
func (db *benchDatabase) forgetStatistics(ctx context.Context) error {
	if _, err := db.Admin.Exec(ctx, `ALTER TABLE outbox SET (autovacuum_enabled = false)`); err != nil {
		return fmt.Errorf("keeping autovacuum off the outbox: %w", err)
	}
	if _, err := db.Admin.Exec(ctx, `DELETE FROM pg_statistic WHERE starelid = 'outbox'::regclass`); err != nil {
		return fmt.Errorf("removing the outbox's statistics (the burst runs need a superuser): %w", err)
	}
	return nil
}

// insertBacklog writes rows pending outbox rows in one statement. With keys above 0 the key
// of row g is 'k' || (g % keys); otherwise the key is null. The rows share one created_at and
// scheduled_at (one transaction), the hardest case for the claim's ordered scan. The table is
// vacuumed and analysed afterwards, so every run starts with the same statistics.
func (db *benchDatabase) insertBacklog(ctx context.Context, rows, keys int, analyse bool) error {
	_, err := db.Admin.Exec(ctx, `
INSERT INTO outbox (topic, key, payload)
SELECT '`+BacklogTopic+`',
       CASE WHEN $2::int > 0 THEN 'k' || (g % $2::int) END,
       jsonb_build_object('orderId', g, 'amount', 1999, 'currency', 'EUR')
FROM generate_series(1, $1::int) AS g`, rows, keys)
	if err != nil {
		return fmt.Errorf("inserting the backlog: %w", err)
	}
	if !analyse {
		return nil
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

// BacklogTopic is the topic of the rows of insertBacklog, HistoryTopic that of the finished rows
// of insertHistory.
const (
	BacklogTopic = "orders.created"
	HistoryTopic = "orders.archived"
)

// stateCounts returns the number of outbox rows of the backlog's topic per state.
func (db *benchDatabase) stateCounts(ctx context.Context) (map[string]int, error) {
	rows, err := db.Admin.Query(ctx, `SELECT state, count(*)::int FROM outbox WHERE topic = $1 GROUP BY state`, BacklogTopic)
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

// insertHistory writes rows finished (sent) outbox rows of HistoryTopic, in batches of a
// million, as years of delivered messages leave them: the first aged of them updated
// between 8 and 9 days ago (past a 7-day retention), the others within the last 6 days. The
// ids come from the column default, random as the application's are. The table is vacuumed
// and analysed afterwards.
func (db *benchDatabase) insertHistory(ctx context.Context, rows, aged int) error {
	const batch = 1_000_000
	for from := 0; from < rows; from += batch {
		n := min(batch, rows-from)
		_, err := db.Admin.Exec(ctx, `
INSERT INTO outbox (topic, key, payload, state, attempt, created_at, updated_at, scheduled_at)
SELECT '`+HistoryTopic+`', NULL, jsonb_build_object('orderId', g, 'amount', 1999, 'currency', 'EUR'), 'sent', 1, t, t, t
FROM generate_series($1::int, $2::int) AS g,
     LATERAL (SELECT CASE WHEN g < $3::int
                          THEN now() - interval '9 days' + (g::float8 / greatest($3::int, 1)) * interval '1 day'
                          ELSE now() - interval '6 days' + ((g - $3::int)::float8 / greatest($4::int - $3::int, 1)) * interval '6 days'
                     END AS t) AS ts`, from, from+n-1, aged, rows)
		if err != nil {
			return fmt.Errorf("inserting the history: %w", err)
		}
	}
	if _, err := db.Admin.Exec(ctx, `VACUUM ANALYZE outbox`); err != nil {
		return fmt.Errorf("vacuuming the outbox: %w", err)
	}
	return nil
}

// deleteBacklog removes the rows of the backlog's topic (a drained backlog beside the history)
// and vacuums the table.
func (db *benchDatabase) deleteBacklog(ctx context.Context) error {
	if _, err := db.Admin.Exec(ctx, `DELETE FROM outbox WHERE topic = $1`, BacklogTopic); err != nil {
		return fmt.Errorf("deleting the last backlog: %w", err)
	}
	return db.vacuum(ctx)
}

// tableSize returns the outbox's total size (heap and indexes) in bytes.
func (db *benchDatabase) tableSize(ctx context.Context) (int64, error) {
	var n int64
	if err := db.Admin.QueryRow(ctx, `SELECT pg_total_relation_size('outbox')`).Scan(&n); err != nil {
		return 0, fmt.Errorf("measuring the outbox: %w", err)
	}
	return n, nil
}
