package inbox

import (
	"fmt"
	"net/http"
)

// Gate answers the first two steps of the data port, the one copy of them that the inbox
// handler and the data port of shared/service share: 503 {"error":"QueueBox is shutting
// down"} (with Connection: close) to every request while draining reports true, and, when
// limit is above 0, 413 {"error":"Request body exceeds <limit> bytes"} to a request whose
// Content-Length is above limit. It hands every other request to h. A nil draining never
// drains.
func Gate(h http.Handler, draining func() bool, limit int64) http.Handler {
	tooLarge := errorBody(fmt.Sprintf("Request body exceeds %d bytes", limit))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining != nil && draining() {
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusServiceUnavailable, bodyShuttingDown)
			return
		}
		if limit > 0 && r.ContentLength > limit {
			writeJSON(w, http.StatusRequestEntityTooLarge, tooLarge)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TooLarge answers 413 {"error":"Request body exceeds <limit> bytes"}, the answer of Gate to a
// body above limit, for a route that finds the body too long as it reads it.
func TooLarge(w http.ResponseWriter, limit int64) {
	writeJSON(w, http.StatusRequestEntityTooLarge, errorBody(fmt.Sprintf("Request body exceeds %d bytes", limit)))
}
