package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/replay"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store"
)

// replaySampleSize is the number of ids that a dry run prints, as the admin route's.
const replaySampleSize = 10

// replayArgs are the options of `queuebox replay`: the filters and the safe replay's fields of
// POST /admin/replay and POST /admin/inbox/replay (docs/replay.md), on the command line.
type replayArgs struct {
	table       string
	ids         []string
	topics      []string
	destination string
	sources     []string
	consumption string
	from, to    *time.Time
	states      []string
	opts        replay.Options
	dryRun      bool
	json        bool
}

// listFlag is a flag that may be given more than once and takes comma-separated values.
type listFlag struct{ values *[]string }

func (l listFlag) String() string {
	if l.values == nil {
		return ""
	}
	return strings.Join(*l.values, ",")
}

func (l listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l.values = append(*l.values, v)
		}
	}
	return nil
}

// timeFlag is an optional RFC 3339 instant.
type timeFlag struct{ t **time.Time }

func (f timeFlag) String() string {
	if f.t == nil || *f.t == nil {
		return ""
	}
	return (*f.t).Format(time.RFC3339Nano)
}

func (f timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("%q is not an RFC 3339 instant", s)
	}
	*f.t = &t
	return nil
}

// replayUsageError is a replay command line whose values are out of their bounds.
type replayUsageError struct{ msg string }

func (e replayUsageError) Error() string { return "Invalid replay: " + e.msg }

// parseReplay parses `replay [--table outbox|inbox] [filters] [--states S] [--limit N]
// [--batch-size N] [--rows-per-second R] [--dry-run] [--json]`; args starts with "replay".
func parseReplay(args []string) (command, error) {
	r := &replayArgs{}
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&r.table, "table", console.TableOutbox, "")
	fs.Var(listFlag{&r.ids}, "id", "")
	fs.Var(listFlag{&r.topics}, "topic", "")
	fs.StringVar(&r.destination, "destination", "", "")
	fs.Var(listFlag{&r.sources}, "source", "")
	fs.StringVar(&r.consumption, "consumption", "", "")
	fs.Var(timeFlag{&r.from}, "created-after", "")
	fs.Var(timeFlag{&r.to}, "created-before", "")
	fs.Var(listFlag{&r.states}, "states", "")
	fs.Int64Var(&r.opts.Limit, "limit", 0, "")
	fs.IntVar(&r.opts.BatchSize, "batch-size", 0, "")
	fs.Float64Var(&r.opts.RowsPerSecond, "rows-per-second", 0, "")
	fs.BoolVar(&r.dryRun, "dry-run", false, "")
	fs.BoolVar(&r.json, "json", false, "")
	rest := args[1:]
	if err := fs.Parse(rest); err != nil {
		return command{}, replayUsageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return command{}, usageError{fs.Args()}
	}
	if err := r.check(fs); err != nil {
		return command{}, replayUsageError{err.Error()}
	}
	return command{name: "replay", replay: r}, nil
}

// check refuses options that the admin routes would refuse, and filters of the other table.
func (r *replayArgs) check(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var allowed, otherTable []string
	switch r.table {
	case console.TableOutbox:
		allowed, otherTable = []string{store.OutboxSent, store.OutboxDead}, []string{"source", "consumption"}
	case console.TableInbox:
		allowed, otherTable = []string{store.InboxProcessed, store.InboxDead}, []string{"topic", "destination"}
	default:
		return fmt.Errorf("--table must be outbox or inbox, not %q", r.table)
	}
	for _, name := range otherTable {
		if set[name] {
			return fmt.Errorf("--%s does not apply to the %s table", name, r.table)
		}
	}
	if len(r.states) == 0 {
		// The command line replays dead rows unless told otherwise, as the console does.
		r.states = []string{store.OutboxDead}
	}
	for _, s := range r.states {
		if !slices.Contains(allowed, s) {
			return fmt.Errorf("--states may hold only %s on the %s table, not %q", strings.Join(allowed, ","), r.table, s)
		}
	}
	if err := r.checkValues(); err != nil {
		return err
	}
	if err := r.checkBounds(set); err != nil {
		return err
	}
	return r.opts.Check()
}

// checkValues refuses an --id that is not a UUID and a --consumption other than push or pull.
func (r *replayArgs) checkValues() error {
	for _, id := range r.ids {
		if _, err := uuid.Parse(id); err != nil {
			return fmt.Errorf("--id %q is not a UUID", id)
		}
	}
	if r.consumption != "" && r.consumption != store.ConsumptionPush && r.consumption != store.ConsumptionPull {
		return fmt.Errorf("--consumption must be push or pull, not %q", r.consumption)
	}
	return nil
}

// checkBounds refuses a --limit, --batch-size or --rows-per-second given (set) out of its
// bounds.
func (r *replayArgs) checkBounds(set map[string]bool) error {
	switch {
	case set["limit"] && r.opts.Limit <= 0:
		return errors.New("--limit must be above 0")
	case set["batch-size"] && (r.opts.BatchSize <= 0 || r.opts.BatchSize > replay.MaxBatchSize):
		return fmt.Errorf("--batch-size must be between 1 and %d", replay.MaxBatchSize)
	case set["rows-per-second"] && (r.opts.RowsPerSecond <= 0 || r.opts.RowsPerSecond > replay.MaxRowsPerSecond):
		return fmt.Errorf("--rows-per-second must be above 0 and at most %d", replay.MaxRowsPerSecond)
	}
	return nil
}

// replayCommandJSON is the answer of `replay --json`: the keys of the admin route's answer.
type replayCommandJSON struct {
	Table   string   `json:"table"`
	DryRun  bool     `json:"dryRun"`
	Count   int64    `json:"count"`
	Moved   int64    `json:"moved"`
	Batches int      `json:"batches"`
	Sample  []string `json:"sample,omitempty"`
}

// replayCommand runs `queuebox replay` against the configured database.
func replayCommand(ctx context.Context, env Env, r *replayArgs) int {
	cfg, db, ok := connect(ctx, env, slog.LevelWarn)
	if !ok {
		return ExitFailure
	}
	defer db.Close()
	if err := db.CheckTrack(ctx, nil); err != nil {
		return fail(env, "read the migration history", err)
	}
	rs, isReplay := db.Store.(store.ReplayStore)
	if !isReplay {
		fmt.Fprintln(env.Stderr, "QueueBox could not replay. Reason: this store has no batched replay.")
		return ExitFailure
	}
	runner, empty, err := r.runner(ctx, cfg, db.Store, rs)
	if err != nil {
		return fail(env, "select the rows to replay", err)
	}
	var count int64
	var sample []string
	if !empty {
		if count, err = runner.Count(ctx); err != nil {
			return fail(env, "count the rows to replay", err)
		}
		if r.opts.Limit > 0 && count > r.opts.Limit {
			count = r.opts.Limit
		}
	}
	if r.dryRun {
		if count > 0 {
			rows, err := runner.Scan(ctx, int(min(count, replaySampleSize)))
			if err != nil {
				return fail(env, "list the rows to replay", err)
			}
			for _, row := range rows {
				sample = append(sample, row.ID)
			}
		}
		if r.json {
			writeJSONTo(env.Stdout, replayCommandJSON{Table: r.table, DryRun: true, Count: count, Sample: sample})
			return ExitOK
		}
		fmt.Fprintf(env.Stdout, "Dry run: %d %s %s rows would move back to pending; nothing changed.\n",
			count, strings.Join(r.states, " or "), r.table)
		for _, id := range sample {
			fmt.Fprintf(env.Stdout, "  %s\n", id)
		}
		return ExitOK
	}
	var res replay.Result
	if !empty && count > 0 {
		o := r.opts
		if !r.json {
			fmt.Fprintf(env.Stderr, "Replaying %d %s %s rows in batches of %d...\n", count, strings.Join(r.states, " or "),
				r.table, orDefault(o.BatchSize, replay.DefaultBatchSize))
			o.Progress = func(moved int64, batches int) {
				fmt.Fprintf(env.Stderr, "  batch %d: %d of %d rows moved\n", batches, moved, count)
			}
		}
		res, err = replay.Run(ctx, runner.Batch, o)
		if err != nil {
			return fail(env, fmt.Sprintf("finish the replay (%d rows moved in %d batches before the failure)", res.Moved, res.Batches), err)
		}
	}
	if r.json {
		writeJSONTo(env.Stdout, replayCommandJSON{Table: r.table, Count: count, Moved: res.Moved, Batches: res.Batches})
		return ExitOK
	}
	fmt.Fprintf(env.Stdout, "Moved %d %s rows back to pending in %d batches.\n", res.Moved, r.table, res.Batches)
	return ExitOK
}

// orDefault returns v, or def when v is 0.
func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// runner builds the selection. empty is true when the topic filters cannot overlap (a
// destination that no finished topic routes to), so nothing moves.
func (r *replayArgs) runner(ctx context.Context, cfg *config.Config, st store.Store, rs store.ReplayStore) (replay.Selection, bool, error) {
	if r.table == console.TableInbox {
		sel := store.InboxSelection{States: r.states, IDs: r.ids, Sources: r.sources, Consumption: r.consumption, CreatedFrom: r.from, CreatedTo: r.to}
		return replay.Inbox(rs, sel), false, nil
	}
	topics := r.topics
	if r.destination != "" {
		routes, err := service.Routes(cfg)
		if err != nil {
			return replay.Selection{}, false, fmt.Errorf("building the routes: %w", err)
		}
		all, err := st.OutboxFinishedTopics(ctx)
		if err != nil {
			return replay.Selection{}, false, fmt.Errorf("listing outbox topics: %w", err)
		}
		routed := routes.TopicsOf(r.destination, all)
		if len(topics) > 0 {
			routed = slices.DeleteFunc(routed, func(t string) bool { return !slices.Contains(topics, t) })
		}
		if len(routed) == 0 {
			return replay.Selection{}, true, nil
		}
		topics = routed
	}
	sel := store.OutboxSelection{States: r.states, IDs: r.ids, Topics: topics, CreatedFrom: r.from, CreatedTo: r.to}
	return replay.Outbox(rs, sel), false, nil
}
