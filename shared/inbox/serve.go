package inbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	otelattr "go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/tracing"
)

// Serving one request to an HTTP source: serveSource runs the steps in their documented order,
// each of which answers the request when it ends it.

// logger returns the logger of the lines about one request's message: the source's, with the
// correlation identifier and, when tracing is on, the trace_id and span_id of the request's
// span.
func (h *Handler) logger(ctx context.Context, rt *route, corrID string) *slog.Logger {
	log := rt.rules.logger(corrID)
	if h.tracer != nil {
		log = log.With(tracing.LogAttrs(ctx)...)
	}
	return log
}

// serveSource serves a request to the source of rt: the body, the credentials, the header
// filter, the correlation identifier, the message (JSON, attributes, transform), then the row.
func (h *Handler) serveSource(w http.ResponseWriter, r *http.Request, rt *route) {
	// 1. The body, under the size cap.
	body, ok := h.body(w, r, rt)
	if !ok {
		return
	}
	receivedAt := h.now()

	// 2. The credentials.
	if !h.authenticated(w, r, rt, body, receivedAt) {
		return
	}

	// 3. The header filter (shared).
	headers := requestHeaders(r)
	lookup := func(name string) (string, bool) { v, ok := headers[name]; return v, ok }
	if !rt.rules.pass(lookup) {
		writeJSON(w, http.StatusAccepted, bodyFiltered)
		return
	}

	// 4. The correlation identifier (shared): the last received value, cleaned, or a new UUID.
	corrID := rt.rules.correlation(lookup, "")
	w.Header().Set(CorrelationHeader, corrID)
	for _, name := range rt.excludeHeaders {
		delete(headers, name)
	}
	if h.tracer != nil {
		// The row continues this request's span (docs/tracing.md).
		tracing.SetHeaders(r.Context(), headers)
	}

	// 5 to 7. The JSON document, the three attributes and the source transform (shared). An
	// HTTP source answers what a broker source stores as a dead row: 400 for a body that is
	// not JSON and for a missing or too long attribute, 422 for a failed transform.
	p, refused := rt.rules.prepare(r.Context(), &message{body: body, headers: headers,
		correlationID: corrID, receivedAt: receivedAt}, lookup)
	if refused != nil {
		h.refuse(w, r, rt, corrID, refused)
		return
	}

	// 8. The row, through the batcher of concurrent requests (the shared write).
	p.Headers, _ = encodeHeaders(headers) // a map of strings always encodes
	res, err := h.batch.insert(r.Context(), p)
	if err != nil {
		h.storeFailed(w, r, rt, corrID, err)
		return
	}
	h.stored(w, r, rt, corrID, &p, res)
}

// body reads the request body under the size cap; ok is false once it answered a body that is
// too large (413) or broke off (400).
func (h *Handler) body(w http.ResponseWriter, r *http.Request, rt *route) (body []byte, ok bool) {
	body, err := readBody(w, r, h.maxBody)
	if err == nil {
		return body, true
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		writeJSON(w, http.StatusRequestEntityTooLarge, h.tooLarge)
		return nil, false
	}
	// The body broke off (the client went away or sent a bad chunk): what arrived is no
	// JSON document.
	h.log.DebugContext(r.Context(), "inbox: reading the request body", slog.String("source", rt.src.Name), slog.Any("error", err))
	writeJSON(w, http.StatusBadRequest, bodyInvalidJSON)
	return nil, false
}

// authenticated checks the request's credentials with the source's verifier, if any; it
// answers 401 and returns false when they fail.
func (h *Handler) authenticated(w http.ResponseWriter, r *http.Request, rt *route, body []byte, receivedAt time.Time) bool {
	src := &rt.src
	if src.Verifier == nil {
		return true
	}
	if err := src.Verifier.Verify(r.Header, body, receivedAt); err != nil {
		h.log.InfoContext(r.Context(), "inbox: request refused by the source auth", slog.String("source", src.Name), slog.String("reason", err.Error()))
		writeJSON(w, http.StatusUnauthorized, errorBody(err.Error()))
		return false
	}
	return true
}

// refuse answers a message that the source's rules refused: 400 for a body that is not JSON
// and for a missing or too long attribute, 422 for a failed transform.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, rt *route, corrID string, refused *refusal) {
	switch refused.cause {
	case causeInvalidJSON:
		writeJSON(w, http.StatusBadRequest, bodyInvalidJSON)
	case causeTransform:
		h.logger(r.Context(), rt, corrID).InfoContext(r.Context(), "inbox: source transform failed", slog.Any("error", refused.err))
		writeJSON(w, http.StatusUnprocessableEntity, errorBody(refused.Text()))
	default:
		h.logger(r.Context(), rt, corrID).DebugContext(r.Context(), "inbox: request refused", slog.String("reason", refused.Text()))
		writeJSON(w, http.StatusBadRequest, errorBody(refused.Text()))
	}
}

// storeFailed answers a message whose row could not be stored: 400 for a value that the
// database refuses, 500 otherwise.
func (h *Handler) storeFailed(w http.ResponseWriter, r *http.Request, rt *route, corrID string, err error) {
	if errors.Is(err, store.ErrInvalidValue) {
		// Valid JSON that the database cannot hold (a \u0000 escape, a lone surrogate, a
		// number beyond its range): storing it again fails again, so the sender must not retry.
		h.metrics.InboxRejection(ReasonExtraction)
		h.logger(r.Context(), rt, corrID).Warn("inbox: the database refuses a value of the message", slog.Any("error", err))
		writeJSON(w, http.StatusBadRequest, bodyInvalidJSON)
		return
	}
	h.metrics.InboxRejection(ReasonStorageFailed)
	level := slog.LevelError
	if r.Context().Err() != nil {
		level = slog.LevelWarn // the client went away during the write; it sends again
	}
	h.logger(r.Context(), rt, corrID).Log(r.Context(), level, "inbox: storing the message", slog.Any("error", err))
	writeJSON(w, http.StatusInternalServerError, bodyStorage)
}

// stored counts and answers a stored message: 200 for a duplicate, 202 with the message id
// for a new row, which wakes the relay.
func (h *Handler) stored(w http.ResponseWriter, r *http.Request, rt *route, corrID string, p *store.InboxInsertParams, res store.InboxInsertResult) {
	dup := rt.rules.counted(p, res) == Duplicate
	if h.tracer != nil {
		trace.SpanFromContext(r.Context()).SetAttributes(
			otelattr.String("queuebox.message_id", res.ID), otelattr.Bool("queuebox.duplicate", dup))
	}
	if h.log.Enabled(r.Context(), slog.LevelDebug) {
		h.logger(r.Context(), rt, corrID).DebugContext(r.Context(), "inbox: message stored",
			slog.String("message_id", res.ID), slog.Bool("duplicate", dup), slog.String("event_type", p.EventType))
	}
	if dup {
		writeJSON(w, http.StatusOK, bodyDuplicate)
		return
	}
	rt.rules.wake() // every new push row of an HTTP request wakes the relay
	answer := make([]byte, 0, len(`{"messageId":""}`)+len(res.ID))
	answer = appendJSONString(append(answer, `{"messageId":`...), res.ID)
	writeJSON(w, http.StatusAccepted, append(answer, '}'))
}

// readBody reads the whole body, at most limit bytes; a longer body gives *http.MaxBytesError.
// A body with a Content-Length is read into one buffer of that length plus one byte, so that
// the read that reports the end finds room and nothing is copied again.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	rd := http.MaxBytesReader(w, r.Body, limit)
	size := 512
	if r.ContentLength > 0 {
		size = int(r.ContentLength) + 1
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow, as io.ReadAll does
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
