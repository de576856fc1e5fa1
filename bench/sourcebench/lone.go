package sourcebench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store"
)

// LoneResult is the store latency of lone messages on one broker: the source runs with the
// broker's default batch setting on an empty queue, stream or topic; each message is published
// after the one before it was stored and the source has been idle for the gap, and its latency
// runs from the publish call to the return of the insert of its row (the publish's own round
// trip to the broker included). At low traffic every message is such a lone one.
type LoneResult struct {
	// Broker names the source's broker (rabbitmq, kafka, nats).
	Broker string `json:"broker"`
	// Setting names the source settings of the run.
	Setting string `json:"setting"`
	// Batch is the source's batch size.
	Batch int `json:"batch"`
	// Messages is how many lone messages were timed.
	Messages int `json:"messages"`
	// GapMs is the idle time before each publish.
	GapMs float64 `json:"gapMs"`
	// MedianMs, P95Ms and MaxMs summarise LatenciesMs, in publish order.
	MedianMs    float64   `json:"medianMs"`
	P95Ms       float64   `json:"p95Ms"`
	MaxMs       float64   `json:"maxMs"`
	LatenciesMs []float64 `json:"latenciesMs"`
}

// loneLatency measures o.LoneMessages lone messages on a fresh backlog of b, into a fresh
// database.
func loneLatency(ctx context.Context, o Options, broker string, b brokerBench) (LoneResult, error) {
	setting, batch := b.setting()
	res := LoneResult{Broker: broker, Setting: setting, Batch: batch, Messages: o.LoneMessages, GapMs: round(o.LoneGap.Seconds()*1000, 1)}
	bl, err := b.fill(ctx, nil)
	if err != nil {
		return res, fmt.Errorf("making an empty backlog: %w", err)
	}
	defer bl.close()
	d, err := openDatabase(ctx, o)
	if err != nil {
		return res, err
	}
	defer d.close()
	name := broker + "-lone-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	src, err := bl.source(name, batch)
	if err != nil {
		return res, fmt.Errorf("NewSource: %w", err)
	}
	sink := &signalSink{inner: d.st, stored: make(chan time.Time, 1)}
	rctx, cancel := context.WithTimeout(ctx, o.RunTimeout)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- src.Run(rctx, sink) }()
	defer func() {
		cancel()
		<-ran
	}()
	body := bodies(o.LoneMessages+1, o.BodyBytes)
	// The first message waits for the source's connection: it is not measured.
	for i := range body {
		if i > 0 {
			select {
			case <-time.After(o.LoneGap):
			case <-rctx.Done():
				return res, fmt.Errorf("after %d lone messages: %w", i-1, rctx.Err())
			}
		}
		t0 := time.Now()
		if err := bl.publish(rctx, body[i]); err != nil {
			return res, fmt.Errorf("publishing lone message %d: %w", i, err)
		}
		select {
		case at := <-sink.stored:
			if i > 0 {
				res.LatenciesMs = append(res.LatenciesMs, round(at.Sub(t0).Seconds()*1000, 2))
			}
		case err := <-ran:
			ran <- err
			return res, fmt.Errorf("the source stopped before lone message %d was stored: %v", i, err)
		case <-rctx.Done():
			return res, fmt.Errorf("lone message %d was not stored: %w", i, rctx.Err())
		}
	}
	sorted := slices.Clone(res.LatenciesMs)
	slices.Sort(sorted)
	if n := len(sorted); n > 0 {
		res.MedianMs = sorted[(n-1)/2]
		res.P95Ms = sorted[min(n-1, (n*95+99)/100-1)]
		res.MaxMs = sorted[n-1]
	}
	return res, nil
}

// signalSink passes inserts to the store and sends the time of each insert that stored a new
// row on stored.
type signalSink struct {
	inner  inbox.Inserter
	stored chan time.Time
}

// InboxInsert implements inbox.Inserter.
func (s *signalSink) InboxInsert(ctx context.Context, p store.InboxInsertParams) (store.InboxInsertResult, error) {
	rs, err := s.InboxInsertBatch(ctx, []store.InboxInsertParams{p})
	if err != nil {
		return store.InboxInsertResult{}, err
	}
	return rs[0], nil
}

// InboxInsertBatch implements inbox.Inserter.
func (s *signalSink) InboxInsertBatch(ctx context.Context, ps []store.InboxInsertParams) ([]store.InboxInsertResult, error) {
	rs, err := s.inner.InboxInsertBatch(ctx, ps)
	if err != nil {
		return rs, err
	}
	at := time.Now()
	for _, r := range rs {
		if !r.Duplicate {
			select {
			case s.stored <- at:
			default:
			}
		}
	}
	return rs, nil
}

func printLone(w io.Writer, r LoneResult) {
	fmt.Fprintf(w, "%-8s %s %d (default): a lone message is stored %.1f ms after its publish (median; p95 %.1f ms, max %.1f ms; %d messages, each after %.0f ms idle)\n",
		r.Broker, r.Setting, r.Batch, r.MedianMs, r.P95Ms, r.MaxMs, len(r.LatenciesMs), r.GapMs)
}
