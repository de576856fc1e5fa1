package store

import "context"

// CaptureStateTable is the table that records each capture identity (migration V7).
const CaptureStateTable = "queuebox_capture_state"

// CaptureStateRow is the row of CaptureStateTable of one capture identity.
type CaptureStateRow struct {
	// StateID is the state_id that ties the state directory to the row.
	StateID string
	// Fingerprint is the config_fingerprint of the capture configuration.
	Fingerprint string
}

// CaptureStateStore reads and writes CaptureStateTable; each dialect that has a capture source
// implements it.
type CaptureStateStore interface {
	// Exists reports whether the table exists (migration V7 applied).
	Exists(ctx context.Context) (bool, error)
	// Read returns the row of the identity, or nil.
	Read(ctx context.Context, identity string) (*CaptureStateRow, error)
	// Insert records the identity unless a row exists, and returns the row that the table
	// holds afterwards.
	Insert(ctx context.Context, identity string, r CaptureStateRow) (*CaptureStateRow, error)
}
