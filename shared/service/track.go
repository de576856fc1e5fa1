package service

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/alternayte/queuebox/shared/migrate"
	"github.com/alternayte/queuebox/shared/store"
)

// QueueBox's own migration track (migrations/queuebox) with database.migrate false: a file
// that is neither recorded nor applied does not stop the start. Each feature that needs its
// table is off until it is applied, and the start says so once per file (trackFileOff).

// trackFileOff says, per table of the QueueBox track, what is off while the table is missing.
var trackFileOff = map[string]string{
	store.DestinationStateTable: "pausing and resuming a destination is off and the outbox delivers as if no destination " +
		"were paused (a destination that sets circuitBreaker or rateLimit stops the start until it is applied)",
	store.RevokedSessionTable: "a console logout clears the browser's cookie only: a copy of the cookie stays valid until " +
		"it expires (change the admin token to end every session at once)",
	store.ReplayGenerationTable: "a NATS JetStream destination gets the row id as Nats-Msg-Id on every delivery, replays " +
		"included, so a stream drops a replay inside its duplicate window while the row is marked sent; " +
		"a replay still moves the rows",
}

// withoutTrackFiles warns once per missing file of the QueueBox track and tells the store to
// leave the missing tables out (store.TrackTables).
func (d *Database) withoutTrackFiles(missing []migrate.MissingFile, log *slog.Logger) {
	if len(missing) == 0 {
		return
	}
	tables := make([]string, 0, len(missing))
	for _, m := range missing {
		tables = append(tables, m.Table)
		if log == nil {
			continue
		}
		off := trackFileOff[m.Table]
		if off == "" {
			off = "the feature that needs it is off"
		}
		log.Warn(fmt.Sprintf("database.migrate is false and QueueBox's own migration %s (table %s) is not applied: "+
			"until it is, %s; %s", m.Path, m.Table, off, m.Apply),
			"migration", m.Script, "table", m.Table)
	}
	if tt, ok := d.Store.(store.TrackTables); ok {
		tt.SetMissingTables(tables)
	}
}

// CheckTrack is the part of the start check that the commands which use the store without
// starting (queuebox replay, queuebox dead) need: it reads which files of the QueueBox track
// are neither recorded nor applied and tells the store to leave their tables out, as the start
// does. It logs nothing (log may be nil) and writes nothing.
func (d *Database) CheckTrack(ctx context.Context, log *slog.Logger) error {
	st, err := d.Migrations.Status(ctx)
	if err != nil {
		return fmt.Errorf("reading the migration history: %w", err)
	}
	d.withoutTrackFiles(st.QueueBox.MissingFiles(st.Dialect), log)
	return nil
}
