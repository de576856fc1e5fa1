// Package deadletter groups dead rows: Fingerprint reduces a last_error to the shape that the
// same failure leaves on every row, so that the console and the CLI count dead letters per
// destination and cause instead of per row.
package deadletter

import (
	"regexp"
	"strings"
)

// MaxFingerprintLen is the longest fingerprint; a longer normalised error is cut there.
const MaxFingerprintLen = 200

// The replacements, applied in order: the more specific shapes first, so that a UUID or a
// time is not first broken into numbers.
var replacements = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "<uuid>"},
	{regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?`), "<time>"},
	{regexp.MustCompile(`(?i)\b[0-9a-f]{16,}\b`), "<hex>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ms|s|µs|ns|m|h)\b`), "<duration>"},
	{regexp.MustCompile(`\d+`), "<n>"},
	{regexp.MustCompile(`\s+`), " "},
}

// Fingerprint returns last_error with ids, times, long hexadecimal tokens, durations and
// numbers replaced by placeholders and white space collapsed, at most MaxFingerprintLen bytes
// (cut on a character boundary). HTTP status codes become <n> too, so "HTTP 503" and "HTTP
// 500" share a group only with the rest of their text. An empty error is "(no error text)".
func Fingerprint(lastError string) string {
	s := strings.TrimSpace(lastError)
	if s == "" {
		return "(no error text)"
	}
	for _, r := range replacements {
		s = r.re.ReplaceAllString(s, r.with)
	}
	if len(s) > MaxFingerprintLen {
		cut := MaxFingerprintLen
		for cut > 0 && !isBoundary(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// isBoundary reports whether b starts a UTF-8 character.
func isBoundary(b byte) bool { return b&0xC0 != 0x80 }
