package redact

import (
	"errors"
	"strings"
)

const (
	// maxLevels is the largest number of errors of a chain that Error names.
	maxLevels = 5
	// maxWalk bounds the walk down a chain of wrappers that add no text of their own.
	maxWalk = 64
	// causeSeparator joins the levels of an error chain.
	causeSeparator = " | caused by "
)

// Error returns the text of err and of the errors it wraps, outermost first, joined as
// "outer | caused by inner", at most five levels deep, passed through String. It returns ""
// for a nil error.
//
// The chain is walked with errors.Unwrap. A wrapper's message usually ends with the message of
// the error it wraps (fmt.Errorf("dialing: %w", io.EOF) reads "dialing: EOF"), so each level
// shows only its own text: "dialing | caused by EOF"; a wrapper whose message does not end
// with the wrapped message shows its whole message. A wrapper that adds no text of its own
// (a bare "%w") is not counted as a level. An error that wraps several errors (errors.Join, or
// fmt.Errorf with two %w) ends the walk and shows its whole message.
func Error(err error) string {
	if err == nil {
		return ""
	}
	parts := make([]string, 0, maxLevels)
	cur, msg := err, errorText(err)
	for steps := 0; cur != nil && len(parts) < maxLevels && steps < maxWalk; steps++ {
		next := errors.Unwrap(cur)
		nextMsg := ""
		if next != nil {
			nextMsg = errorText(next)
		}
		if own := ownText(msg, nextMsg); own != "" {
			parts = append(parts, own)
		}
		cur, msg = next, nextMsg
	}
	return String(strings.Join(parts, causeSeparator))
}

// ownText returns the part of msg that is not the message inner of the error it wraps:
// "dialing: EOF" with inner "EOF" gives "dialing". A message that does not end with inner is
// returned whole.
func ownText(msg, inner string) string {
	if inner == "" {
		return msg
	}
	if !strings.HasSuffix(msg, inner) {
		return msg
	}
	return strings.TrimRight(msg[:len(msg)-len(inner)], ": \t\r\n")
}

// errorText returns err.Error(), or a placeholder when that method panics (a nil pointer
// receiver, for example), as fmt and log/slog do.
func errorText(err error) (text string) {
	defer func() {
		if r := recover(); r != nil {
			text = "!PANIC in Error method"
		}
	}()
	return err.Error()
}
