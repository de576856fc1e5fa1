package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// loadWithDatabase loads file with the database keys of the PostgreSQL database at dbURL.
func loadWithDatabase(t *testing.T, dbURL, file string) *config.Config {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	file = fmt.Sprintf("database:\n  url: jdbc:postgresql://%s%s\n  username: %s\n  password: trust-auth\n  migrate: true\n", u.Host, u.Path, u.User.Username()) + file
	cfg, _, err := Load(LoadOptions{Env: map[string]string{}, ReadFile: func(name string) ([]byte, error) {
		if name == config.DefaultConfigFile {
			return []byte(file), nil
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}})
	require.NoError(t, err)
	return cfg
}

// A destination with a circuit breaker or a rate limit needs the table of the QueueBox track's V1:
// without it the start stops with an error that names the destinations, the table and the
// migration, instead of running with the controls silently off. A configuration without such
// a destination starts as before.
func TestStartRefusesControlsWithoutTheStateTable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	dbURL := dbtest.NewDatabase(t)
	controlled := loadWithDatabase(t, dbURL, `destinations:
  web:
    baseUrl: https://example.com
    circuitBreaker: {}
  limited:
    url: amqp://rabbitmq:5672
    exchange: events
    rateLimit:
      requestsPerSecond: 10
  plain:
    baseUrl: https://plain.example.com
`)
	plain := loadWithDatabase(t, dbURL, "destinations:\n  plain:\n    baseUrl: https://plain.example.com\n    retry:\n      scheduleMs: [1000]\n")

	// With every migration applied, the start passes.
	db, err := Open(ctx, controlled, log)
	require.NoError(t, err)
	defer db.Close()

	dbtest.Exec(t, dbtest.NewPool(t, dbURL), "DROP TABLE "+store.DestinationStateTable)

	err = Prepare(ctx, controlled, db, log)
	require.Error(t, err)
	var se *StartError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "check the database schema", se.Step)
	assert.ErrorIs(t, err, store.ErrNoDestinationState)
	assert.Equal(t, "QueueBox could not check the database schema. Reason: destinations limited, web set circuitBreaker or rateLimit, "+
		"which keep their state in the table of QueueBox's own migration V1 (migrations/queuebox, V1__add_destination_state.sql; database.migrate: true applies it at start): "+
		"apply it, or remove those keys | caused by reading the destination state | caused by the table queuebox_destination_state does not exist: apply QueueBox's own migration V1__add_destination_state.sql",
		err.Error())

	// Open, the path of serve and of every Lambda function, refuses too.
	_, err = Open(ctx, controlled, log)
	assert.ErrorIs(t, err, store.ErrNoDestinationState)

	// No breaker, no rate limit: the table is not needed (a retry schedule keeps no state).
	require.NoError(t, Prepare(ctx, plain, db, log))
}

// A store error other than the missing table stops the start as well, with the table named.
func TestStartCheckOfTheStateTableWrapsOtherErrors(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Destinations: map[string]*config.Destination{"web": config.NewDestination("web", kind.HTTP)}}
	cfg.Destinations["web"].RateLimit = &config.DestinationRateLimit{RequestsPerSecond: 1, Burst: 1}
	boom := errors.New("connection refused")
	err := checkDestinationState(context.Background(), cfg, failingStates{err: boom})
	assert.ErrorIs(t, err, boom)
	assert.EqualError(t, err, "reading the table queuebox_destination_state for the circuitBreaker and rateLimit of destinations web: connection refused")
}

// failingStates is a destination state store whose every read fails.
type failingStates struct {
	store.DestinationStateStore
	err error
}

func (f failingStates) DestinationStates(context.Context) ([]store.DestinationState, error) {
	return nil, f.err
}

// With database.migrate false, a database without the tables of QueueBox's own migrations
// (migrations/queuebox) starts, on the path of serve and of every Lambda function: the start
// logs one warning per file, naming the file, its table, what is off and how to apply it; a
// replay moves a row without the table of the replay generations, whose read answers
// generation 0; the logouts answer store.ErrNoRevokedSessions without a statement. Once the
// files are applied by hand the start warns no more.
func TestStartWithoutMigrateRunsWithoutTheQueueBoxMigrations(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.NewPool(t, dbURL)
	main, err := migrations.List(migrations.PostgreSQL)
	require.NoError(t, err)
	for _, m := range main {
		dbtest.Exec(t, pool, m.SQL)
	}
	cfg := loadWithDatabase(t, dbURL, "")
	cfg.Database.Migrate = false

	var logs strings.Builder
	db, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	defer db.Close()
	track, err := migrations.ListTrack(migrations.QueueBox, migrations.PostgreSQL)
	require.NoError(t, err)
	warnings := strings.Count(logs.String(), "level=WARN")
	assert.Equal(t, len(track), warnings, "one warning per missing file:\n%s", logs.String())
	for _, m := range track {
		for _, want := range []string{"migrations/queuebox/postgresql/" + m.Script, "table " + m.Table, "until it is,",
			"psql -v ON_ERROR_STOP=1 -f migrations/queuebox/postgresql/" + m.Script, "queuebox migrate"} {
			assert.Contains(t, logs.String(), want)
		}
	}
	assert.Contains(t, logs.String(), "a console logout clears the browser's cookie only")
	assert.Contains(t, logs.String(), "Nats-Msg-Id")

	var id string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO outbox (topic, payload, state) VALUES ('t', '{}', 'dead') RETURNING id::text`).Scan(&id))
	moved, err := db.Store.OutboxReplay(ctx, store.OutboxReplayParams{IDs: []string{id}})
	require.NoError(t, err, "the replay without the table of the replay generations")
	assert.Equal(t, int64(1), moved)
	dbtest.Exec(t, pool, `UPDATE outbox SET state = 'dead' WHERE id = $1`, id)
	res, err := db.Store.(store.ReplayStore).OutboxReplayBatch(ctx, store.OutboxSelection{IDs: []string{id}}, "", 10)
	require.NoError(t, err, "the batched replay without the table of the replay generations")
	assert.Equal(t, int64(1), res.Moved)
	gens, err := db.Store.OutboxReplayGenerations(ctx, []string{id})
	require.NoError(t, err)
	assert.Empty(t, gens, "generation 0")
	_, err = db.Store.SessionRevoked(ctx, strings.Repeat("a", 64))
	require.ErrorIs(t, err, store.ErrNoRevokedSessions)

	for _, m := range track {
		dbtest.Exec(t, pool, m.SQL)
	}
	logs.Reset()
	again, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	defer again.Close()
	assert.NotContains(t, logs.String(), "level=WARN")
}
