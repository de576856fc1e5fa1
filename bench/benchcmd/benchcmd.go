// Package benchcmd holds what the bench commands' main functions share: running until
// SIGTERM or an interrupt, the PostgreSQL server they create their databases on, and the
// garbage collector settings of QueueBox's processes.
package benchcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/alternayte/queuebox/shared/gctune"
	"github.com/alternayte/queuebox/shared/service"
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

// QueueBoxRuntime sets the garbage collector as QueueBox's processes set it at their start
// (shared/gctune.Apply, from this process's environment: GOGC and GOMEMLIMIT win), prints the
// settings to w, and returns a function that puts back what was in force before. A bench that
// measures QueueBox in its own process calls it first, so that it measures what production
// runs; `GOGC=100 make bench` measures Go's default instead.
func QueueBoxRuntime(w io.Writer, name string) func() {
	percent := debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	limit := debug.SetMemoryLimit(-1)
	s := gctune.Apply(service.EnvMap(os.Environ()))
	fmt.Fprintf(w, "%s: garbage collector as QueueBox sets it: GC percent %d (from %s), memory limit %d bytes (from %s)\n",
		name, s.Percent, s.PercentFrom, s.Limit, s.LimitFrom)
	return func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}
