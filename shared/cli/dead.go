package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/service"
)

// deadArgs are the options of `queuebox dead list|show|replay`.
type deadArgs struct {
	sub  string // list, show or replay
	json bool
	id   string
	// table, target and fingerprint select the rows of a replay (console.Selection).
	table, target, fingerprint string
	dryRun                     bool
}

// selection is the replay's selection.
func (d deadArgs) selection() console.Selection {
	sel := console.Selection{Table: d.table, Target: d.target, Fingerprint: d.fingerprint}
	if d.id != "" {
		sel.IDs = []string{d.id}
	}
	return sel
}

// parseDead parses `dead list [--json]`, `dead show <id> [--json]` and `dead replay [--table
// outbox|inbox] [--target NAME] [--fingerprint TEXT] [--id ID] [--dry-run] [--json]`; args
// starts with "dead".
func parseDead(args []string) (command, error) {
	if len(args) < 2 {
		return command{}, usageError{args}
	}
	d := deadArgs{sub: args[1]}
	fs := flag.NewFlagSet("dead "+args[1], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&d.json, "json", false, "")
	rest := args[2:]
	switch d.sub {
	case "list":
	case "show":
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return command{}, usageError{args[1:]}
		}
		d.id, rest = rest[0], rest[1:]
	case "replay":
		fs.StringVar(&d.table, "table", console.TableOutbox, "")
		fs.StringVar(&d.target, "target", "", "")
		fs.StringVar(&d.fingerprint, "fingerprint", "", "")
		fs.StringVar(&d.id, "id", "", "")
		fs.BoolVar(&d.dryRun, "dry-run", false, "")
	default:
		return command{}, usageError{args[1:]}
	}
	if err := fs.Parse(rest); err != nil || fs.NArg() > 0 {
		return command{}, usageError{rest}
	}
	if d.sub == "replay" && d.table != console.TableOutbox && d.table != console.TableInbox {
		return command{}, usageError{[]string{"--table", d.table}}
	}
	return command{name: "dead", dead: d}, nil
}

// deadCommand runs `queuebox dead ...` against the configured database.
func deadCommand(ctx context.Context, env Env, d deadArgs) int {
	cfg, db, ok := connect(ctx, env, slog.LevelWarn)
	if !ok {
		return ExitFailure
	}
	defer db.Close()
	if err := db.CheckTrack(ctx, nil); err != nil {
		return fail(env, "read the migration history", err)
	}
	b, err := service.NewOperatorBackend(cfg, db.Store)
	if err != nil {
		fmt.Fprintln(env.Stderr, err.Error())
		return ExitFailure
	}
	switch d.sub {
	case "list":
		return deadList(ctx, env, b, d.json)
	case "show":
		return deadShow(ctx, env, b, d.id, d.json)
	default:
		return deadReplay(ctx, env, b, d)
	}
}

func fail(env Env, what string, err error) int {
	fmt.Fprintf(env.Stderr, "QueueBox could not %s. Reason: %s\n", what, redact.Error(err))
	return ExitFailure
}

func writeJSONTo(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// deadGroupJSON is one group of `dead list --json`.
type deadGroupJSON struct {
	Table       string    `json:"table"`
	Target      string    `json:"target"`
	Fingerprint string    `json:"fingerprint"`
	Count       int64     `json:"count"`
	FirstSeen   time.Time `json:"firstSeen"`
	LastSeen    time.Time `json:"lastSeen"`
	SampleID    string    `json:"sampleId"`
	SampleError string    `json:"sampleError"`
}

func deadList(ctx context.Context, env Env, b console.Backend, asJSON bool) int {
	groups, err := b.DeadGroups(ctx)
	if err != nil {
		return fail(env, "list the dead letters", err)
	}
	if asJSON {
		out := make([]deadGroupJSON, len(groups))
		for i, g := range groups {
			out[i] = deadGroupJSON{g.Table, g.Target, g.Fingerprint, g.Count, g.FirstSeen.UTC(), g.LastSeen.UTC(), g.SampleID, g.SampleError}
		}
		writeJSONTo(env.Stdout, out)
		return ExitOK
	}
	if len(groups) == 0 {
		fmt.Fprintln(env.Stdout, "No dead rows.")
		return ExitOK
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tTARGET\tROWS\tFIRST SEEN\tLAST SEEN\tSAMPLE\tERROR")
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", g.Table, g.Target, g.Count,
			g.FirstSeen.UTC().Format(time.RFC3339), g.LastSeen.UTC().Format(time.RFC3339), g.SampleID, g.Fingerprint)
	}
	_ = tw.Flush()
	return ExitOK
}

// deadRowJSON is the answer of `dead show --json`.
type deadRowJSON struct {
	Table     string          `json:"table"`
	ID        string          `json:"id"`
	State     string          `json:"state"`
	Topic     string          `json:"topic,omitempty"`
	Source    string          `json:"source,omitempty"`
	Key       string          `json:"key"`
	Attempt   int             `json:"attempt"`
	LastError string          `json:"lastError"`
	CreatedAt time.Time       `json:"createdAt"`
	UpdatedAt time.Time       `json:"updatedAt"`
	Headers   json.RawMessage `json:"headers"`
	Payload   json.RawMessage `json:"payload"`
}

func deadShow(ctx context.Context, env Env, b console.Backend, id string, asJSON bool) int {
	var row console.Row
	var err error
	for _, table := range []string{console.TableOutbox, console.TableInbox} {
		if row, err = b.Row(ctx, table, id); !errors.Is(err, console.ErrNotFound) {
			break
		}
	}
	if errors.Is(err, console.ErrNotFound) {
		fmt.Fprintf(env.Stderr, "QueueBox could not show row %s. Reason: neither the outbox nor the inbox has it.\n", id)
		return ExitFailure
	}
	if err != nil {
		return fail(env, "show row "+id, err)
	}
	if asJSON {
		writeJSONTo(env.Stdout, deadRowJSON{row.Table, row.ID, row.State, row.Topic, row.Source, row.Key, row.Attempt,
			row.LastError, row.CreatedAt.UTC(), row.UpdatedAt.UTC(), row.Headers, row.Payload})
		return ExitOK
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "table\t%s\nid\t%s\nstate\t%s\n", row.Table, row.ID, row.State)
	if row.Topic != "" {
		fmt.Fprintf(tw, "topic\t%s\n", row.Topic)
	}
	if row.Source != "" {
		fmt.Fprintf(tw, "source\t%s\n", row.Source)
	}
	fmt.Fprintf(tw, "key\t%s\nattempt\t%d\ncreated\t%s\nupdated\t%s\nlast error\t%s\n", row.Key, row.Attempt,
		row.CreatedAt.UTC().Format(time.RFC3339Nano), row.UpdatedAt.UTC().Format(time.RFC3339Nano), row.LastError)
	_ = tw.Flush()
	fmt.Fprintf(env.Stdout, "headers:\n%s\npayload:\n%s\n", row.Headers, row.Payload)
	return ExitOK
}

// replayJSON is the answer of `dead replay --json`.
type replayJSON struct {
	DryRun bool     `json:"dryRun"`
	Count  int64    `json:"count"`
	Moved  int64    `json:"moved"`
	Sample []string `json:"sample,omitempty"`
}

func deadReplay(ctx context.Context, env Env, b console.Backend, d deadArgs) int {
	sel := d.selection()
	p, err := b.Preview(ctx, sel)
	if err != nil {
		return fail(env, "preview the replay", err)
	}
	if d.dryRun {
		if d.json {
			writeJSONTo(env.Stdout, replayJSON{DryRun: true, Count: p.Count, Sample: p.Sample})
			return ExitOK
		}
		fmt.Fprintf(env.Stdout, "Dry run: %d dead %s rows would move back to pending; nothing changed.\n", p.Count, sel.Table)
		for _, id := range p.Sample {
			fmt.Fprintf(env.Stdout, "  %s\n", id)
		}
		return ExitOK
	}
	if !d.json {
		fmt.Fprintf(env.Stderr, "Replaying %d dead %s rows, in batches...\n", p.Count, sel.Table)
	}
	var moved int64
	if pr, ok := b.(console.ProgressReplayer); ok && !d.json {
		moved, err = pr.ReplayWithProgress(ctx, sel, func(moved int64, batches int, total int64) {
			fmt.Fprintf(env.Stderr, "  batch %d: %d of %d rows moved\n", batches, moved, total)
		})
	} else {
		moved, err = b.Replay(ctx, sel)
	}
	if err != nil {
		return fail(env, fmt.Sprintf("replay (after moving %d rows)", moved), err)
	}
	if d.json {
		writeJSONTo(env.Stdout, replayJSON{Count: p.Count, Moved: moved})
		return ExitOK
	}
	fmt.Fprintf(env.Stdout, "Moved %d dead %s rows back to pending.\n", moved, sel.Table)
	return ExitOK
}
