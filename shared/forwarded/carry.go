package forwarded

import (
	"encoding/base64"
	"sort"
)

// EncodedPrefix starts a header value that is sent as the Base64 text of its bytes: the form
// that the inbox gives a binary header value (spec/27-inbox-table.md).
const EncodedPrefix = "base64:"

// Fault says why a destination cannot carry a header. The zero Fault means that it can.
type Fault uint8

const (
	// Carried is a header that the destination carries as it is.
	Carried Fault = iota
	// BadName is a header whose name the destination's protocol cannot carry: it is left out
	// of a relayed delivery.
	BadName
	// BadValue is a header whose name travels and whose value the destination's protocol
	// cannot carry: a relayed delivery sends the value in its base64: form (Encode).
	BadValue
)

// Rule is what one destination protocol carries of a header: which part of a header cannot
// travel (Check) and why (Reason). Each destination kind has its rule: HTTP, the built-in kind,
// has HTTP; a connector's kind has the one its configuration package gives
// (config.ConnectorSpec.Headers), so that a new protocol's limits live in its connector. The
// zero Rule carries every header.
type Rule struct {
	check  func(name, value string) Fault
	reason func(f Fault) string
}

// NewRule returns the rule whose check says which part of a header cannot travel (a name is
// checked before its value) and whose reason describes a fault for a log line or a
// last_error; a reason names no value.
func NewRule(check func(name, value string) Fault, reason func(f Fault) string) Rule {
	return Rule{check: check, reason: reason}
}

// Check reports whether the rule's protocol carries the header name: value, and if not,
// which part of it cannot travel.
func (r Rule) Check(name, value string) Fault {
	if r.check == nil {
		return Carried
	}
	return r.check(name, value)
}

// Reason describes why the rule's protocol cannot carry a header with fault f. It names no
// value.
func (r Rule) Reason(f Fault) string {
	if f == Carried || r.reason == nil {
		return "it travels as it is"
	}
	return r.reason(f)
}

// BadNameReason is the reason of a name that is not an RFC 9110 token (ValidName).
const BadNameReason = "its name is not a header name (one or more letters, digits and !#$%&'*+-.^_`|~)"

// HTTP is the rule of HTTP: the name must be a token of RFC 9110 (ValidName) and the value
// must not hold a control character other than tab (RFC 9110 field-value), as net/http
// enforces them.
var HTTP = NewRule(func(name, value string) Fault {
	switch {
	case !ValidName(name):
		return BadName
	case !ValidHTTPValue(value):
		return BadValue
	}
	return Carried
}, func(f Fault) string {
	if f == BadName {
		return BadNameReason
	}
	return "its value holds a control character, which an HTTP header value cannot hold (only tab is allowed)"
})

// ValidHTTPValue reports whether v may be the value of an HTTP header field: it holds no
// control character but tab, that is no byte below 0x20 other than 0x09 and no 0x7f (RFC 9110
// field-value, as net/http checks it).
func ValidHTTPValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// Encode returns the base64: form of value: EncodedPrefix and the standard Base64 text of its
// bytes.
func Encode(value string) string {
	return EncodedPrefix + base64.StdEncoding.EncodeToString([]byte(value))
}

// Adjustment is one header of a row that its destination cannot carry as it is.
type Adjustment struct {
	// Name is the header's name as the row spells it.
	Name string
	// Fault is BadName (the header is left out) or BadValue (its value is encoded).
	Fault Fault
}

// Fit returns headers as the rule's protocol can carry them, by the one rule of
// docs/headers.md: a header whose name cannot travel is left out, and a header whose value
// cannot travel is sent with its value in the base64: form. It also returns what it changed,
// in name order. headers is never modified; when nothing changes, Fit returns headers itself
// and no adjustment.
func (r Rule) Fit(headers map[string]string) (map[string]string, []Adjustment) {
	var adj []Adjustment
	for name, value := range headers {
		if f := r.Check(name, value); f != Carried {
			adj = append(adj, Adjustment{Name: name, Fault: f})
		}
	}
	if len(adj) == 0 {
		return headers, nil
	}
	sort.Slice(adj, func(i, j int) bool { return adj[i].Name < adj[j].Name })
	out := make(map[string]string, len(headers))
	for name, value := range headers {
		out[name] = value
	}
	for _, a := range adj {
		if a.Fault == BadName {
			delete(out, a.Name)
		} else {
			out[a.Name] = Encode(out[a.Name])
		}
	}
	return out, adj
}
