package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler wraps h so that no secret that the rules recognise reaches it. Every process builds
// its logger on it: slog.New(redact.Handler(slog.NewJSONHandler(os.Stderr, nil))).
//
// Before a record reaches h, and before attributes reach h.WithAttrs:
//   - the message and every string value pass through String;
//   - an error value becomes the string of Error (its chain, redacted);
//   - a value that implements fmt.Stringer becomes its redacted String() text, because a
//     *url.URL, for one, prints its password;
//   - the value of an attribute whose key names a secret (password, db_password, apiKey,
//     client.secret, ... as in rule 2 of the package documentation) becomes [REDACTED] whatever
//     its kind, unless it is an empty string;
//   - groups are redacted recursively; a slog.LogValuer is resolved first.
//
// Keys and values of other kinds (numbers, times, maps, structs) pass unchanged. The returned
// handler is safe for concurrent use when h is. h must not be nil.
func Handler(h slog.Handler) slog.Handler {
	if r, ok := h.(*handler); ok {
		return r
	}
	return &handler{next: h}
}

// handler is the slog.Handler that Handler returns.
type handler struct {
	next slog.Handler
}

// Enabled reports whether the wrapped handler handles records of the level.
func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle passes a redacted copy of r to the wrapped handler.
func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	if n := r.NumAttrs(); n > 0 {
		attrs := make([]slog.Attr, 0, n)
		r.Attrs(func(a slog.Attr) bool {
			attrs = append(attrs, redactAttr(a))
			return true
		})
		out.AddAttrs(attrs...)
	}
	return h.next.Handle(ctx, out)
}

// WithAttrs returns a handler whose wrapped handler holds the redacted attrs.
func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &handler{next: h.next.WithAttrs(redactAttrs(attrs))}
}

// WithGroup returns a handler whose wrapped handler opens the group name.
func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name)}
}

// redactAttrs returns attrs with every attribute redacted.
func redactAttrs(attrs []slog.Attr) []slog.Attr {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = redactAttr(a)
	}
	return out
}

// redactAttr returns a with its value redacted as Handler describes.
func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(redactAttrs(v.Group())...)}
	}
	if isSecretKey(a.Key) {
		if v.Kind() == slog.KindString && v.String() == "" {
			return slog.Attr{Key: a.Key, Value: v}
		}
		return slog.String(a.Key, redacted)
	}
	switch v.Kind() {
	case slog.KindString:
		s := v.String()
		if r := String(s); r != s {
			return slog.String(a.Key, r)
		}
		return slog.Attr{Key: a.Key, Value: v}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, Error(x))
		case fmt.Stringer:
			return slog.String(a.Key, String(stringerText(x)))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// stringerText returns x.String(), or a placeholder when that method panics.
func stringerText(x fmt.Stringer) (text string) {
	defer func() {
		if r := recover(); r != nil {
			text = "!PANIC in String method"
		}
	}()
	return x.String()
}

// isSecretKey reports whether an attribute key names a secret: it ends, on a word boundary,
// with a secret-bearing key of rule 2 and its optional prefix (password, db_password,
// client.secret, apiKey).
func isSecretKey(key string) bool {
	return key != "" && isWord(key[len(key)-1]) && hasKeyEnding(key) && keyStart(key, 0, len(key)) >= 0
}
