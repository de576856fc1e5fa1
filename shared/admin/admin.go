// Package admin serves the admin routes of spec/26-http-api.md: POST /admin/transform/test
// evaluates a caller's JSONata expression against a sample payload, and POST /admin/replay
// moves sent and dead outbox rows back to pending. It also serves the destination routes of
// the delivery controls (an extension, docs/delivery-controls.md): GET /admin/destinations,
// POST /admin/destinations/{name}/pause and POST /admin/destinations/{name}/resume. The
// routes exist only when admin.enabled is true; each request needs the credentials of admin.auth unless admin.insecure is true,
// and a body over admin.maxPayloadBytes gets 413.
package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/alternayte/queuebox/shared/inboundauth"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/transform"
)

// DefaultTransformTimeout is the evaluation timeout of a test request that sends none.
const DefaultTransformTimeout = 100 * time.Millisecond

// DefaultMockTopic is $topic of a test request that sends no mockTopic.
const DefaultMockTopic = "test.topic"

// Store is what the replay route needs of the outbox.
type Store interface {
	OutboxReplay(ctx context.Context, params store.OutboxReplayParams) (int64, error)
	OutboxFinishedTopics(ctx context.Context) ([]string, error)
}

// Options build a Handler.
type Options struct {
	// Verifier checks the credentials; nil accepts every request (admin.insecure).
	Verifier inboundauth.Verifier
	// Engine compiles and evaluates the test expressions: the JSONata engine
	// (shared/transform/jsonata). Required.
	Engine transform.Compiler
	// Store and Routes serve the replay.
	Store  Store
	Routes *route.Table
	// States serves the destination routes; nil means Store, when it is a
	// store.DestinationStateStore. Without either, those routes answer 503.
	States store.DestinationStateStore
	// Destinations are the configured destination names: the destination routes know only
	// these.
	Destinations []string
	// Replay holds the statements of the safe replay (docs/replay.md); nil means Store when it
	// is a store.ReplayStore. Without either, the safe replay's fields and the inbox replay
	// answer 501.
	Replay store.ReplayStore
	// MaxTransformTimeout caps the caller's timeoutMs (admin.maxTransformTimeoutMs).
	MaxTransformTimeout time.Duration
	// MaxPayloadBytes is the largest request body (admin.maxPayloadBytes).
	MaxPayloadBytes int64
	Logger          *slog.Logger
	// Now is the clock of the credential checks and of $timestamp; nil means time.Now.
	Now func() time.Time
}

// Handler serves the admin routes.
type Handler struct {
	opts Options
	log  *slog.Logger
}

// New returns the admin handler.
func New(opts Options) (*Handler, error) {
	if opts.Engine == nil || opts.Store == nil {
		return nil, errors.New("admin: an engine and a store are required")
	}
	if opts.States == nil {
		if s, ok := opts.Store.(store.DestinationStateStore); ok {
			opts.States = s
		}
	}
	if opts.Replay == nil {
		if s, ok := opts.Store.(store.ReplayStore); ok {
			opts.Replay = s
		}
	}
	if opts.Routes == nil {
		opts.Routes = route.NewTable(nil)
	}
	if opts.MaxTransformTimeout <= 0 {
		opts.MaxTransformTimeout = time.Second
	}
	if opts.MaxPayloadBytes <= 0 {
		opts.MaxPayloadBytes = 65536
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Handler{opts: opts, log: opts.Logger.With("component", "admin")}, nil
}

// Register mounts the routes on mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /admin/transform/test", h.serveTransformTest)
	mux.HandleFunc("POST /admin/replay", h.serveReplay)
	mux.HandleFunc("POST /admin/inbox/replay", h.serveInboxReplay)
	mux.HandleFunc("GET /admin/destinations", h.serveDestinations)
	mux.HandleFunc("POST /admin/destinations/{name}/pause", h.servePause)
	mux.HandleFunc("POST /admin/destinations/{name}/resume", h.serveResume)
}

// read applies the size cap and the credential check, in that order. It answers itself and
// returns false when the request stops here. errBody shapes an error body of the route.
func (h *Handler) read(w http.ResponseWriter, r *http.Request, errBody func(string) any) ([]byte, bool) {
	limit := h.opts.MaxPayloadBytes
	tooLarge := fmt.Sprintf("Request body exceeds %d bytes", limit)
	if r.ContentLength > limit {
		writeJSON(w, http.StatusRequestEntityTooLarge, errBody(tooLarge))
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errBody("Invalid request: the body could not be read"))
		return nil, false
	}
	if int64(len(body)) > limit {
		writeJSON(w, http.StatusRequestEntityTooLarge, errBody(tooLarge))
		return nil, false
	}
	if v := h.opts.Verifier; v != nil {
		if err := v.Verify(r.Header, body, h.opts.Now()); err != nil {
			writeJSON(w, http.StatusUnauthorized, errBody(err.Error()))
			return nil, false
		}
	}
	return body, true
}

// testRequest is the body of POST /admin/transform/test; unknown fields are ignored.
type testRequest struct {
	Expression *string         `json:"expression"`
	Payload    json.RawMessage `json:"payload"`
	MockTopic  *string         `json:"mockTopic"`
	MockSource *string         `json:"mockSource"`
	TimeoutMs  *int64          `json:"timeoutMs"`
}

type testFailure struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
}

type testSuccess struct {
	Success bool            `json:"success"`
	Result  json.RawMessage `json:"result"`
	Context testContext     `json:"context"`
}

type testContext struct {
	MessageID string `json:"messageId"`
	Topic     string `json:"topic"`
	Attempt   int    `json:"attempt"`
	Timestamp string `json:"timestamp"`
	Source    string `json:"source,omitempty"`
}

func testError(msg string) any { return testFailure{Success: false, Error: msg} }

func (h *Handler) serveTransformTest(w http.ResponseWriter, r *http.Request) {
	body, ok := h.read(w, r, testError)
	if !ok {
		return
	}
	var req testRequest
	if err := decode(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, testError("Invalid request: "+err.Error()))
		return
	}
	switch {
	case req.Expression == nil || strings.TrimSpace(*req.Expression) == "":
		writeJSON(w, http.StatusBadRequest, testError("Invalid request: expression is required"))
		return
	case len(req.Payload) == 0:
		writeJSON(w, http.StatusBadRequest, testError("Invalid request: payload is required"))
		return
	case req.TimeoutMs != nil && *req.TimeoutMs <= 0:
		writeJSON(w, http.StatusBadRequest, testError("Invalid request: timeoutMs must be above 0"))
		return
	}
	timeout := DefaultTransformTimeout
	if req.TimeoutMs != nil {
		timeout = time.Duration(*req.TimeoutMs) * time.Millisecond
	}
	timeout = min(timeout, h.opts.MaxTransformTimeout)
	expr, err := h.opts.Engine.Compile(*req.Expression, transform.Limits{Timeout: timeout})
	if err != nil {
		writeJSON(w, http.StatusBadRequest, testError("Invalid expression: "+err.Error()))
		return
	}
	topic := DefaultMockTopic
	if req.MockTopic != nil {
		topic = *req.MockTopic
	}
	ctxInfo := testContext{MessageID: uuid.NewString(), Topic: topic, Attempt: 0, Timestamp: transform.FormatTimestamp(h.opts.Now())}
	vars := transform.Vars{
		transform.VarMessageID: ctxInfo.MessageID,
		transform.VarTopic:     ctxInfo.Topic,
		transform.VarAttempt:   0,
		transform.VarTimestamp: ctxInfo.Timestamp,
	}
	if req.MockSource != nil {
		vars[transform.VarSource] = *req.MockSource
		ctxInfo.Source = *req.MockSource
	}
	result, err := expr.Evaluate(r.Context(), req.Payload, vars)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, testError(err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, testSuccess{Success: true, Result: result, Context: ctxInfo})
}

// replayRequest is the body of POST /admin/replay; unknown fields are ignored.
type replayRequest struct {
	IDs           []string   `json:"ids"`
	Topic         *string    `json:"topic"`
	Topics        []string   `json:"topics"`
	Destination   *string    `json:"destination"`
	CreatedAfter  *time.Time `json:"createdAfter"`
	CreatedBefore *time.Time `json:"createdBefore"`
	// The fields of the safe replay (an extension, docs/replay.md); a request without them
	// behaves exactly as spec/26 says.
	safeFields
}

type replayError struct {
	Error string `json:"error"`
}

func replayErr(msg string) any { return replayError{Error: msg} }

func (h *Handler) serveReplay(w http.ResponseWriter, r *http.Request) {
	body, ok := h.read(w, r, replayErr)
	if !ok {
		return
	}
	var req replayRequest
	if err := decode(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, replayErr("Invalid request: "+err.Error()))
		return
	}
	if req.IDs == nil && req.Topic == nil && req.Topics == nil && req.Destination == nil &&
		req.CreatedAfter == nil && req.CreatedBefore == nil && req.States == nil {
		writeJSON(w, http.StatusBadRequest, replayErr("A replay needs at least one filter."))
		return
	}
	if err := checkIDs(req.IDs); err != nil {
		writeJSON(w, http.StatusBadRequest, replayErr(err.Error()))
		return
	}
	params, empty, err := h.replayParams(r.Context(), req)
	if err != nil {
		h.log.Error("admin replay: resolving the destination", "error", err)
		writeJSON(w, http.StatusInternalServerError, replayErr("Replay failed"))
		return
	}
	if req.safeFields.set() {
		h.serveSafeReplay(w, r, req, params, empty)
		return
	}
	var moved int64
	if !empty {
		if moved, err = h.opts.Store.OutboxReplay(r.Context(), params); err != nil {
			h.log.Error("admin replay failed", "error", err)
			writeJSON(w, http.StatusInternalServerError, replayErr("Replay failed"))
			return
		}
	}
	h.log.Info("admin replay", "filter", filterText(req), "moved", moved)
	writeJSON(w, http.StatusOK, map[string]int64{"moved": moved})
}

// checkIDs refuses the first id of a replay request that is not a UUID, with the answer's text.
func checkIDs(ids []string) error {
	for _, id := range ids {
		if _, err := uuid.Parse(id); err != nil {
			return fmt.Errorf("Invalid request: %q is not a UUID", id)
		}
	}
	return nil
}

// replayParams turns the request into the store's filter. empty is true when the topic
// filters cannot overlap (a destination that no topic routes to, or topics outside it), so
// nothing moves.
func (h *Handler) replayParams(ctx context.Context, req replayRequest) (store.OutboxReplayParams, bool, error) {
	p := store.OutboxReplayParams{IDs: req.IDs, CreatedFrom: req.CreatedAfter, CreatedTo: req.CreatedBefore}
	var topics []string // nil: no topic filter
	narrow := func(set []string) {
		if topics == nil {
			topics = append([]string{}, set...)
			return
		}
		topics = slices.DeleteFunc(topics, func(t string) bool { return !slices.Contains(set, t) })
	}
	if req.Topic != nil {
		narrow([]string{*req.Topic})
	}
	if req.Topics != nil {
		narrow(req.Topics)
	}
	if req.Destination != nil {
		all, err := h.opts.Store.OutboxFinishedTopics(ctx)
		if err != nil {
			return p, false, fmt.Errorf("listing outbox topics: %w", err)
		}
		narrow(h.opts.Routes.TopicsOf(*req.Destination, all))
	}
	if topics != nil && len(topics) == 0 {
		return p, true, nil
	}
	p.Topics = topics
	if len(p.IDs) == 0 && len(p.Topics) == 0 && p.CreatedFrom == nil && p.CreatedTo == nil && req.States == nil {
		// Only an empty ids list was sent: it selects nothing.
		return p, true, nil
	}
	return p, false, nil
}

func filterText(req replayRequest) string {
	var parts []string
	if req.IDs != nil {
		parts = append(parts, fmt.Sprintf("ids=%v", req.IDs))
	}
	if req.Topic != nil {
		parts = append(parts, "topic="+*req.Topic)
	}
	if req.Topics != nil {
		parts = append(parts, fmt.Sprintf("topics=%v", req.Topics))
	}
	if req.Destination != nil {
		parts = append(parts, "destination="+*req.Destination)
	}
	if req.CreatedAfter != nil {
		parts = append(parts, "createdAfter="+req.CreatedAfter.UTC().Format(time.RFC3339Nano))
	}
	if req.CreatedBefore != nil {
		parts = append(parts, "createdBefore="+req.CreatedBefore.UTC().Format(time.RFC3339Nano))
	}
	return strings.Join(parts, " ")
}

// decode reads one JSON object; unknown fields are ignored, a wrong type is an error that
// names the field.
func decode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var timeErr *time.ParseError
		switch {
		case errors.As(err, &typeErr) && typeErr.Field != "":
			// The safe replay's fields are an embedded struct, whose name is no field of the body.
			field := strings.TrimPrefix(typeErr.Field, "safeFields.")
			return fmt.Errorf("field %s must be %s", field, jsonKind(typeErr.Type.String()))
		case errors.As(err, &timeErr):
			return errors.New("a time must be an ISO-8601 instant such as 2026-09-01T00:00:00Z")
		case errors.Is(err, io.EOF):
			return errors.New("the body is empty")
		default:
			return errors.New("the body is not a JSON object")
		}
	}
	if dec.More() {
		return errors.New("the body holds more than one JSON document")
	}
	return nil
}

func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "string"):
		return "a string"
	default:
		return "of another type"
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
