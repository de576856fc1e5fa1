// Package benchcmd holds what the bench commands' main functions share: running until
// SIGTERM or an interrupt, and the PostgreSQL server they create their databases on.
package benchcmd

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// DefaultServer is the server of the tests, used when QUEUEBOX_TEST_DATABASE_URL is not set.
const DefaultServer = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Main calls run with a context that ends on SIGTERM or an interrupt and the command's
// arguments, and exits with the code run returns.
func Main(run func(ctx context.Context, args []string) int) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// ServerURL returns QUEUEBOX_TEST_DATABASE_URL, or DefaultServer when it is not set.
func ServerURL() string {
	if u := os.Getenv("QUEUEBOX_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultServer
}
