package inbox

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/alternayte/queuebox/shared/forwarded"
)

// CorrelationHeader is the request and response header of the correlation identifier.
const CorrelationHeader = "X-Correlation-Id"

// correlationKey is CorrelationHeader as requestHeaders names it.
const correlationKey = "x-correlation-id"

// MaxCorrelationIDLength is the largest correlation identifier that QueueBox keeps, in
// characters (the correlation_id column is VARCHAR(128) / NVARCHAR(128)).
const MaxCorrelationIDLength = 128

// alwaysExcluded are the credential headers that no inbox row holds, whatever the auth block.
var alwaysExcluded = []string{"authorization", "proxy-authorization", "cookie"}

// requestHeaders returns the request headers as one value per name: the name in lower case,
// the last value of a repeated name. The Host header, which net/http keeps apart from the
// other headers, is included as host. A NUL character is removed from a name, because
// PostgreSQL refuses it in a JSON document (net/http refuses such a name, but a Lambda event is
// not parsed by net/http); a value keeps its bytes, and encodeHeaders stores one that holds a
// NUL character in its base64: form.
func requestHeaders(r *http.Request) map[string]string {
	m := make(map[string]string, len(r.Header)+1)
	if r.Host != "" {
		m["host"] = r.Host
	}
	for name, values := range r.Header {
		if len(values) == 0 {
			continue
		}
		v := values[len(values)-1]
		if strings.IndexByte(name, 0) >= 0 {
			name = strings.ReplaceAll(name, "\x00", "")
		}
		m[strings.ToLower(name)] = v
	}
	return m
}

// encodeHeaders encodes the headers as a JSON object without HTML escapes (the object of the
// headers column). A value is stored as StoredHeaderValue makes it.
func encodeHeaders(m map[string]string) (json.RawMessage, error) {
	names := make([]string, 0, len(m))
	size := 2
	for name, v := range m {
		names = append(names, name)
		size += len(name) + len(v) + 6
	}
	slices.Sort(names)
	out := make([]byte, 0, size)
	out = append(out, '{')
	for i, name := range names {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendJSONString(out, name)
		out = append(out, ':')
		out = appendJSONString(out, StoredHeaderValue(m[name]))
	}
	return append(out, '}'), nil
}

// StoredHeaderValue returns a received header value as the headers column holds it: the value
// itself when it is UTF-8 text without a NUL character, and otherwise its base64: form
// (forwarded.Encode: the prefix and the standard Base64 text of its bytes), the form that a
// delivery also uses for a value that its destination cannot carry. A JSON document of the database cannot hold U+0000, and
// removing it would lose the value and make different values equal (the big-endian int 42,
// 00 00 00 2a, would read "*"); a value that is not UTF-8 would lose its bytes to U+FFFD. Other
// control characters stay text; what a destination receives of them is the delivery's rule
// (docs/headers.md).
func StoredHeaderValue(v string) string {
	if strings.IndexByte(v, 0) < 0 && utf8.ValidString(v) {
		return v
	}
	return forwarded.Encode(v)
}

// CleanCorrelationID returns a received correlation identifier as QueueBox keeps it: control
// characters and bytes that are not UTF-8 removed, then cut to at most 128 characters. A
// character is a UTF-16 code unit, as in SQL Server's NVARCHAR(128) and in the original
// implementation, and a cut never splits a character. An empty result means that QueueBox
// generates a new identifier.
func CleanCorrelationID(s string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if (r == utf8.RuneError && size <= 1) || unicode.IsControl(r) {
			continue
		}
		l := utf16.RuneLen(r)
		if l < 0 {
			continue
		}
		if n+l > MaxCorrelationIDLength {
			break
		}
		n += l
		b.WriteRune(r)
	}
	return b.String()
}

// correlationID returns the cleaned received identifier, or a new UUID.
func correlationID(received string) string {
	if id := CleanCorrelationID(received); id != "" {
		return id
	}
	return uuid.NewString()
}
