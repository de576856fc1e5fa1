package queuebox

import (
	"context"
	"log/slog"
	"sort"

	"github.com/alternayte/queuebox/clients/go/internal/redact"
)

// MaxErrorLength is the largest number of characters (Unicode code points) that Sanitize and
// SanitizeError return, and so the longest last_error that the library writes. A longer text
// is cut and ends in "...[truncated]".
const MaxErrorLength = redact.MaxLength

// Sanitize removes secrets from text with the redaction rules of QueueBox (the rules of the
// server's log lines and last_error, pinned by testdata/redaction/corpus.json): the values of
// secret-bearing keys such as password=, token: or "access_token":"..." become [REDACTED], the
// user information of a URL becomes ***, an Authorization credential after Basic, Bearer,
// Digest, Negotiate or Token becomes [REDACTED], the secret query parameters password, pwd,
// secret and token become ***; the text is cut to MaxErrorLength characters. Only the first
// 2 512 characters of the input are examined. Sanitize is safe for concurrent use.
func Sanitize(text string) string { return redact.String(text) }

// SanitizeError returns the text of err and of the errors it wraps, outermost first, joined as
// "outer | caused by inner", at most five levels deep, passed through Sanitize. A wrapper made
// with fmt.Errorf("reading: %w", err) shows only its own text ("reading"). It returns "" for a
// nil error. This is the text that the library writes to last_error.
func SanitizeError(err error) string { return redact.Error(err) }

// Logger receives the library's log lines: a short message and a map of fields (snake_case
// keys such as "source", "id", "idempotency_key", "attempt", "error"). The library passes
// every message and every string or error field through Sanitize first. The methods are called
// from several goroutines at once and must be safe for concurrent use. Without a Logger the
// library prints nothing. SlogLogger adapts a *slog.Logger.
type Logger interface {
	Info(msg string, fields map[string]any)
	Warn(msg string, fields map[string]any)
	Error(msg string, fields map[string]any)
}

// safeLogger sanitizes every line before it reaches the application's Logger. A nil Logger
// discards the lines.
type safeLogger struct{ l Logger }

func (s safeLogger) info(msg string, fields map[string]any) {
	if s.l != nil {
		s.l.Info(Sanitize(msg), sanitizeFields(fields))
	}
}

func (s safeLogger) warn(msg string, fields map[string]any) {
	if s.l != nil {
		s.l.Warn(Sanitize(msg), sanitizeFields(fields))
	}
}

func (s safeLogger) error(msg string, fields map[string]any) {
	if s.l != nil {
		s.l.Error(Sanitize(msg), sanitizeFields(fields))
	}
}

// sanitizeFields returns a copy of fields with every string passed through Sanitize and every
// error replaced by its SanitizeError text.
func sanitizeFields(fields map[string]any) map[string]any {
	out := make(map[string]any, len(fields))
	for k, v := range fields {
		switch x := v.(type) {
		case string:
			out[k] = Sanitize(x)
		case error:
			out[k] = SanitizeError(x)
		default:
			out[k] = v
		}
	}
	return out
}

// SlogLogger returns a Logger that writes to l, each field as an attribute in the order of
// its key. The lines reach l already sanitized.
func SlogLogger(l *slog.Logger) Logger { return slogLogger{l} }

type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Info(msg string, fields map[string]any) { s.log(slog.LevelInfo, msg, fields) }
func (s slogLogger) Warn(msg string, fields map[string]any) { s.log(slog.LevelWarn, msg, fields) }
func (s slogLogger) Error(msg string, fields map[string]any) {
	s.log(slog.LevelError, msg, fields)
}

func (s slogLogger) log(level slog.Level, msg string, fields map[string]any) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, fields[k]))
	}
	s.l.LogAttrs(context.Background(), level, msg, attrs...)
}
