package config

import (
	"fmt"

	"github.com/alternayte/queuebox/shared/redact"
)

// The grammar of database.url belongs to the dialects (shared/store/postgres,
// shared/store/sqlserver), which the validation asks through Components; this file keeps the
// warnings of database.url and the masking of URLs.

// databaseURLWarnings warns about the JDBC parameters that the Go drivers leave out.
func (c *Config) databaseURLWarnings(comps *Components) []Warning {
	u, ok := comps.databaseURL(&c.Database)
	d, known := comps.dialect(c.Database.Type)
	if !ok || !known || d.UnsupportedParams == nil {
		return nil
	}
	var out []Warning
	for _, name := range d.UnsupportedParams(u) {
		out = append(out, Warning{Key: "database.url", Message: fmt.Sprintf(
			"database.url: the JDBC parameter %s has no equivalent in this implementation and has no effect", name)})
	}
	return out
}

// MaskURL returns raw with its password masked as ***: the password of the user info
// (amqp://user:***@host) and the value of a password or pwd parameter (?password=***,
// ;password=***). Text without a password stays as it is. It is redact.URL, which the dialect
// drivers' URL errors use as well.
func MaskURL(raw string) string {
	return redact.URL(raw)
}
