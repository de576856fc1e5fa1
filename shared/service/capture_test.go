package service

import (
	"io/fs"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/store/postgres/logical"
	"github.com/alternayte/queuebox/shared/store/sqlserver/cdc"
	"github.com/alternayte/queuebox/shared/waker"
)

func loadCaptureYAML(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, _, err := config.Load(config.LoadOptions{
		Env: map[string]string{"QUEUEBOX_CONFIG_FILE": "queuebox.yml"},
		ReadFile: func(name string) ([]byte, error) {
			if name == "queuebox.yml" {
				return []byte(yaml), nil
			}
			return nil, fs.ErrNotExist
		},
	})
	if err != nil {
		t.Fatalf("loading the configuration: %v", err)
	}
	return cfg
}

// CaptureConfig maps outbox.capture and the database section to the connector's
// configuration, with the PostgreSQL logical-replication source.
func TestCaptureConfigMapsTheConfiguration(t *testing.T) {
	t.Parallel()
	cfg := loadCaptureYAML(t, `
database:
  url: jdbc:postgresql://db.example.com:5433/orders
  username: app
  password: app-secret
outbox:
  capture:
    mode: postgres-logical
    enabled: true
    identity: orders_capture
    publication: orders_pub
    slot: orders_slot
    stateDirectory: /var/lib/queuebox/capture
    reconciliationIntervalMs: 2500
`)
	w := waker.Nop{}
	log := slog.New(slog.DiscardHandler)
	got, err := CaptureConfig(cfg, w, log)
	if err != nil {
		t.Fatalf("CaptureConfig: %v", err)
	}
	if _, ok := got.Source.(logical.Source); !ok {
		t.Errorf("Source is %T, want logical.Source", got.Source)
	}
	target, err := cfg.CaptureTarget()
	if err != nil {
		t.Fatal(err)
	}
	state, err := cfg.Database.PgxConnString()
	if err != nil {
		t.Fatal(err)
	}
	want := capture.Config{
		Source: got.Source, ConnString: target.PgxConnString(), StateConnString: state,
		Identity: "orders_capture", Publication: "orders_pub", Slot: "orders_slot",
		Schema: "public", Table: "outbox", InboxTable: "inbox",
		StateDirectory: "/var/lib/queuebox/capture", ReconciliationInterval: 2500 * time.Millisecond,
		Waker: w, Logger: log,
	}
	if got != want {
		t.Errorf("CaptureConfig returned\n%+v\nwant\n%+v", got, want)
	}
	if !strings.Contains(got.ConnString, "db.example.com") {
		t.Errorf("ConnString %q does not name the database host", got.ConnString)
	}
}

// CaptureConfig refuses a configuration whose capture is off.
func TestCaptureConfigRefuses(t *testing.T) {
	t.Parallel()
	off := loadCaptureYAML(t, `
database:
  url: jdbc:postgresql://127.0.0.1:5432/queuebox
  username: postgres
  password: secret
`)
	if _, err := CaptureConfig(off, waker.Nop{}, nil); err == nil || err.Error() !=
		"outbox.capture.enabled is false (QUEUEBOX_OUTBOX_CAPTURE_ENABLED); capture needs outbox.capture.enabled true and outbox.capture.mode postgres-logical or sqlserver-cdc" {
		t.Errorf("capture off: got %v", err)
	}
}

// CaptureConfig maps sqlserver-cdc to the SQL Server change data capture source: the capture
// connection with its encrypt and trustServerCertificate, the state table on database.url,
// the schema dbo and the mapped outbox table.
func TestCaptureConfigSQLServerCDC(t *testing.T) {
	t.Parallel()
	cfg := loadCaptureYAML(t, `
database:
  type: sqlserver
  url: jdbc:sqlserver://db.example.com:1433;databaseName=queuebox
  username: app
  password: app-secret
  outboxTableName: qb_outbox
  migrate: false
outbox:
  capture:
    mode: sqlserver-cdc
    enabled: true
    identity: orders_capture
    stateDirectory: /var/lib/queuebox/capture
    reconciliationIntervalMs: 2500
    connection:
      username: capture_user
      password: capture-secret
      encrypt: true
      trustServerCertificate: false
`)
	w := waker.Nop{}
	log := slog.New(slog.DiscardHandler)
	got, err := CaptureConfig(cfg, w, log)
	if err != nil {
		t.Fatalf("CaptureConfig: %v", err)
	}
	if _, ok := got.Source.(*cdc.Source); !ok {
		t.Errorf("Source is %T, want *cdc.Source", got.Source)
	}
	target, err := cfg.CaptureTarget()
	if err != nil {
		t.Fatal(err)
	}
	state, err := cfg.Database.SQLServerURL()
	if err != nil {
		t.Fatal(err)
	}
	if got.ConnString != target.SQLServerURL() || got.StateConnString != state {
		t.Errorf("connections: capture %q state %q; want %q and %q", got.ConnString, got.StateConnString, target.SQLServerURL(), state)
	}
	for _, want := range []string{"capture_user", "encrypt=true", "TrustServerCertificate=false", "database=queuebox"} {
		if !strings.Contains(got.ConnString, want) {
			t.Errorf("capture connection %q lacks %q", got.ConnString, want)
		}
	}
	if got.Identity != "orders_capture" || got.Schema != "dbo" || got.Table != "qb_outbox" || got.InboxTable != "" ||
		got.StateDirectory != "/var/lib/queuebox/capture" || got.ReconciliationInterval != 2500*time.Millisecond ||
		got.Waker != w || got.Logger != log {
		t.Errorf("CaptureConfig returned %+v", got)
	}
	// The connector takes it: the source parses the capture connection without connecting.
	if _, err := capture.New(got); err != nil {
		t.Errorf("capture.New: %v", err)
	}
}
