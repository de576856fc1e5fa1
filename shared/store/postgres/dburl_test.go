package postgres_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/dburl"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
)

func TestConnString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, user, password, want string
	}{
		{name: "jdbc", url: "jdbc:postgresql://db:5432/queuebox", user: "queuebox", password: "secret",
			want: "postgres://queuebox:secret@db:5432/queuebox"},
		{name: "escaped credentials", url: "jdbc:postgresql://db/q", user: "app@corp", password: "p@ss:w/rd?#%",
			want: "postgres://app%40corp:p%40ss%3Aw%2Frd%3F%23%25@db:5432/q"},
		{name: "several hosts and mapped parameters", url: "jdbc:postgresql://h1:5432,[::1]:5433/q?ssl=true&ApplicationName=queue box&currentSchema=qb&connectTimeout=10&targetServerType=preferSecondary&socketTimeout=30&password=url-pw",
			user: "u", password: "p",
			want: "postgres://u:p@h1:5432,[::1]:5433/q?application_name=queue+box&search_path=qb&connect_timeout=10&target_session_attrs=prefer-standby&sslmode=verify-full"},
		{name: "sslmode wins over ssl", url: "jdbc:postgresql://db/q?ssl=true&sslmode=require&sslrootcert=/ca.pem", user: "u", password: "p",
			want: "postgres://u:p@db:5432/q?sslrootcert=%2Fca.pem&sslmode=require"},
		{name: "native keeps its parameters, the keys win over its user info", url: "postgresql://old:old@db:6432/q?sslmode=disable&pool_max_conns=4", user: "u", password: "p",
			want: "postgres://u:p@db:6432/q?sslmode=disable&pool_max_conns=4"},
		{name: "credentials from the url when the keys are empty", url: "jdbc:postgresql://db/q?user=a&password=b",
			want: "postgres://a:b@db:5432/q"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := postgres.ConnString(tt.url, tt.user, tt.password)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := postgres.ConnString("jdbc:sqlserver://db", "", "")
	assert.EqualError(t, err, "database.url names a sqlserver database, but database.type is postgresql")
	_, err = postgres.ConnString("jdbc:mysql://u:pw@db/q", "", "")
	assert.EqualError(t, err, `database.url must start with jdbc:postgresql:// or jdbc:sqlserver:// (or be a native postgres:// or sqlserver:// URL), not "jdbc:mysql://u:***@db/q"`)
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	u, err := postgres.ParseURL(" JDBC:postgresql://app:p%40ss@h1,[::1]:5433/q?user=other&sslmode=require ")
	require.NoError(t, err)
	assert.Equal(t, dburl.URL{Dialect: store.DialectPostgreSQL, Hosts: []dburl.Host{{Name: "h1", Port: 5432}, {Name: "::1", Port: 5433}},
		Database: "q", User: "other", Password: "p@ss", Params: []dburl.Param{{Name: "sslmode", Value: "require"}}}, u)
	kept, dropped := postgres.Params(dburl.URL{Params: []dburl.Param{{Name: "socketTimeout", Value: "30"}, {Name: "targetServerType", Value: "nope"}}})
	assert.Empty(t, kept)
	assert.Equal(t, []string{"socketTimeout", "targetServerType"}, dropped)
	for _, raw := range []string{"jdbc:postgresql://user:Pa55/Xq7z@db/q", "postgres://user:Pa55?Xq7z@db/q", "jdbc:postgresql://user:123456/Xq7z@db/q"} {
		_, err := postgres.ConnString(raw, "", "")
		require.Error(t, err, raw)
		for _, piece := range []string{"Pa55", "123456", "Xq7z"} {
			assert.False(t, strings.Contains(err.Error(), piece), "%s: the error %q holds a piece of the password", raw, err)
		}
	}
}
