package replay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// rows is an in-memory selection of n rows with ids 0001..n; batch moves them in id order.
func rows(n int) (Batch, *int) {
	moved := 0
	return func(_ context.Context, cursor string, limit int) (int64, string, error) {
		start := 0
		if cursor != "" {
			fmt.Sscanf(cursor, "%d", &start)
		}
		end := min(start+limit, n)
		if end <= start {
			return 0, "", nil
		}
		moved += end - start
		return int64(end - start), fmt.Sprintf("%04d", end), nil
	}, &moved
}

func TestRunMovesEverythingInBatches(t *testing.T) {
	b, moved := rows(25)
	res, err := Run(context.Background(), b, Options{BatchSize: 10})
	if err != nil || res.Moved != 25 || res.Batches != 3 || *moved != 25 {
		t.Fatalf("Run = %+v, %v (moved %d); want 25 in 3 batches", res, err, *moved)
	}
}

func TestRunStopsAtTheLimit(t *testing.T) {
	b, moved := rows(100)
	res, err := Run(context.Background(), b, Options{BatchSize: 10, Limit: 25})
	if err != nil || res.Moved != 25 || res.Batches != 3 || *moved != 25 {
		t.Fatalf("Run = %+v, %v (moved %d); want 25 in 3 batches", res, err, *moved)
	}
}

// TestRunKeepsTheRate checks the waits that the rate asks for, on a clock that the sleeps move.
func TestRunKeepsTheRate(t *testing.T) {
	now := time.Unix(1000, 0)
	var waits []time.Duration
	b, _ := rows(30)
	res, err := Run(context.Background(), b, Options{BatchSize: 10, RowsPerSecond: 20,
		Now:   func() time.Time { return now },
		Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); now = now.Add(d); return nil }})
	if err != nil || res.Moved != 30 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	want := []time.Duration{500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("waits = %v, want %v (10 rows per batch at 20 rows/s)", waits, want)
	}
}

func TestRunReturnsWhatMovedBeforeAnError(t *testing.T) {
	calls := 0
	boom := errors.New("boom")
	res, err := Run(context.Background(), func(context.Context, string, int) (int64, string, error) {
		calls++
		if calls == 2 {
			return 0, "", boom
		}
		return 10, "x", nil
	}, Options{BatchSize: 10})
	if !errors.Is(err, boom) || res.Moved != 10 || res.Batches != 1 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

func TestOptionsBounds(t *testing.T) {
	for _, o := range []Options{{Limit: -1}, {BatchSize: MaxBatchSize + 1}, {RowsPerSecond: -1}} {
		if o.Check() == nil {
			t.Errorf("%+v passed the check", o)
		}
	}
}
