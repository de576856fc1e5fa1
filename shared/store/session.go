package store

import (
	"context"
	"errors"
	"time"
)

// RevokedSessionTable holds the console sessions that a logout ended (V2 of the QueueBox
// track, migrations/queuebox): every replica and every Lambda invocation reads it, so a cookie
// that a logout ended is refused everywhere until it expires. An extension of QueueBox's
// documented schema: see docs/console.md.
const RevokedSessionTable = "queuebox_revoked_session"

// ErrNoRevokedSessions is returned (wrapped) by a SessionRevocationStore method when
// RevokedSessionTable does not exist: V2 of the QueueBox track has not been applied.
var ErrNoRevokedSessions = errors.New("the table " + RevokedSessionTable +
	" does not exist: apply QueueBox's own migration V2__add_revoked_sessions.sql")

// MaxSessionKeyLen is the width of the key column of RevokedSessionTable: the hex SHA-256
// that the console makes of a session's nonce.
const MaxSessionKeyLen = 64

// SessionRevocationStore reads and writes RevokedSessionTable. Every method is safe for
// concurrent use by many goroutines and many processes.
type SessionRevocationStore interface {
	// RevokeSession records that the session of key ended, until expiresAt (the session's own
	// expiry, after which its cookie is refused anyway). Revoking a revoked session changes
	// nothing. It also deletes some rows whose expiry has passed, so the table keeps only
	// sessions that could still be used. A key is at most MaxSessionKeyLen characters.
	RevokeSession(ctx context.Context, key string, expiresAt time.Time) error
	// SessionRevoked reports whether the session of key was revoked.
	SessionRevoked(ctx context.Context, key string) (bool, error)
}

// RevokedSessionSweep is the largest number of expired rows that one RevokeSession deletes.
const RevokedSessionSweep = 1000

// CheckSessionKey refuses a key that the table cannot hold.
func CheckSessionKey(key string) error {
	if key == "" || len(key) > MaxSessionKeyLen {
		return errors.New("a revoked session key must have 1 to 64 characters")
	}
	return nil
}
