package sqlserver_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/microsoft/go-mssqldb" // the sqlserver driver
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/migrate"
)

// sqlServerSkipReason is why the SQL Server integration tests skip on this machine.
const sqlServerSkipReason = "SQL Server cannot run on this machine; set QUEUEBOX_TEST_SQLSERVER_URL to run"

// newSQLServerDatabase creates a database of its own for the test on the server that
// QUEUEBOX_TEST_SQLSERVER_URL names (a go-mssqldb URL, sqlserver://user:password@host:1433),
// and drops it when the test ends. It skips the test when the variable is not set.
func newSQLServerDatabase(t *testing.T) *sql.DB {
	t.Helper()
	server := os.Getenv("QUEUEBOX_TEST_SQLSERVER_URL")
	if server == "" {
		t.Skip(sqlServerSkipReason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("sqlserver", server)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.PingContext(ctx), "SQL Server at QUEUEBOX_TEST_SQLSERVER_URL does not answer")

	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "qbt_migrate_" + hex.EncodeToString(suffix[:])
	_, err = admin.ExecContext(ctx, "CREATE DATABASE ["+name+"]")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = admin.ExecContext(ctx, "ALTER DATABASE ["+name+"] SET SINGLE_USER WITH ROLLBACK IMMEDIATE")
		if _, err := admin.ExecContext(ctx, "DROP DATABASE ["+name+"]"); err != nil {
			t.Logf("dropping database %s: %v", name, err)
		}
	})
	u, err := url.Parse(server)
	require.NoError(t, err)
	q := u.Query()
	q.Set("database", name)
	u.RawQuery = q.Encode()
	db, err := sql.Open("sqlserver", u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestSQLServerIntegrationMigratesOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	db := newSQLServerDatabase(t)
	ctx := context.Background()

	const runners = 6
	var wg sync.WaitGroup
	applied := make([][]int, runners)
	errs := make([]error, runners)
	for i := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := msMigrate(ctx, db, migrate.Options{})
			applied[i], errs[i] = res.Applied, err
			for _, v := range res.QueueBox.Applied {
				applied[i] = append(applied[i], 100+v)
			}
		}()
	}
	wg.Wait()
	var all []int
	for i := range runners {
		require.NoError(t, errs[i], "runner %d", i)
		all = append(all, applied[i]...)
	}
	slices.Sort(all)
	n := len(queueboxList(t))
	want := seq(1, 11)
	for v := 1; v <= n; v++ {
		want = append(want, 100+v)
	}
	assert.Equal(t, want, all, "each version of each track applied by exactly one runner")

	again, err := msMigrate(ctx, db, migrate.Options{})
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("schema is up to date at V11; QueueBox's own migrations are up to date at V%d", n), again.String())

	var rows, versions int
	require.NoError(t, db.QueryRowContext(ctx,
		`SELECT COUNT(*), COUNT(DISTINCT [version]) FROM dbo.flyway_schema_history WHERE [success] = 1`).Scan(&rows, &versions))
	assert.Equal(t, 11, rows)
	assert.Equal(t, 11, versions)
	require.NoError(t, db.QueryRowContext(ctx,
		`SELECT COUNT(*), COUNT(DISTINCT [version]) FROM dbo.queuebox_schema_history WHERE [success] = 1`).Scan(&rows, &versions))
	assert.Equal(t, n, rows)
	assert.Equal(t, n, versions)

	// The indexes of spec/29 and spec/27 for SQL Server, with their key columns.
	wantIndexes := map[string]string{
		"idx_outbox_pending_scheduled":  "outbox:state,scheduled_at:filtered",
		"idx_outbox_state_updated":      "outbox:state,updated_at:",
		"idx_outbox_processing_claimed": "outbox:claimed_at:filtered",
		"idx_outbox_key_sequence":       "outbox:key,sequence:filtered",
		"uq_inbox_source_idempotency":   "inbox:source,idempotency_key:",
		"idx_inbox_state":               "inbox:state:",
		"idx_inbox_state_created":       "inbox:state,created_at:",
		"idx_inbox_aggregate_state":     "inbox:aggregate_id,state:",
		"idx_inbox_processing_claimed":  "inbox:claimed_at:filtered",
		"idx_inbox_consumption_pending": "inbox:consumption,state,scheduled_at:",
		"idx_inbox_pull_pending":        "inbox:source,scheduled_at,created_at,id:filtered",
		"idx_inbox_pull_busy":           "inbox:source,aggregate_id,lease_expires_at:filtered",
	}
	r, err := db.QueryContext(ctx, `
		SELECT i.name, OBJECT_NAME(i.object_id),
		       STUFF((SELECT ',' + c.name FROM sys.index_columns ic
		              JOIN sys.columns c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
		              WHERE ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.is_included_column = 0
		              ORDER BY ic.key_ordinal FOR XML PATH('')), 1, 1, ''),
		       i.has_filter
		FROM sys.indexes i
		WHERE i.object_id IN (OBJECT_ID(N'outbox'), OBJECT_ID(N'inbox')) AND i.is_primary_key = 0 AND i.name IS NOT NULL`)
	require.NoError(t, err)
	got := map[string]string{}
	for r.Next() {
		var name, table, cols string
		var filtered bool
		require.NoError(t, r.Scan(&name, &table, &cols, &filtered))
		f := ""
		if filtered {
			f = "filtered"
		}
		got[name] = table + ":" + cols + ":" + f
	}
	require.NoError(t, r.Err())
	assert.Equal(t, wantIndexes, got)
}

func TestSQLServerIntegrationV11NumbersExistingRows(t *testing.T) {
	t.Parallel()
	db := newSQLServerDatabase(t)
	ctx := context.Background()
	_, err := msMigrate(ctx, db, migrate.Options{Target: 10})
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO outbox (id, topic, [key], payload, created_at) VALUES
		('FFFFFFFF-0000-0000-0000-000000000001', N't', N'k', N'{}', '2024-01-01T00:00:01'),
		('00000000-0000-0000-0000-000000000001', N't', N'k', N'{}', '2024-01-01T00:00:02'),
		('80000000-0000-0000-0000-000000000001', N't', NULL, N'{}', '2024-01-01T00:00:00')`)
	require.NoError(t, err)

	res, err := msMigrate(ctx, db, migrate.Options{})
	require.NoError(t, err)
	require.Equal(t, []int{11}, res.Applied)

	rows, err := db.QueryContext(ctx, `SELECT CONVERT(NVARCHAR(36), id), sequence FROM outbox`)
	require.NoError(t, err)
	got := map[string]int64{}
	for rows.Next() {
		var id string
		var n int64
		require.NoError(t, rows.Scan(&id, &n))
		got[strings.ToLower(id)] = n
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, map[string]int64{
		"80000000-0000-0000-0000-000000000001": 1,
		"ffffffff-0000-0000-0000-000000000001": 2,
		"00000000-0000-0000-0000-000000000001": 3,
	}, got)

	var next int64
	require.NoError(t, db.QueryRowContext(ctx,
		`INSERT INTO outbox (topic, payload) OUTPUT inserted.sequence VALUES (N't', N'{}')`).Scan(&next))
	assert.Equal(t, int64(4), next, "a new row gets max + 1")
}

func TestSQLServerIntegrationBaseline(t *testing.T) {
	t.Parallel()
	db := newSQLServerDatabase(t)
	ctx := context.Background()
	_, err := msMigrate(ctx, db, migrate.Options{})
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `DROP TABLE dbo.flyway_schema_history`)
	require.NoError(t, err)

	r := msRunner(db, migrate.Options{})
	_, err = r.CheckStart(ctx, true)
	require.ErrorIs(t, err, migrate.ErrNoHistory)
	_, err = r.Baseline(ctx, 11)
	require.NoError(t, err)
	start, err := r.CheckStart(ctx, true)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("schema is up to date at V11; QueueBox's own migrations are up to date at V%d", len(queueboxList(t))),
		start.Message, "the QueueBox track keeps its history")
	_, err = r.Baseline(ctx, 11)
	require.ErrorIs(t, err, migrate.ErrHistoryExists)
}
