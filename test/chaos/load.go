package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// keyName is the key of row i: rows go round robin over the keys, so row i is number i/keys
// of its key. Key 0 is the poison key when the scenario has one.
func keyName(i, keys int, poison bool) string {
	k := i % keys
	if poison && k == 0 {
		return poisonKey
	}
	return fmt.Sprintf("k%03d", k)
}

const poisonKey = "poison"

func rowPayload(i, keys int, poison bool) payload {
	return payload{ID: fmt.Sprintf("r%06d", i), Key: keyName(i, keys, poison), Seq: i / keys}
}

// produceOutbox inserts rows into the outbox as one application would: one writer, rows of a
// key in order, in small batches spread evenly over spread. A batch whose commit failed (the
// database restarting) is looked up by its ids and inserted again only when it is absent.
// maxAttempts gives the max_attempts of a row of a key (0: the column default).
func produceOutbox(ctx context.Context, pool *pgtool.Pool, rows, keys int, spread time.Duration, poison bool, maxAttempts func(key string) int) (int, error) {
	batches := max(1, int(spread/(100*time.Millisecond)))
	size := (rows + batches - 1) / batches
	start := time.Now()
	inserted := 0
	for b := 0; b*size < rows; b++ {
		if err := sleepUntil(ctx, start.Add(time.Duration(b)*spread/time.Duration(batches))); err != nil {
			return inserted, err
		}
		var ids, ks, bodies []string
		var atts []int32
		for i := b * size; i < min(rows, (b+1)*size); i++ {
			p := rowPayload(i, keys, poison)
			body, _ := json.Marshal(p)
			ids = append(ids, p.ID)
			ks = append(ks, p.Key)
			bodies = append(bodies, string(body))
			atts = append(atts, int32(maxAttempts(p.Key)))
		}
		if err := insertBatch(ctx, pool, ids, ks, bodies, atts); err != nil {
			return inserted, err
		}
		inserted += len(ids)
	}
	return inserted, nil
}

const insertSQL = `INSERT INTO outbox (topic, key, payload, max_attempts)
SELECT 'chaos.direct', u.k, u.p::jsonb, CASE WHEN u.m > 0 THEN u.m ELSE 5 END
FROM unnest($1::text[], $2::text[], $3::int[]) WITH ORDINALITY AS u(k, p, m, n)
ORDER BY u.n`

func insertBatch(ctx context.Context, pool *pgtool.Pool, ids, keys, bodies []string, atts []int32) error {
	deadline := time.Now().Add(2 * time.Minute)
	var lastErr error
	for attempt := 0; attempt < 1200 && time.Now().Before(deadline); attempt++ {
		if attempt > 0 {
			var n int
			err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE payload->>'id' = ANY($1)`, ids).Scan(&n)
			if err == nil && n == len(ids) {
				return nil // the failed commit had committed
			}
			if err == nil && n != 0 {
				return fmt.Errorf("a batch committed in part: %d of %d rows", n, len(ids))
			}
			if err != nil {
				lastErr = err
				if err := sleep(ctx, 100*time.Millisecond); err != nil {
					return err
				}
				continue
			}
		}
		_, err := pool.Exec(ctx, insertSQL, keys, bodies, atts)
		if err == nil {
			return nil
		}
		lastErr = err
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("inserting a batch of %d rows: gave up: %w", len(ids), lastErr)
}

// sendWebhooks posts rows webhooks to the inbox path of the replicas that targets returns,
// spread over spread, by senders goroutines that each own a share of the keys and post the
// rows of a key one after the other (the next only after the previous was accepted). A post
// that fails goes to another replica. It returns the number of accepted webhooks.
func sendWebhooks(ctx context.Context, targets func() []string, path string, rows, keys int, spread time.Duration, senders int) (int, error) {
	start := time.Now()
	var mu sync.Mutex
	accepted := 0
	var errs []error
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 5 * time.Second}
			rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			for i := 0; i < rows; i++ {
				if (i%keys)%senders != g {
					continue
				}
				if err := sleepUntil(ctx, start.Add(time.Duration(i)*spread/time.Duration(rows))); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				body, _ := json.Marshal(rowPayload(i, keys, false))
				if err := postOne(ctx, client, rng, targets, path, body); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mu.Lock()
				accepted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return accepted, errors.Join(errs...)
}

func postOne(ctx context.Context, client *http.Client, rng *rand.Rand, targets func() []string, path string, body []byte) error {
	deadline := time.Now().Add(2 * time.Minute)
	last := ""
	for attempt := 0; attempt < 2000 && time.Now().Before(deadline); attempt++ {
		urls := targets()
		if len(urls) > 0 {
			url := urls[rng.IntN(len(urls))] + path
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return fmt.Errorf("building a webhook: %w", err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK:
					return nil
				case resp.StatusCode >= 400 && resp.StatusCode < 500:
					return fmt.Errorf("webhook %s: %s answered %d", body, url, resp.StatusCode)
				}
				last = fmt.Sprintf("%s answered %d", url, resp.StatusCode)
			} else {
				last = err.Error()
			}
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("webhook %s not accepted: gave up, last: %s", body, last)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func sleepUntil(ctx context.Context, at time.Time) error {
	if d := time.Until(at); d > 0 {
		return sleep(ctx, d)
	}
	return ctx.Err()
}
