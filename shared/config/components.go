package config

import (
	"errors"
	"strings"

	"github.com/alternayte/queuebox/shared/dburl"
)

// Components is what the validation asks of the components that own a rule, so that this
// package links none of them (no database driver, no connector): the database dialects (the
// values of database.type, the grammar of database.url, the capture mode of each), the
// connector kinds of destinations and sources (their blocks) and the rules that only a
// destination's connector knows. The composition root, shared/service,
// fills it from the dialect table and the connectors (service.Components); `queuebox config
// check` and every start path load with that one value, so that they refuse the same
// configurations with the same text.
type Components struct {
	// Dialects lists the database dialects, in the order that the error of database.type
	// names them.
	Dialects []Dialect
	// ParseDatabaseURL parses database.url with the parser of the dialect that its scheme
	// names. Its error says why the URL does not parse and quotes no password.
	ParseDatabaseURL func(raw string) (dburl.URL, error)
	// Destinations maps a destination kind to the rules that its connector owns. A kind
	// without an entry has none.
	Destinations map[DestinationKind]DestinationRules
	// Connectors lists the connector kinds beside the built-in http, in the order that the
	// loader tries them: the keys, defaults, checks and bounds of their destination and
	// source blocks.
	Connectors []ConnectorSpec
}

// Dialect is what the validation knows of one database dialect.
type Dialect struct {
	// Name is the value of database.type that selects the dialect.
	Name DatabaseType
	// CaptureMode is the outbox.capture.mode of the dialect's change data capture; empty when
	// the dialect has none.
	CaptureMode CaptureMode
	// ClaimLock says that the dialect offers outbox.claimMode lock.
	ClaimLock bool
	// UnsupportedParams returns the names of the parameters of a URL of the dialect that its
	// driver leaves out; each one is a warning.
	UnsupportedParams func(u dburl.URL) []string
}

// DestinationRules are the rules of one destination kind that its connector owns.
type DestinationRules struct {
	// SigningKey decodes one standard-webhooks secret of signing.secrets as the publisher
	// does; its error never holds the secret. Nil: a destination of the kind signs nothing,
	// and a signing block on it is refused.
	SigningKey func(secret string) ([]byte, error)
	// MaxSigningSecrets is the most secrets of one standard-webhooks signing block.
	MaxSigningSecrets int
}

// errNoComponents is the error of a Load without LoadOptions.Components.
var errNoComponents = errors.New("config: LoadOptions.Components is not set; the composition root fills it (service.Load, service.Components)")

// dialectNames returns the values of database.type, in order.
func (c *Components) dialectNames() []string {
	out := make([]string, len(c.Dialects))
	for i, d := range c.Dialects {
		out[i] = string(d.Name)
	}
	return out
}

// dialect returns the dialect named by database.type.
func (c *Components) dialect(name DatabaseType) (Dialect, bool) {
	for _, d := range c.Dialects {
		if d.Name == name {
			return d, true
		}
	}
	return Dialect{}, false
}

// captureDialect returns the dialect whose change data capture is mode.
func (c *Components) captureDialect(mode CaptureMode) (Dialect, bool) {
	for _, d := range c.Dialects {
		if d.CaptureMode != "" && d.CaptureMode == mode {
			return d, true
		}
	}
	return Dialect{}, false
}

// databaseURL parses database.url and reports whether it names the dialect of database.type.
func (c *Components) databaseURL(d *Database) (dburl.URL, bool) {
	u, err := c.ParseDatabaseURL(d.URL.Reveal())
	return u, err == nil && u.Dialect == string(d.Type)
}

// captureModes returns the outbox.capture.mode of every dialect that has change data capture,
// in the order of the dialects.
func (c *Components) captureModes() []string {
	var out []string
	for _, d := range c.Dialects {
		if d.CaptureMode != "" {
			out = append(out, string(d.CaptureMode))
		}
	}
	return out
}

// hostsAndDatabase returns host:port[,host:port...]/database of a parsed URL: what the start
// log shows of database.url, without credentials.
func hostsAndDatabase(u dburl.URL) string {
	hosts := make([]string, len(u.Hosts))
	for i, h := range u.Hosts {
		hosts[i] = h.String()
	}
	return strings.Join(hosts, ",") + "/" + u.Database
}
