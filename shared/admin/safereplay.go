package admin

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/alternayte/queuebox/shared/replay"
	"github.com/alternayte/queuebox/shared/store"
)

// PreviewSampleSize is the number of ids that a dry run returns.
const PreviewSampleSize = 10

// safeFields are the optional fields of a safe replay (docs/replay.md), on the outbox and the
// inbox replay routes.
type safeFields struct {
	// States narrows the states that move: sent and dead on the outbox (both by default),
	// processed and dead on the inbox (dead by default).
	States []string `json:"states"`
	// DryRun answers the count and a sample of ids and changes nothing.
	DryRun *bool `json:"dryRun"`
	// Limit is the most rows that move.
	Limit *int64 `json:"limit"`
	// BatchSize is the most rows of one batch, each its own short transaction.
	BatchSize *int `json:"batchSize"`
	// RowsPerSecond caps the rate of the moves.
	RowsPerSecond *float64 `json:"rowsPerSecond"`
}

// set reports whether the request uses the safe replay.
func (f safeFields) set() bool {
	return f.States != nil || f.DryRun != nil || f.Limit != nil || f.BatchSize != nil || f.RowsPerSecond != nil
}

// options checks the fields against their bounds and the states against allowed.
func (f safeFields) options(allowed ...string) (replay.Options, error) {
	var o replay.Options
	if f.States != nil {
		if len(f.States) == 0 {
			return o, fmt.Errorf("states must name at least one of %v", allowed)
		}
		for _, s := range f.States {
			if !slices.Contains(allowed, s) {
				return o, fmt.Errorf("states may hold only %v, not %q", allowed, s)
			}
		}
	}
	if f.Limit != nil {
		if *f.Limit <= 0 {
			return o, fmt.Errorf("limit must be above 0")
		}
		o.Limit = *f.Limit
	}
	if f.BatchSize != nil {
		if *f.BatchSize <= 0 || *f.BatchSize > replay.MaxBatchSize {
			return o, fmt.Errorf("batchSize must be between 1 and %d", replay.MaxBatchSize)
		}
		o.BatchSize = *f.BatchSize
	}
	if f.RowsPerSecond != nil {
		if *f.RowsPerSecond <= 0 || *f.RowsPerSecond > replay.MaxRowsPerSecond {
			return o, fmt.Errorf("rowsPerSecond must be above 0 and at most %d", replay.MaxRowsPerSecond)
		}
		o.RowsPerSecond = *f.RowsPerSecond
	}
	return o, o.Check()
}

func (f safeFields) dryRun() bool { return f.DryRun != nil && *f.DryRun }

// safeAnswer is the answer of a safe replay. Moved keeps the key of spec/26's answer.
type safeAnswer struct {
	Moved   int64    `json:"moved"`
	Batches int      `json:"batches,omitempty"`
	DryRun  bool     `json:"dryRun,omitempty"`
	Count   *int64   `json:"count,omitempty"`
	Sample  []string `json:"sample,omitempty"`
}

// runSafe answers a dry run or runs the batches.
func (h *Handler) runSafe(w http.ResponseWriter, r *http.Request, what string, f safeFields, o replay.Options, empty bool, sel replay.Selection) {
	if f.dryRun() {
		var n int64
		var sample []string
		if !empty {
			var err error
			if n, err = sel.Count(r.Context()); err != nil {
				h.log.Error("admin "+what+" dry run failed", "error", err)
				writeJSON(w, http.StatusInternalServerError, replayErr("Replay failed"))
				return
			}
			if o.Limit > 0 && n > o.Limit {
				n = o.Limit
			}
			if n > 0 {
				rows, err := sel.Scan(r.Context(), int(min(n, PreviewSampleSize)))
				if err != nil {
					h.log.Error("admin "+what+" dry run failed", "error", err)
					writeJSON(w, http.StatusInternalServerError, replayErr("Replay failed"))
					return
				}
				for _, row := range rows {
					sample = append(sample, row.ID)
				}
			}
		}
		if sample == nil {
			sample = []string{}
		}
		h.log.Info("admin "+what+" dry run", "count", n)
		writeJSON(w, http.StatusOK, safeAnswer{DryRun: true, Count: &n, Sample: sample})
		return
	}
	var res replay.Result
	if !empty {
		var err error
		res, err = replay.Run(r.Context(), sel.Batch, o)
		if err != nil {
			h.log.Error("admin "+what+" failed", "error", err, "moved", res.Moved, "batches", res.Batches)
			writeJSON(w, http.StatusInternalServerError, replayErr(fmt.Sprintf("Replay failed after moving %d rows", res.Moved)))
			return
		}
	}
	h.log.Info("admin "+what, "moved", res.Moved, "batches", res.Batches)
	writeJSON(w, http.StatusOK, safeAnswer{Moved: res.Moved, Batches: res.Batches})
}

// serveSafeReplay is POST /admin/replay with the safe replay's fields.
func (h *Handler) serveSafeReplay(w http.ResponseWriter, r *http.Request, req replayRequest, p store.OutboxReplayParams, empty bool) {
	o, err := req.safeFields.options(store.OutboxSent, store.OutboxDead)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, replayErr("Invalid request: "+err.Error()))
		return
	}
	rs := h.opts.Replay
	if rs == nil {
		writeJSON(w, http.StatusNotImplemented, replayErr("This store has no batched replay"))
		return
	}
	sel := store.OutboxSelection{States: req.States, IDs: p.IDs, Topics: p.Topics, CreatedFrom: p.CreatedFrom, CreatedTo: p.CreatedTo}
	h.runSafe(w, r, "replay", req.safeFields, o, empty, replay.Outbox(rs, sel))
}

// inboxReplayRequest is the body of POST /admin/inbox/replay; unknown fields are ignored.
type inboxReplayRequest struct {
	IDs           []string   `json:"ids"`
	Sources       []string   `json:"sources"`
	Consumption   *string    `json:"consumption"`
	CreatedAfter  *time.Time `json:"createdAfter"`
	CreatedBefore *time.Time `json:"createdBefore"`
	safeFields
}

// serveInboxReplay is POST /admin/inbox/replay: it moves processed or dead inbox rows back to
// pending, so that the relay forwards a push row again and a pull worker claims a pull row
// again (docs/replay.md).
func (h *Handler) serveInboxReplay(w http.ResponseWriter, r *http.Request) {
	body, ok := h.read(w, r, replayErr)
	if !ok {
		return
	}
	var req inboxReplayRequest
	if err := decode(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, replayErr("Invalid request: "+err.Error()))
		return
	}
	if req.IDs == nil && req.Sources == nil && req.Consumption == nil && req.States == nil &&
		req.CreatedAfter == nil && req.CreatedBefore == nil {
		writeJSON(w, http.StatusBadRequest, replayErr("A replay needs at least one filter."))
		return
	}
	if err := checkIDs(req.IDs); err != nil {
		writeJSON(w, http.StatusBadRequest, replayErr(err.Error()))
		return
	}
	consumption := ""
	if req.Consumption != nil {
		consumption = *req.Consumption
		if consumption != store.ConsumptionPush && consumption != store.ConsumptionPull {
			writeJSON(w, http.StatusBadRequest, replayErr("Invalid request: consumption must be push or pull"))
			return
		}
	}
	o, err := req.safeFields.options(store.InboxProcessed, store.InboxDead)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, replayErr("Invalid request: "+err.Error()))
		return
	}
	rs := h.opts.Replay
	if rs == nil {
		writeJSON(w, http.StatusNotImplemented, replayErr("This store has no batched replay"))
		return
	}
	// An empty ids or sources list selects nothing, as on the outbox route.
	empty := (req.IDs != nil && len(req.IDs) == 0) || (req.Sources != nil && len(req.Sources) == 0)
	sel := store.InboxSelection{States: req.States, IDs: req.IDs, Sources: req.Sources, Consumption: consumption,
		CreatedFrom: req.CreatedAfter, CreatedTo: req.CreatedBefore}
	h.runSafe(w, r, "inbox replay", req.safeFields, o, empty, replay.Inbox(rs, sel))
}
