package sqlserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/alternayte/queuebox/shared/store"
)

// The statements of queuebox_capture_state (migration V7), in the database's default schema
// as V7 creates it.
const (
	// CaptureStateExists answers 1 when the table exists.
	CaptureStateExists = `SELECT CASE WHEN OBJECT_ID(N'` + store.CaptureStateTable + `', N'U') IS NULL THEN 0 ELSE 1 END;`
	// CaptureStateRead reads the row of the identity @p1.
	CaptureStateRead = `SELECT state_id, config_fingerprint FROM ` + store.CaptureStateTable + ` WHERE identity_name = @p1;`
	// CaptureStateInsert records the identity @p1 with state_id @p2 and config_fingerprint @p3
	// unless a row exists; the key range lock (UPDLOCK, HOLDLOCK) makes two racing inserts
	// wait for each other instead of both passing the check.
	CaptureStateInsert = `INSERT INTO ` + store.CaptureStateTable + ` (identity_name, state_id, config_fingerprint)
SELECT @p1, @p2, @p3
WHERE NOT EXISTS (SELECT 1 FROM ` + store.CaptureStateTable + ` WITH (UPDLOCK, HOLDLOCK) WHERE identity_name = @p1);`
)

// Querier runs statements: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// CaptureState is the store.CaptureStateStore of SQL Server change data capture: it reads
// and writes queuebox_capture_state through one Querier.
type CaptureState struct {
	q Querier
}

var _ store.CaptureStateStore = CaptureState{}

// NewCaptureState returns the capture state statements on q.
func NewCaptureState(q Querier) CaptureState { return CaptureState{q: q} }

// Exists reports whether the table exists (migration V7 applied).
func (s CaptureState) Exists(ctx context.Context) (bool, error) {
	var n int64
	if err := s.q.QueryRowContext(ctx, CaptureStateExists).Scan(&n); err != nil {
		return false, fmt.Errorf("looking for %s: %w", store.CaptureStateTable, err)
	}
	return n == 1, nil
}

// Read returns the row of the identity, or nil.
func (s CaptureState) Read(ctx context.Context, identity string) (*store.CaptureStateRow, error) {
	var r store.CaptureStateRow
	err := s.q.QueryRowContext(ctx, CaptureStateRead, identity).Scan(&r.StateID, &r.Fingerprint)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", store.CaptureStateTable, err)
	}
	return &r, nil
}

// Insert records the identity unless a row exists, and returns the row that the table holds
// afterwards. A unique violation (another process inserted the identity at the same time) is
// not an error: the row that won is returned.
func (s CaptureState) Insert(ctx context.Context, identity string, r store.CaptureStateRow) (*store.CaptureStateRow, error) {
	if _, err := s.q.ExecContext(ctx, CaptureStateInsert, identity, r.StateID, r.Fingerprint); err != nil && !isUniqueViolation(err) {
		return nil, fmt.Errorf("recording the capture identity in %s: %w", store.CaptureStateTable, err)
	}
	return s.Read(ctx, identity)
}
