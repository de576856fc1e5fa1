package redact

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// plainCause is an error whose message does not repeat the error it wraps.
type plainCause struct {
	msg   string
	cause error
}

func (e *plainCause) Error() string { return e.msg }
func (e *plainCause) Unwrap() error { return e.cause }

// nilPointerError panics in Error when its receiver is nil.
type nilPointerError struct{ msg string }

func (e *nilPointerError) Error() string { return e.msg }

// chain wraps the innermost error with fmt.Errorf once per name, innermost name last.
func chain(names ...string) error {
	err := errors.New(names[len(names)-1])
	for i := len(names) - 2; i >= 0; i-- {
		err = fmt.Errorf("%s: %w", names[i], err)
	}
	return err
}

func TestError(t *testing.T) {
	t.Parallel()
	var nilPtr *nilPointerError
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "nil", err: nil, want: ""},
		{name: "one level", err: io.EOF, want: "EOF"},
		{name: "wrapped with a colon", err: fmt.Errorf("dialing: %w", io.EOF), want: "dialing | caused by EOF"},
		{name: "wrapped with a space", err: fmt.Errorf("dialing %w", io.EOF), want: "dialing | caused by EOF"},
		{name: "three levels", err: chain("claiming outbox batch", "querying", "connection reset"),
			want: "claiming outbox batch | caused by querying | caused by connection reset"},
		{name: "five levels are all shown", err: chain("l1", "l2", "l3", "l4", "l5"),
			want: "l1 | caused by l2 | caused by l3 | caused by l4 | caused by l5"},
		{name: "levels after the fifth are dropped", err: chain("l1", "l2", "l3", "l4", "l5", "l6", "l7"),
			want: "l1 | caused by l2 | caused by l3 | caused by l4 | caused by l5"},
		{name: "a wrapper that adds no text is not a level",
			err:  fmt.Errorf("%w", fmt.Errorf("%w", chain("l1", "l2", "l3", "l4", "l5", "l6"))),
			want: "l1 | caused by l2 | caused by l3 | caused by l4 | caused by l5"},
		{name: "a cause that the message does not repeat",
			err:  &plainCause{msg: "publishing failed", cause: &plainCause{msg: "broker closed the channel"}},
			want: "publishing failed | caused by broker closed the channel"},
		{name: "a message that holds the cause elsewhere is kept whole",
			err:  fmt.Errorf("publish (%w) failed", io.EOF),
			want: "publish (EOF) failed | caused by EOF"},
		{name: "a joined error ends the walk", err: fmt.Errorf("validating: %w", errors.Join(errors.New("a"), errors.New("b"))),
			want: "validating | caused by a\nb"},
		{name: "a secret in the cause is redacted",
			err:  fmt.Errorf("connecting: %w", errors.New("dial postgres://app:hunter2@db:5432/app: refused")),
			want: "connecting | caused by dial postgres://***@db:5432/app: refused"},
		{name: "a secret in the wrapper is redacted",
			err:  fmt.Errorf("calling with token=abc123: %w", io.ErrUnexpectedEOF),
			want: "calling with token=[REDACTED] | caused by unexpected EOF"},
		{name: "an Error method that panics", err: fmt.Errorf("loading: %w", error(nilPtr)),
			want: "loading: <nil> | caused by !PANIC in Error method"},
		{name: "a long chain is cut to MaxLength",
			err:  fmt.Errorf("outer: %w", errors.New(strings.Repeat("x", 3000))),
			want: "outer | caused by " + strings.Repeat("x", MaxLength-len("outer | caused by ")-len(truncationMarker)) + truncationMarker},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Error(tt.err); got != tt.want {
				t.Errorf("Error()\n got: %q\nwant: %q", abbreviate(got), abbreviate(tt.want))
			}
		})
	}
}
