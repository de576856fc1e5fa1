package localserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// TestIdempotencyKeyLengthCountsPostgreSQLCharacters: on PostgreSQL the idempotency key is
// counted in code points, as its VARCHAR(255) column counts it: 128 emoji (256 UTF-16 units)
// and 255 emoji are stored whole; 256 code points get 400. (SQL Server's NVARCHAR(255) counts
// UTF-16 units: inbox's KeyLength tests hold that rule.)
func TestIdempotencyKeyLengthCountsPostgreSQLCharacters(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	cfg := loadYAML(t, fmt.Sprintf(`
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
sources:
  orders:
    type: http
    path: /orders
    idempotencyKeyPath: $.id
    consumption: pull
`, u.Host, u.Path))
	cfg.Server.HTTPPort = 0
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	base := runLocal(t, l)
	pool := dbtest.NewPool(t, dbURL)

	post := func(key string) (int, string) {
		body, err := json.Marshal(map[string]string{"id": key})
		require.NoError(t, err)
		resp, err := http.Post(base+"/inbox/orders", "application/json", strings.NewReader(string(body)))
		require.NoError(t, err)
		defer resp.Body.Close()
		text, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(text)
	}
	for _, n := range []int{128, 255} {
		key := strings.Repeat("\U0001F600", n)
		status, body := post(key)
		require.Equal(t, http.StatusAccepted, status, "%d emoji: %s", n, body)
		var stored string
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT idempotency_key FROM inbox WHERE source = 'orders' AND idempotency_key = $1`, key).Scan(&stored))
		assert.Equal(t, key, stored, "%d emoji are stored whole", n)
	}
	for _, key := range []string{strings.Repeat("\U0001F600", 256), strings.Repeat("a", 256)} {
		status, body := post(key)
		assert.Equal(t, http.StatusBadRequest, status, body)
		assert.JSONEq(t, `{"error":"Idempotency key at $.id exceeds 255 characters"}`, body)
	}
}
