package lambdafn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/gctune"
	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

func TestInitMigratesAnEmptyDatabaseWhenConfigured(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t) // no tables
	rc := newReceiver(t, false)
	env := functionEnv(dbURL, rc, map[string]string{
		"QUEUEBOX_DATABASE_MIGRATE": "true",
		"LAMBDA_MODE":               "continuous",
		"LAMBDA_MARGIN_MS":          "1500",
	})
	rt, err := lambdafn.Init(context.Background(), lambdafn.Options{
		Load: config.LoadOptions{Env: env, ReadFile: noFile}, LogOutput: io.Discard,
	})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	defer rt.Close()

	if want := (lambdafn.Settings{Mode: lambdafn.Continuous, Margin: 1500 * time.Millisecond}); rt.Settings != want {
		t.Errorf("Settings = %+v, want %+v", rt.Settings, want)
	}
	if err := rt.DB.Store.CheckSchema(context.Background()); err != nil {
		t.Errorf("the schema is not in place after Init: %v", err)
	}
	st, err := rt.DB.Migrations.Status(context.Background())
	if err != nil {
		t.Fatalf("reading the migration status: %v", err)
	}
	if !st.HasHistory || len(st.Pending) != 0 {
		t.Errorf("migration status = history %v, pending %v; want every bundled migration applied", st.HasHistory, st.Pending)
	}
}

func TestInitErrors(t *testing.T) {
	t.Parallel()
	_, dbURL := dbtest.Migrated(t)
	rc := newReceiver(t, false)
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string // the start of the printed error
	}{
		{
			name:    "bad mode",
			env:     functionEnv(dbURL, rc, map[string]string{"LAMBDA_MODE": "fast"}),
			wantErr: `QueueBox could not read the Lambda settings. Reason: LAMBDA_MODE is "fast"; it must be drain or continuous`,
		},
		{
			name:    "bad margin",
			env:     functionEnv(dbURL, rc, map[string]string{"LAMBDA_MARGIN_MS": "2s"}),
			wantErr: `QueueBox could not read the Lambda settings. Reason: LAMBDA_MARGIN_MS is "2s"`,
		},
		{
			name:    "invalid configuration",
			env:     functionEnv(dbURL, rc, map[string]string{"QUEUEBOX_OUTBOX_BATCHSIZE": "0"}),
			wantErr: "QueueBox could not load the configuration. Reason: invalid configuration: outbox.batchSize (QUEUEBOX_OUTBOX_BATCHSIZE)",
		},
		{
			name: "database does not answer",
			env: functionEnv("postgres://postgres@127.0.0.1:1/none?sslmode=disable", rc,
				map[string]string{"QUEUEBOX_DATABASE_STARTUPTIMEOUTMS": "300"}),
			wantErr: "QueueBox could not connect to the database. Reason: ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt, err := lambdafn.Init(context.Background(), lambdafn.Options{
				Load: config.LoadOptions{Env: tt.env, ReadFile: noFile}, LogOutput: io.Discard,
			})
			if err == nil {
				rt.Close()
				t.Fatal("Init succeeded")
			}
			var se *service.StartError
			if !errors.As(err, &se) {
				t.Errorf("Init error %T is not a *service.StartError", err)
			}
			if !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("Init error = %q, want it to start with %q", err.Error(), tt.wantErr)
			}
		})
	}
}

// TestExit runs Exit in a child process: it must print the start error and exit with 1.
func TestExit(t *testing.T) {
	t.Parallel()
	if os.Getenv("LAMBDAFN_TEST_EXIT") == "1" {
		lambdafn.Exit(service.NewStartError("read the Lambda settings", errors.New(`LAMBDA_MODE is "fast"`)))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestExit$")
	cmd.Env = append(os.Environ(), "LAMBDAFN_TEST_EXIT=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("the child ended with %v, want exit status 1", err)
	}
	if want := "QueueBox could not read the Lambda settings. Reason: LAMBDA_MODE is \"fast\"\n"; stderr.String() != want {
		t.Errorf("stderr = %q, want %q", stderr.String(), want)
	}
}

// TestInitSetsTheGarbageCollector checks that a function's Init sets the collector from the
// function's memory size (shared/gctune) and says so in its "configuration loaded" line.
func TestInitSetsTheGarbageCollector(t *testing.T) {
	_, dbURL := dbtest.Migrated(t)
	rc := newReceiver(t, false)
	beforePercent := debug.SetGCPercent(100)
	beforeLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(beforePercent)
		debug.SetMemoryLimit(beforeLimit)
	})
	var logs bytes.Buffer
	rt, err := lambdafn.Init(context.Background(), lambdafn.Options{
		Load:      config.LoadOptions{Env: functionEnv(dbURL, rc, map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "4096"}), ReadFile: noFile},
		LogOutput: &logs,
	})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	defer rt.Close()
	mem := float64(4096 << 20)
	want := int64(mem * gctune.LimitShare)
	if got := debug.SetGCPercent(gctune.Percent); got != gctune.Percent {
		t.Errorf("GC percent after Init = %d, want %d", got, gctune.Percent)
	}
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Errorf("memory limit after Init = %d, want %d", got, want)
	}
	var line struct {
		Msg     string `json:"msg"`
		Runtime struct {
			Percent   int    `json:"gc_percent"`
			Limit     int64  `json:"memory_limit_bytes"`
			LimitFrom string `json:"memory_limit_from"`
		} `json:"runtime"`
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"configuration loaded"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("the configuration line is not JSON: %v\n%s", err, l)
			}
		}
	}
	if line.Msg != "configuration loaded" || line.Runtime.Percent != gctune.Percent || line.Runtime.Limit != want ||
		line.Runtime.LimitFrom != "AWS_LAMBDA_FUNCTION_MEMORY_SIZE" {
		t.Errorf("configuration line = %+v, want gc_percent %d and memory_limit_bytes %d from AWS_LAMBDA_FUNCTION_MEMORY_SIZE\n%s",
			line, gctune.Percent, want, logs.String())
	}
}
