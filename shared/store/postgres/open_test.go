package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// waitFor is the WaitForDatabase of these tests: it tries connect until it succeeds or the
// timeout ends.
func waitFor(ctx context.Context, connect func(context.Context) error, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := connect(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestOpenReturnsADriverOnTheDatabase(t *testing.T) {
	t.Parallel()
	_, dbURL := dbtest.Migrated(t)
	ctx := context.Background()
	drv, err := Open(ctx, store.OpenConfig{
		ConnString: dbURL, PoolSize: 3, StartupTimeout: 30 * time.Second,
		WaitForDatabase: waitFor, Names: store.DefaultNames(),
	})
	require.NoError(t, err)
	t.Cleanup(drv.Close)

	require.NoError(t, drv.Ping(ctx))
	require.NoError(t, drv.Store.CheckSchema(ctx), "the store runs on the migrated database")
	assert.IsType(t, &Store{}, drv.Store)
	stats := drv.PoolStats()
	assert.Equal(t, int64(3), stats.Max, "the pool size")
	assert.GreaterOrEqual(t, stats.Idle, int64(1), "the start's connection is back in the pool, idle")
}

func TestOpenErrorsNameTheirStep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      store.OpenConfig
		wantStep string
		wantErr  string
	}{
		{
			name:     "a connection string that pgx refuses",
			cfg:      store.OpenConfig{ConnString: "postgres://h/db?pool_max_conns=nope", PoolSize: 1, Names: store.DefaultNames()},
			wantStep: store.StepConnect,
			wantErr:  "parsing database.url: ",
		},
		{
			name:     "names that the store refuses",
			cfg:      store.OpenConfig{ConnString: dbtest.ServerURL(), PoolSize: 1, Names: store.Names{}},
			wantStep: store.StepOpenStore,
			wantErr:  "creating postgres store",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			drv, err := Open(context.Background(), tc.cfg)
			require.Error(t, err)
			assert.Nil(t, drv)
			var oe *store.OpenError
			require.True(t, errors.As(err, &oe), "a *store.OpenError: %v", err)
			assert.Equal(t, tc.wantStep, oe.Step)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}
