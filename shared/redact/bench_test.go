package redact

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

var benchInputs = []struct {
	name string
	in   string
}{
	{"clean_short", "claiming outbox batch: dial tcp 10.0.0.1:5432: connect: connection refused"},
	{"clean_prose", "Connection reset by peer after 3 attempts on exchange orders, the broker closed the channel"},
	{"secrets", `HTTP 401 from https://api.example.com/v1/hooks?token=abc123&x=1: {"error":"bad","access_token":"eyJhbGciOi.abc"} Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig`},
	{"url", "publishing to amqp://guest:guest@rabbit:5672/vh: connection refused"},
	{"max_input", strings.Repeat("delivery failed for order 1234 with password=hunter2 and more words; ", 60)},
}

var sink string

func BenchmarkString(b *testing.B) {
	for _, bi := range benchInputs {
		b.Run(bi.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bi.in)))
			for b.Loop() {
				sink = String(bi.in)
			}
		})
	}
}

func BenchmarkError(b *testing.B) {
	err := fmt.Errorf("claiming outbox batch: %w", fmt.Errorf("querying: %w", errors.New("dial postgres://app:pw@db:5432/app: refused")))
	b.ReportAllocs()
	for b.Loop() {
		sink = Error(err)
	}
}

func BenchmarkHandler(b *testing.B) {
	logger := slog.New(Handler(slog.NewJSONHandler(io.Discard, nil)))
	b.ReportAllocs()
	for b.Loop() {
		logger.Info("outbox row delivered", "topic", "order.created", "attempt", 2, "destination", "https://hooks.example.com/orders")
	}
}
