// Package operator is what an operator reads and changes in the web console (shared/console)
// and with `queuebox dead`: the console.Backend over the store, the routes and the
// destination state. It groups the dead rows of both tables by destination or source and
// error fingerprint, shows one row with its secrets redacted, replays a selection of dead
// rows in batches, lists and pauses the destinations, and keeps the console's logouts in the
// database. It takes its own Config; the composition root (shared/service) maps the
// configuration to it.
package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/alternayte/queuebox/shared/admin"
	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/deadletter"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
)

// The limits of the backend: the dead rows that the grouping reads (the newest are not
// preferred: the scan walks the ids), the ids that a preview shows, and the rows of one replay
// batch.
const (
	DeadScanLimit = 100000
	previewSample = 10
	replayBatch   = 500
	scanPage      = 1000
)

// Config is what the backend knows of the configuration.
type Config struct {
	// Routes are the compiled routes (routes[*]): the dead outbox rows group under the
	// destination that the routes give their topic, or "(no route)". Nil: every topic has no
	// route.
	Routes *route.Table
	// Destinations are the names of the configured destinations, sorted: the ones that the
	// destination list shows and that SetPaused accepts.
	Destinations []string
}

// Backend implements console.Backend over the store. It is safe for concurrent use.
type Backend struct {
	st     store.Store
	routes *route.Table
	dests  admin.Destinations
}

// New returns the backend over st, whose destination states are those of states (st itself,
// or the store that a Build without a database binds later).
func New(st store.Store, states store.DestinationStateStore, cfg Config) *Backend {
	routes := cfg.Routes
	if routes == nil {
		routes = route.NewTable(nil)
	}
	return &Backend{st: st, routes: routes, dests: admin.Destinations{Names: cfg.Destinations, States: states}}
}

var _ console.Backend = (*Backend)(nil)

// replayStore returns the store's replay statements (the bound store of a Build without a
// database forwards them to the store that Open bound).
func (b *Backend) replayStore() (store.ReplayStore, error) {
	rs, ok := b.st.(store.ReplayStore)
	if !ok {
		return nil, errors.New("the store has no replay statements")
	}
	return rs, nil
}

// Overview counts each table's rows by state.
func (b *Backend) Overview(ctx context.Context) (console.Overview, error) {
	rs, err := b.replayStore()
	if err != nil {
		return console.Overview{}, err
	}
	o := console.Overview{Outbox: console.TableCounts{ByState: map[string]int64{}}, Inbox: console.TableCounts{ByState: map[string]int64{}}}
	for _, s := range []string{store.OutboxPending, store.OutboxProcessing, store.OutboxSent, store.OutboxDead} {
		n, err := rs.OutboxSelectionCount(ctx, store.OutboxSelection{States: []string{s}})
		if err != nil {
			return o, err
		}
		o.Outbox.ByState[s] = n
	}
	for _, s := range []string{store.InboxPending, store.InboxProcessing, store.InboxProcessed, store.InboxDead} {
		n, err := rs.InboxSelectionCount(ctx, store.InboxSelection{States: []string{s}})
		if err != nil {
			return o, err
		}
		o.Inbox.ByState[s] = n
	}
	os, err := b.st.OutboxStats(ctx)
	if err != nil {
		return o, err
	}
	o.Outbox.OldestPendingAge = os.OldestPendingAge
	is, err := b.st.InboxStats(ctx)
	if err != nil {
		return o, err
	}
	o.Inbox.OldestPendingAge = is.OldestPendingAge
	return o, nil
}

// destinationOf is the destination that the routes give a topic; "(no route)" when none does.
func (b *Backend) destinationOf(topic string) string {
	if r, ok := b.routes.Match(topic); ok {
		return r.Destination
	}
	return "(no route)"
}

// deadRows calls f for every dead row of the table, up to DeadScanLimit, with its
// target (the destination or the source).
func (b *Backend) deadRows(ctx context.Context, table string, f func(target string, r store.FinishedRow)) error {
	rs, err := b.replayStore()
	if err != nil {
		return err
	}
	after, seen := "", 0
	for seen < DeadScanLimit {
		page := store.ScanParams{After: after, Limit: scanPage}
		var rows []store.FinishedRow
		if table == console.TableOutbox {
			rows, err = rs.OutboxSelectionScan(ctx, store.OutboxSelection{States: []string{store.OutboxDead}}, page)
		} else {
			rows, err = rs.InboxSelectionScan(ctx, store.InboxSelection{States: []string{store.InboxDead}}, page)
		}
		if err != nil {
			return err
		}
		for _, r := range rows {
			target := r.Source
			if table == console.TableOutbox {
				target = b.destinationOf(r.Topic)
			}
			f(target, r)
		}
		seen += len(rows)
		if len(rows) < scanPage {
			return nil
		}
		after = rows[len(rows)-1].ID
	}
	return nil
}

// DeadGroups groups the dead rows by table, target and error fingerprint.
func (b *Backend) DeadGroups(ctx context.Context) ([]console.DeadGroup, error) {
	type k struct{ table, target, fp string }
	groups := map[k]*console.DeadGroup{}
	for _, table := range []string{console.TableOutbox, console.TableInbox} {
		err := b.deadRows(ctx, table, func(target string, r store.FinishedRow) {
			key := k{table, target, deadletter.Fingerprint(r.LastError)}
			g := groups[key]
			if g == nil {
				g = &console.DeadGroup{Table: table, Target: target, Fingerprint: key.fp,
					FirstSeen: r.UpdatedAt, LastSeen: r.UpdatedAt, SampleID: r.ID, SampleError: redact.String(r.LastError)}
				groups[key] = g
			}
			g.Count++
			if r.UpdatedAt.Before(g.FirstSeen) {
				g.FirstSeen = r.UpdatedAt
			}
			if r.UpdatedAt.After(g.LastSeen) {
				g.LastSeen = r.UpdatedAt
			}
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]console.DeadGroup, 0, len(groups))
	for _, g := range groups {
		g.Fingerprint = redact.String(g.Fingerprint)
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Table+out[i].Target+out[i].Fingerprint < out[j].Table+out[j].Target+out[j].Fingerprint
	})
	return out, nil
}

// Row reads one row with its bodies; payload, headers and last_error pass the redaction.
func (b *Backend) Row(ctx context.Context, table, id string) (console.Row, error) {
	rs, err := b.replayStore()
	if err != nil {
		return console.Row{}, err
	}
	page := store.ScanParams{Limit: 1, Bodies: true}
	var rows []store.FinishedRow
	if table == console.TableOutbox {
		rows, err = rs.OutboxSelectionScan(ctx, store.OutboxSelection{IDs: []string{id},
			States: []string{store.OutboxPending, store.OutboxProcessing, store.OutboxSent, store.OutboxDead}}, page)
	} else {
		rows, err = rs.InboxSelectionScan(ctx, store.InboxSelection{IDs: []string{id},
			States: []string{store.InboxPending, store.InboxProcessing, store.InboxProcessed, store.InboxDead}}, page)
	}
	if err != nil {
		return console.Row{}, err
	}
	if len(rows) == 0 {
		return console.Row{}, fmt.Errorf("%s row %s: %w", table, id, console.ErrNotFound)
	}
	r := rows[0]
	return console.Row{Table: table, ID: r.ID, State: r.State, Topic: r.Topic, Source: r.Source, Key: r.Key,
		Attempt: r.Attempt, LastError: redact.String(r.LastError), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Payload: redactJSON(r.Payload), Headers: redactJSON(r.Headers)}, nil
}

// redactJSON indents a JSON document for reading and redacts the values of secret keys.
func redactJSON(raw json.RawMessage) json.RawMessage {
	var v any
	if err := json.Unmarshal(raw, &v); err == nil {
		if b, err := json.MarshalIndent(v, "", "  "); err == nil {
			raw = b
		}
	}
	return json.RawMessage(redact.String(string(raw)))
}

// selectedIDs returns the ids of the dead rows that sel selects, in id order.
func (b *Backend) selectedIDs(ctx context.Context, sel console.Selection) ([]string, error) {
	var ids []string
	err := b.deadRows(ctx, sel.Table, func(target string, r store.FinishedRow) {
		switch {
		case len(sel.IDs) > 0 && !slices.Contains(sel.IDs, r.ID):
		case sel.Target != "" && target != sel.Target:
		case sel.Fingerprint != "" && redact.String(deadletter.Fingerprint(r.LastError)) != sel.Fingerprint:
		default:
			ids = append(ids, r.ID)
		}
	})
	return ids, err
}

// Preview counts the dead rows of the selection and samples their ids.
func (b *Backend) Preview(ctx context.Context, sel console.Selection) (console.Preview, error) {
	ids, err := b.selectedIDs(ctx, sel)
	if err != nil {
		return console.Preview{}, err
	}
	p := console.Preview{Count: int64(len(ids))}
	p.Sample = ids[:min(len(ids), previewSample)]
	return p, nil
}

// Replay moves the dead rows of the selection back to pending, replayBatch ids a
// statement, each in its own transaction; only rows that are still dead move.
func (b *Backend) Replay(ctx context.Context, sel console.Selection) (int64, error) {
	return b.ReplayWithProgress(ctx, sel, nil)
}

var _ console.ProgressReplayer = (*Backend)(nil)

// ReplayWithProgress is Replay that calls progress, when set, after every batch.
func (b *Backend) ReplayWithProgress(ctx context.Context, sel console.Selection, progress func(moved int64, batches int, total int64)) (int64, error) {
	rs, err := b.replayStore()
	if err != nil {
		return 0, err
	}
	ids, err := b.selectedIDs(ctx, sel)
	if err != nil {
		return 0, err
	}
	var moved int64
	batches := 0
	for chunk := range slices.Chunk(ids, replayBatch) {
		var res store.ReplayBatchResult
		if sel.Table == console.TableOutbox {
			res, err = rs.OutboxReplayBatch(ctx, store.OutboxSelection{States: []string{store.OutboxDead}, IDs: chunk}, "", len(chunk))
		} else {
			res, err = rs.InboxReplayBatch(ctx, store.InboxSelection{States: []string{store.InboxDead}, IDs: chunk}, "", len(chunk))
		}
		if err != nil {
			return moved, err
		}
		moved += res.Moved
		batches++
		if progress != nil {
			progress(moved, batches, int64(len(ids)))
		}
	}
	return moved, nil
}

// Destinations lists the configured destinations with their state and pending rows.
func (b *Backend) Destinations(ctx context.Context) ([]console.Destination, error) {
	list, err := b.dests.List(ctx)
	if err != nil {
		return nil, err
	}
	stats, err := b.st.OutboxStats(ctx)
	pending := map[string]int64{}
	known := err == nil && stats.PendingByTopic != nil
	if known {
		for topic, n := range stats.PendingByTopic {
			pending[b.destinationOf(topic)] += n
		}
	}
	out := make([]console.Destination, len(list))
	for i, d := range list {
		out[i] = console.Destination{Name: d.Name, Paused: d.Paused, Circuit: d.Circuit, Pending: -1}
		if known {
			out[i].Pending = pending[d.Name]
		}
	}
	return out, nil
}

// SetPaused pauses or resumes a configured destination.
func (b *Backend) SetPaused(ctx context.Context, name string, paused bool) error {
	_, err := b.dests.SetPaused(ctx, name, paused)
	if errors.Is(err, admin.ErrUnknownDestination) {
		return fmt.Errorf("%w: %w", console.ErrNotFound, err)
	}
	return err
}
