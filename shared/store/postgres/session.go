package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/alternayte/queuebox/shared/store"
)

// The statements of queuebox_revoked_session (V2 of the QueueBox track), whose name and
// columns are fixed.

// revokeSessionSQL: $1 key, $2 expiry. One statement: it deletes up to
// store.RevokedSessionSweep rows whose expiry has passed and records the session; a session
// revoked twice keeps its first row.
var revokeSessionSQL = `WITH swept AS (
    DELETE FROM queuebox_revoked_session
    WHERE session_hash IN (
        SELECT session_hash FROM queuebox_revoked_session
        WHERE expires_at < clock_timestamp()
        LIMIT ` + strconv.Itoa(store.RevokedSessionSweep) + `)
)
INSERT INTO queuebox_revoked_session (session_hash, expires_at, revoked_at)
VALUES ($1, $2, clock_timestamp())
ON CONFLICT (session_hash) DO NOTHING`

// sessionRevokedSQL: $1 key.
const sessionRevokedSQL = `SELECT EXISTS (SELECT 1 FROM queuebox_revoked_session WHERE session_hash = $1)`

// missingSessions wraps an undefined-table error in store.ErrNoRevokedSessions.
func missingSessions(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return fmt.Errorf("%s: %w", op, store.ErrNoRevokedSessions)
	}
	return wrapErr(op, err)
}

// RevokeSession records that the session of key ended, until expiresAt.
func (s *Store) RevokeSession(ctx context.Context, key string, expiresAt time.Time) error {
	const op = "revoking a console session"
	if err := store.CheckSessionKey(key); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if s.noSessions.Load() {
		return fmt.Errorf("%s: %w", op, store.ErrNoRevokedSessions)
	}
	if _, err := s.pool.Exec(ctx, revokeSessionSQL, key, expiresAt.UTC()); err != nil {
		return missingSessions(op, err)
	}
	return nil
}

// SessionRevoked reports whether the session of key was revoked.
func (s *Store) SessionRevoked(ctx context.Context, key string) (bool, error) {
	const op = "reading the revoked console sessions"
	if s.noSessions.Load() {
		return false, fmt.Errorf("%s: %w", op, store.ErrNoRevokedSessions)
	}
	var revoked bool
	if err := s.pool.QueryRow(ctx, sessionRevokedSQL, key).Scan(&revoked); err != nil {
		return false, missingSessions(op, err)
	}
	return revoked, nil
}
