package domain

import (
	"errors"
	"fmt"
	"net/http"
)

// Kind classifies an error by what the caller can do about it. The HTTP
// status and the CLI's exit code follow from the kind, in one place
// (HTTPStatus, ExitCode), so the API and the CLI answer the same failure
// the same way.
type Kind uint8

// Error kinds.
const (
	Internal    Kind = iota // a bug or an unexpected failure: log it, show "internal error"
	NotFound                // the thing asked for does not exist (or is not visible)
	Invalid                 // the input is wrong; the message says how
	TooLarge                // the input or the result is over a configured bound
	Unavailable             // a dependency (ClickHouse, the spool) cannot serve now; retry later
	Conflict                // the request contradicts the current state (a case under legal hold)
)

func (k Kind) String() string {
	switch k {
	case NotFound:
		return "not found"
	case Invalid:
		return "invalid"
	case TooLarge:
		return "too large"
	case Unavailable:
		return "unavailable"
	case Conflict:
		return "conflict"
	}
	return "internal"
}

// Error is an error with a Kind. Msg is safe to show to the user; Err
// (the cause) is for logs.
type Error struct {
	Kind Kind
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case e.Msg != "" && e.Err != nil:
		return e.Msg + ": " + e.Err.Error()
	case e.Msg != "":
		return e.Msg
	case e.Err != nil:
		return e.Err.Error()
	}
	return e.Kind.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf makes an Error of kind k with a formatted user-facing message.
// A %w verb wraps its operand as the cause.
func Errorf(k Kind, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Kind: k, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// E gives err the kind k, keeping err as the cause ("" message: err's own
// text is shown). A nil err stays nil.
func E(k Kind, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: k, Err: err}
}

// KindOf is the kind of the outermost *Error in err's chain, Internal if
// there is none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// Message is what a user may read about err: the message of its *Error,
// or "internal error" for anything else (whose detail belongs in a log).
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Kind != Internal {
		return e.Error()
	}
	return "internal error"
}

// HTTPStatus maps a kind to the status the API answers with.
func HTTPStatus(k Kind) int {
	switch k {
	case NotFound:
		return http.StatusNotFound
	case Invalid:
		return http.StatusBadRequest
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	case Unavailable:
		return http.StatusServiceUnavailable
	case Conflict:
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// Exit codes of the CLI, by kind. 1 stays "something failed"; usage errors
// (2) are cobra's.
const (
	ExitInternal    = 1
	ExitInvalid     = 2
	ExitNotFound    = 3
	ExitUnavailable = 4
	ExitConflict    = 5
	ExitTooLarge    = 6
)

// ExitCode maps a kind to the CLI's exit code.
func ExitCode(k Kind) int {
	switch k {
	case NotFound:
		return ExitNotFound
	case Invalid:
		return ExitInvalid
	case TooLarge:
		return ExitTooLarge
	case Unavailable:
		return ExitUnavailable
	case Conflict:
		return ExitConflict
	}
	return ExitInternal
}
