package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/alternayte/queuebox/shared/dburl"
	"github.com/alternayte/queuebox/shared/store"
)

// ParseURL parses database.url of a PostgreSQL database: a JDBC URL
// (jdbc:postgresql://h1:5432,h2:5432/db?params) or a native postgres:// or postgresql:// URL,
// [user[:password]@]host[:port][,host[:port]...][/database][?params]. A URL of another dialect
// or scheme is an error that says so.
func ParseURL(raw string) (dburl.URL, error) {
	dialect, rest, native, ok := store.URLScheme(raw)
	switch {
	case !ok:
		return dburl.URL{}, store.URLSchemeError(raw)
	case dialect != store.DialectPostgreSQL:
		return dburl.URL{}, store.URLDialectError(dialect, store.DialectPostgreSQL)
	}
	u := dburl.URL{Dialect: store.DialectPostgreSQL, Native: native}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		if err := u.SetUserInfo(authority[:at]); err != nil {
			return dburl.URL{}, err
		}
		authority = authority[at+1:]
	}
	if authority == "" {
		authority = "localhost"
	}
	for _, h := range strings.Split(authority, ",") {
		host, err := dburl.ParseHost(h, 5432)
		if err != nil {
			return dburl.URL{}, err
		}
		u.Hosts = append(u.Hosts, host)
	}
	path, query, _ := strings.Cut(tail, "?")
	db, err := url.PathUnescape(strings.TrimPrefix(path, "/"))
	if err != nil {
		return dburl.URL{}, fmt.Errorf("has a badly escaped database name: %w", err)
	}
	u.Database = db
	for _, kv := range strings.Split(query, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		name, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err := errors.Join(err1, err2); err != nil {
			return dburl.URL{}, fmt.Errorf("has a badly escaped parameter: %w", err)
		}
		u.AddParam(name, value)
	}
	return u, nil
}

// ConnString returns the connection string that pgx (pgxpool.ParseConfig) takes for
// database.url (raw), database.username (user) and database.password (password):
// postgres://user:password@host:port[,host:port]/database?params, with the credentials
// URL-escaped; an empty user or password takes the one of the URL. The JDBC parameters that
// libpq knows under another name are renamed (ApplicationName, connectTimeout, currentSchema,
// ssl, targetServerType); those without an equivalent are left out (see Params). Errors read
// "database.url ..." and quote no password. The string holds the password: never log it.
func ConnString(raw, user, password string) (string, error) {
	u, err := ParseURL(raw)
	if err != nil {
		return "", fmt.Errorf("database.url %w", err)
	}
	user, password = u.Credentials(user, password)
	hosts := make([]string, len(u.Hosts))
	for i, h := range u.Hosts {
		hosts[i] = h.String()
	}
	out := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: strings.Join(hosts, ","), Path: "/" + u.Database}
	params, _ := Params(u)
	q := make([]string, 0, len(params))
	for _, p := range params {
		q = append(q, url.QueryEscape(p.Name)+"="+url.QueryEscape(p.Value))
	}
	out.RawQuery = strings.Join(q, "&")
	return out.String(), nil
}

// Params maps the parameters of a JDBC PostgreSQL URL to their libpq names. A native URL keeps
// its parameters. It returns the kept parameters and the names of the dropped ones, which
// have no equivalent in pgx.
func Params(u dburl.URL) (kept []dburl.Param, dropped []string) {
	if u.Native {
		return u.Params, nil
	}
	var sslMode, ssl string
	for _, p := range u.Params {
		switch strings.ToLower(p.Name) {
		case "sslmode":
			sslMode = p.Value
		case "ssl":
			ssl = p.Value
		case "sslcert", "sslkey", "sslrootcert", "sslpassword", "options":
			kept = append(kept, dburl.Param{Name: strings.ToLower(p.Name), Value: p.Value})
		case "applicationname":
			kept = append(kept, dburl.Param{Name: "application_name", Value: p.Value})
		case "connecttimeout":
			kept = append(kept, dburl.Param{Name: "connect_timeout", Value: p.Value})
		case "currentschema":
			kept = append(kept, dburl.Param{Name: "search_path", Value: p.Value})
		case "targetservertype":
			if v, ok := targetSessionAttrs[strings.ToLower(p.Value)]; ok {
				kept = append(kept, dburl.Param{Name: "target_session_attrs", Value: v})
			} else {
				dropped = append(dropped, p.Name)
			}
		default:
			dropped = append(dropped, p.Name)
		}
	}
	switch {
	case sslMode != "":
		kept = append(kept, dburl.Param{Name: "sslmode", Value: sslMode})
	case strings.EqualFold(ssl, "true"):
		kept = append(kept, dburl.Param{Name: "sslmode", Value: "verify-full"}) // what pgjdbc does with ssl=true
	case strings.EqualFold(ssl, "false"):
		kept = append(kept, dburl.Param{Name: "sslmode", Value: "disable"})
	}
	return kept, dropped
}

var targetSessionAttrs = map[string]string{
	"any":             "any",
	"primary":         "primary",
	"master":          "primary",
	"secondary":       "standby",
	"slave":           "standby",
	"preferprimary":   "prefer-standby",
	"prefersecondary": "prefer-standby",
	"preferslave":     "prefer-standby",
}
