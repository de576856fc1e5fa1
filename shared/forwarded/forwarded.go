// Package forwarded decides which headers of a relayed outbox row a destination sends.
//
// The relay copies the headers that a webhook sender or a broker producer gave a message onto
// the outbox row it writes. Those headers come from outside QueueBox, so they get a stricter
// treatment than the headers that an application writes on its own outbox rows
// (docs/headers.md):
//
//   - a hop-by-hop or framing header (Host, Connection, Content-Length, Transfer-Encoding, TE,
//     Upgrade, Keep-Alive, Trailer, Proxy-*, ...) is never forwarded;
//   - a received header never replaces a header that the destination sets itself: its auth
//     header, its static headers and its standard headers (spec/25-headers.md). It is
//     dropped instead;
//   - a source with forwardHeaders forwards only the received headers it lists.
//
// The delivery happens later, after routing and possibly after a replay, and only sees the
// outbox row. A row is treated as relayed when its headers carry the relay's marker, the
// x-inbox-id and x-source headers, which the relay writes on every row and which replace a
// received header of the same name (so a sender cannot remove them). An application row that
// sets both headers itself gets the stricter treatment too.
//
// The package also holds what each destination kind's protocol can carry in a header (Check,
// Fit; carry.go): before every publish, the poller leaves out a header of a relayed row whose
// name cannot travel and sends one whose value cannot travel in the base64: form, and makes an
// application row with such a header dead at once (docs/headers.md).
package forwarded

import "strings"

// The marker headers that the relay writes on every outbox row (spec/25, "Headers that the
// relay adds").
const (
	// MarkerInboxID carries the id of the inbox row.
	MarkerInboxID = "x-inbox-id"
	// MarkerSource carries the source name.
	MarkerSource = "x-source"
)

// IsRelayed reports whether headers carry the relay's marker: both x-inbox-id and x-source,
// in any letter case.
func IsRelayed(headers map[string]string) bool {
	if len(headers) < 2 {
		return false
	}
	var inboxID, source bool
	for name := range headers {
		switch {
		case strings.EqualFold(name, MarkerInboxID):
			inboxID = true
		case strings.EqualFold(name, MarkerSource):
			source = true
		}
	}
	return inboxID && source
}

// hopByHop are the lower-case names of the hop-by-hop and framing headers: they describe one
// connection or the body as the sender framed it, never the message QueueBox sends.
var hopByHop = map[string]bool{
	"connection":        true,
	"keep-alive":        true,
	"te":                true,
	"trailer":           true,
	"transfer-encoding": true,
	"upgrade":           true,
	"host":              true,
	"content-length":    true,
	"content-encoding":  true,
	"expect":            true,
	"http2-settings":    true,
}

// IsHopByHop reports whether name, in any letter case, is a hop-by-hop or framing header:
// Connection, Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade, Host, Content-Length,
// Content-Encoding, Expect, HTTP2-Settings, or any name that starts with Proxy-. A received
// header of such a name is never forwarded.
func IsHopByHop(name string) bool {
	lower := strings.ToLower(name)
	return hopByHop[lower] || strings.HasPrefix(lower, "proxy-")
}

// Guard holds the header names that one destination sets itself, and drops a received header
// that would replace or duplicate one of them. The zero Guard drops the hop-by-hop headers
// only. A Guard is safe for concurrent use once built.
type Guard struct {
	names    map[string]bool // lower case
	prefixes []string        // lower case
}

// NewGuard returns a Guard that protects names, in any letter case: the standard, static and
// auth headers of a destination.
func NewGuard(names ...string) Guard {
	g := Guard{names: make(map[string]bool, len(names))}
	for _, n := range names {
		if n != "" {
			g.names[strings.ToLower(n)] = true
		}
	}
	return g
}

// WithPrefix returns a copy of g that also protects every name that starts with prefix, in
// any letter case (the reserved Nats- headers, for example).
func (g Guard) WithPrefix(prefix string) Guard {
	g.prefixes = append(g.prefixes[:len(g.prefixes):len(g.prefixes)], strings.ToLower(prefix))
	return g
}

// Drops reports whether a received header named name must not be forwarded: it is a
// hop-by-hop or framing header, or the destination sets a header of that name itself.
func (g Guard) Drops(name string) bool {
	if IsHopByHop(name) {
		return true
	}
	lower := strings.ToLower(name)
	if g.names[lower] {
		return true
	}
	for _, p := range g.prefixes {
		if strings.HasPrefix(lower, p) {
			return true
		}
	}
	return false
}

// ValidName reports whether name is a non-empty HTTP token (RFC 9110, section 5.1), the form
// of a header name that may travel in an HTTP request.
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
