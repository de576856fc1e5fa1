package writeretry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var errWrite = errors.New("write failed")

// failing returns a write that fails its first n attempts and counts its calls.
func failing(n int, calls *int) func(context.Context) error {
	return func(context.Context) error {
		*calls++
		if *calls <= n {
			return fmt.Errorf("attempt %d: %w", *calls, errWrite)
		}
		return nil
	}
}

func TestDo(t *testing.T) {
	t.Parallel()
	quick := []time.Duration{time.Millisecond, time.Millisecond}
	tests := []struct {
		name      string
		failures  int
		wantCalls int
		wantErr   bool
	}{
		{name: "first attempt succeeds", failures: 0, wantCalls: 1},
		{name: "a retry succeeds", failures: 2, wantCalls: 3},
		{name: "every retry fails", failures: 10, wantCalls: 3, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := New(Policy{Delays: quick})
			calls := 0
			err := w.Do(context.Background(), failing(tt.failures, &calls))
			require.Equal(t, tt.wantCalls, calls)
			if !tt.wantErr {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, errWrite)
			require.Equal(t, fmt.Sprintf("attempt %d: write failed", calls), err.Error(), "the last attempt's error, unchanged")
			require.False(t, Stopped(err))
		})
	}
}

func TestOnceAfterFailure(t *testing.T) {
	t.Parallel()
	for _, once := range []bool{true, false} {
		t.Run(fmt.Sprint("once=", once), func(t *testing.T) {
			t.Parallel()
			w := New(Policy{Delays: []time.Duration{time.Millisecond}, OnceAfterFailure: once})
			calls := 0
			require.Error(t, w.Do(context.Background(), failing(100, &calls)))
			require.Equal(t, 2, calls)

			calls = 0
			require.Error(t, w.Do(context.Background(), failing(100, &calls)))
			want := 2
			if once {
				want = 1
			}
			require.Equal(t, want, calls, "the write after one that failed every retry")

			w.Succeeded()
			calls = 0
			require.Error(t, w.Do(context.Background(), failing(100, &calls)))
			require.Equal(t, 2, calls, "after a success, a write gets its retries again")
		})
	}
}

func TestDoStopsWithItsContext(t *testing.T) {
	t.Parallel()
	w := New(Policy{Delays: []time.Duration{time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- w.Do(ctx, func(context.Context) error { calls++; return errWrite })
	}()
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, errWrite)
		require.Equal(t, errWrite.Error(), err.Error())
		require.True(t, Stopped(err), "the context ended before the retry was due")
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not return when its context ended")
	}
	require.Equal(t, 1, calls)

	// A context that is already done allows the first attempt, and no retry.
	calls = 0
	err := w.Do(ctx, func(context.Context) error { calls++; return errWrite })
	require.True(t, Stopped(err))
	require.Equal(t, 1, calls)
}

// TestPolicies pins the documented schedules: the outbox retries a finishing write after
// 100 ms, 500 ms and 2 s; the relay retries a row's write after 100 ms and 500 ms, and once
// a row failed every retry, writes the next rows once each.
func TestPolicies(t *testing.T) {
	t.Parallel()
	require.Equal(t, []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}, Batch.Delays)
	require.False(t, Batch.OnceAfterFailure)
	require.Equal(t, []time.Duration{100 * time.Millisecond, 500 * time.Millisecond}, Row.Delays)
	require.True(t, Row.OnceAfterFailure)
}
