package service

import (
	"context"
	"time"

	"github.com/alternayte/queuebox/shared/console"
)

// The console's logouts live in the database (queuebox_revoked_session, V2 of the QueueBox
// track), so a logout on one replica or Lambda invocation ends the session on all of them.
var _ console.SessionRevoker = (*consoleBackend)(nil)

// RevokeSession records a console logout in the store (console.SessionRevoker).
func (b *consoleBackend) RevokeSession(ctx context.Context, key string, expiresAt time.Time) error {
	return b.st.RevokeSession(ctx, key, expiresAt)
}

// SessionRevoked reads a console logout from the store (console.SessionRevoker).
func (b *consoleBackend) SessionRevoked(ctx context.Context, key string) (bool, error) {
	return b.st.SessionRevoked(ctx, key)
}
