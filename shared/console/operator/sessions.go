package operator

import (
	"context"
	"errors"
	"time"

	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/store"
)

// The console's logouts live in the database (queuebox_revoked_session, V2 of the QueueBox
// track), so a logout on one replica or Lambda invocation ends the session on all of them.
// Without that table (database.migrate false and the file not applied, which the start warns
// about) a logout clears the browser's cookie only, and no session counts as revoked; any
// other failure to read the logouts still refuses the session (shared/console).
var _ console.SessionRevoker = (*Backend)(nil)

// RevokeSession records a console logout in the store (console.SessionRevoker). Without the
// table it records nothing and the logout clears the cookie only.
func (b *Backend) RevokeSession(ctx context.Context, key string, expiresAt time.Time) error {
	err := b.st.RevokeSession(ctx, key, expiresAt)
	if errors.Is(err, store.ErrNoRevokedSessions) {
		return nil
	}
	return err
}

// SessionRevoked reads a console logout from the store (console.SessionRevoker). Without the
// table no session was revoked.
func (b *Backend) SessionRevoked(ctx context.Context, key string) (bool, error) {
	revoked, err := b.st.SessionRevoked(ctx, key)
	if errors.Is(err, store.ErrNoRevokedSessions) {
		return false, nil
	}
	return revoked, err
}
