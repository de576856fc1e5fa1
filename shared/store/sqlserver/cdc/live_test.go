package cdc_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/microsoft/go-mssqldb" // the sqlserver driver of database/sql
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/store/sqlserver/cdc"
	"github.com/alternayte/queuebox/shared/waker"
)

// serverURLVariable names the SQL Server of the live test, for example
// sqlserver://sa:Secret-1@127.0.0.1:1433. The login must be a member of sysadmin (it creates a
// database and runs sys.sp_cdc_enable_db), and the SQL Server Agent must run (the capture job
// fills the change tables; in the mcr.microsoft.com/mssql/server image set
// MSSQL_AGENT_ENABLED=true).
const serverURLVariable = "QUEUEBOX_TEST_SQLSERVER_URL"

// TestLiveSQLServerCDC runs the source on a real SQL Server: the start checks before and
// after each enabling statement of spec/08, a committed insert that wakes delivery through the
// capture job and the change table, the second owner refused by sp_getapplock, and a restart
// from offsets.dat. These machines cannot run SQL Server, so the test skips unless
// QUEUEBOX_TEST_SQLSERVER_URL names a server.
func TestLiveSQLServerCDC(t *testing.T) {
	serverURL := os.Getenv(serverURLVariable)
	if serverURL == "" {
		t.Skip("SQL Server cannot run on this machine; set QUEUEBOX_TEST_SQLSERVER_URL to run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	master, err := sql.Open("sqlserver", serverURL)
	require.NoError(t, err)
	defer func() { _ = master.Close() }()

	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "qbcdc_" + hex.EncodeToString(b[:])
	_, err = master.ExecContext(ctx, "CREATE DATABASE ["+name+"]")
	require.NoError(t, err)
	u, err := url.Parse(serverURL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("database", name)
	u.RawQuery = q.Encode()
	dbURL := u.String()
	db, err := sql.Open("sqlserver", dbURL)
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = db.ExecContext(cctx, "EXEC sys.sp_cdc_disable_db")
		_ = db.Close()
		_, _ = master.ExecContext(cctx, "ALTER DATABASE ["+name+"] SET SINGLE_USER WITH ROLLBACK IMMEDIATE")
		_, _ = master.ExecContext(cctx, "DROP DATABASE ["+name+"]")
	})
	for _, stmt := range []string{
		`CREATE TABLE dbo.outbox (id INT IDENTITY(1,1) PRIMARY KEY, topic NVARCHAR(255) NOT NULL)`,
		`CREATE TABLE queuebox_capture_state (
            identity_name VARCHAR(63) NOT NULL PRIMARY KEY,
            state_id VARCHAR(36) NOT NULL,
            config_fingerprint VARCHAR(64) NOT NULL)`,
	} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}

	dir := t.TempDir()
	cfg := capture.Config{
		Source: &cdc.Source{PollInterval: 100 * time.Millisecond}, ConnString: dbURL,
		Identity: "queuebox", Schema: "dbo", Table: "outbox", StateDirectory: dir,
		ReconciliationInterval: time.Hour, StandbyInterval: 200 * time.Millisecond,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, OwnerGrace: 500 * time.Millisecond,
		Waker: waker.Nop{}, Logger: slog.New(slog.DiscardHandler),
	}
	faultOf := func(cfg capture.Config) string {
		t.Helper()
		r := run(t, cfg)
		defer r.stop()
		return fault(t, r).Error()
	}

	assert.Contains(t, faultOf(cfg), "change data capture is not enabled on the database "+name+"; as a member of sysadmin, run: "+specEnableDB)
	_, err = db.ExecContext(ctx, specEnableDB)
	require.NoError(t, err)
	assert.Contains(t, faultOf(cfg), "change data capture is not enabled on the outbox table [dbo].[outbox]")
	_, err = db.ExecContext(ctx, specEnableTable)
	require.NoError(t, err)

	first := run(t, cfg)
	streaming(t, first)
	_, err = db.ExecContext(ctx, `INSERT INTO dbo.outbox (topic) VALUES (N'a'), (N'b')`)
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(ctx, 90*time.Second) // the capture job scans every 5 s when idle
	defer wcancel()
	require.True(t, waitFor(wctx, func() bool { return first.c.Stats().Wakes >= 1 }), "no wake: %+v", first.c.Stats())
	assert.Equal(t, uint64(2), first.c.Stats().Inserts)
	_, err = db.ExecContext(ctx, `UPDATE dbo.outbox SET topic = N'c'`)
	require.NoError(t, err)

	other := cfg
	other.StateDirectory = t.TempDir()
	assert.Contains(t, faultOf(other), "the capture identity queuebox already has an owner")

	handled := first.c.Stats().Handled
	first.stop()
	var off capture.Offsets
	raw, err := os.ReadFile(filepath.Join(dir, capture.OffsetsFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &off))
	assert.Equal(t, handled, off.LSN)

	second := run(t, cfg)
	streaming(t, second)
	_, err = db.ExecContext(ctx, `INSERT INTO dbo.outbox (topic) VALUES (N'd')`)
	require.NoError(t, err)
	require.True(t, waitFor(wctx, func() bool { return second.c.Stats().Wakes >= 1 }), "no wake after the restart: %+v", second.c.Stats())
	assert.Equal(t, uint64(1), second.c.Stats().Inserts, "the restart does not read the inserts before the recorded LSN")
	if err := second.c.Fault(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("fault: %v", err)
	}
}
