package sqlserver

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/alternayte/queuebox/shared/dburl"
	"github.com/alternayte/queuebox/shared/store"
)

// ParseURL parses database.url of a SQL Server database: a JDBC URL
// (jdbc:sqlserver://host[\instance][:port][;property=value...], a value in braces may hold a
// ;) or a native sqlserver://user:pass@host:port/instance?database=db&... URL. A URL of another
// dialect or scheme is an error that says so.
func ParseURL(raw string) (dburl.URL, error) {
	dialect, rest, native, ok := store.URLScheme(raw)
	switch {
	case !ok:
		return dburl.URL{}, store.URLSchemeError(raw)
	case dialect != store.DialectSQLServer:
		return dburl.URL{}, store.URLDialectError(dialect, store.DialectSQLServer)
	case native:
		return parseNativeURL("sqlserver://" + rest)
	}
	return parseJDBCURL(rest)
}

// parseJDBCURL parses what follows jdbc:sqlserver://.
func parseJDBCURL(rest string) (dburl.URL, error) {
	u := dburl.URL{Dialect: store.DialectSQLServer}
	hostPart, props, _ := strings.Cut(rest, ";")
	var params []dburl.Param
	for props != "" {
		var kv string
		kv, props = nextProperty(props)
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(v, "{") && strings.HasSuffix(v, "}") {
			v = strings.ReplaceAll(v[1:len(v)-1], "}}", "}")
		}
		params = append(params, dburl.Param{Name: strings.TrimSpace(k), Value: v})
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
				return dburl.URL{}, dburl.ErrPort
			}
			port = n
		default:
			u.AddParam(p.Name, p.Value)
		}
	}
	if strings.Contains(hostPart, "@") {
		// No host name holds an @: this is user[:password]@host, which the JDBC SQL Server
		// form does not take. Quoting the host or its "port" would quote the password.
		return dburl.URL{}, errors.New("has user:password@ before the host, which a jdbc:sqlserver:// URL does not take: " +
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
	host, err := dburl.ParseHost(hostPart, 1433)
	if err != nil {
		return dburl.URL{}, err
	}
	if port != 0 {
		host.Port = port
	}
	u.Hosts = []dburl.Host{host}
	return u, nil
}

// nextProperty returns the next property of a JDBC SQL Server URL and the rest, minding
// values in braces.
func nextProperty(s string) (string, string) {
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

// parseNativeURL parses sqlserver://user:pass@host:port/instance?database=db&....
func parseNativeURL(raw string) (dburl.URL, error) {
	pu, err := url.Parse(raw)
	if err != nil {
		return dburl.URL{}, fmt.Errorf("is not a valid URL: %w", redactURLError(err))
	}
	u := dburl.URL{Dialect: store.DialectSQLServer, Native: true, Instance: strings.Trim(pu.Path, "/")}
	if pu.User != nil {
		u.User = pu.User.Username()
		if p, ok := pu.User.Password(); ok {
			u.Password = p
		}
	}
	hostport := pu.Host
	if hostport == "" {
		hostport = "localhost"
	}
	host, err := dburl.ParseHost(hostport, 1433)
	if err != nil {
		return dburl.URL{}, err
	}
	u.Hosts = []dburl.Host{host}
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
		u.AddParam(name, value)
	}
	return u, nil
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
		return dburl.ErrPort
	}
	return err
}

// ConnString returns the URL that go-mssqldb takes for database.url (raw), database.username
// (user) and database.password (password):
// sqlserver://user:password@host:port/instance?database=db&encrypt=true&...; an empty user or
// password takes the one of the URL. encrypt defaults to true, as with the JDBC driver. The
// JDBC properties without an equivalent are left out (see Params). Errors read
// "database.url ..." and quote no password. The URL holds the password: never log it.
func ConnString(raw, user, password string) (string, error) {
	u, err := ParseURL(raw)
	if err != nil {
		return "", fmt.Errorf("database.url %w", err)
	}
	user, password = u.Credentials(user, password)
	params, _ := Params(u)
	return BuildURL(u.Hosts[0], u.Instance, user, password, u.Database, params), nil
}

// BuildURL returns the go-mssqldb URL of one host: sqlserver://user:password@host:port[/instance]
// with database and params in the query. The URL holds the password: never log it.
func BuildURL(h dburl.Host, instance, user, password, database string, params []dburl.Param) string {
	q := url.Values{}
	if database != "" {
		q.Set("database", database)
	}
	for _, p := range params {
		q.Set(p.Name, p.Value)
	}
	out := url.URL{Scheme: "sqlserver", User: url.UserPassword(user, password), Host: h.String(), RawQuery: q.Encode()}
	if instance != "" {
		out.Path = "/" + instance
	}
	return out.String()
}

// Params maps the properties of a JDBC SQL Server URL to go-mssqldb names. A native URL keeps
// its parameters. It returns the kept parameters and the names of the dropped ones, which
// have no equivalent in go-mssqldb.
func Params(u dburl.URL) (kept []dburl.Param, dropped []string) {
	if u.Native {
		return u.Params, nil
	}
	kept = []dburl.Param{}
	encrypt := "true"
	for _, p := range u.Params {
		switch strings.ToLower(p.Name) {
		case "encrypt":
			encrypt = p.Value
		case "trustservercertificate":
			kept = append(kept, dburl.Param{Name: "TrustServerCertificate", Value: p.Value})
		case "hostnameincertificate":
			kept = append(kept, dburl.Param{Name: "hostNameInCertificate", Value: p.Value})
		case "logintimeout":
			kept = append(kept, dburl.Param{Name: "connection timeout", Value: p.Value})
		case "applicationname":
			kept = append(kept, dburl.Param{Name: "app name", Value: p.Value})
		case "applicationintent":
			kept = append(kept, dburl.Param{Name: "ApplicationIntent", Value: p.Value})
		case "multisubnetfailover":
			kept = append(kept, dburl.Param{Name: "multisubnetfailover", Value: p.Value})
		default:
			dropped = append(dropped, p.Name)
		}
	}
	kept = append(kept, dburl.Param{Name: "encrypt", Value: encrypt})
	return kept, dropped
}
