package examples

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store/postgres/logical/logicaltest"
)

// TestCDCSmokeTest runs examples/cdc/smoke-test.sh against a private PostgreSQL cluster with
// wal_level = logical (logicaltest), as it runs against `make run`'s cluster, and checks that
// it showed the three claims of spec/08 (capture wakes delivery, the position survives a
// restart, a second owner is refused), cleaned up its database, and left no port open.
func TestCDCSmokeTest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster and three QueueBox processes; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	srv, err := logicaltest.Start(ctx)
	cancel()
	if err != nil {
		t.Fatalf("no PostgreSQL server with wal_level = logical: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	bin := buildQueueBox(t)
	receiver := filepath.Join(t.TempDir(), "receiver")
	build := exec.Command("go", "build", "-o", receiver, "./local/receiver")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./local/receiver: %v\n%s", err, out)
	}
	ports := []int{freePort(t), freePort(t), freePort(t)}

	ctx, cancel = context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("cdc", "smoke-test.sh"))
	// On the timeout the script gets SIGTERM, so that its trap stops what it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 60 * time.Second
	cmd.Env = append(environWithout("QUEUEBOX_", "PG"),
		"PGHOST=127.0.0.1", "PGPORT="+strconv.Itoa(srv.Port), "PGUSER=postgres",
		"QUEUEBOX_BIN="+bin, "QUEUEBOX_RECEIVER_BIN="+receiver,
		"QUEUEBOX_SERVER_HTTPPORT="+strconv.Itoa(ports[0]),
		"QUEUEBOX_CDC_SECOND_PORT="+strconv.Itoa(ports[1]),
		"QUEUEBOX_CDC_RECEIVER_PORT="+strconv.Itoa(ports[2]),
		"QUEUEBOX_EXAMPLE_TIMEOUT=90",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	t.Logf("cdc/smoke-test.sh took %s:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("cdc/smoke-test.sh: %v", err)
	}
	for _, want := range []string{
		"OK 1: capture woke delivery",
		"OK 2: the position survived the restart",
		"OK 3: a second owner is refused: the capture identity queuebox already has an owner",
		"OK: o-1 to o-4 each delivered once and sent",
		"stopped first", "stopped second-start", "stopped second-owner", "stopped receiver",
		"dropped database",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output does not say %q", want)
		}
	}
	for _, p := range ports {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), time.Second); err == nil {
			c.Close()
			t.Errorf("something still listens on 127.0.0.1:%d after cdc/smoke-test.sh exited", p)
		}
	}
}
