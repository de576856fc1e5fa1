package store

import (
	"fmt"
	"strings"

	"github.com/alternayte/queuebox/shared/redact"
)

// The schemes of database.url: each dialect driver parses its own URL forms (postgres.ParseURL,
// sqlserver.ParseURL) into a dburl.URL and builds its driver's connection string from it
// (postgres.ConnString, sqlserver.ConnString). The schemes of every dialect are listed here,
// so that a dialect's parser can say which other dialect a URL names.

// The dialect names of the URL schemes (dburl.URL.Dialect), as database.type spells them.
const (
	DialectPostgreSQL = "postgresql"
	DialectSQLServer  = "sqlserver"
)

// urlSchemes maps the schemes of database.url, lower case, to their dialect; native is false
// for the JDBC forms.
var urlSchemes = []struct {
	prefix, dialect string
	native          bool
}{
	{"jdbc:postgresql://", DialectPostgreSQL, false},
	{"postgresql://", DialectPostgreSQL, true},
	{"postgres://", DialectPostgreSQL, true},
	{"jdbc:sqlserver://", DialectSQLServer, false},
	{"sqlserver://", DialectSQLServer, true},
}

// URLScheme returns the dialect that the scheme of a database URL names (in any letter case,
// after blanks are trimmed), the text after the scheme, and whether the URL is a native one
// rather than a JDBC URL. ok is false for another scheme.
func URLScheme(raw string) (dialect, rest string, native, ok bool) {
	s := strings.TrimSpace(raw)
	lower := strings.ToLower(s)
	for _, sc := range urlSchemes {
		if strings.HasPrefix(lower, sc.prefix) {
			return sc.dialect, s[len(sc.prefix):], sc.native, true
		}
	}
	return "", "", false, false
}

// URLSchemeError is the error for a database URL whose scheme names no dialect. It quotes the
// URL with its password masked (redact.URL).
func URLSchemeError(raw string) error {
	return fmt.Errorf("must start with jdbc:postgresql:// or jdbc:sqlserver:// (or be a native postgres:// or sqlserver:// URL), not %q", redact.URL(raw))
}

// URLDialectError is the error for a database URL of the dialect named, read by the driver of
// the dialect want.
func URLDialectError(named, want string) error {
	return fmt.Errorf("names a %s database, but database.type is %s", named, want)
}
