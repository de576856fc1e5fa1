package service

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/store/postgres/logical"
	"github.com/alternayte/queuebox/shared/waker"
)

// errCaptureNotEnabled refuses a configuration whose capture is off.
var errCaptureNotEnabled = errors.New("outbox.capture.enabled is false (QUEUEBOX_OUTBOX_CAPTURE_ENABLED); " +
	"capture needs outbox.capture.enabled true and outbox.capture.mode postgres-logical")

// CaptureConfig returns the configuration of the capture connector of outbox.capture, waking
// w, with the PostgreSQL logical-replication source (shared/store/postgres/logical). It
// refuses a configuration whose capture is off and the mode sqlserver-cdc
// (capture.ErrSQLServerCDCNotImplemented).
func CaptureConfig(cfg *config.Config, w waker.Waker, log *slog.Logger) (capture.Config, error) {
	cp := cfg.Outbox.Capture
	switch {
	case !cp.Enabled:
		return capture.Config{}, errCaptureNotEnabled
	case cp.Mode == config.CaptureSQLServerCDC:
		return capture.Config{}, capture.ErrSQLServerCDCNotImplemented
	case cp.Mode != config.CapturePostgresLogical:
		return capture.Config{}, fmt.Errorf("outbox.capture.mode is %s; capture needs postgres-logical", cp.Mode)
	}
	target, err := cfg.CaptureTarget()
	if err != nil {
		return capture.Config{}, fmt.Errorf("reading the capture connection: %w", err)
	}
	stateConn, err := cfg.Database.PgxConnString()
	if err != nil {
		return capture.Config{}, fmt.Errorf("reading database.url: %w", err)
	}
	tables := cfg.Database.Tables()
	return capture.Config{
		Source:                 logical.Source{},
		ConnString:             target.PgxConnString(),
		StateConnString:        stateConn,
		Identity:               cp.Identity,
		Publication:            cp.Publication,
		Slot:                   cp.Slot,
		Schema:                 cp.EffectiveSchema(cfg.Database.Type),
		Table:                  tables.Outbox,
		InboxTable:             tables.Inbox,
		StateDirectory:         cp.StateDirectory,
		ReconciliationInterval: cp.ReconciliationIntervalMs.Duration(),
		Waker:                  w,
		Logger:                 log,
	}, nil
}
