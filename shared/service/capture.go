package service

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/dialect"
	"github.com/alternayte/queuebox/shared/waker"
)

// errCaptureNotEnabled refuses a configuration whose capture is off.
var errCaptureNotEnabled = errors.New("outbox.capture.enabled is false (QUEUEBOX_OUTBOX_CAPTURE_ENABLED); " +
	"capture needs outbox.capture.enabled true and outbox.capture.mode " + captureModes())

// captureModes lists the capture modes of the dialect table: "postgres-logical or
// sqlserver-cdc".
func captureModes() string { return dialect.JoinOr(dialect.CaptureModes()) }

// CaptureConfig returns the configuration of the capture connector of outbox.capture, waking
// w, with the capture source of the dialect whose mode outbox.capture.mode names (the dialect
// table, shared/store/dialect): PostgreSQL logical replication (shared/store/postgres/logical)
// for postgres-logical, SQL Server change data capture (shared/store/sqlserver/cdc) for
// sqlserver-cdc. It refuses a configuration whose capture is off.
//
// The capture connection is outbox.capture.connection over database.url, and
// queuebox_capture_state is on database.url. A source that reads a publication
// (dialect.Dialect.CapturePublication) takes outbox.capture.publication and slot, and the
// inbox table; the others read the outbox table only, so that an inbox insert wakes nothing
// (the relay keeps its poll interval).
func CaptureConfig(cfg *config.Config, w waker.Waker, log *slog.Logger) (capture.Config, error) {
	cp := cfg.Outbox.Capture
	if !cp.Enabled {
		return capture.Config{}, errCaptureNotEnabled
	}
	d, ok := dialect.ByCaptureMode(string(cp.Mode))
	if !ok {
		return capture.Config{}, fmt.Errorf("outbox.capture.mode is %s; capture needs %s", cp.Mode, captureModes())
	}
	if string(cfg.Database.Type) != d.Name {
		return capture.Config{}, fmt.Errorf("outbox.capture.mode %s needs database.type %s, not %s", cp.Mode, d.Name, cfg.Database.Type)
	}
	target, err := captureEndpoint(cfg, d)
	if err != nil {
		return capture.Config{}, fmt.Errorf("reading the capture connection: %w", err)
	}
	_, stateConn, err := databaseConnString(cfg)
	if err != nil {
		return capture.Config{}, fmt.Errorf("reading database.url: %w", err)
	}
	schema := cp.Schema
	if schema == "" {
		schema = d.DefaultSchema
	}
	tables := cfg.Database.Tables()
	c := capture.Config{
		Source:                 dialect.NewCaptureSource(d),
		ConnString:             d.EndpointConnString(target),
		StateConnString:        stateConn,
		Identity:               cp.Identity,
		Schema:                 schema,
		Table:                  tables.Outbox,
		StateDirectory:         cp.StateDirectory,
		ReconciliationInterval: cp.ReconciliationIntervalMs.Duration(),
		Waker:                  w,
		Logger:                 log,
	}
	if d.CapturePublication {
		c.Publication, c.Slot, c.InboxTable = cp.Publication, cp.Slot, tables.Inbox
	}
	return c, nil
}

const errCaptureHosts = "database.url names more than one host; set outbox.capture.connection.hostname (QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAME) to the host that capture reads"

// captureEndpoint returns the capture connection: database.url, database.username and
// database.password with the overrides of outbox.capture.connection, read with the parser of
// dialect d. It fails when database.url names more than one host and
// outbox.capture.connection.hostname names none.
func captureEndpoint(cfg *config.Config, d dialect.Dialect) (store.Endpoint, error) {
	u, err := d.ParseURL(cfg.Database.URL.Reveal())
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("database.url %s", err)
	}
	conn := cfg.Outbox.Capture.Connection
	if len(u.Hosts) > 1 && conn.Hostname == "" {
		return store.Endpoint{}, errors.New(errCaptureHosts)
	}
	user, pass := u.Credentials(cfg.Database.Username, cfg.Database.Password.Reveal())
	params, _ := d.Params(u)
	e := store.Endpoint{Host: u.Hosts[0], Database: u.Database, User: user, Password: pass,
		Encrypt: conn.Encrypt, TrustServerCertificate: conn.TrustServerCertificate, Params: params}
	if conn.Username != "" {
		e.User = conn.Username
	}
	if !conn.Password.IsEmpty() {
		e.Password = conn.Password.Reveal()
	}
	if conn.Hostname != "" {
		e.Host.Name = conn.Hostname
	}
	if conn.Port != 0 {
		e.Host.Port = conn.Port
	}
	if conn.Database != "" {
		e.Database = conn.Database
	}
	return e, nil
}
