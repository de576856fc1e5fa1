package service

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/transform/jsonata"
)

// pingStore is a store whose Ping answers err; no other method is called.
type pingStore struct {
	store.Store
	err error
}

func (s pingStore) Ping(context.Context) error { return s.err }

func (pingStore) Close() {}

func appEnv(extra map[string]string) map[string]string {
	env := map[string]string{
		"QUEUEBOX_DATABASE_URL":      "jdbc:postgresql://db:5432/queuebox",
		"QUEUEBOX_DATABASE_USERNAME": "queuebox",
		"QUEUEBOX_DATABASE_PASSWORD": "secret",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

func checkNames(checks []health.Check) (names []string, deciding []bool) {
	for _, c := range checks {
		names = append(names, c.Name)
		deciding = append(deciding, c.Decides)
	}
	return names, deciding
}

// The assembly of queuebox serve builds every loop once, against a store bound later, and
// owns the readiness components of the parts it built, in the order of the health answer.
func TestBuildServeChecks(t *testing.T) {
	t.Parallel()
	cfg, err := LoadEnv(appEnv(map[string]string{"QUEUEBOX_RETENTION_ENABLED": "true", "QUEUEBOX_INBOX_RELAY_ENABLED": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	app, err := Build(context.Background(), cfg, AppOptions{
		Logger: slog.New(slog.DiscardHandler), Poller: true, Relay: IfEnabled, Retention: true,
		Admin: IfEnabled, Inbox: true, Capture: IfEnabled,
	})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	defer app.Close()
	if app.Outbox == nil || app.Relay == nil || app.Cleaner == nil || app.Inbox == nil {
		t.Fatalf("parts missing: %+v", app)
	}
	if app.Admin != nil || app.Capture != nil || app.DB != nil {
		t.Errorf("admin, capture and the database are off or not open yet: %+v", app)
	}
	names, deciding := checkNames(app.Checks())
	if got, want := strings.Join(names, " "), "database outbox-poller inbox-relay retention-service"; got != want {
		t.Errorf("checks = %s, want %s", got, want)
	}
	for i, d := range deciding {
		if !d {
			t.Errorf("%s does not decide readiness", names[i])
		}
	}

	// Open binds the parts to the store it opens; here a store is bound by hand.
	down := errors.New("down")
	app.store.Store = pingStore{err: down}
	app.DB = &Database{Store: app.store}
	if err := app.Checks()[0].Probe(context.Background()); !errors.Is(err, down) {
		t.Errorf("database probe = %v, want the bound store's answer", err)
	}
}

// Without retention.enabled the cleanup is built (its refusals apply) but is no component.
func TestBuildRetentionDisabledIsNoComponent(t *testing.T) {
	t.Parallel()
	cfg, err := LoadEnv(appEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	app, err := Build(context.Background(), cfg, AppOptions{Database: &Database{Store: pingStore{}}, Retention: true})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if app.Cleaner == nil {
		t.Fatal("no cleaner")
	}
	if names, _ := checkNames(app.Checks()); strings.Join(names, " ") != "database" {
		t.Errorf("checks = %v, want database alone", names)
	}
	app.Close()
	if app.DB == nil {
		t.Error("Close dropped the database that the runtime owns")
	}
}

// A part that is Always built ignores its switch; Skip leaves it out.
func TestBuildWants(t *testing.T) {
	t.Parallel()
	cfg, err := LoadEnv(appEnv(map[string]string{"QUEUEBOX_INBOX_RELAY_ENABLED": "false"}))
	if err != nil {
		t.Fatal(err)
	}
	db := &Database{Store: pingStore{}}
	for _, tc := range []struct {
		want  Want
		built bool
	}{{Skip, false}, {IfEnabled, false}, {Always, true}} {
		app, err := Build(context.Background(), cfg, AppOptions{Database: db, Relay: tc.want})
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		if (app.Relay != nil) != tc.built {
			t.Errorf("relay with Want %d built = %v, want %v", tc.want, app.Relay != nil, tc.built)
		}
	}
}

// A Required part that the configuration switches off is refused with a start error that
// names the program. sqlserver-cdc builds its connector (the SQL Server source) without
// connecting.
func TestBuildRefusesCapture(t *testing.T) {
	t.Parallel()
	cfg, err := LoadEnv(appEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(context.Background(), cfg, AppOptions{Capture: Required, Name: "the capture node", HealthPool: true})
	var se *StartError
	if !errors.As(err, &se) {
		t.Fatalf("error %T %v is not a *StartError", err, err)
	}
	want := "QueueBox could not start capture. Reason: outbox.capture.enabled is false (QUEUEBOX_OUTBOX_CAPTURE_ENABLED); " +
		"the capture node needs it true and outbox.capture.mode postgres-logical or sqlserver-cdc"
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}

	cdc, err := LoadEnv(map[string]string{
		"QUEUEBOX_DATABASE_TYPE": "sqlserver", "QUEUEBOX_DATABASE_URL": "jdbc:sqlserver://127.0.0.1:1;databaseName=q",
		"QUEUEBOX_DATABASE_USERNAME": "sa", "QUEUEBOX_DATABASE_PASSWORD": "p",
		"QUEUEBOX_OUTBOX_CAPTURE_MODE": "sqlserver-cdc", "QUEUEBOX_OUTBOX_CAPTURE_ENABLED": "true",
		"QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY": "/tmp",
	})
	if err != nil {
		t.Fatal(err)
	}
	app, err := Build(context.Background(), cdc, AppOptions{Poller: true, Capture: IfEnabled, HealthPool: true})
	if err != nil {
		t.Fatalf("sqlserver-cdc: %v", err)
	}
	defer app.Close()
	if app.Capture == nil {
		t.Error("sqlserver-cdc: Build built no capture connector")
	}
}

// newEngine returns a JSONata engine, which the runtimes pass to Build (AppOptions.Engine).
func newEngine() *jsonata.Engine { return jsonata.NewEngine(jsonata.EngineOptions{}) }

// BuildParts builds the parts it is given as Build does and no other, even when the options
// ask for one; without AppOptions.NewTracing it makes no tracer provider. The admin part
// alone has the database's check alone; an inbox built after the relay wakes it.
func TestBuildPartsBuildsThosePartsAlone(t *testing.T) {
	t.Parallel()
	cfg, err := LoadEnv(appEnv(map[string]string{"QUEUEBOX_ADMIN_ENABLED": "true", "QUEUEBOX_ADMIN_AUTH_TYPE": "api-key",
		"QUEUEBOX_ADMIN_AUTH_KEY": "k", "QUEUEBOX_INBOX_RELAY_ENABLED": "true", "QUEUEBOX_RETENTION_ENABLED": "true",
		"QUEUEBOX_TRACING_ENDPOINT": "http://127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	o := AppOptions{Logger: slog.New(slog.DiscardHandler), Database: &Database{Store: pingStore{}}, Engine: newEngine(),
		Admin: IfEnabled, Poller: true, Relay: Always, Retention: true, Inbox: true, Capture: IfEnabled}
	app, err := BuildParts(context.Background(), cfg, o, AdminPart())
	if err != nil {
		t.Fatalf("BuildParts: %v", err)
	}
	defer app.Close()
	if app.Admin == nil || app.Console == nil {
		t.Fatalf("admin routes or console missing: %+v", app)
	}
	if app.Outbox != nil || app.Relay != nil || app.Cleaner != nil || app.Inbox != nil || app.Capture != nil || app.Sources != nil {
		t.Errorf("BuildParts built another part: %+v", app)
	}
	if app.Tracing() != nil {
		t.Error("BuildParts made a tracer provider without NewTracing")
	}
	if names, _ := checkNames(app.Checks()); strings.Join(names, " ") != "database" {
		t.Errorf("checks = %v, want database alone", names)
	}

	app, err = BuildParts(context.Background(), cfg, o, RelayPart(), RetentionPart(), InboxPart())
	if err != nil {
		t.Fatalf("BuildParts relay, retention, inbox: %v", err)
	}
	defer app.Close()
	if app.Relay == nil || app.Cleaner == nil || app.Inbox == nil || app.Outbox != nil || app.Admin != nil {
		t.Errorf("BuildParts relay, retention, inbox built %+v", app)
	}
	if names, _ := checkNames(app.Checks()); strings.Join(names, " ") != "database inbox-relay retention-service" {
		t.Errorf("checks = %v", names)
	}

	cfg.Admin.Enabled = false
	app, err = BuildParts(context.Background(), cfg, o, AdminPart())
	if err != nil {
		t.Fatalf("BuildParts with admin.enabled false: %v", err)
	}
	if app.Admin != nil || app.Console != nil {
		t.Error("admin.enabled false: BuildParts built the admin routes")
	}
	cfg.Tracing.Protocol = "thrift"
	if _, err := BuildParts(context.Background(), cfg, o, AdminPart()); err == nil || !strings.Contains(err.Error(), "tracing.protocol") {
		t.Errorf("BuildParts with a bad tracing.protocol: %v, want the refusal of Build", err)
	}
}
