// Command queuebox is the local process of QueueBox: `queuebox serve` runs the inbox routes,
// the management routes and the poll, relay and retention loops in one process;
// `queuebox config check` and `queuebox migrate` are its tools. See shared/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/alternayte/queuebox/shared/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], cli.OSEnv())
	stop()
	os.Exit(code)
}
