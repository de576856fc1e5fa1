package service

import (
	"errors"
	"io/fs"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/store/postgres/logical"
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

// CaptureConfig refuses a configuration whose capture is off and the mode sqlserver-cdc.
func TestCaptureConfigRefuses(t *testing.T) {
	t.Parallel()
	off := loadCaptureYAML(t, `
database:
  url: jdbc:postgresql://127.0.0.1:5432/queuebox
  username: postgres
  password: secret
`)
	if _, err := CaptureConfig(off, waker.Nop{}, nil); err == nil || err.Error() !=
		"outbox.capture.enabled is false (QUEUEBOX_OUTBOX_CAPTURE_ENABLED); capture needs outbox.capture.enabled true and outbox.capture.mode postgres-logical" {
		t.Errorf("capture off: got %v", err)
	}
	cdc := loadCaptureYAML(t, `
database:
  type: sqlserver
  url: jdbc:sqlserver://127.0.0.1:1;databaseName=queuebox
  username: sa
  password: secret
outbox:
  capture:
    mode: sqlserver-cdc
    enabled: true
    stateDirectory: /var/lib/queuebox/capture
`)
	if _, err := CaptureConfig(cdc, waker.Nop{}, nil); !errors.Is(err, capture.ErrSQLServerCDCNotImplemented) {
		t.Errorf("sqlserver-cdc: got %v, want ErrSQLServerCDCNotImplemented", err)
	}
}
