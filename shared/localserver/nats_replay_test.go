package localserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// adminReplay posts a replay request to the admin route (admin.insecure: the credentials are
// not under test here) and returns the answer's status and body.
func adminReplay(t *testing.T, base, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/admin/replay", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// windowedStream creates a JetStream stream on the machine's NATS with a duplicate window of
// ten minutes, longer than any test, for the subjects "<prefix>.>" where prefix is label and a
// unique suffix; the stream is deleted when the test ends.
func windowedStream(t *testing.T, ctx context.Context, label string) (jetstream.Stream, string) {
	t.Helper()
	nc, err := natsgo.Connect("nats://127.0.0.1:4222")
	require.NoError(t, err, "NATS is not reachable at 127.0.0.1:4222; start it with: "+
		"start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log")
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	id := fmt.Sprintf("%d", time.Now().UnixNano())
	name, prefix := strings.ToUpper(label)+"_"+id, label+"."+id
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"},
		Storage: jetstream.MemoryStorage, Duplicates: 10 * time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return stream, prefix
}

// TestANATSReplayInsideTheDuplicateWindowIsDeliveredAgain runs the local process with a NATS
// JetStream destination whose stream keeps a duplicate window of ten minutes, longer than the
// test. A row is delivered once; published again without a replay (the row put back to
// pending by SQL, as after a publish whose acknowledgement was lost), the stream drops it as a
// duplicate of the same Nats-Msg-Id; replayed through /admin/replay, then through the batched
// replay of the same route, it is stored again each time, with Nats-Msg-Id "<id>:1" and
// "<id>:2" and x-message-id still the row id.
func TestANATSReplayInsideTheDuplicateWindowIsDeliveredAgain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream, prefix := windowedStream(t, ctx, "qbreplay")

	dbURL := dbtest.NewDatabase(t)
	cfg := brokerConfig(t, dbURL, `    type: nats
    servers: nats://127.0.0.1:4222
    subject: "`+prefix+`.{{ topic }}"`)
	cfg.Admin.Enabled = true
	cfg.Admin.Insecure = true
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	base := runLocal(t, l)

	pool := dbtest.NewPool(t, dbURL)
	var rowID string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'o-1', '{"orderId":"1"}') RETURNING id::text`).Scan(&rowID))

	stored := func() uint64 {
		t.Helper()
		info, err := stream.Info(ctx)
		require.NoError(t, err)
		return info.State.Msgs
	}
	sentAt := func() time.Time {
		t.Helper()
		var at time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT updated_at FROM outbox WHERE id = $1`, rowID).Scan(&at))
		return at
	}
	// waitSentAgain waits until the row is sent again after before (its updated_at moved on).
	waitSentAgain := func(what string, before time.Time) {
		t.Helper()
		waitUntil(t, 30*time.Second, what, func() bool {
			var state string
			var at time.Time
			require.NoError(t, pool.QueryRow(ctx, `SELECT state, updated_at FROM outbox WHERE id = $1`, rowID).Scan(&state, &at))
			return state == "sent" && at.After(before)
		})
	}

	waitSentAgain("the first delivery", time.Time{})
	require.Equal(t, uint64(1), stored())

	// The same delivery published again (no replay): the stream drops it as a duplicate.
	before := sentAt()
	dbtest.Exec(t, pool, `UPDATE outbox SET state = 'pending', scheduled_at = now(), updated_at = now() WHERE id = $1`, rowID)
	waitSentAgain("the re-publish without a replay", before)
	assert.Equal(t, uint64(1), stored(), "a publish with the same Nats-Msg-Id inside the window is a duplicate")

	// The admin replay, then the batched replay of the same route.
	for i, body := range []string{
		`{"ids": ["` + rowID + `"]}`,
		`{"ids": ["` + rowID + `"], "batchSize": 10}`,
	} {
		before := sentAt()
		status, answer := adminReplay(t, base, body)
		require.Equal(t, http.StatusOK, status, answer)
		var moved struct{ Moved int64 }
		require.NoError(t, json.Unmarshal([]byte(answer), &moved))
		require.Equal(t, int64(1), moved.Moved, answer)
		waitSentAgain(fmt.Sprintf("the delivery of replay %d", i+1), before)
		require.Equal(t, uint64(i+2), stored(), "replay %d is stored in the stream", i+1)
	}

	var msgIDs, messageIDs []string
	for seq := uint64(1); seq <= 3; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		require.NoError(t, err)
		msgIDs = append(msgIDs, m.Header.Get(jetstream.MsgIDHeader))
		messageIDs = append(messageIDs, m.Header.Get("x-message-id"))
		assert.JSONEq(t, `{"orderId":"1"}`, string(m.Data))
	}
	assert.Equal(t, []string{rowID, rowID + ":1", rowID + ":2"}, msgIDs, "each replay has its own Nats-Msg-Id")
	assert.Equal(t, []string{rowID, rowID, rowID}, messageIDs, "x-message-id stays the row id")
}
