package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Host is one host of a database URL.
type Host struct {
	// Name is the host name or address, without brackets.
	Name string
	// Port is the port: the one in the URL, or 5432 (PostgreSQL) or 1433 (SQL Server).
	Port int
}

// String returns host:port, with brackets around an IPv6 address.
func (h Host) String() string {
	return net.JoinHostPort(h.Name, strconv.Itoa(h.Port))
}

// Param is one parameter of a database URL.
type Param struct {
	Name  string
	Value string
}

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

// ParseDatabaseURL parses a JDBC URL (jdbc:postgresql://h1:5432,h2:5432/db?params,
// jdbc:sqlserver://host:1433;databaseName=db;encrypt=true) or a native postgres://,
// postgresql:// or sqlserver:// URL.
func ParseDatabaseURL(raw string) (DatabaseURL, error) {
	s := strings.TrimSpace(raw)
	lower := strings.ToLower(s)
	switch {
	case strings.HasPrefix(lower, "jdbc:postgresql://"):
		return parsePostgresURL(s[len("jdbc:postgresql://"):], false)
	case strings.HasPrefix(lower, "postgresql://"):
		return parsePostgresURL(s[len("postgresql://"):], true)
	case strings.HasPrefix(lower, "postgres://"):
		return parsePostgresURL(s[len("postgres://"):], true)
	case strings.HasPrefix(lower, "jdbc:sqlserver://"):
		return parseJDBCSQLServerURL(s[len("jdbc:sqlserver://"):])
	case strings.HasPrefix(lower, "sqlserver://"):
		return parseNativeSQLServerURL(s)
	}
	return DatabaseURL{}, fmt.Errorf("must start with jdbc:postgresql:// or jdbc:sqlserver:// (or be a native postgres:// or sqlserver:// URL), not %q", MaskURL(raw))
}

// parsePostgresURL parses what follows the scheme of a PostgreSQL URL:
// [user[:password]@]host[:port][,host[:port]...][/database][?params].
func parsePostgresURL(rest string, native bool) (DatabaseURL, error) {
	u := DatabaseURL{Type: PostgreSQL, Native: native}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		if err := u.setUserInfo(authority[:at]); err != nil {
			return DatabaseURL{}, err
		}
		authority = authority[at+1:]
	}
	if authority == "" {
		authority = "localhost"
	}
	for _, h := range strings.Split(authority, ",") {
		host, err := parseHost(h, 5432)
		if err != nil {
			return DatabaseURL{}, err
		}
		u.Hosts = append(u.Hosts, host)
	}
	path, query, _ := strings.Cut(tail, "?")
	db, err := url.PathUnescape(strings.TrimPrefix(path, "/"))
	if err != nil {
		return DatabaseURL{}, fmt.Errorf("has a badly escaped database name: %w", err)
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
			return DatabaseURL{}, fmt.Errorf("has a badly escaped parameter: %w", err)
		}
		u.addParam(name, value)
	}
	return u, nil
}

func (u *DatabaseURL) setUserInfo(info string) error {
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
		u.Password = NewSecret(p)
	}
	return nil
}

// addParam records a parameter; user and password go to User and Password.
func (u *DatabaseURL) addParam(name, value string) {
	switch strings.ToLower(name) {
	case "user":
		u.User = value
	case "password":
		u.Password = NewSecret(value)
	default:
		u.Params = append(u.Params, Param{Name: name, Value: value})
	}
}

// errPort refuses a port that is not a number from 1 to 65535. It quotes no part of the URL:
// the text where a port is expected can be a piece of a password that holds a /, ? or ;
// (user:Pa55/word@db reads as host "user" and port "Pa55").
var errPort = errors.New("has a port that is not a number from 1 to 65535 (a password that holds /, ?, ; or @ must be percent-encoded, or given in database.password)")

// parseHost parses host, host:port, [v6] or [v6]:port.
func parseHost(s string, defaultPort int) (Host, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Host{}, errors.New("names an empty host")
	}
	name, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Host{}, errors.New("has an unclosed [ in a host")
		}
		name, port = s[1:end], strings.TrimPrefix(s[end+1:], ":")
	case strings.Count(s, ":") == 1:
		name, port, _ = strings.Cut(s, ":")
	}
	h := Host{Name: name, Port: defaultPort}
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return Host{}, errPort
		}
		h.Port = p
	}
	if h.Name == "" {
		return Host{}, errors.New("names an empty host")
	}
	return h, nil
}

// parseJDBCSQLServerURL parses what follows jdbc:sqlserver://:
// [host[\instance][:port]][;property=value...]. A value in braces may hold a ;.
func parseJDBCSQLServerURL(rest string) (DatabaseURL, error) {
	u := DatabaseURL{Type: SQLServer}
	hostPart, props, _ := strings.Cut(rest, ";")
	var params []Param
	for props != "" {
		var kv string
		kv, props = nextSQLServerProperty(props)
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(v, "{") && strings.HasSuffix(v, "}") {
			v = strings.ReplaceAll(v[1:len(v)-1], "}}", "}")
		}
		params = append(params, Param{Name: strings.TrimSpace(k), Value: v})
	}
	port := 0
	for _, p := range params {
		switch strings.ToLower(p.Name) {
		case "databasename", "database":
			u.Database = p.Value
		case "servername", "server":
			if hostPart == "" {
				hostPart = p.Value
			}
		case "instancename":
			u.Instance = p.Value
		case "portnumber", "port":
			n, err := strconv.Atoi(p.Value)
			if err != nil || n < 1 || n > 65535 {
				return DatabaseURL{}, errPort
			}
			port = n
		default:
			u.addParam(p.Name, p.Value)
		}
	}
	if strings.Contains(hostPart, "@") {
		// No host name holds an @: this is user[:password]@host, which the JDBC SQL Server
		// form does not take. Quoting the host or its "port" would quote the password.
		return DatabaseURL{}, errors.New("has user:password@ before the host, which a jdbc:sqlserver:// URL does not take: " +
			"set database.username and database.password (or the user and password properties)")
	}
	if hostPart == "" {
		hostPart = "localhost"
	}
	if name, inst, ok := strings.Cut(hostPart, `\`); ok {
		hostPart = name
		instName, instPort, _ := strings.Cut(inst, ":")
		u.Instance = instName
		if instPort != "" {
			hostPart += ":" + instPort
		}
	}
	host, err := parseHost(hostPart, 1433)
	if err != nil {
		return DatabaseURL{}, err
	}
	if port != 0 {
		host.Port = port
	}
	u.Hosts = []Host{host}
	return u, nil
}

// nextSQLServerProperty returns the next property of a JDBC SQL Server URL and the rest, minding
// values in braces.
func nextSQLServerProperty(s string) (string, string) {
	inBraces := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '{':
			inBraces = true
		case s[i] == '}' && inBraces:
			if i+1 < len(s) && s[i+1] == '}' {
				i++
				continue
			}
			inBraces = false
		case s[i] == ';' && !inBraces:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// parseNativeSQLServerURL parses sqlserver://user:pass@host:port/instance?database=db&....
func parseNativeSQLServerURL(raw string) (DatabaseURL, error) {
	pu, err := url.Parse(raw)
	if err != nil {
		return DatabaseURL{}, fmt.Errorf("is not a valid URL: %w", redactURLError(err))
	}
	u := DatabaseURL{Type: SQLServer, Native: true, Instance: strings.Trim(pu.Path, "/")}
	if pu.User != nil {
		u.User = pu.User.Username()
		if p, ok := pu.User.Password(); ok {
			u.Password = NewSecret(p)
		}
	}
	host, err := parseHost(cmpOr(pu.Host, "localhost"), 1433)
	if err != nil {
		return DatabaseURL{}, err
	}
	u.Hosts = []Host{host}
	for _, kv := range strings.Split(pu.RawQuery, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		name, _ := url.QueryUnescape(k)
		value, _ := url.QueryUnescape(v)
		if strings.EqualFold(name, "database") {
			u.Database = value
			continue
		}
		u.addParam(name, value)
	}
	return u, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// redactURLError drops the URL, which may hold a password, from a url.Parse error.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	// net/url quotes the port text ("invalid port \":Pa55\" after host"), which can be a
	// piece of the password.
	if strings.Contains(err.Error(), "port") {
		return errPort
	}
	return err
}

// Parsed parses database.url and checks that it matches database.type.
func (d *Database) Parsed() (DatabaseURL, error) {
	u, err := ParseDatabaseURL(d.URL.Reveal())
	if err != nil {
		return DatabaseURL{}, err
	}
	if u.Type != d.Type {
		return DatabaseURL{}, fmt.Errorf("names a %s database, but database.type is %s", u.Type, d.Type)
	}
	return u, nil
}

// credentials returns database.username and database.password, or those of the URL when the
// keys are empty.
func (d *Database) credentials(u DatabaseURL) (string, string) {
	user, pass := d.Username, d.Password.Reveal()
	if user == "" {
		user = u.User
	}
	if pass == "" {
		pass = u.Password.Reveal()
	}
	return user, pass
}

// PgxConnString returns the connection string that pgx (pgxpool.ParseConfig) takes:
// postgres://user:password@host:port[,host:port]/database?params, with database.username and
// database.password URL-escaped. The JDBC parameters that libpq knows under another name are
// renamed (ApplicationName, connectTimeout, currentSchema, ssl, targetServerType); those
// without an equivalent are left out (see UnsupportedParams). The string holds the password:
// never log it.
func (d *Database) PgxConnString() (string, error) {
	if d.Type != PostgreSQL {
		return "", fmt.Errorf("database.type is %s, not postgresql", d.Type)
	}
	u, err := d.Parsed()
	if err != nil {
		return "", fmt.Errorf("database.url %s", err)
	}
	user, pass := d.credentials(u)
	hosts := make([]string, len(u.Hosts))
	for i, h := range u.Hosts {
		hosts[i] = h.String()
	}
	out := url.URL{Scheme: "postgres", User: url.UserPassword(user, pass), Host: strings.Join(hosts, ","), Path: "/" + u.Database}
	params, _ := pgParams(u)
	q := make([]string, 0, len(params))
	for _, p := range params {
		q = append(q, url.QueryEscape(p.Name)+"="+url.QueryEscape(p.Value))
	}
	out.RawQuery = strings.Join(q, "&")
	return out.String(), nil
}

// pgParams maps the parameters of a JDBC PostgreSQL URL to their libpq names. A native URL keeps
// its parameters. It returns the kept parameters and the names of the dropped ones.
func pgParams(u DatabaseURL) ([]Param, []string) {
	if u.Native {
		return u.Params, nil
	}
	var (
		kept    []Param
		dropped []string
		sslMode string
		ssl     string
	)
	for _, p := range u.Params {
		switch strings.ToLower(p.Name) {
		case "sslmode":
			sslMode = p.Value
		case "ssl":
			ssl = p.Value
		case "sslcert", "sslkey", "sslrootcert", "sslpassword", "options":
			kept = append(kept, Param{Name: strings.ToLower(p.Name), Value: p.Value})
		case "applicationname":
			kept = append(kept, Param{Name: "application_name", Value: p.Value})
		case "connecttimeout":
			kept = append(kept, Param{Name: "connect_timeout", Value: p.Value})
		case "currentschema":
			kept = append(kept, Param{Name: "search_path", Value: p.Value})
		case "targetservertype":
			if v, ok := targetSessionAttrs[strings.ToLower(p.Value)]; ok {
				kept = append(kept, Param{Name: "target_session_attrs", Value: v})
			} else {
				dropped = append(dropped, p.Name)
			}
		default:
			dropped = append(dropped, p.Name)
		}
	}
	switch {
	case sslMode != "":
		kept = append(kept, Param{Name: "sslmode", Value: sslMode})
	case strings.EqualFold(ssl, "true"):
		kept = append(kept, Param{Name: "sslmode", Value: "verify-full"}) // what pgjdbc does with ssl=true
	case strings.EqualFold(ssl, "false"):
		kept = append(kept, Param{Name: "sslmode", Value: "disable"})
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

// SQLServerURL returns the URL that go-mssqldb takes:
// sqlserver://user:password@host:port/instance?database=db&encrypt=true&..., with
// database.username and database.password. encrypt defaults to true, as with the JDBC driver.
// The JDBC properties without an equivalent are left out (see UnsupportedParams). The URL holds
// the password: never log it.
func (d *Database) SQLServerURL() (string, error) {
	if d.Type != SQLServer {
		return "", fmt.Errorf("database.type is %s, not sqlserver", d.Type)
	}
	u, err := d.Parsed()
	if err != nil {
		return "", fmt.Errorf("database.url %s", err)
	}
	user, pass := d.credentials(u)
	params, _ := sqlServerParams(u)
	return sqlServerURL(u.Hosts[0], u.Instance, user, pass, u.Database, params), nil
}

func sqlServerURL(h Host, instance, user, pass, database string, params []Param) string {
	q := url.Values{}
	if database != "" {
		q.Set("database", database)
	}
	for _, p := range params {
		q.Set(p.Name, p.Value)
	}
	out := url.URL{Scheme: "sqlserver", User: url.UserPassword(user, pass), Host: h.String(), RawQuery: q.Encode()}
	if instance != "" {
		out.Path = "/" + instance
	}
	return out.String()
}

// sqlServerParams maps the properties of a JDBC SQL Server URL to go-mssqldb names. A native
// URL keeps its parameters.
func sqlServerParams(u DatabaseURL) ([]Param, []string) {
	if u.Native {
		return u.Params, nil
	}
	kept := []Param{}
	var dropped []string
	encrypt := "true"
	for _, p := range u.Params {
		switch strings.ToLower(p.Name) {
		case "encrypt":
			encrypt = p.Value
		case "trustservercertificate":
			kept = append(kept, Param{Name: "TrustServerCertificate", Value: p.Value})
		case "hostnameincertificate":
			kept = append(kept, Param{Name: "hostNameInCertificate", Value: p.Value})
		case "logintimeout":
			kept = append(kept, Param{Name: "connection timeout", Value: p.Value})
		case "applicationname":
			kept = append(kept, Param{Name: "app name", Value: p.Value})
		case "applicationintent":
			kept = append(kept, Param{Name: "ApplicationIntent", Value: p.Value})
		case "multisubnetfailover":
			kept = append(kept, Param{Name: "multisubnetfailover", Value: p.Value})
		default:
			dropped = append(dropped, p.Name)
		}
	}
	kept = append(kept, Param{Name: "encrypt", Value: encrypt})
	return kept, dropped
}

// UnsupportedParams returns the names of the JDBC parameters of the URL that the Go drivers have
// no equivalent for, and that PgxConnString and SQLServerURL leave out.
func (u DatabaseURL) UnsupportedParams() []string {
	if u.Type == SQLServer {
		_, dropped := sqlServerParams(u)
		return dropped
	}
	_, dropped := pgParams(u)
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
		Username:               cmpOr(conn.Username, user),
		Password:               conn.Password,
		Encrypt:                conn.Encrypt,
		TrustServerCertificate: conn.TrustServerCertificate,
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
		t.Params, _ = pgParams(u)
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
	return sqlServerURL(Host{Name: t.Host, Port: t.Port}, "", t.Username, t.Password.Reveal(), t.Database, []Param{
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

var (
	userInfoPattern = lazyRegexp(`(://[^/?#;@\s]*?:)([^/?#;\s]*)@`)
	passwordParam   = lazyRegexp(`(?i)([?&;](?:password|pwd|passwd|sslpassword)=)(\{(?:[^}]|\}\})*\}|[^&;#\s]*)`)
)

// MaskURL returns raw with its password masked as ***: the password of the user info
// (amqp://user:***@host) and the value of a password or pwd parameter (?password=***,
// ;password=***). Text without a password stays as it is.
func MaskURL(raw string) string {
	s := userInfoPattern().ReplaceAllString(raw, "${1}***@")
	return passwordParam().ReplaceAllString(s, "${1}***")
}
