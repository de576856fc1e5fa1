package redact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// secretValuer is a slog.LogValuer whose value holds a secret.
type secretValuer struct{}

func (secretValuer) LogValue() slog.Value { return slog.StringValue("password=fromValuer") }

// jsonLogger returns a logger that writes JSON lines through Handler into buf.
func jsonLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(Handler(slog.NewJSONHandler(buf, nil)))
}

// decodeLine decodes the one JSON log line in buf.
func decodeLine(t *testing.T, buf *bytes.Buffer) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("decoding %q: %v", buf.String(), err)
	}
	return m
}

func TestHandlerRedactsMessageAndAttributes(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	jsonLogger(&buf).Info("connecting with password=hunter2", "dsn", "host=db password=hunter2")
	line := decodeLine(t, &buf)
	if got, want := line["msg"], "connecting with password=[REDACTED]"; got != want {
		t.Errorf("msg = %q, want %q", got, want)
	}
	if got, want := line["dsn"], "host=db password=[REDACTED]"; got != want {
		t.Errorf("dsn = %q, want %q", got, want)
	}
	if strings.Contains(buf.String(), "hunter2") {
		t.Errorf("the secret reached the log: %s", buf.String())
	}
}

func TestHandlerTextOutput(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(Handler(slog.NewTextHandler(&buf, nil)))
	logger.Warn("login failed password=hunter2", "detail", "password=hunter2")
	out := buf.String()
	if strings.Contains(out, "hunter2") || strings.Count(out, "[REDACTED]") != 2 {
		t.Errorf("text line = %q, want the secret replaced twice", out)
	}
}

func TestHandlerValues(t *testing.T) {
	t.Parallel()
	dsn, err := url.Parse("postgres://app:fromURL@db:5432/app")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		attr slog.Attr
		want any
	}{
		{name: "a string without secrets is unchanged", attr: slog.String("topic", "order.created"), want: "order.created"},
		{name: "a string", attr: slog.String("reason", "Authorization: Bearer abc123"), want: "Authorization: [REDACTED]"},
		{name: "an error", attr: slog.Any("error", fmt.Errorf("dialing: %w", errors.New("token=fromError"))),
			want: "dialing | caused by token=[REDACTED]"},
		{name: "a Stringer", attr: slog.Any("url", dsn), want: "postgres://***@db:5432/app"},
		{name: "a LogValuer is resolved first", attr: slog.Any("v", secretValuer{}), want: "password=[REDACTED]"},
		{name: "a key that names a secret hides a plain value", attr: slog.String("password", "fromKey"), want: "[REDACTED]"},
		{name: "a prefixed secret key", attr: slog.String("db_password", "fromKey"), want: "[REDACTED]"},
		{name: "a camel case secret key", attr: slog.String("apiKey", "fromKey"), want: "[REDACTED]"},
		{name: "a secret key hides a number", attr: slog.Int("pwd", 1234), want: "[REDACTED]"},
		{name: "an empty secret stays empty", attr: slog.String("password", ""), want: ""},
		{name: "a key that only starts like a secret", attr: slog.String("passwordless", "yes"), want: "yes"},
		{name: "a number is unchanged", attr: slog.Int("attempt", 3), want: float64(3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			jsonLogger(&buf).LogAttrs(context.Background(), slog.LevelError, "m", tt.attr)
			line := decodeLine(t, &buf)
			if got := line[tt.attr.Key]; got != tt.want {
				t.Errorf("%s = %#v, want %#v", tt.attr.Key, got, tt.want)
			}
			if strings.Contains(buf.String(), "from") {
				t.Errorf("a secret reached the log: %s", buf.String())
			}
		})
	}
}

func TestHandlerGroupsAndWith(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := jsonLogger(&buf).
		With("static", "token=fromWith").
		WithGroup("req").
		With(slog.Group("auth", slog.String("header", "Bearer abc123def"), slog.String("cookie", "sid=fromCookie")))
	logger.Info("sent", slog.Group("db", slog.String("url", "postgres://u:fromGroup@db/app")))

	out := buf.String()
	if strings.Contains(out, "from") || strings.Contains(out, "abc123def") {
		t.Fatalf("a secret reached the log: %s", out)
	}
	line := decodeLine(t, &buf)
	if got, want := line["static"], "token=[REDACTED]"; got != want {
		t.Errorf("static = %q, want %q", got, want)
	}
	req, _ := line["req"].(map[string]any)
	auth, _ := req["auth"].(map[string]any)
	db, _ := req["db"].(map[string]any)
	if got, want := auth["header"], "Bearer [REDACTED]"; got != want {
		t.Errorf("req.auth.header = %q, want %q", got, want)
	}
	if got, want := auth["cookie"], "[REDACTED]"; got != want {
		t.Errorf("req.auth.cookie = %q, want %q", got, want)
	}
	if got, want := db["url"], "postgres://***@db/app"; got != want {
		t.Errorf("req.db.url = %q, want %q", got, want)
	}
}

func TestHandlerEnabledAndWrapping(t *testing.T) {
	t.Parallel()
	inner := slog.NewJSONHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn})
	h := Handler(inner)
	ctx := context.Background()
	if h.Enabled(ctx, slog.LevelInfo) || !h.Enabled(ctx, slog.LevelWarn) {
		t.Error("Enabled does not follow the wrapped handler's level")
	}
	if Handler(h) != h {
		t.Error("wrapping a redacting handler again adds a second layer")
	}
}

func TestIsSecretKeyMatchesExpression(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`\b` + keyPattern + `$`)
	keys := []string{"", "password", "db_password", "db.password", "passwordless", "apiKey", "x-api-key",
		"my-x-api-key", "stripe.api_key", "token_count", "max_token", "Secret", "ſecret", "pass word", "-token", "token-"}
	for _, k := range keys {
		if got, want := isSecretKey(k), re.MatchString(k); got != want {
			t.Errorf("isSecretKey(%q) = %v, the expression says %v", k, got, want)
		}
	}
}
