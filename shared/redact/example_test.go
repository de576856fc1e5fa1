package redact_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/alternayte/queuebox/shared/redact"
)

func ExampleString() {
	fmt.Println(redact.String(`POST failed: {"password":"hunter2"} via amqp://guest:guest@rabbit:5672/vh`))
	fmt.Println(redact.String("Bearer token missing"))
	// Output:
	// POST failed: {"password":"[REDACTED]"} via amqp://***@rabbit:5672/vh
	// Bearer token missing
}

func ExampleError() {
	err := fmt.Errorf("dialing: %w", io.EOF)
	fmt.Println(redact.Error(err))
	// Output:
	// dialing | caused by EOF
}

func ExampleHandler() {
	opts := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{} // a stable line for the example
		}
		return a
	}}
	logger := slog.New(redact.Handler(slog.NewTextHandler(os.Stdout, opts)))
	logger.Info("connecting password=hunter2", "dsn", "postgres://app:hunter2@db/app")
	// Output:
	// level=INFO msg="connecting password=[REDACTED]" dsn=postgres://***@db/app
}
