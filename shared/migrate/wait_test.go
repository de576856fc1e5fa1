package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// closedPort returns a port on 127.0.0.1 that nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

func TestWaitForDatabaseGivesUpAfterTheTimeout(t *testing.T) {
	t.Parallel()
	url := fmt.Sprintf("postgres://queuebox:s3cret-Pa55@127.0.0.1:%d/queuebox?sslmode=disable&connect_timeout=2", closedPort(t))
	var attempts atomic.Int32
	connect := func(ctx context.Context) error {
		attempts.Add(1)
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return fmt.Errorf("connecting to %s: %w", url, err)
		}
		return c.Close(ctx)
	}

	start := time.Now()
	// Two seconds: retries at about 0.1, 0.3, 0.7 and 1.5 s, so at least two attempts even when
	// a loaded machine makes one slow.
	err := WaitForDatabase(context.Background(), connect, 2*time.Second)
	elapsed := time.Since(start)

	require.ErrorIs(t, err, ErrStartupTimeout)
	var te *StartupTimeoutError
	require.ErrorAs(t, err, &te)
	assert.Contains(t, err.Error(), "the database did not answer within database.startupTimeoutMs (2000 ms): ")
	assert.Contains(t, err.Error(), "connection refused", "the cause of the last attempt that the deadline did not cut")
	assert.NotContains(t, err.Error(), "\n", "one line")
	assert.NotContains(t, err.Error(), "s3cret-Pa55", "the password never reaches the message")
	assert.GreaterOrEqual(t, elapsed, 2*time.Second)
	assert.Less(t, elapsed, 10*time.Second)
	assert.GreaterOrEqual(t, attempts.Load(), int32(2), "it retried")
	assert.Equal(t, int(attempts.Load()), te.Attempts)
}

func TestWaitForDatabase(t *testing.T) {
	t.Parallel()
	leaky := errors.New(`dial sqlserver://sa:hunter2@db:1433?database=q: password=hunter2 refused`)
	tests := []struct {
		name      string
		failures  int32 // calls that fail before one succeeds; -1 never succeeds
		cause     error
		timeout   time.Duration
		cancel    bool
		wantErr   error
		wantCalls int32
		wantText  []string
		never     []string
	}{
		{name: "answers at once", failures: 0, timeout: time.Second, wantCalls: 1},
		{name: "answers after two failures", failures: 2, cause: errors.New("connection refused"), timeout: 10 * time.Second, wantCalls: 3},
		{name: "never answers", failures: -1, cause: leaky, timeout: 250 * time.Millisecond, wantErr: ErrStartupTimeout,
			wantText: []string{"database.startupTimeoutMs (250 ms)", "refused"}, never: []string{"hunter2"}},
		{name: "the caller gives up first", failures: -1, cause: leaky, timeout: time.Minute, cancel: true, wantErr: context.Canceled,
			wantText: []string{"waiting for the database"}, never: []string{"hunter2", "startupTimeoutMs"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var calls atomic.Int32
			connect := func(context.Context) error {
				n := calls.Add(1)
				if tc.cancel && n == 2 {
					cancel()
				}
				if tc.failures < 0 || n <= tc.failures {
					return tc.cause
				}
				return nil
			}
			err := WaitForDatabase(ctx, connect, tc.timeout)
			if tc.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.wantCalls, calls.Load())
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
			for _, w := range tc.wantText {
				assert.Contains(t, err.Error(), w)
			}
			for _, n := range tc.never {
				assert.NotContains(t, err.Error(), n)
			}
		})
	}
}

func TestWaitForDatabaseReachesTheTestServer(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	err := WaitForDatabase(context.Background(), func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		return c.Close(ctx)
	}, 10*time.Second)
	require.NoError(t, err)
}

// syncBuffer is a bytes.Buffer that a logger and the test may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestLoggedWaitSaysWhatItWaitsForWhileTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	port := closedPort(t)
	url := fmt.Sprintf("postgres://queuebox:s3cret-Pa55@127.0.0.1:%d/queuebox?sslmode=disable&connect_timeout=2", port)
	masked := fmt.Sprintf("jdbc:postgresql://127.0.0.1:%d/queuebox", port)
	var out syncBuffer
	log := slog.New(slog.NewTextHandler(&out, nil))

	// The database comes up after the first failed attempts: the wait logs before it does.
	var attempts atomic.Int32
	connect := func(ctx context.Context) error {
		if attempts.Add(1) >= 3 {
			return nil
		}
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return fmt.Errorf("connecting to %s: %w", url, err)
		}
		return c.Close(ctx)
	}
	require.NoError(t, LoggedWait(log, masked)(context.Background(), connect, 30*time.Second))

	text := out.String()
	assert.Contains(t, text, `msg="waiting for the database to answer"`)
	assert.Contains(t, text, "url="+masked)
	assert.Contains(t, text, "startupTimeout=30s")
	assert.Contains(t, text, "connection refused")
	assert.Contains(t, text, `msg="the database answered"`)
	assert.NotContains(t, text, "s3cret-Pa55", "the password never reaches the log")
}

func TestLoggedWaitIsSilentWhenTheDatabaseAnswersAtOnce(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	require.NoError(t, LoggedWait(log, "jdbc:postgresql://db/queuebox")(context.Background(), func(context.Context) error { return nil }, time.Second))
	assert.Empty(t, out.String())
}

func TestLoggedWaitKeepsTheTimeoutError(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	err := LoggedWait(log, "jdbc:postgresql://db/queuebox")(context.Background(),
		func(context.Context) error { return errors.New("dial tcp: connection refused") }, 300*time.Millisecond)
	require.ErrorIs(t, err, ErrStartupTimeout)
	assert.Contains(t, out.String(), `msg="waiting for the database to answer"`)
	assert.NotContains(t, out.String(), "the database answered")
}
