package sqlserver

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// The statements of queuebox_revoked_session (V2 of the QueueBox track), whose name and
// columns are fixed.

// revokeSessionSQL: @p1 key, @p2 expiry (UTC; cast to DATETIME2). It deletes up to
// store.RevokedSessionSweep rows whose expiry has passed, then records the session with one
// MERGE WITH (HOLDLOCK), so that two replicas that revoke the same session at once insert one
// row; a session revoked twice keeps its first row.
var revokeSessionSQL = `DELETE TOP (` + strconv.Itoa(store.RevokedSessionSweep) + `) FROM queuebox_revoked_session
WHERE expires_at < SYSUTCDATETIME();
MERGE queuebox_revoked_session WITH (HOLDLOCK) AS r
USING (SELECT @p1 AS session_hash) AS src
    ON r.session_hash = src.session_hash
WHEN NOT MATCHED THEN INSERT (session_hash, expires_at, revoked_at)
    VALUES (src.session_hash, CAST(@p2 AS DATETIME2), SYSUTCDATETIME());`

// sessionRevokedSQL: @p1 key.
const sessionRevokedSQL = `SELECT CASE WHEN EXISTS (SELECT 1 FROM queuebox_revoked_session WHERE session_hash = @p1)
    THEN CAST(1 AS BIT) ELSE CAST(0 AS BIT) END;`

// missingSessions wraps Msg 208 (the table does not exist) in store.ErrNoRevokedSessions.
func missingSessions(op string, err error) error {
	if hasErrorNumber(err, errInvalidObjectName) {
		return fmt.Errorf("%s: %w: %w", op, store.ErrNoRevokedSessions, err)
	}
	return fmt.Errorf("%s: %w", op, translate(err))
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
	_, err := retryDeadlock(ctx, func() (struct{}, error) {
		_, err := s.db.ExecContext(ctx, revokeSessionSQL, key, expiresAt.UTC())
		return struct{}{}, err
	})
	if err != nil {
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
	if err := s.db.QueryRowContext(ctx, sessionRevokedSQL, key).Scan(&revoked); err != nil {
		return false, missingSessions(op, err)
	}
	return revoked, nil
}
