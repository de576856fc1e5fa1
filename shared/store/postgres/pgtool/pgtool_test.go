package pgtool_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

func TestCreateOpenDrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := dbtest.ServerURL()
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "qbt_pgtool_" + hex.EncodeToString(suffix[:])
	require.NoError(t, pgtool.CreateDatabase(ctx, server, name))
	dropped := false
	t.Cleanup(func() {
		if !dropped {
			_ = pgtool.DropDatabase(context.Background(), server, name)
		}
	})
	u, err := url.Parse(server)
	require.NoError(t, err)
	u.Path = "/" + name

	type query struct {
		sql  string
		rows int64
		err  error
	}
	var mu sync.Mutex
	var seen []query
	pool, err := pgtool.OpenPool(ctx, u.String(), pgtool.PoolOptions{
		MaxConns: 3, MinConns: 1, AppName: "pgtool-test",
		Timer: func(sql string, took time.Duration, rows int64, err error) {
			assert.Positive(t, took)
			mu.Lock()
			seen = append(seen, query{sql, rows, err})
			mu.Unlock()
		},
	})
	require.NoError(t, err)
	assert.Equal(t, int32(3), pool.Config().MaxConns)
	assert.Equal(t, int32(1), pool.Config().MinConns)

	var app string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('application_name')`).Scan(&app))
	assert.Equal(t, "pgtool-test", app)
	_, err = pool.Exec(ctx, `CREATE TABLE t (n int, s text); INSERT INTO t SELECT g, 'r' || g FROM generate_series(1, 3) g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE t SET s = s || '!' WHERE n < 3`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT * FROM missing`)
	require.Error(t, err)

	rows, err := pool.Query(ctx, `SELECT n, s FROM t ORDER BY n`)
	require.NoError(t, err)
	var n int
	var s string
	var got []string
	require.NoError(t, pgtool.ForEachRow(rows, []any{&n, &s}, func() error {
		got = append(got, s)
		return nil
	}))
	assert.Equal(t, []string{"r1!", "r2!", "r3"}, got)
	rows, err = pool.Query(ctx, `SELECT n FROM t ORDER BY n DESC`)
	require.NoError(t, err)
	ns, err := pgtool.CollectRows[int32](rows)
	require.NoError(t, err)
	assert.Equal(t, []int32{3, 2, 1}, ns)
	// A batch's queries reach the timer one by one.
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('application_name', 'batch', true)`)
	b.Queue(`UPDATE t SET s = s || '?' WHERE n = 3`)
	require.NoError(t, pool.SendBatch(ctx, b).Close())
	pool.Close()

	mu.Lock()
	var update, missing, batched *query
	for i := range seen {
		switch {
		case strings.HasPrefix(seen[i].sql, "UPDATE t SET s = s || '?'"):
			batched = &seen[i]
		case strings.HasPrefix(seen[i].sql, "UPDATE t"):
			update = &seen[i]
		case strings.Contains(seen[i].sql, "missing"):
			missing = &seen[i]
		}
	}
	mu.Unlock()
	require.NotNil(t, update, "the timer saw the UPDATE")
	assert.Equal(t, int64(2), update.rows)
	assert.NoError(t, update.err)
	require.NotNil(t, missing, "the timer saw the failed query")
	assert.Error(t, missing.err)
	assert.Zero(t, missing.rows)
	require.NotNil(t, batched, "the timer saw the batch's UPDATE")
	assert.Equal(t, int64(1), batched.rows)

	require.NoError(t, pgtool.DropDatabase(ctx, server, name))
	dropped = true
	require.NoError(t, pgtool.DropDatabase(ctx, server, name), "dropping a database that is gone")
	err = pgtool.CreateDatabase(ctx, u.String(), "x")
	require.Error(t, err, "the dropped database does not accept connections")
	_, ok := errors.AsType[*pgtool.ConnectError](err)
	assert.True(t, ok, "a failed connection is a *ConnectError: %v", err)
}

func TestCreateDatabaseError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "qbt_pgtool_dup_" + hex.EncodeToString(suffix[:])
	server := dbtest.ServerURL()
	require.NoError(t, pgtool.CreateDatabase(ctx, server, name))
	t.Cleanup(func() { _ = pgtool.DropDatabase(context.Background(), server, name) })
	err := pgtool.CreateDatabase(ctx, server, name)
	require.Error(t, err, "the database exists")
	_, ok := errors.AsType[*pgtool.ConnectError](err)
	assert.False(t, ok, "a failed statement is not a connection error: %v", err)
	assert.Contains(t, err.Error(), "already exists")
}

func TestQuoteIdentifier(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `"chaos_kill"`, pgtool.QuoteIdentifier("chaos_kill"))
	assert.Equal(t, `"a""b"`, pgtool.QuoteIdentifier(`a"b`))
}
