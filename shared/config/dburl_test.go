package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestParseDatabaseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		raw     string
		want    DatabaseURL
		wantErr string
	}{
		{name: "jdbc postgresql", raw: "jdbc:postgresql://db:5432/queuebox",
			want: DatabaseURL{Type: PostgreSQL, Hosts: []Host{{Name: "db", Port: 5432}}, Database: "queuebox"}},
		{name: "default port and parameters", raw: "jdbc:postgresql://db.internal/app?sslmode=require&ApplicationName=qb%20one",
			want: DatabaseURL{Type: PostgreSQL, Hosts: []Host{{Name: "db.internal", Port: 5432}}, Database: "app",
				Params: []Param{{Name: "sslmode", Value: "require"}, {Name: "ApplicationName", Value: "qb one"}}}},
		{name: "several hosts", raw: "jdbc:postgresql://h1:5432,h2:5433,[::1]/db?targetServerType=primary",
			want: DatabaseURL{Type: PostgreSQL, Hosts: []Host{{Name: "h1", Port: 5432}, {Name: "h2", Port: 5433}, {Name: "::1", Port: 5432}}, Database: "db",
				Params: []Param{{Name: "targetServerType", Value: "primary"}}}},
		{name: "credentials in parameters", raw: "jdbc:postgresql://db:5432/q?user=app&password=pw",
			want: DatabaseURL{Type: PostgreSQL, Hosts: []Host{{Name: "db", Port: 5432}}, Database: "q", User: "app", Password: NewSecret("pw")}},
		{name: "no host", raw: "jdbc:postgresql:///q",
			want: DatabaseURL{Type: PostgreSQL, Hosts: []Host{{Name: "localhost", Port: 5432}}, Database: "q"}},
		{name: "native postgres", raw: "postgres://app:p%40ss@db:6432/q?sslmode=disable",
			want: DatabaseURL{Type: PostgreSQL, Native: true, Hosts: []Host{{Name: "db", Port: 6432}}, Database: "q", User: "app", Password: NewSecret("p@ss"),
				Params: []Param{{Name: "sslmode", Value: "disable"}}}},
		{name: "native postgresql", raw: "postgresql://db/q",
			want: DatabaseURL{Type: PostgreSQL, Native: true, Hosts: []Host{{Name: "db", Port: 5432}}, Database: "q"}},
		{name: "jdbc sqlserver", raw: "jdbc:sqlserver://db.internal:1433;databaseName=queuebox;encrypt=true;trustServerCertificate=false",
			want: DatabaseURL{Type: SQLServer, Hosts: []Host{{Name: "db.internal", Port: 1433}}, Database: "queuebox",
				Params: []Param{{Name: "encrypt", Value: "true"}, {Name: "trustServerCertificate", Value: "false"}}}},
		{name: "sqlserver instance and braces", raw: `jdbc:sqlserver://db\SQLEXPRESS;database=q;user=sa;password={a;b}}c};loginTimeout=5`,
			want: DatabaseURL{Type: SQLServer, Hosts: []Host{{Name: "db", Port: 1433}}, Database: "q", Instance: "SQLEXPRESS", User: "sa", Password: NewSecret("a;b}c"),
				Params: []Param{{Name: "loginTimeout", Value: "5"}}}},
		{name: "sqlserver host from properties", raw: "jdbc:sqlserver://;serverName=db;portNumber=1500;databaseName=q",
			want: DatabaseURL{Type: SQLServer, Hosts: []Host{{Name: "db", Port: 1500}}, Database: "q"}},
		{name: "native sqlserver", raw: "sqlserver://sa:pw@db:1433/inst?database=q&encrypt=disable",
			want: DatabaseURL{Type: SQLServer, Native: true, Hosts: []Host{{Name: "db", Port: 1433}}, Database: "q", Instance: "inst", User: "sa", Password: NewSecret("pw"),
				Params: []Param{{Name: "encrypt", Value: "disable"}}}},
		{name: "other scheme", raw: "jdbc:mysql://db/q", wantErr: `must start with jdbc:postgresql:// or jdbc:sqlserver:// (or be a native postgres:// or sqlserver:// URL), not "jdbc:mysql://db/q"`},
		{name: "file reference", raw: "file:/run/secrets/url", wantErr: `must start with jdbc:postgresql:// or jdbc:sqlserver:// (or be a native postgres:// or sqlserver:// URL), not "file:/run/secrets/url"`},
		{name: "bad port", raw: "jdbc:postgresql://db:x/q", wantErr: `has a port that is not a number from 1 to 65535 (a password that holds /, ?, ; or @ must be percent-encoded, or given in database.password)`},
		{name: "empty host in a list", raw: "jdbc:postgresql://h1,/q", wantErr: "names an empty host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseDatabaseURL(tt.raw)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want.Password.Reveal(), got.Password.Reveal())
			got.Password, tt.want.Password = Secret{}, Secret{}
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestPgxConnString checks the wrapper of postgres.ConnString (whose cases are in
// shared/store/postgres): the database.type check and the URL's own.
func TestPgxConnString(t *testing.T) {
	t.Parallel()
	d := Database{Type: PostgreSQL, URL: NewConnectionURL("jdbc:postgresql://db:5432/queuebox"), Username: "queuebox", Password: NewSecret("secret")}
	got, err := d.PgxConnString()
	require.NoError(t, err)
	assert.Equal(t, "postgres://queuebox:secret@db:5432/queuebox", got)
	_, err = (&Database{Type: SQLServer, URL: NewConnectionURL("jdbc:sqlserver://db")}).PgxConnString()
	assert.EqualError(t, err, "database.type is sqlserver, not postgresql")
	_, err = (&Database{Type: PostgreSQL, URL: NewConnectionURL("jdbc:sqlserver://db")}).PgxConnString()
	assert.EqualError(t, err, "database.url names a sqlserver database, but database.type is postgresql")
}

// TestSQLServerURL checks the wrapper of sqlserver.ConnString (whose cases are in
// shared/store/sqlserver).
func TestSQLServerURL(t *testing.T) {
	t.Parallel()
	d := Database{Type: SQLServer, URL: NewConnectionURL("jdbc:sqlserver://db.internal:1433;databaseName=queuebox"), Username: "sa", Password: NewSecret("p@ss")}
	got, err := d.SQLServerURL()
	require.NoError(t, err)
	assert.Equal(t, "sqlserver://sa:p%40ss@db.internal:1433?database=queuebox&encrypt=true", got)
	_, err = (&Database{Type: PostgreSQL, URL: NewConnectionURL("jdbc:postgresql://db")}).SQLServerURL()
	assert.EqualError(t, err, "database.type is postgresql, not sqlserver")
	_, err = (&Database{Type: SQLServer, URL: NewConnectionURL("jdbc:postgresql://db")}).SQLServerURL()
	assert.EqualError(t, err, "database.url names a postgresql database, but database.type is sqlserver")
}

func TestUnsupportedParamsAreWarnings(t *testing.T) {
	t.Parallel()
	_, warnings, err := loadYAML(t, minimalDatabase, map[string]string{"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://db/q?socketTimeout=30&sslmode=require&reWriteBatchedInserts=true"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"database.url: the JDBC parameter socketTimeout has no equivalent in this implementation and has no effect",
		"database.url: the JDBC parameter reWriteBatchedInserts has no equivalent in this implementation and has no effect",
	}, warningStrings(warnings))
}

func TestCaptureTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    CaptureTarget
		wantPgx string
		wantErr string
	}{
		{name: "from database.url", env: map[string]string{"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://db:5432/queuebox?sslmode=require"},
			want:    CaptureTarget{Host: "db", Port: 5432, Database: "queuebox", Username: "queuebox", Password: NewSecret("secret"), Encrypt: true, Params: []Param{{Name: "sslmode", Value: "require"}}},
			wantPgx: "postgres://queuebox:secret@db:5432/queuebox?sslmode=require"},
		{name: "overrides", env: map[string]string{
			"QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAME": "replica", "QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_PORT": "5433",
			"QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_DATABASE": "other", "QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_USERNAME": "capture_user",
			"QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_PASSWORD": "cap",
		}, want: CaptureTarget{Host: "replica", Port: 5433, Database: "other", Username: "capture_user", Password: NewSecret("cap"), Encrypt: true},
			wantPgx: "postgres://capture_user:cap@replica:5433/other"},
		{name: "several hosts", env: map[string]string{"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://h1,h2/q"},
			wantErr: "database.url names more than one host; set outbox.capture.connection.hostname (QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAME) to the host that capture reads"},
		{name: "several hosts with a hostname", env: map[string]string{"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://h1,h2:5433/q", "QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAME": "h2"},
			want:    CaptureTarget{Host: "h2", Port: 5432, Database: "q", Username: "queuebox", Password: NewSecret("secret"), Encrypt: true},
			wantPgx: "postgres://queuebox:secret@h2:5432/q"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := mustLoad(t, minimalDatabase, tt.env)
			got, err := cfg.CaptureTarget()
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantPgx, got.PgxConnString())
			assert.Equal(t, tt.want.Password.Reveal(), got.Password.Reveal())
			got.Password, tt.want.Password = Secret{}, Secret{}
			assert.Equal(t, tt.want, got)
		})
	}

	sql := mustLoad(t, minimalDatabase, map[string]string{
		"QUEUEBOX_DATABASE_TYPE": "sqlserver", "QUEUEBOX_DATABASE_URL": "jdbc:sqlserver://db:1433;databaseName=q",
		"QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_TRUSTSERVERCERTIFICATE": "true",
	})
	target, err := sql.CaptureTarget()
	require.NoError(t, err)
	assert.Equal(t, "sqlserver://queuebox:secret@db:1433?TrustServerCertificate=true&database=q&encrypt=true", target.SQLServerURL())
	pg := mustLoad(t, minimalDatabase, nil)
	target, err = pg.CaptureTarget()
	require.NoError(t, err)
	assert.Equal(t, "postgres://queuebox:secret@db:5432/queuebox", target.PgxConnString())
}

func TestDatabaseURLHelpers(t *testing.T) {
	t.Parallel()
	u, err := ParseDatabaseURL("jdbc:postgresql://db/q?SSLMode=require")
	require.NoError(t, err)
	v, ok := u.Param("sslmode")
	assert.True(t, ok)
	assert.Equal(t, "require", v)
	_, ok = u.Param("nope")
	assert.False(t, ok)
	assert.Equal(t, "[::1]:5432", Host{Name: "::1", Port: 5432}.String())
	assert.Equal(t, Milliseconds(1500).Duration().String(), "1.5s")
	y, err := yaml.Marshal(map[string]any{"maxAge": MustRetentionDuration("7d")})
	require.NoError(t, err)
	assert.Equal(t, "maxAge: 7d\n", string(y))
	assert.Equal(t, []string{"a:1", "b:2"}, (&KafkaSource{BootstrapServers: " a:1, ,b:2 "}).Brokers())
	assert.Equal(t, []string{"nats://a", "nats://b"}, (&NATSSource{Servers: "nats://a,nats://b"}).ServerList())
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
		_, err := ParseDatabaseURL(raw)
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
