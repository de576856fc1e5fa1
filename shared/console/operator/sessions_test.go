package operator

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
)

// sessionStore answers every logout statement with err.
type sessionStore struct {
	store.Store
	err error
}

func (s sessionStore) RevokeSession(context.Context, string, time.Time) error { return s.err }
func (s sessionStore) SessionRevoked(context.Context, string) (bool, error)   { return false, s.err }

// Without the table of the logouts, a logout records nothing and no session is revoked; any
// other error (the database not answering) reaches the console, which refuses the session.
func TestConsoleLogoutsWithoutTheirTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	missing := Backend{st: sessionStore{err: fmt.Errorf("reading: %w", store.ErrNoRevokedSessions)}}
	revoked, err := missing.SessionRevoked(ctx, "k")
	require.NoError(t, err)
	assert.False(t, revoked)
	require.NoError(t, missing.RevokeSession(ctx, "k", time.Now()))

	down := errors.New("connection refused")
	failing := Backend{st: sessionStore{err: down}}
	_, err = failing.SessionRevoked(ctx, "k")
	require.ErrorIs(t, err, down)
	require.ErrorIs(t, failing.RevokeSession(ctx, "k", time.Now()), down)
}
