package postgres

import (
	"net/url"
	"strings"

	"github.com/alternayte/queuebox/shared/store"
)

// Dialect is PostgreSQL's line of the dialect table (shared/store/dialect): database.type
// postgresql, the schema public, and change data capture by logical replication
// (outbox.capture.mode postgres-logical, shared/store/postgres/logical).
var Dialect = store.Dialect{
	Name:               store.DialectPostgreSQL,
	ParseURL:           ParseURL,
	Params:             Params,
	ConnString:         ConnString,
	EndpointConnString: EndpointConnString,
	Open:               Open,
	OpenHealth:         OpenHealth,
	DefaultSchema:      "public",
	CaptureMode:        "postgres-logical",
	ClaimLock:          true,
}

// EndpointConnString returns the pgx connection string of an endpoint:
// postgres://user:password@host:port/database?params. It holds the password: never log it.
func EndpointConnString(e store.Endpoint) string {
	out := url.URL{Scheme: "postgres", User: url.UserPassword(e.User, e.Password), Host: e.Host.String(), Path: "/" + e.Database}
	q := make([]string, 0, len(e.Params))
	for _, p := range e.Params {
		q = append(q, url.QueryEscape(p.Name)+"="+url.QueryEscape(p.Value))
	}
	out.RawQuery = strings.Join(q, "&")
	return out.String()
}
