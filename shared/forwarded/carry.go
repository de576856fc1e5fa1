package forwarded

import (
	"encoding/base64"
	"sort"
	"strings"
)

// The destination kinds whose protocol limits the headers it carries: the destination_type
// label of each publisher (webhook.Type, rabbitmq.Type, kafka.Type, nats.Type). Any other kind
// carries every header.
const (
	KindHTTP     = "http"
	KindRabbitMQ = "rabbitmq"
	KindKafka    = "kafka"
	KindNATS     = "nats"
)

// MaxAMQPNameBytes is the longest header name that an AMQP 0-9-1 table holds: a key is a
// short string, one length octet and at most 255 bytes.
const MaxAMQPNameBytes = 255

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

// Check reports whether a destination of kind carries the header name: value, and if not,
// which part of it cannot travel. A name is checked before its value.
//
//   - http and nats: the name must be a token of RFC 9110 (ValidName), as net/http and the
//     NATS client require. An HTTP value must not hold a control character other than tab
//     (RFC 9110 field-value, as net/http enforces it); a NATS value must not hold CR or LF,
//     which the NATS client turns into spaces (its header block is line based).
//   - rabbitmq: the name must be at most MaxAMQPNameBytes bytes; any value travels.
//   - kafka, and any other kind: every header travels.
func Check(kind, name, value string) Fault {
	switch kind {
	case KindHTTP:
		if !ValidName(name) {
			return BadName
		}
		if !ValidHTTPValue(value) {
			return BadValue
		}
	case KindNATS:
		if !ValidName(name) {
			return BadName
		}
		if strings.ContainsAny(value, "\r\n") {
			return BadValue
		}
	case KindRabbitMQ:
		if len(name) > MaxAMQPNameBytes {
			return BadName
		}
	}
	return Carried
}

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

// Reason describes, for a log line or a last_error, why a destination of kind cannot carry a
// header with fault f. It names no value.
func Reason(kind string, f Fault) string {
	switch {
	case f == BadName && kind == KindRabbitMQ:
		return "its name is longer than 255 bytes, the most that an AMQP header name holds"
	case f == BadName:
		return "its name is not a header name (one or more letters, digits and !#$%&'*+-.^_`|~)"
	case f == BadValue && kind == KindNATS:
		return "its value holds a CR or LF character, which a NATS header value cannot hold"
	case f == BadValue:
		return "its value holds a control character, which an HTTP header value cannot hold (only tab is allowed)"
	}
	return "it travels as it is"
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

// Fit returns headers as a destination of kind can carry them, by the one rule of
// docs/headers.md: a header whose name cannot travel is left out, and a header whose value
// cannot travel is sent with its value in the base64: form. It also returns what it changed,
// in name order. headers is never modified; when nothing changes, Fit returns headers itself
// and no adjustment.
func Fit(kind string, headers map[string]string) (map[string]string, []Adjustment) {
	var adj []Adjustment
	for name, value := range headers {
		if f := Check(kind, name, value); f != Carried {
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
