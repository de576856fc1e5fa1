package service

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/dburl"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/dialect"
	"github.com/alternayte/queuebox/shared/store/postgres/logical"
	"github.com/alternayte/queuebox/shared/store/sqlserver/cdc"
	"github.com/alternayte/queuebox/shared/waker"
)

func loadCaptureYAML(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, _, err := Load(LoadOptions{
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
	want := capture.Config{
		Source:          got.Source,
		ConnString:      "postgres://app:app-secret@db.example.com:5433/orders",
		StateConnString: "postgres://app:app-secret@db.example.com:5433/orders",
		Identity:        "orders_capture", Publication: "orders_pub", Slot: "orders_slot",
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
	target := "sqlserver://capture_user:capture-secret@db.example.com:1433?TrustServerCertificate=false&database=queuebox&encrypt=true"
	state := "sqlserver://app:app-secret@db.example.com:1433?database=queuebox&encrypt=true"
	if got.ConnString != target || got.StateConnString != state {
		t.Errorf("connections: capture %q state %q; want %q and %q", got.ConnString, got.StateConnString, target, state)
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

// captureEndpointOf loads the minimal database section with env and returns the capture
// connection of its dialect, and that connection's string.
func captureEndpointOf(t *testing.T, env map[string]string) (store.Endpoint, string, error) {
	t.Helper()
	base := map[string]string{"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://db:5432/queuebox",
		"QUEUEBOX_DATABASE_USERNAME": "queuebox", "QUEUEBOX_DATABASE_PASSWORD": "secret"}
	for k, v := range env {
		base[k] = v
	}
	cfg, err := LoadEnv(base)
	require.NoError(t, err)
	d, ok := dialect.Lookup(string(cfg.Database.Type))
	require.True(t, ok)
	e, err := captureEndpoint(cfg, d)
	if err != nil {
		return e, "", err
	}
	return e, d.EndpointConnString(e), nil
}

// TestCaptureTarget checks the capture connection: database.url and its credentials with the
// overrides of outbox.capture.connection (moved here from shared/config with the mapping).
func TestCaptureTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    store.Endpoint
		wantPgx string
		wantErr string
	}{
		{name: "from database.url", env: map[string]string{"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://db:5432/queuebox?sslmode=require"},
			want:    store.Endpoint{Host: dburl.Host{Name: "db", Port: 5432}, Database: "queuebox", User: "queuebox", Password: "secret", Encrypt: true, Params: []dburl.Param{{Name: "sslmode", Value: "require"}}},
			wantPgx: "postgres://queuebox:secret@db:5432/queuebox?sslmode=require"},
		{name: "overrides", env: map[string]string{
			"QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAME": "replica", "QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_PORT": "5433",
			"QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_DATABASE": "other", "QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_USERNAME": "capture_user",
			"QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_PASSWORD": "cap",
		}, want: store.Endpoint{Host: dburl.Host{Name: "replica", Port: 5433}, Database: "other", User: "capture_user", Password: "cap", Encrypt: true},
			wantPgx: "postgres://capture_user:cap@replica:5433/other"},
		{name: "several hosts", env: map[string]string{"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://h1,h2/q"},
			wantErr: "database.url names more than one host; set outbox.capture.connection.hostname (QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAME) to the host that capture reads"},
		{name: "several hosts with a hostname", env: map[string]string{"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://h1,h2:5433/q", "QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAME": "h2"},
			want:    store.Endpoint{Host: dburl.Host{Name: "h2", Port: 5432}, Database: "q", User: "queuebox", Password: "secret", Encrypt: true},
			wantPgx: "postgres://queuebox:secret@h2:5432/q"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, conn, err := captureEndpointOf(t, tt.env)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantPgx, conn)
			assert.Equal(t, tt.want, got)
		})
	}

	_, conn, err := captureEndpointOf(t, map[string]string{
		"QUEUEBOX_DATABASE_TYPE": "sqlserver", "QUEUEBOX_DATABASE_URL": "jdbc:sqlserver://db:1433;databaseName=q",
		"QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_TRUSTSERVERCERTIFICATE": "true",
	})
	require.NoError(t, err)
	assert.Equal(t, "sqlserver://queuebox:secret@db:1433?TrustServerCertificate=true&database=q&encrypt=true", conn)
	_, conn, err = captureEndpointOf(t, nil)
	require.NoError(t, err)
	assert.Equal(t, "postgres://queuebox:secret@db:5432/queuebox", conn)
}

// TestCaptureOfTheSpecFragments checks what the dialect table gives the capture fragments of
// ../shared/spec (shared/config/testdata/fragments/08-capture-changes-*.yml): the default
// schema of each dialect, and the capture connection of the third fragment.
func TestCaptureOfTheSpecFragments(t *testing.T) {
	t.Parallel()
	load := func(file string, env map[string]string) *config.Config {
		t.Helper()
		body, err := os.ReadFile(filepath.Join("../config/testdata/fragments", file))
		require.NoError(t, err)
		env["QUEUEBOX_CONFIG_FILE"] = "queuebox.yml"
		env["DB_PASSWORD"] = "db-pass"
		cfg, _, err := Load(LoadOptions{Env: env, ReadFile: func(name string) ([]byte, error) {
			if name == "queuebox.yml" {
				return body, nil
			}
			return nil, fs.ErrNotExist
		}})
		require.NoError(t, err)
		return cfg
	}
	for _, tt := range []struct{ file, schema string }{{"08-capture-changes-1.yml", "public"}, {"08-capture-changes-2.yml", "dbo"}} {
		got, err := CaptureConfig(load(tt.file, map[string]string{}), waker.Nop{}, nil)
		require.NoError(t, err, tt.file)
		assert.Equal(t, tt.schema, got.Schema, tt.file)
	}
	cfg := load("08-capture-changes-3.yml", map[string]string{"CAPTURE_PASSWORD": "cap",
		"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://db:5432/queuebox", "QUEUEBOX_DATABASE_USERNAME": "queuebox", "QUEUEBOX_DATABASE_PASSWORD": "secret"})
	d, _ := dialect.Lookup(string(cfg.Database.Type))
	target, err := captureEndpoint(cfg, d)
	require.NoError(t, err)
	assert.Equal(t, "replica.db.internal", target.Host.Name)
	assert.Equal(t, 5433, target.Host.Port)
	assert.Equal(t, "capture_user", target.User)
	assert.Equal(t, "cap", target.Password)
}
