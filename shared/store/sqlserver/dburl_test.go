package sqlserver_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/dburl"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/sqlserver"
)

func TestConnString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, want string
	}{
		{name: "jdbc, encrypt by default", url: "jdbc:sqlserver://db.internal:1433;databaseName=queuebox",
			want: "sqlserver://sa:p%40ss@db.internal:1433?database=queuebox&encrypt=true"},
		{name: "jdbc properties", url: `jdbc:sqlserver://db\inst:1500;databaseName=q;encrypt=false;trustServerCertificate=true;loginTimeout=15;applicationName=qb;socketTimeout=5`,
			want: "sqlserver://sa:p%40ss@db:1500/inst?TrustServerCertificate=true&app+name=qb&connection+timeout=15&database=q&encrypt=false"},
		{name: "native", url: "sqlserver://x:y@db:1433?database=q&encrypt=disable",
			want: "sqlserver://sa:p%40ss@db:1433?database=q&encrypt=disable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := sqlserver.ConnString(tt.url, "sa", "p@ss")
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	got, err := sqlserver.ConnString("jdbc:sqlserver://db;user=a;password={b;c}", "", "")
	require.NoError(t, err)
	assert.Equal(t, "sqlserver://a:b;c@db:1433?encrypt=true", got, "the credentials of the URL when the keys are empty")
	_, err = sqlserver.ConnString("postgres://db/q", "", "")
	assert.EqualError(t, err, "database.url names a postgresql database, but database.type is sqlserver")
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	u, err := sqlserver.ParseURL(`jdbc:sqlserver://db\SQLEXPRESS;database=q;user=sa;password={a;b}}c};loginTimeout=5`)
	require.NoError(t, err)
	assert.Equal(t, dburl.URL{Dialect: store.DialectSQLServer, Hosts: []dburl.Host{{Name: "db", Port: 1433}}, Database: "q",
		Instance: "SQLEXPRESS", User: "sa", Password: "a;b}c", Params: []dburl.Param{{Name: "loginTimeout", Value: "5"}}}, u)
	_, dropped := sqlserver.Params(u)
	assert.Empty(t, dropped)
	for _, raw := range []string{"jdbc:sqlserver://user:Pa55;Xq7z@db", "sqlserver://user:Pa55/Xq7z@db"} {
		_, err := sqlserver.ConnString(raw, "", "")
		require.Error(t, err, raw)
		for _, piece := range []string{"Pa55", "Xq7z"} {
			assert.False(t, strings.Contains(err.Error(), piece), "%s: the error %q holds a piece of the password", raw, err)
		}
	}
}
