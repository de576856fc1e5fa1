package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/sqlserver"
)

// The parsing of database.url and the connection strings of the drivers belong to the
// dialect drivers (postgres.ParseURL and postgres.ConnString, sqlserver.ParseURL and
// sqlserver.ConnString); this file checks database.url against database.type for the
// validation and keeps the forms that the rest of the configuration reads.

// Host is one host of a database URL: Name is the host name or address, without brackets;
// Port is the one in the URL, or 5432 (PostgreSQL) or 1433 (SQL Server).
type Host = store.URLHost

// Param is one parameter of a database URL.
type Param = store.URLParam

// DatabaseURL is database.url taken apart.
type DatabaseURL struct {
	// Type is the database type that the scheme names.
	Type DatabaseType
	// Native is true for a postgres://, postgresql:// or sqlserver:// URL, false for a JDBC URL.
	Native bool
	// Hosts lists the hosts, in order. A PostgreSQL URL may name several; capture then needs
	// outbox.capture.connection.hostname.
	Hosts []Host
	// Database is the database name, empty when the URL names none.
	Database string
	// Instance is the SQL Server instance name, empty when the URL names none.
	Instance string
	// User is the user name that the URL itself carries, if any. database.username wins.
	User string
	// Password is the password that the URL itself carries, if any. database.password wins.
	Password Secret
	// Params lists the other parameters, in URL order, with their names as written.
	Params []Param
}

// Param returns the value of the parameter name, matched in any letter case.
func (u DatabaseURL) Param(name string) (string, bool) {
	for _, p := range u.Params {
		if strings.EqualFold(p.Name, name) {
			return p.Value, true
		}
	}
	return "", false
}

// storeURL returns u in the form of the dialect drivers.
func (u DatabaseURL) storeURL() store.DatabaseURL {
	return store.DatabaseURL{Dialect: string(u.Type), Native: u.Native, Hosts: u.Hosts, Database: u.Database,
		Instance: u.Instance, User: u.User, Password: u.Password.Reveal(), Params: u.Params}
}

// ParseDatabaseURL parses a JDBC URL (jdbc:postgresql://h1:5432,h2:5432/db?params,
// jdbc:sqlserver://host:1433;databaseName=db;encrypt=true) or a native postgres://,
// postgresql:// or sqlserver:// URL, with the parser of the dialect that its scheme names.
func ParseDatabaseURL(raw string) (DatabaseURL, error) {
	dialect, _, _, ok := store.URLScheme(raw)
	var (
		su  store.DatabaseURL
		err error
	)
	switch {
	case !ok:
		return DatabaseURL{}, store.URLSchemeError(raw)
	case dialect == store.DialectSQLServer:
		su, err = sqlserver.ParseURL(raw)
	default:
		su, err = postgres.ParseURL(raw)
	}
	if err != nil {
		return DatabaseURL{}, err
	}
	u := DatabaseURL{Type: DatabaseType(su.Dialect), Native: su.Native, Hosts: su.Hosts, Database: su.Database,
		Instance: su.Instance, User: su.User, Params: su.Params}
	if su.Password != "" {
		u.Password = NewSecret(su.Password)
	}
	return u, nil
}

// Parsed parses database.url and checks that it matches database.type.
func (d *Database) Parsed() (DatabaseURL, error) {
	u, err := ParseDatabaseURL(d.URL.Reveal())
	if err != nil {
		return DatabaseURL{}, err
	}
	if u.Type != d.Type {
		return DatabaseURL{}, store.URLDialectError(string(u.Type), string(d.Type))
	}
	return u, nil
}

// credentials returns database.username and database.password, or those of the URL when the
// keys are empty.
func (d *Database) credentials(u DatabaseURL) (string, string) {
	return u.storeURL().Credentials(d.Username, d.Password.Reveal())
}

// PgxConnString returns the connection string that pgx takes (postgres.ConnString) for
// database.url, database.username and database.password. The string holds the password:
// never log it.
func (d *Database) PgxConnString() (string, error) {
	if d.Type != PostgreSQL {
		return "", fmt.Errorf("database.type is %s, not postgresql", d.Type)
	}
	if _, err := d.Parsed(); err != nil {
		return "", fmt.Errorf("database.url %s", err)
	}
	return postgres.ConnString(d.URL.Reveal(), d.Username, d.Password.Reveal())
}

// SQLServerURL returns the URL that go-mssqldb takes (sqlserver.ConnString) for database.url,
// database.username and database.password. The URL holds the password: never log it.
func (d *Database) SQLServerURL() (string, error) {
	if d.Type != SQLServer {
		return "", fmt.Errorf("database.type is %s, not sqlserver", d.Type)
	}
	if _, err := d.Parsed(); err != nil {
		return "", fmt.Errorf("database.url %s", err)
	}
	return sqlserver.ConnString(d.URL.Reveal(), d.Username, d.Password.Reveal())
}

// UnsupportedParams returns the names of the JDBC parameters of the URL that the Go drivers have
// no equivalent for, and that PgxConnString and SQLServerURL leave out (postgres.Params,
// sqlserver.Params).
func (u DatabaseURL) UnsupportedParams() []string {
	if u.Type == SQLServer {
		_, dropped := sqlserver.Params(u.storeURL())
		return dropped
	}
	_, dropped := postgres.Params(u.storeURL())
	return dropped
}

// CaptureTarget is the connection that capture uses: database.url with the overrides of
// outbox.capture.connection.
type CaptureTarget struct {
	// Host is the capture host.
	Host string
	// Port is the capture port.
	Port int
	// Database is the database name.
	Database string
	// Username is the capture account.
	Username string
	// Password is the password of the capture account.
	Password Secret
	// Encrypt encrypts the connection (SQL Server only).
	Encrypt bool
	// TrustServerCertificate accepts the server certificate without a check (SQL Server only).
	TrustServerCertificate bool
	// Params are the parameters of database.url that the Go drivers take, for example sslmode.
	Params []Param
}

// CaptureTarget returns the connection of capture. It fails when database.url names more than
// one host and outbox.capture.connection.hostname names none.
func (c *Config) CaptureTarget() (CaptureTarget, error) {
	u, err := c.Database.Parsed()
	if err != nil {
		return CaptureTarget{}, fmt.Errorf("database.url %s", err)
	}
	conn := c.Outbox.Capture.Connection
	if len(u.Hosts) > 1 && conn.Hostname == "" {
		return CaptureTarget{}, errors.New(errCaptureHosts)
	}
	user, pass := c.Database.credentials(u)
	t := CaptureTarget{
		Host:                   u.Hosts[0].Name,
		Port:                   u.Hosts[0].Port,
		Database:               u.Database,
		Username:               user,
		Password:               conn.Password,
		Encrypt:                conn.Encrypt,
		TrustServerCertificate: conn.TrustServerCertificate,
	}
	if conn.Username != "" {
		t.Username = conn.Username
	}
	if conn.Password.IsEmpty() {
		t.Password = NewSecret(pass)
	}
	if conn.Hostname != "" {
		t.Host = conn.Hostname
	}
	if conn.Port != 0 {
		t.Port = conn.Port
	}
	if conn.Database != "" {
		t.Database = conn.Database
	}
	if u.Type == PostgreSQL {
		t.Params, _ = postgres.Params(u.storeURL())
	}
	return t, nil
}

// PgxConnString returns the pgx connection string of the capture target.
func (t CaptureTarget) PgxConnString() string {
	out := url.URL{Scheme: "postgres", User: url.UserPassword(t.Username, t.Password.Reveal()),
		Host: Host{Name: t.Host, Port: t.Port}.String(), Path: "/" + t.Database}
	q := make([]string, 0, len(t.Params))
	for _, p := range t.Params {
		q = append(q, url.QueryEscape(p.Name)+"="+url.QueryEscape(p.Value))
	}
	out.RawQuery = strings.Join(q, "&")
	return out.String()
}

// SQLServerURL returns the go-mssqldb URL of the capture target.
func (t CaptureTarget) SQLServerURL() string {
	return sqlserver.BuildURL(Host{Name: t.Host, Port: t.Port}, "", t.Username, t.Password.Reveal(), t.Database, []Param{
		{Name: "encrypt", Value: strconv.FormatBool(t.Encrypt)},
		{Name: "TrustServerCertificate", Value: strconv.FormatBool(t.TrustServerCertificate)},
	})
}

const errCaptureHosts = "database.url names more than one host; set outbox.capture.connection.hostname (QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAME) to the host that capture reads"

// databaseURLWarnings warns about the JDBC parameters that the Go drivers leave out.
func (c *Config) databaseURLWarnings() []Warning {
	u, err := c.Database.Parsed()
	if err != nil {
		return nil
	}
	var out []Warning
	for _, name := range u.UnsupportedParams() {
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
