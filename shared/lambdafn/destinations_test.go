package lambdafn_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
)

// TestAdminHandlerPausesAndResumesADestination: the admin function serves the destination
// routes of the local management port, with admin.auth.
func TestAdminHandlerPausesAndResumesADestination(t *testing.T) {
	t.Parallel()
	f := newAdminFunction(t, nil)
	key := map[string]string{"x-api-key": adminKey}
	st, err := postgres.New(f.pool, store.DefaultNames())
	require.NoError(t, err)

	status, _, body := f.invoke(t, adminEvent(t, "POST", "/admin/destinations/receiver/pause", nil, nil))
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, `{"error":"Missing header X-API-Key"}`, body)

	status, hdr, body := f.invoke(t, adminEvent(t, "POST", "/admin/destinations/receiver/pause", nil, key))
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	assert.Contains(t, body, `{"name":"receiver","paused":true,"pausedAt":"`)
	states, err := st.DestinationStates(context.Background())
	require.NoError(t, err)
	require.Len(t, states, 1)
	assert.True(t, states[0].Paused)

	status, _, body = f.invoke(t, adminEvent(t, "GET", "/admin/destinations", nil, key))
	require.Equal(t, http.StatusOK, status, body)
	assert.Regexp(t, `^\{"destinations":\[\{"name":"receiver","paused":true,"pausedAt":"[^"]+","circuit":"closed","openRemainingMs":0,"failures":0\}\]\}$`, body)

	status, _, body = f.invoke(t, adminEvent(t, "POST", "/admin/destinations/receiver/resume", nil, key))
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, `{"name":"receiver","paused":false,"pausedAt":null,"circuit":"closed","openRemainingMs":0,"failures":0}`, body)

	status, _, body = f.invoke(t, adminEvent(t, "POST", "/admin/destinations/nowhere/resume", nil, key))
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, `{"error":"Unknown destination \"nowhere\": it is not configured under destinations"}`, body)
}
