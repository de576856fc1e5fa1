package cdc_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/store/changes"
	"github.com/alternayte/queuebox/shared/store/sqlserver/cdc"
	"github.com/alternayte/queuebox/shared/waker"
)

// These tests run the dialect-neutral connector of shared/capture on the SQL Server source,
// against fakeServer: they prove the statements, their order and arguments, and what the
// source makes of the answers. The statements themselves run on a server only in
// TestLiveSQLServerCDC (QUEUEBOX_TEST_SQLSERVER_URL).

const connString = "sqlserver://capture_user:secret@db.example.com:1433?database=queuebox&encrypt=true"

// config is the connector's configuration on the fake server, with a state directory of its
// own unless dir is given.
func config(t *testing.T, s *fakeServer, dir string) capture.Config {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	return capture.Config{
		Source: s.source(), ConnString: connString,
		Identity: "queuebox", Schema: "dbo", Table: "outbox",
		StateDirectory:         dir,
		ReconciliationInterval: time.Hour,
		StandbyInterval:        20 * time.Millisecond,
		MinBackoff:             5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		OwnerGrace: 50 * time.Millisecond,
		Waker:      waker.Nop{},
		Logger:     slog.New(slog.DiscardHandler),
	}
}

// running is a connector that runs until the test ends or stop is called.
type running struct {
	c      *capture.Connector
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func run(t *testing.T, cfg capture.Config) *running {
	t.Helper()
	c, err := capture.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// stop ends Run and waits for it.
func (r *running) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

func deadline(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// streaming waits until the connector streams.
func streaming(t *testing.T, r *running) {
	t.Helper()
	if !waitFor(deadline(t), func() bool { return r.c.Check(context.Background()) == nil }) {
		t.Fatalf("the connector does not stream: %v", r.c.Check(context.Background()))
	}
}

// fault waits for the fault that stops the connector.
func fault(t *testing.T, r *running) *changes.Fault {
	t.Helper()
	select {
	case <-r.c.Faulted():
	case <-deadline(t).Done():
		t.Fatalf("no fault; health: %v", r.c.Check(context.Background()))
	}
	var f *changes.Fault
	require.True(t, errors.As(r.c.Fault(), &f), "fault %v", r.c.Fault())
	return f
}

// The spec's statements (spec/08-capture-changes.md, Prepare the database, SQL Server).
const (
	specEnableDB    = "EXEC sys.sp_cdc_enable_db;"
	specEnableTable = "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'outbox', @role_name = NULL, @supports_net_changes = 0;"
)

// Each start check of spec/08 refuses a database that is not prepared with a Fault that names
// the statements the operator runs, and never retries it.
func TestStartChecksRefuseWithTheStatementsToRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(s *fakeServer)
		want    string
	}{
		{name: "CDC off on the database", prepare: func(s *fakeServer) { s.dbEnabled = false },
			want: "capture cannot start: change data capture is not enabled on the database queuebox; as a member of sysadmin, run: " +
				specEnableDB + " " + specEnableTable + " and keep the SQL Server Agent running"},
		{name: "no outbox table", prepare: func(s *fakeServer) { s.tableFound = false },
			want: "capture cannot start: the outbox table [dbo].[outbox] does not exist in the database queuebox, or the capture account capture_user cannot see it; " +
				"create it (queuebox migrate) or grant the account SELECT on it: GRANT SELECT ON [dbo].[outbox] TO [capture_user];"},
		{name: "CDC off on the table", prepare: func(s *fakeServer) { s.tracked = false },
			want: "capture cannot start: change data capture is not enabled on the outbox table [dbo].[outbox]; as a member of db_owner, run: " +
				specEnableTable + " and keep the SQL Server Agent running"},
		{name: "no SELECT permission", prepare: func(s *fakeServer) { s.canSelect = false },
			want: "capture cannot start: the capture account capture_user has no SELECT permission on the outbox table [dbo].[outbox], which reading its change data needs; " +
				"run: GRANT SELECT ON [dbo].[outbox] TO [capture_user];"},
		{name: "capture instance behind a gating role", prepare: func(s *fakeServer) { s.instances = nil },
			want: "capture cannot start: the capture account capture_user cannot read a capture instance of the outbox table [dbo].[outbox]: " +
				"its capture instance has a gating role (the @role_name of sys.sp_cdc_enable_table) that the account is not a member of; " +
				"add the account to that role (ALTER ROLE <role> ADD MEMBER [capture_user]; a member of db_owner sees the role with " +
				"EXEC sys.sp_cdc_help_change_data_capture @source_schema = N'dbo', @source_name = N'outbox';), or enable the table without a gating role: " +
				specEnableTable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFakeServer()
			s.set(tt.prepare)
			r := run(t, config(t, s, ""))
			f := fault(t, r)
			assert.False(t, f.Recovery)
			assert.Equal(t, tt.want, f.Error())
			assert.EqualError(t, r.c.Check(context.Background()), tt.want, "the health check shows the fault whole")
			assert.Equal(t, uint64(1), r.c.Stats().Attempts, "a fault is not retried")
			assert.Zero(t, s.pollCount(), "no poll before the checks pass")
		})
	}
}

// A prepared database: the session takes the lock, checks, chooses the capture instance,
// records the state, starts at the newest LSN and polls, all on the one connection that holds
// the identity's lock; history.dat names the capture instance.
func TestStatementsOfASession(t *testing.T) {
	t.Parallel()
	s := newFakeServer()
	dir := t.TempDir()
	r := run(t, config(t, s, dir))
	streaming(t, r)
	require.True(t, waitFor(deadline(t), func() bool { return s.pollCount() >= 2 }))
	r.stop()

	assert.Equal(t, []string{"lock", "check", "instances", "state-exists", "state-read", "state-insert", "state-read", "start", "poll"},
		s.statementNames(1))
	for _, e := range s.db.Statements() {
		assert.Equal(t, 1, e.Conn, "every statement on the session's connection: %q", e.Query)
	}
	st := s.db.Statements()
	assert.Equal(t, []any{"queuebox.capture.queuebox"}, st[0].Args, "the lock resource")
	assert.Equal(t, []any{"[dbo].[outbox]"}, st[1].Args, "the checked table")
	assert.Equal(t, []any{"dbo", "outbox"}, st[2].Args, "the instances of the table")
	assert.False(t, s.db.Open(1), "Close closes the connection, which releases the lock")

	assert.Equal(t, [][]byte{make([]byte, 10)}, s.startArgs(), "a first start has no recorded position")
	h, err := os.ReadFile(filepath.Join(dir, cdc.HistoryFile))
	require.NoError(t, err)
	var rec cdc.HistoryRecord
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(string(h))), &rec), "one line: %s", h)
	assert.Equal(t, "dbo_outbox", rec.CaptureInstance)
	assert.Equal(t, lsnText(100), rec.StartLSN)
	assert.Equal(t, "[id], [topic]", rec.CapturedColumns)
}

// The statement texts: the poll reads the capture instance's change function from the
// position after the last one read up to the newest LSN and counts inserts only; the lock is
// the session's and does not wait.
func TestStatementTexts(t *testing.T) {
	t.Parallel()
	poll := cdc.StmtPoll("dbo_outbox")
	for _, want := range []string{
		"sys.fn_cdc_get_min_lsn(@p1)", "sys.fn_cdc_get_max_lsn()", "sys.fn_cdc_increment_lsn(@p2)",
		"FROM cdc.[fn_cdc_get_all_changes_dbo_outbox](@qb_from, @qb_to, N'all')", "WHERE __$operation = 2", "COUNT_BIG(*)",
		"@qb_from < @qb_min",
	} {
		assert.Contains(t, poll, want)
	}
	assert.Contains(t, cdc.StmtPoll("a]b"), "cdc.[fn_cdc_get_all_changes_a]]b]", "a capture instance is quoted as an identifier")
	for _, want := range []string{"sys.sp_getapplock", "@LockOwner = N'Session'", "@LockTimeout = 0", "@LockMode = N'Exclusive'"} {
		assert.Contains(t, cdc.StmtLock, want)
	}
	for _, want := range []string{"sys.databases", "is_cdc_enabled", "is_tracked_by_cdc", "HAS_PERMS_BY_NAME(@p1, N'OBJECT', N'SELECT')"} {
		assert.Contains(t, cdc.StmtCheck, want)
	}
	assert.Equal(t, specEnableTable, cdc.EnableTable("dbo", "outbox"))
	assert.Equal(t, specEnableDB, cdc.EnableDB)
	assert.Equal(t, "EXEC sys.sp_cdc_enable_table @source_schema = N'o''s', @source_name = N'qb_outbox', @role_name = NULL, @supports_net_changes = 0;",
		cdc.EnableTable("o's", "qb_outbox"))
}

// A poll that finds committed inserts is one batch, and the connector wakes delivery once for
// it; a poll that finds only updates and deletes wakes nothing but moves the recorded
// position; the position survives a restart, which polls from the position after it.
func TestLSNProgressionWakeOncePerBatchAndRestart(t *testing.T) {
	t.Parallel()
	s := newFakeServer()
	dir := t.TempDir()
	r := run(t, config(t, s, dir))
	streaming(t, r)

	s.commit(200, 2, 2, 2) // three inserts that one scan of the capture job made visible
	ctx := deadline(t)
	require.True(t, waitFor(ctx, func() bool { return r.c.Stats().Wakes == 1 }), "stats %+v", r.c.Stats())
	polls := s.pollCount()
	require.True(t, waitFor(ctx, func() bool { return s.pollCount() >= polls+3 }))
	st := r.c.Stats()
	assert.Equal(t, uint64(3), st.Inserts)
	assert.Equal(t, uint64(1), st.Wakes, "one wake for the batch")
	assert.Equal(t, lsnText(200), st.Handled)

	s.commit(300, 4, 3, 1) // an update and a delete: QueueBox's own state changes
	require.True(t, waitFor(ctx, func() bool { return r.c.Stats().Handled == lsnText(300) }), "stats %+v", r.c.Stats())
	assert.Equal(t, uint64(1), r.c.Stats().Wakes, "updates and deletes wake nothing")
	r.stop()

	var off capture.Offsets
	b, err := os.ReadFile(filepath.Join(dir, capture.OffsetsFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &off))
	assert.Equal(t, lsnText(300), off.LSN, "offsets.dat holds the handled LSN")
	id, err := os.ReadFile(filepath.Join(dir, capture.IdentityFile))
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(id)), s.states["queuebox"][0], "the identity file and queuebox_capture_state agree")

	// A restart on the same directory starts after LSN 300: the batch at 200 wakes nothing
	// again, the insert at 400 wakes once.
	s.commit(400, 2)
	r2 := run(t, config(t, s, dir))
	streaming(t, r2)
	require.True(t, waitFor(ctx, func() bool { return r2.c.Stats().Wakes == 1 }), "stats %+v", r2.c.Stats())
	assert.Equal(t, uint64(1), r2.c.Stats().Inserts)
	starts := s.startArgs()
	require.Len(t, starts, 2)
	assert.Equal(t, lsn(300), starts[1], "the restart passes the recorded LSN")
	h, err := os.ReadFile(filepath.Join(dir, cdc.HistoryFile))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(h), "\n"), "the same capture instance is recorded once: %s", h)
}

// A recorded LSN older than the oldest change that the capture instance keeps (the cleanup
// job removed changes that capture never read) is the fault that needs the recovery steps, at
// a restart and while streaming.
func TestLSNOutsideTheRetentionWindowIsAFault(t *testing.T) {
	t.Parallel()
	want := "capture needs recovery: the recorded position " + lsnText(300) + " is older than the oldest change that the capture instance dbo_outbox keeps (" +
		lsnText(500) + "): the change data capture cleanup job removed changes that capture never read " +
		"(capture was stopped for longer than the cleanup job's retention); follow the recovery steps of the capture guide to reset the capture identity queuebox"

	t.Run("at a restart", func(t *testing.T) {
		t.Parallel()
		s := newFakeServer()
		dir := t.TempDir()
		r := run(t, config(t, s, dir))
		streaming(t, r)
		s.commit(300, 2)
		require.True(t, waitFor(deadline(t), func() bool { return r.c.Stats().Handled == lsnText(300) }))
		r.stop()

		s.set(func(s *fakeServer) { s.minLSN, s.maxLSN = 500, 600 }) // the cleanup job ran
		r2 := run(t, config(t, s, dir))
		f := fault(t, r2)
		assert.True(t, f.Recovery)
		assert.Equal(t, want, f.Error())
	})
	t.Run("while streaming", func(t *testing.T) {
		t.Parallel()
		s := newFakeServer()
		r := run(t, config(t, s, ""))
		streaming(t, r)
		s.commit(300, 2)
		require.True(t, waitFor(deadline(t), func() bool { return r.c.Stats().Handled == lsnText(300) }))
		s.set(func(s *fakeServer) { s.minLSN = 500 })
		f := fault(t, r)
		assert.True(t, f.Recovery)
		assert.Equal(t, want, f.Error())
	})
	t.Run("the next LSN is the oldest kept", func(t *testing.T) {
		t.Parallel()
		s := newFakeServer()
		r := run(t, config(t, s, ""))
		streaming(t, r)
		s.commit(300, 2)
		require.True(t, waitFor(deadline(t), func() bool { return r.c.Stats().Handled == lsnText(300) }))
		s.set(func(s *fakeServer) { s.minLSN = 301 })
		s.commit(302, 2)
		require.True(t, waitFor(deadline(t), func() bool { return r.c.Stats().Wakes == 2 }), "stats %+v", r.c.Stats())
		assert.NoError(t, r.c.Fault())
	})
}

// A capture instance that disappears while capture streams stops it with a fault that says
// how to enable the table again.
func TestCaptureInstanceGone(t *testing.T) {
	t.Parallel()
	s := newFakeServer()
	r := run(t, config(t, s, ""))
	streaming(t, r)
	s.set(func(s *fakeServer) { s.instances = nil })
	f := fault(t, r)
	assert.Equal(t, "capture cannot start: the capture instance dbo_outbox of the outbox table [dbo].[outbox] does not exist any more, "+
		"or the capture account cannot read it; enable change data capture on the table again with: "+specEnableTable, f.Error())
}

// A lost connection ends the session; the connector reconnects with its backoff, takes the
// identity's lock again (it owned it before), resumes from the position it handled, and wakes
// for an insert that committed meanwhile.
func TestReconnectsAfterALostConnection(t *testing.T) {
	t.Parallel()
	s := newFakeServer()
	dir := t.TempDir()
	r := run(t, config(t, s, dir))
	streaming(t, r)
	s.commit(200, 2)
	ctx := deadline(t)
	require.True(t, waitFor(ctx, func() bool { return r.c.Stats().Wakes == 1 }))
	// The connector records the handled LSN in offsets.dat at its standby interval; a session
	// starts from there (a loss before it costs a wake, which every connection attempt makes).
	require.True(t, waitFor(ctx, func() bool {
		var off capture.Offsets
		b, err := os.ReadFile(filepath.Join(dir, capture.OffsetsFile))
		return err == nil && json.Unmarshal(b, &off) == nil && off.LSN == lsnText(200)
	}))

	s.set(func(s *fakeServer) { s.failPolls = 1 })
	s.commit(300, 2)
	require.True(t, waitFor(ctx, func() bool { return r.c.Stats().Attempts >= 2 && r.c.Stats().Wakes == 2 }), "stats %+v", r.c.Stats())
	streaming(t, r)
	assert.Equal(t, uint64(2), r.c.Stats().Inserts, "the insert at 200 is not read twice")
	starts := s.startArgs()
	require.Len(t, starts, 2)
	assert.Equal(t, lsn(200), starts[1], "the new session starts after the handled LSN")
	assert.False(t, s.db.Open(1), "the lost session's connection is closed")
}

// One owner: while a connector holds the identity's application lock, a second one with the
// same identity is refused; after the connector's owner grace it stops with the fault of a
// second owner. When the first stops, its connection closes, and a new one takes the lock.
func TestSecondOwnerIsRefused(t *testing.T) {
	t.Parallel()
	s := newFakeServer()
	dir := t.TempDir()
	first := run(t, config(t, s, dir))
	streaming(t, first)

	second := run(t, config(t, s, ""))
	f := fault(t, second)
	assert.Equal(t, "capture cannot start: the capture identity queuebox already has an owner: another process holds its lock; "+
		"set outbox.capture.enabled to false on every replica but the one that owns capture", f.Error())
	assert.GreaterOrEqual(t, second.c.Stats().Attempts, uint64(2), "a refusal is retried during the owner grace")
	assert.NoError(t, first.c.Check(context.Background()), "the owner streams on")

	first.stop()
	third := run(t, config(t, s, dir))
	streaming(t, third)
}

// Positions are SQL Server LSNs, written as SQL Server shows them.
func TestPositions(t *testing.T) {
	t.Parallel()
	s := newFakeServer()
	log, err := s.source().Open(changes.Settings{ConnString: connString, Schema: "dbo", Table: "outbox"})
	require.NoError(t, err)
	p, err := log.ParsePosition("0x0000002A000001F00003")
	require.NoError(t, err)
	assert.Len(t, string(p), 10)
	assert.Equal(t, "0x0000002A000001F00003", log.FormatPosition(p))
	q, err := log.ParsePosition("0x0000002A000001F00004")
	require.NoError(t, err)
	assert.Less(t, p, q, "positions order as LSNs")
	assert.Equal(t, "0x00000000000000000000", log.FormatPosition(""))
	for _, bad := range []string{"", "0x00", "1/2", "0xZZ00002A000001F00003"} {
		_, err := log.ParsePosition(bad)
		assert.Error(t, err, bad)
	}

	other, err := s.source().Open(changes.Settings{ConnString: strings.Replace(connString, "database=queuebox", "database=other", 1), Schema: "dbo", Table: "outbox"})
	require.NoError(t, err)
	assert.NotEqual(t, log.Fingerprint(), other.Fingerprint(), "another database makes the position meaningless")
	_, err = s.source().Open(changes.Settings{ConnString: "postgres://db/queuebox"})
	assert.EqualError(t, err, "parsing the capture connection: it is not a sqlserver:// URL")
}
