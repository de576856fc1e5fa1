package queuebox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSanitizeCorpus runs the shared redaction corpus, which the server and every pull-client
// library pass.
func TestSanitizeCorpus(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../testdata/redaction/corpus.json")
	if err != nil {
		t.Fatalf("reading the corpus: %v", err)
	}
	var cases []struct{ Name, Input, Want string }
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatalf("decoding the corpus: %v", err)
	}
	if len(cases) < 60 {
		t.Fatalf("the corpus has %d cases, want at least 60", len(cases))
	}
	for _, c := range cases {
		if got := Sanitize(c.Input); got != c.Want {
			t.Errorf("%s:\n got: %q\nwant: %q", c.Name, got, c.Want)
		}
	}
}

func TestSanitizeError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"plain", errors.New("downstream unavailable"), "downstream unavailable"},
		{"wrapped", fmt.Errorf("calling the payment service: %w", io.ErrUnexpectedEOF), "calling the payment service | caused by unexpected EOF"},
		{"secret in the cause", fmt.Errorf("connecting: %w", errors.New("dial postgres://app:hunter2@db:5432/app: refused")),
			"connecting | caused by dial postgres://***@db:5432/app: refused"},
		{"long", errors.New(strings.Repeat("é", 3000)), strings.Repeat("é", MaxErrorLength-14) + "...[truncated]"},
	}
	for _, tt := range tests {
		if got := SanitizeError(tt.err); got != tt.want {
			t.Errorf("%s: SanitizeError() = %q, want %q", tt.name, got, tt.want)
		}
	}
	if n := utf8.RuneCountInString(SanitizeError(errors.New(strings.Repeat("x", 5000)))); n != MaxErrorLength {
		t.Errorf("a long error gives %d characters, want %d", n, MaxErrorLength)
	}
}

// TestLoggerSanitizes checks that the message, string fields and error fields of a log line
// are redacted before they reach the application's Logger, and that other values pass.
func TestLoggerSanitizes(t *testing.T) {
	t.Parallel()
	var got struct {
		msg    string
		fields map[string]any
	}
	l := safeLogger{loggerFunc(func(msg string, fields map[string]any) { got.msg, got.fields = msg, fields })}
	l.warn("calling https://u:p@example.com/?token=abc", map[string]any{
		"error":   errors.New("password=hunter2"),
		"key":     "Bearer abcdefghijklmnop1234",
		"attempt": 3,
	})
	if got.msg != "calling https://***@example.com/?token=***" {
		t.Errorf("message = %q", got.msg)
	}
	if got.fields["error"] != "password=[REDACTED]" || got.fields["key"] != "Bearer [REDACTED]" || got.fields["attempt"] != 3 {
		t.Errorf("fields = %v", got.fields)
	}
	safeLogger{}.error("no logger", nil) // prints nothing, does not panic
}

func TestSlogLogger(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	opts := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	l := safeLogger{SlogLogger(slog.New(slog.NewTextHandler(&b, opts)))}
	l.warn("retrying", map[string]any{"source": "orders", "error": errors.New("token=abc"), "attempt": 2})
	if want := "level=WARN msg=retrying attempt=2 error=\"token=[REDACTED]\" source=orders\n"; b.String() != want {
		t.Errorf("slog line = %q, want %q", b.String(), want)
	}
}

type loggerFunc func(msg string, fields map[string]any)

func (f loggerFunc) Info(msg string, fields map[string]any)  { f(msg, fields) }
func (f loggerFunc) Warn(msg string, fields map[string]any)  { f(msg, fields) }
func (f loggerFunc) Error(msg string, fields map[string]any) { f(msg, fields) }
