package service

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/store/postgres/logical"
	"github.com/alternayte/queuebox/shared/store/sqlserver/cdc"
	"github.com/alternayte/queuebox/shared/waker"
)

// errCaptureNotEnabled refuses a configuration whose capture is off.
var errCaptureNotEnabled = errors.New("outbox.capture.enabled is false (QUEUEBOX_OUTBOX_CAPTURE_ENABLED); " +
	"capture needs outbox.capture.enabled true and outbox.capture.mode postgres-logical or sqlserver-cdc")

// CaptureConfig returns the configuration of the capture connector of outbox.capture, waking
// w: with the PostgreSQL logical-replication source (shared/store/postgres/logical) for
// postgres-logical, and the SQL Server change data capture source
// (shared/store/sqlserver/cdc) for sqlserver-cdc. It refuses a configuration whose capture is
// off.
func CaptureConfig(cfg *config.Config, w waker.Waker, log *slog.Logger) (capture.Config, error) {
	cp := cfg.Outbox.Capture
	switch {
	case !cp.Enabled:
		return capture.Config{}, errCaptureNotEnabled
	case cp.Mode == config.CaptureSQLServerCDC:
		return sqlServerCaptureConfig(cfg, w, log)
	case cp.Mode != config.CapturePostgresLogical:
		return capture.Config{}, fmt.Errorf("outbox.capture.mode is %s; capture needs postgres-logical or sqlserver-cdc", cp.Mode)
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

// sqlServerCaptureConfig is CaptureConfig for sqlserver-cdc: the capture connection of
// outbox.capture.connection (encrypt, trustServerCertificate) over database.url, and
// queuebox_capture_state on database.url. The SQL Server source reads the outbox table only:
// an inbox insert wakes nothing (the relay keeps its poll interval).
func sqlServerCaptureConfig(cfg *config.Config, w waker.Waker, log *slog.Logger) (capture.Config, error) {
	cp := cfg.Outbox.Capture
	if cfg.Database.Type != config.SQLServer {
		return capture.Config{}, fmt.Errorf("outbox.capture.mode sqlserver-cdc needs database.type sqlserver, not %s", cfg.Database.Type)
	}
	target, err := cfg.CaptureTarget()
	if err != nil {
		return capture.Config{}, fmt.Errorf("reading the capture connection: %w", err)
	}
	stateConn, err := cfg.Database.SQLServerURL()
	if err != nil {
		return capture.Config{}, fmt.Errorf("reading database.url: %w", err)
	}
	return capture.Config{
		Source:                 &cdc.Source{},
		ConnString:             target.SQLServerURL(),
		StateConnString:        stateConn,
		Identity:               cp.Identity,
		Schema:                 cp.EffectiveSchema(cfg.Database.Type),
		Table:                  cfg.Database.Tables().Outbox,
		StateDirectory:         cp.StateDirectory,
		ReconciliationInterval: cp.ReconciliationIntervalMs.Duration(),
		Waker:                  w,
		Logger:                 log,
	}, nil
}
