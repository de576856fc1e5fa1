package dburl_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/dburl"
)

func TestParseHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    dburl.Host
		wantErr string
	}{
		{name: "name", in: "db", want: dburl.Host{Name: "db", Port: 5432}},
		{name: "name and port", in: " db:6432 ", want: dburl.Host{Name: "db", Port: 6432}},
		{name: "ipv6", in: "[::1]", want: dburl.Host{Name: "::1", Port: 5432}},
		{name: "ipv6 and port", in: "[::1]:1", want: dburl.Host{Name: "::1", Port: 1}},
		{name: "empty", in: " ", wantErr: "names an empty host"},
		{name: "port only", in: ":5432", wantErr: "names an empty host"},
		{name: "unclosed bracket", in: "[::1", wantErr: "has an unclosed [ in a host"},
		{name: "port out of range", in: "db:65536", wantErr: dburl.ErrPort.Error()},
		{name: "port of a password", in: "user:Pa55", wantErr: dburl.ErrPort.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := dburl.ParseHost(tt.in, 5432)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestUserInfoParamsAndCredentials(t *testing.T) {
	t.Parallel()
	var u dburl.URL
	require.NoError(t, u.SetUserInfo("app:p%40ss"))
	assert.Equal(t, "app", u.User)
	assert.Equal(t, "p@ss", u.Password)
	assert.EqualError(t, u.SetUserInfo("app:%zz"), "has a badly escaped password")

	u = dburl.URL{}
	u.AddParam("User", "sa")
	u.AddParam("PASSWORD", "pw")
	u.AddParam("sslmode", "require")
	assert.Equal(t, dburl.URL{User: "sa", Password: "pw", Params: []dburl.Param{{Name: "sslmode", Value: "require"}}}, u)
	v, ok := u.Param("SSLMode")
	assert.True(t, ok)
	assert.Equal(t, "require", v)

	user, pass := u.Credentials("", "")
	assert.Equal(t, []string{"sa", "pw"}, []string{user, pass})
	user, pass = u.Credentials("app", "secret")
	assert.Equal(t, []string{"app", "secret"}, []string{user, pass})
	assert.Equal(t, "[::1]:5432", dburl.Host{Name: "::1", Port: 5432}.String())
}
