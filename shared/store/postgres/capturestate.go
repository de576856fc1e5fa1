package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/alternayte/queuebox/shared/store"
)

// CaptureState is the store.CaptureStateStore of PostgreSQL logical capture: it reads and
// writes queuebox_capture_state on one connection.
type CaptureState struct {
	conn *pgx.Conn
}

var _ store.CaptureStateStore = CaptureState{}

// NewCaptureState returns the capture state statements on conn.
func NewCaptureState(conn *pgx.Conn) CaptureState { return CaptureState{conn: conn} }

// Exists reports whether the table exists (migration V7 applied).
func (s CaptureState) Exists(ctx context.Context) (bool, error) {
	var ok bool
	if err := s.conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, store.CaptureStateTable).Scan(&ok); err != nil {
		return false, fmt.Errorf("looking for %s: %w", store.CaptureStateTable, err)
	}
	return ok, nil
}

// Read returns the row of the identity, or nil.
func (s CaptureState) Read(ctx context.Context, identity string) (*store.CaptureStateRow, error) {
	var r store.CaptureStateRow
	err := s.conn.QueryRow(ctx, `SELECT state_id, config_fingerprint FROM `+store.CaptureStateTable+` WHERE identity_name = $1`, identity).
		Scan(&r.StateID, &r.Fingerprint)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", store.CaptureStateTable, err)
	}
	return &r, nil
}

// Insert records the identity unless a row exists, and returns the row that the table holds
// afterwards.
func (s CaptureState) Insert(ctx context.Context, identity string, r store.CaptureStateRow) (*store.CaptureStateRow, error) {
	if _, err := s.conn.Exec(ctx, `INSERT INTO `+store.CaptureStateTable+` (identity_name, state_id, config_fingerprint)
VALUES ($1, $2, $3) ON CONFLICT (identity_name) DO NOTHING`, identity, r.StateID, r.Fingerprint); err != nil {
		return nil, fmt.Errorf("recording the capture identity in %s: %w", store.CaptureStateTable, err)
	}
	return s.Read(ctx, identity)
}
