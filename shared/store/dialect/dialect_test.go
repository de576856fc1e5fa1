package dialect_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/dburl"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/dialect"
)

// These cases moved here from shared/config, which parsed database.url with the dialects'
// parsers before the dialect table took that over.

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		raw     string
		want    dburl.URL
		wantErr string
	}{
		{name: "jdbc postgresql", raw: "jdbc:postgresql://db:5432/queuebox",
			want: dburl.URL{Dialect: store.DialectPostgreSQL, Hosts: []dburl.Host{{Name: "db", Port: 5432}}, Database: "queuebox"}},
		{name: "default port and parameters", raw: "jdbc:postgresql://db.internal/app?sslmode=require&ApplicationName=qb%20one",
			want: dburl.URL{Dialect: store.DialectPostgreSQL, Hosts: []dburl.Host{{Name: "db.internal", Port: 5432}}, Database: "app",
				Params: []dburl.Param{{Name: "sslmode", Value: "require"}, {Name: "ApplicationName", Value: "qb one"}}}},
		{name: "several hosts", raw: "jdbc:postgresql://h1:5432,h2:5433,[::1]/db?targetServerType=primary",
			want: dburl.URL{Dialect: store.DialectPostgreSQL, Hosts: []dburl.Host{{Name: "h1", Port: 5432}, {Name: "h2", Port: 5433}, {Name: "::1", Port: 5432}}, Database: "db",
				Params: []dburl.Param{{Name: "targetServerType", Value: "primary"}}}},
		{name: "credentials in parameters", raw: "jdbc:postgresql://db:5432/q?user=app&password=pw",
			want: dburl.URL{Dialect: store.DialectPostgreSQL, Hosts: []dburl.Host{{Name: "db", Port: 5432}}, Database: "q", User: "app", Password: "pw"}},
		{name: "no host", raw: "jdbc:postgresql:///q",
			want: dburl.URL{Dialect: store.DialectPostgreSQL, Hosts: []dburl.Host{{Name: "localhost", Port: 5432}}, Database: "q"}},
		{name: "native postgres", raw: "postgres://app:p%40ss@db:6432/q?sslmode=disable",
			want: dburl.URL{Dialect: store.DialectPostgreSQL, Native: true, Hosts: []dburl.Host{{Name: "db", Port: 6432}}, Database: "q", User: "app", Password: "p@ss",
				Params: []dburl.Param{{Name: "sslmode", Value: "disable"}}}},
		{name: "native postgresql", raw: "postgresql://db/q",
			want: dburl.URL{Dialect: store.DialectPostgreSQL, Native: true, Hosts: []dburl.Host{{Name: "db", Port: 5432}}, Database: "q"}},
		{name: "jdbc sqlserver", raw: "jdbc:sqlserver://db.internal:1433;databaseName=queuebox;encrypt=true;trustServerCertificate=false",
			want: dburl.URL{Dialect: store.DialectSQLServer, Hosts: []dburl.Host{{Name: "db.internal", Port: 1433}}, Database: "queuebox",
				Params: []dburl.Param{{Name: "encrypt", Value: "true"}, {Name: "trustServerCertificate", Value: "false"}}}},
		{name: "sqlserver instance and braces", raw: `jdbc:sqlserver://db\SQLEXPRESS;database=q;user=sa;password={a;b}}c};loginTimeout=5`,
			want: dburl.URL{Dialect: store.DialectSQLServer, Hosts: []dburl.Host{{Name: "db", Port: 1433}}, Database: "q", Instance: "SQLEXPRESS", User: "sa", Password: "a;b}c",
				Params: []dburl.Param{{Name: "loginTimeout", Value: "5"}}}},
		{name: "sqlserver host from properties", raw: "jdbc:sqlserver://;serverName=db;portNumber=1500;databaseName=q",
			want: dburl.URL{Dialect: store.DialectSQLServer, Hosts: []dburl.Host{{Name: "db", Port: 1500}}, Database: "q"}},
		{name: "native sqlserver", raw: "sqlserver://sa:pw@db:1433/inst?database=q&encrypt=disable",
			want: dburl.URL{Dialect: store.DialectSQLServer, Native: true, Hosts: []dburl.Host{{Name: "db", Port: 1433}}, Database: "q", Instance: "inst", User: "sa", Password: "pw",
				Params: []dburl.Param{{Name: "encrypt", Value: "disable"}}}},
		{name: "other scheme", raw: "jdbc:mysql://db/q", wantErr: `must start with jdbc:postgresql:// or jdbc:sqlserver:// (or be a native postgres:// or sqlserver:// URL), not "jdbc:mysql://db/q"`},
		{name: "file reference", raw: "file:/run/secrets/url", wantErr: `must start with jdbc:postgresql:// or jdbc:sqlserver:// (or be a native postgres:// or sqlserver:// URL), not "file:/run/secrets/url"`},
		{name: "bad port", raw: "jdbc:postgresql://db:x/q", wantErr: `has a port that is not a number from 1 to 65535 (a password that holds /, ?, ; or @ must be percent-encoded, or given in database.password)`},
		{name: "empty host in a list", raw: "jdbc:postgresql://h1,/q", wantErr: "names an empty host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := dialect.ParseURL(tt.raw)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestConnString checks the connection string of database.type and database.url: the
// lookup of the dialect and the URL's own checks (the cases of each dialect's string are in
// shared/store/postgres and shared/store/sqlserver).
func TestConnString(t *testing.T) {
	t.Parallel()
	d, got, err := dialect.ConnString("postgresql", "jdbc:postgresql://db:5432/queuebox", "queuebox", "secret")
	require.NoError(t, err)
	assert.Equal(t, "postgresql", d.Name)
	assert.Equal(t, "postgres://queuebox:secret@db:5432/queuebox", got)
	_, _, err = dialect.ConnString("postgresql", "jdbc:sqlserver://db", "", "")
	assert.EqualError(t, err, "database.url names a sqlserver database, but database.type is postgresql")

	d, got, err = dialect.ConnString("sqlserver", "jdbc:sqlserver://db.internal:1433;databaseName=queuebox", "sa", "p@ss")
	require.NoError(t, err)
	assert.Equal(t, "sqlserver", d.Name)
	assert.Equal(t, "sqlserver://sa:p%40ss@db.internal:1433?database=queuebox&encrypt=true", got)
	_, _, err = dialect.ConnString("sqlserver", "jdbc:postgresql://db", "", "")
	assert.EqualError(t, err, "database.url names a postgresql database, but database.type is sqlserver")

	_, _, err = dialect.ConnString("mysql", "jdbc:postgresql://db", "", "")
	assert.EqualError(t, err, "database.type is mysql, not postgresql or sqlserver")
}

func TestURLHelpers(t *testing.T) {
	t.Parallel()
	u, err := dialect.ParseURL("jdbc:postgresql://db/q?SSLMode=require")
	require.NoError(t, err)
	v, ok := u.Param("sslmode")
	assert.True(t, ok)
	assert.Equal(t, "require", v)
	_, ok = u.Param("nope")
	assert.False(t, ok)
	assert.Equal(t, "[::1]:5432", dburl.Host{Name: "::1", Port: 5432}.String())
	assert.Equal(t, []string{"socketTimeout"}, dialect.UnsupportedParams(dburl.URL{Dialect: "postgresql", Params: []dburl.Param{{Name: "socketTimeout", Value: "30"}}}))
}

// TestTable checks the lookups of the table: by database.type and by outbox.capture.mode.
func TestTable(t *testing.T) {
	t.Parallel()
	var got []string
	for _, d := range dialect.All() {
		got = append(got, d.Name+"/"+d.CaptureMode+"/"+d.DefaultSchema)
		assert.NotNil(t, dialect.NewCaptureSource(d), d.Name)
	}
	assert.Equal(t, []string{"postgresql/postgres-logical/public", "sqlserver/sqlserver-cdc/dbo"}, got)
	d, ok := dialect.ByCaptureMode("sqlserver-cdc")
	assert.True(t, ok)
	assert.Equal(t, "sqlserver", d.Name)
	_, ok = dialect.ByCaptureMode("polling")
	assert.False(t, ok)
	_, ok = dialect.Lookup("mysql")
	assert.False(t, ok)
}

// A password with an unescaped /, ? or ; splits the URL where the parser looks for the port,
// so the text that an error would quote as the port is a piece of the password.
func TestPortErrorsQuoteNoPartOfThePassword(t *testing.T) {
	for _, raw := range []string{
		"jdbc:postgresql://user:Pa55/Xq7z@db/q",
		"postgres://user:Pa55?Xq7z@db/q",
		"jdbc:sqlserver://user:Pa55;Xq7z@db",
		"sqlserver://user:Pa55/Xq7z@db",
		"jdbc:postgresql://user:123456/Xq7z@db/q",
	} {
		_, err := dialect.ParseURL(raw)
		if err == nil {
			t.Errorf("%s: parsed, want an error", raw)
			continue
		}
		for _, piece := range []string{"Pa55", "123456", "Xq7z"} {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("%s: the error %q holds a piece of the password", raw, err)
			}
		}
	}
}
