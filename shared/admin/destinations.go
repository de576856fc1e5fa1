package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// The circuit states of a DestinationStatus.
const (
	CircuitClosed   = "closed"
	CircuitOpen     = "open"
	CircuitHalfOpen = "half-open"
)

// ErrUnknownDestination is returned (wrapped) by Destinations.SetPaused for a name that is not
// a configured destination.
var ErrUnknownDestination = errors.New("unknown destination")

// DestinationStatus is the answer of GET /admin/destinations for one destination, of the pause
// and resume routes, and of `queuebox destinations`: the destination's row of
// store.DestinationStateTable as its controls see it. A destination without a row is closed and
// not paused.
type DestinationStatus struct {
	// Name is the destination name, as in destinations.
	Name string `json:"name"`
	// Paused is true from a pause until the resume.
	Paused bool `json:"paused"`
	// PausedAt is the start of the pause by the database clock; null when not paused.
	PausedAt *time.Time `json:"pausedAt"`
	// Circuit is closed, open (in its cool-down) or half-open (the cool-down has passed: the
	// next outcome closes or reopens it).
	Circuit string `json:"circuit"`
	// OpenRemainingMs is what is left of an open breaker's cool-down, in milliseconds.
	OpenRemainingMs int64 `json:"openRemainingMs"`
	// Failures counts the failed deliveries of the breaker's current window.
	Failures int `json:"failures"`
}

// statusOf turns a state row into its status; a zero row is a destination without one.
func statusOf(name string, s store.DestinationState) DestinationStatus {
	out := DestinationStatus{Name: name, Paused: s.Paused, Circuit: CircuitClosed, Failures: s.Failures}
	if s.Paused && !s.PausedAt.IsZero() {
		t := s.PausedAt.UTC()
		out.PausedAt = &t
	}
	switch {
	case s.Open():
		out.Circuit = CircuitOpen
		// Round up: an open breaker never shows 0 ms left.
		out.OpenRemainingMs = int64((s.OpenRemaining + time.Millisecond - 1) / time.Millisecond)
	case s.HalfOpen:
		out.Circuit = CircuitHalfOpen
	}
	return out
}

// Destinations reads and changes the state of the configured destinations: the admin routes
// and the CLI share it.
type Destinations struct {
	// States is the destination state table.
	States store.DestinationStateStore
	// Names are the configured destination names.
	Names []string
}

// known reports whether name is a configured destination.
func (d Destinations) known(name string) bool { return slices.Contains(d.Names, name) }

// List returns the status of every configured destination, by name. A missing state table is
// an error that wraps store.ErrNoDestinationState.
func (d Destinations) List(ctx context.Context) ([]DestinationStatus, error) {
	rows, err := d.States.DestinationStates(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the destinations: %w", err)
	}
	byName := make(map[string]store.DestinationState, len(rows))
	for _, r := range rows {
		byName[r.Destination] = r
	}
	names := slices.Clone(d.Names)
	slices.Sort(names)
	out := make([]DestinationStatus, 0, len(names))
	for _, n := range slices.Compact(names) {
		out = append(out, statusOf(n, byName[n]))
	}
	return out, nil
}

// SetPaused pauses (true) or resumes (false) a configured destination and returns its status
// afterwards; a repeated pause or resume changes nothing and answers the same. A name that is
// not configured is an error that wraps ErrUnknownDestination, and nothing is written.
func (d Destinations) SetPaused(ctx context.Context, name string, paused bool) (DestinationStatus, error) {
	verb := "resuming"
	if paused {
		verb = "pausing"
	}
	if !d.known(name) {
		return DestinationStatus{}, fmt.Errorf("%s destination %q: %w", verb, name, ErrUnknownDestination)
	}
	s, err := d.States.DestinationSetPaused(ctx, name, paused)
	if err != nil {
		return DestinationStatus{}, fmt.Errorf("%s destination %q: %w", verb, name, err)
	}
	return statusOf(name, s), nil
}

// destinationList is the body of GET /admin/destinations.
type destinationList struct {
	Destinations []DestinationStatus `json:"destinations"`
}

// unknownText is the error of a name that no destination has.
func unknownText(name string) string {
	return fmt.Sprintf("Unknown destination %q: it is not configured under destinations", name)
}

// missingTableText is the error of a database without the destination state table (V1 of the
// QueueBox track).
const missingTableText = "The destination state table " + store.DestinationStateTable +
	" does not exist: apply QueueBox's own migration V1__add_destination_state.sql (queuebox migrate), then retry"

// stateError answers a failed read or write of the destination state.
func (h *Handler) stateError(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, store.ErrNoDestinationState):
		writeJSON(w, http.StatusServiceUnavailable, replayErr(missingTableText))
	default:
		h.log.Error("admin destinations: "+what+" failed", "error", err)
		writeJSON(w, http.StatusInternalServerError, replayErr("Reading or writing the destination state failed"))
	}
}

// noStatesText is the error of a handler built without a destination state store.
const noStatesText = "The destination routes are not available: this store keeps no destination state"

// readState is read with the check that a state store exists.
func (h *Handler) readState(w http.ResponseWriter, r *http.Request) bool {
	if _, ok := h.read(w, r, replayErr); !ok {
		return false
	}
	if h.opts.States == nil {
		writeJSON(w, http.StatusServiceUnavailable, replayErr(noStatesText))
		return false
	}
	return true
}

func (h *Handler) serveDestinations(w http.ResponseWriter, r *http.Request) {
	if !h.readState(w, r) {
		return
	}
	list, err := h.destinations().List(r.Context())
	if err != nil {
		h.stateError(w, "listing", err)
		return
	}
	writeJSON(w, http.StatusOK, destinationList{Destinations: list})
}

func (h *Handler) servePause(w http.ResponseWriter, r *http.Request)  { h.setPaused(w, r, true) }
func (h *Handler) serveResume(w http.ResponseWriter, r *http.Request) { h.setPaused(w, r, false) }

func (h *Handler) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	if !h.readState(w, r) {
		return
	}
	name := r.PathValue("name")
	st, err := h.destinations().SetPaused(r.Context(), name, paused)
	switch {
	case errors.Is(err, ErrUnknownDestination):
		writeJSON(w, http.StatusNotFound, replayErr(unknownText(name)))
		return
	case err != nil:
		h.stateError(w, "setting the pause", err)
		return
	}
	action := "resumed"
	if paused {
		action = "paused"
	}
	h.log.Info("admin destination "+action, "destination", name)
	writeJSON(w, http.StatusOK, st)
}

func (h *Handler) destinations() Destinations {
	return Destinations{States: h.opts.States, Names: h.opts.Destinations}
}
