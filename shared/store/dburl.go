package store

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/alternayte/queuebox/shared/redact"
)

// The dialect-neutral pieces of database.url: each dialect driver parses its own URL forms
// (postgres.ParseURL, sqlserver.ParseURL) into a DatabaseURL and builds its driver's
// connection string from it (postgres.ConnString, sqlserver.ConnString).

// The dialect names of the URL schemes (DatabaseURL.Dialect), as database.type spells them.
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

// URLHost is one host of a database URL.
type URLHost struct {
	// Name is the host name or address, without brackets.
	Name string
	// Port is the port: the one in the URL, or the dialect's default (5432, 1433).
	Port int
}

// String returns host:port, with brackets around an IPv6 address.
func (h URLHost) String() string {
	return net.JoinHostPort(h.Name, strconv.Itoa(h.Port))
}

// URLParam is one parameter of a database URL.
type URLParam struct {
	Name  string
	Value string
}

// DatabaseURL is database.url taken apart by its dialect's parser. Password is the password
// that the URL carries: never log it.
type DatabaseURL struct {
	// Dialect is the dialect that the scheme names (DialectPostgreSQL, DialectSQLServer).
	Dialect string
	// Native is true for a postgres://, postgresql:// or sqlserver:// URL, false for a JDBC URL.
	Native bool
	// Hosts lists the hosts, in order.
	Hosts []URLHost
	// Database is the database name, empty when the URL names none.
	Database string
	// Instance is the SQL Server instance name, empty when the URL names none.
	Instance string
	// User is the user name that the URL itself carries, if any.
	User string
	// Password is the password that the URL itself carries, if any.
	Password string
	// Params lists the other parameters, in URL order, with their names as written.
	Params []URLParam
}

// SetUserInfo sets User and Password from the percent-encoded user[:password] of a URL.
func (u *DatabaseURL) SetUserInfo(info string) error {
	user, pass, hasPass := strings.Cut(info, ":")
	var err error
	if u.User, err = url.PathUnescape(user); err != nil {
		return fmt.Errorf("has a badly escaped user name: %w", err)
	}
	if hasPass {
		p, err := url.PathUnescape(pass)
		if err != nil {
			return errors.New("has a badly escaped password")
		}
		u.Password = p
	}
	return nil
}

// AddParam records a parameter; user and password (any letter case) go to User and Password.
func (u *DatabaseURL) AddParam(name, value string) {
	switch strings.ToLower(name) {
	case "user":
		u.User = value
	case "password":
		u.Password = value
	default:
		u.Params = append(u.Params, URLParam{Name: name, Value: value})
	}
}

// Credentials returns user and password, or those of the URL when they are empty.
func (u DatabaseURL) Credentials(user, password string) (string, string) {
	if user == "" {
		user = u.User
	}
	if password == "" {
		password = u.Password
	}
	return user, password
}

// ErrURLPort refuses a port that is not a number from 1 to 65535. It quotes no part of the
// URL: the text where a port is expected can be a piece of a password that holds a /, ? or ;
// (user:Pa55/word@db reads as host "user" and port "Pa55").
var ErrURLPort = errors.New("has a port that is not a number from 1 to 65535 (a password that holds /, ?, ; or @ must be percent-encoded, or given in database.password)")

// ParseURLHost parses host, host:port, [v6] or [v6]:port; defaultPort is the port of a host
// without one.
func ParseURLHost(s string, defaultPort int) (URLHost, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return URLHost{}, errors.New("names an empty host")
	}
	name, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return URLHost{}, errors.New("has an unclosed [ in a host")
		}
		name, port = s[1:end], strings.TrimPrefix(s[end+1:], ":")
	case strings.Count(s, ":") == 1:
		name, port, _ = strings.Cut(s, ":")
	}
	h := URLHost{Name: name, Port: defaultPort}
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return URLHost{}, ErrURLPort
		}
		h.Port = p
	}
	if h.Name == "" {
		return URLHost{}, errors.New("names an empty host")
	}
	return h, nil
}
