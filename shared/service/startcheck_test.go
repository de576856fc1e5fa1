package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/migrate"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// loadWithDatabase loads file with the database keys of the PostgreSQL database at dbURL.
func loadWithDatabase(t *testing.T, dbURL, file string) *config.Config {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	file = fmt.Sprintf("database:\n  url: jdbc:postgresql://%s%s\n  username: %s\n  password: trust-auth\n  migrate: true\n", u.Host, u.Path, u.User.Username()) + file
	cfg, _, err := config.Load(config.LoadOptions{Env: map[string]string{}, ReadFile: func(name string) ([]byte, error) {
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
	cfg := &config.Config{Destinations: map[string]*config.Destination{"web": config.NewDestination("web", config.DestinationHTTP)}}
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
// (migrations/queuebox) stops the start, the path of serve and of every Lambda function, and
// the error names each file and its table; once the files are applied by hand the start goes
// on.
func TestStartWithoutMigrateRefusesAMissingQueueBoxMigration(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	dbURL := dbtest.NewDatabase(t)
	pool := dbtest.NewPool(t, dbURL)
	main, err := migrations.List(migrations.PostgreSQL)
	require.NoError(t, err)
	for _, m := range main {
		dbtest.Exec(t, pool, m.SQL)
	}
	cfg := loadWithDatabase(t, dbURL, "")
	cfg.Database.Migrate = false

	_, err = Open(ctx, cfg, log)
	require.ErrorIs(t, err, migrate.ErrMissingMigration)
	var se *StartError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "apply the database migrations", se.Step)
	track, lerr := migrations.ListTrack(migrations.QueueBox, migrations.PostgreSQL)
	require.NoError(t, lerr)
	for _, m := range track {
		assert.Contains(t, err.Error(), m.Script+" (table "+m.Table+")")
	}
	t.Logf("the error: %s", err)

	for _, m := range track {
		dbtest.Exec(t, pool, m.SQL)
	}
	db, err := Open(ctx, cfg, log)
	require.NoError(t, err)
	db.Close()
}
