package outbox

import (
	"context"
	"strconv"
	"time"

	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
)

// Deduplication ids and replays.
//
// Some destinations drop a message whose deduplication id they have seen within a window: a
// JetStream stream drops a publish whose Nats-Msg-Id it has seen (2 minutes by default, often
// hours), an SQS FIFO queue one whose MessageDeduplicationId it has seen (5 minutes). The id
// must stay the same on the retries of one delivery, so that a publish whose acknowledgement
// was lost and that is published again is not stored twice; and it must change on a replay,
// which is a new delivery of a row that the destination already has: a replay inside the
// window would otherwise be dropped while the row is marked sent.
//
// The rule, for every destination whose publisher is a DedupPublisher that UsesDedupID:
// Message.DedupID is the row id until the first replay, then "<row id>:<generation>", where the
// generation counts the replays of the row. The replay statements raise it in the transaction
// that moves the row (store.ReplayGenerationTable), and the poller reads it after each claim,
// in one statement per claimed batch that holds rows routed to such a destination; a batch
// without one reads nothing. x-message-id and X-Message-Id stay the row id.

// DedupPublisher is a Publisher whose destination drops a message whose deduplication id it has
// seen. A wrapper of a Publisher must implement it too when the publisher it wraps does.
type DedupPublisher interface {
	Publisher
	// UsesDedupID reports whether the publisher sends Message.DedupID: true for a NATS
	// destination on JetStream, false on core NATS.
	UsesDedupID() bool
}

// DedupID returns the deduplication id of the message: its row id before the first replay of
// the row, and "<row id>:<generation>" after the generation-th replay. The retries of one
// delivery share it.
func (m Message) DedupID() string {
	if m.ReplayGeneration <= 0 {
		return m.ID
	}
	return m.ID + ":" + strconv.FormatInt(m.ReplayGeneration, 10)
}

// dedupReader reads the replay generations of the claimed rows that a destination with a
// deduplication id receives.
type dedupReader struct {
	// gens reads the generations; nil when the store has no such statement (then every row
	// is at generation 0).
	gens store.ReplayGenerationStore
	// dests are the destinations whose publisher uses a deduplication id; empty: nothing to
	// read, ever.
	dests map[string]bool
}

func newDedupReader(st store.OutboxStore, dests map[string]Destination) dedupReader {
	d := dedupReader{dests: map[string]bool{}}
	d.gens, _ = st.(store.ReplayGenerationStore)
	for name, dest := range dests {
		if dp, ok := dest.Publisher.(DedupPublisher); ok && dp.UsesDedupID() {
			d.dests[name] = true
		}
	}
	return d
}

// fill sets the ReplayGeneration of each row of rows routed to a destination with a
// deduplication id, reading them all in one statement. On an error it returns the indexes of
// those rows, whose generation is unknown.
func (d dedupReader) fill(ctx context.Context, routes *route.Table, rows []store.OutboxMessage) ([]int, error) {
	if len(d.dests) == 0 || d.gens == nil {
		return nil, nil
	}
	var idx []int
	var ids []string
	for i := range rows {
		if rt, ok := routes.Match(rows[i].Topic); ok && d.dests[rt.Destination] {
			idx = append(idx, i)
			ids = append(ids, rows[i].ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	gens, err := d.gens.OutboxReplayGenerations(ctx, ids)
	if err != nil {
		return idx, err
	}
	for _, i := range idx {
		rows[i].ReplayGeneration = gens[rows[i].ID]
	}
	return nil, nil
}

// dedupRetry is how long a row waits when its replay generation could not be read.
const dedupRetry = time.Second

// withReplayGenerations fills the replay generations of the claimed rows (dedupReader.fill)
// and returns the rows to publish. When the generations cannot be read, the rows that need one
// are returned to pending unattempted (OutboxDefer) instead of being published with an id that
// the destination may drop; the others go on.
func (r *run) withReplayGenerations(ctx context.Context, rows []store.OutboxMessage) []store.OutboxMessage {
	p := r.p
	unknown, err := p.dedup.fill(ctx, p.routes, rows)
	if err == nil {
		return rows
	}
	p.log.Warn("the replay generations of claimed rows could not be read; their publish waits",
		"rows", len(unknown), "retry_in_ms", max(p.cfg.PollInterval, dedupRetry).Milliseconds(), "error", redact.Error(err))
	skip := make(map[int]bool, len(unknown))
	defers := make([]store.OutboxDeferParams, 0, len(unknown))
	for _, i := range unknown {
		skip[i] = true
		defers = append(defers, store.OutboxDeferParams{Claim: rows[i].Claim(), Delay: max(p.cfg.PollInterval, dedupRetry)})
	}
	// A failed deferral leaves the rows to their leases, as after a crash.
	if deferred, derr := p.store.OutboxDefer(ctx, defers); derr != nil {
		p.log.Warn("returning the rows to pending failed; they wait for their leases to expire", "error", redact.Error(derr))
	} else {
		r.mu.Lock()
		r.sum.Deferred += len(deferred)
		r.mu.Unlock()
	}
	out := make([]store.OutboxMessage, 0, len(rows)-len(unknown))
	for i := range rows {
		if !skip[i] {
			out = append(out, rows[i])
		}
	}
	return out
}
