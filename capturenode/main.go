// Command capturenode is the standalone capture node of the AWS deployment: a small
// long-running service (one ECS Fargate task, deploy/capture-node.yaml) that runs capture,
// the broker sources, or both. Capture reads the change log of the outbox table (the
// PostgreSQL logical replication stream with outbox.capture.mode postgres-logical, the SQL
// Server change table with sqlserver-cdc) and wakes the poll Lambda function with a debounced
// asynchronous invoke when an outbox row commits. The broker sources
// (sources.<name> of type rabbitmq, kafka or nats) store what they consume into the inbox
// table and wake the relay function after they stored push rows. With outbox.capture.enabled
// false the node runs the broker sources only; with neither it refuses to start. It loads
// the same configuration as `queuebox serve` (the QUEUEBOX_ variables over
// QUEUEBOX_CONFIG_FILE), takes the functions to wake from CAPTURE_POLL_FUNCTION and
// CAPTURE_RELAY_FUNCTION, and serves /health/live, /health/ready, /health and /metrics on
// server.managementPort (or server.httpPort). See shared/capturenode and
// deploy/capture-node.md.
//
// Both capture modes run here: postgres-logical and sqlserver-cdc (the SQL Server source
// polls the change table of the outbox table's capture instance, docs/sqlserver-cdc.md).
//
// Exit codes: 0 after SIGTERM or SIGINT, 1 when the start fails or capture stops with a fault
// (the reason is printed on stderr).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/alternayte/queuebox/shared/capturenode"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := capturenode.Main(ctx, os.Environ(), os.ReadFile, os.Stderr)
	stop()
	os.Exit(code)
}
