package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/alternayte/queuebox/shared/forwarded"
)

// The actions of queuebox_outbox_headers_not_carried_total: what the delivery did with a row
// header that its destination cannot carry (docs/headers.md).
const (
	// HeaderDropped is a header of a relayed row whose name cannot travel: it is left out.
	HeaderDropped = "dropped"
	// HeaderEncoded is a header of a relayed row whose value cannot travel: it is sent in the
	// base64: form.
	HeaderEncoded = "encoded"
	// HeaderRefused is a header of an application row that cannot travel: the row is dead.
	HeaderRefused = "refused"
)

// HeaderMetrics receives the row headers that a destination cannot carry. A Metrics that also
// implements it gets them; the metric is an extension (docs/headers.md, docs/monitoring.md).
type HeaderMetrics interface {
	// HeaderNotCarried counts queuebox_outbox_headers_not_carried_total{destination,action},
	// one per header, with action HeaderDropped, HeaderEncoded or HeaderRefused.
	HeaderNotCarried(destination, action string)
}

// HeaderError is the last_error of an application row with a header that its destination
// cannot carry: the row is dead at once, since every later attempt would fail the same way.
type HeaderError struct {
	// Destination and Kind are the destination's name and kind (its destination_type).
	Destination, Kind string
	// Name is the first such header, in name order; Fault says which part of it cannot
	// travel.
	Name  string
	Fault forwarded.Fault
	// More counts the other headers of the row that cannot travel.
	More int
	// Reason says why the destination's protocol cannot carry the header
	// (forwarded.Rule.Reason).
	Reason string
}

// Error names the header (never its value), the destination and the reason.
func (e *HeaderError) Error() string {
	more := ""
	if e.More > 0 {
		more = fmt.Sprintf(" (and %d more of its headers cannot travel either)", e.More)
	}
	return fmt.Sprintf("row header %s cannot travel to destination %s (%s): %s%s; an application's row headers are sent as they are, so correct them and requeue the row",
		shownName(e.Name), e.Destination, e.Kind, e.Reason, more)
}

// Terminal reports true: the row goes dead at its first attempt (TerminalError).
func (e *HeaderError) Terminal() bool { return true }

// maxShownName is the most bytes of a header name that a log line or a last_error shows.
const maxShownName = 64

// shownName quotes a header name for a last_error, cut to maxShownName bytes.
func shownName(name string) string {
	if cut := cutName(name); len(cut) < len(name) {
		return fmt.Sprintf("%q... (%d bytes)", cut, len(name))
	}
	return fmt.Sprintf("%q", name)
}

// cutName returns name cut to at most maxShownName bytes on a character boundary: what a log
// line shows of it.
func cutName(name string) string {
	if len(name) <= maxShownName {
		return name
	}
	cut := maxShownName
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut]
}

// fitHeaders applies the header rule of docs/headers.md to msg before its publish to dest,
// whatever the row's history (a retry, a replay, a row written by an older version): on a
// relayed row (forwarded.IsRelayed), a header whose name dest cannot carry is left out and one
// whose value it cannot carry is encoded, each counted and logged; an application row with
// such a header is not published, and the result it returns (true) makes the row dead with a
// HeaderError.
//
// span is the delivery's span, nil when tracing is off.
func (p *Poller) fitHeaders(ctx context.Context, f *flight, dest Destination, pl *destPlan, msg *Message, span trace.Span) (result, bool) {
	if len(msg.Headers) == 0 {
		return result{}, false
	}
	kind := dest.Publisher.Type()
	fitted, adj := dest.Headers.Fit(msg.Headers)
	if len(adj) == 0 {
		return result{}, false
	}
	hm, _ := p.metrics.(HeaderMetrics)
	if !forwarded.IsRelayed(msg.Headers) {
		if hm != nil {
			for range adj {
				hm.HeaderNotCarried(dest.Name, HeaderRefused)
			}
		}
		err := &HeaderError{Destination: dest.Name, Kind: kind, Name: adj[0].Name, Fault: adj[0].Fault, More: len(adj) - 1,
			Reason: dest.Headers.Reason(adj[0].Fault)}
		return result{f: f, plan: pl, err: err, dead: true}, true
	}
	for _, a := range adj {
		action := HeaderEncoded
		if a.Fault == forwarded.BadName {
			action = HeaderDropped
		}
		if hm != nil {
			hm.HeaderNotCarried(dest.Name, action)
		}
		level := slog.LevelDebug
		if p.headerNotes.first(dest.Name, a) {
			level = slog.LevelWarn
		}
		if p.log.Enabled(ctx, level) {
			what := "left out"
			if action == HeaderEncoded {
				what = "sent in the base64: form"
			}
			sc := trace.SpanContext{}
			if span != nil {
				sc = span.SpanContext()
			}
			p.rowLog(f.row, dest.Name, sc).Log(ctx, level, "a relayed header cannot travel to the destination as it is; "+what,
				"header", cutName(a.Name), "action", action, "reason", dest.Headers.Reason(a.Fault))
		}
	}
	msg.Headers = fitted
	return result{}, false
}

// maxHeaderNotes bounds the (destination, header, fault) triples whose first occurrence a
// process remembers; past it, every occurrence is logged at debug level.
const maxHeaderNotes = 1024

// headerNotes remembers which headers that a destination cannot carry a process has already
// logged at warn level, so that a producer that sends one on every message gets one warning
// per destination and header, and debug lines after it. The zero value is ready for use.
type headerNotes struct {
	mu   sync.Mutex
	seen map[headerNote]bool
}

type headerNote struct {
	destination, name string
	fault             forwarded.Fault
}

// first reports whether this is the first time that the process sees a on destination, and
// remembers it while there is room.
func (n *headerNotes) first(destination string, a forwarded.Adjustment) bool {
	k := headerNote{destination, cutName(a.Name), a.Fault}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen[k] || len(n.seen) >= maxHeaderNotes {
		return false
	}
	if n.seen == nil {
		n.seen = make(map[headerNote]bool)
	}
	n.seen[k] = true
	return true
}
