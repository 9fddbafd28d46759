package web

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Conn is what the UI needs from ClickHouse (internal/chstore.Store
// satisfies it). All SQL lives in store_*.go; handlers see only the small
// interfaces declared next to them.
type Conn interface {
	Query(ctx context.Context, sql string, args ...any) (driver.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) driver.Row
	Select(ctx context.Context, dest any, sql string, args ...any) error
	Exec(ctx context.Context, sql string, args ...any) error
	PrepareBatch(ctx context.Context, insert string) (driver.Batch, error)
}

// Error kinds handlers map to status codes.
var (
	errNotFound = errors.New("not found")
	errInvalid  = errors.New("invalid request")
)

// invalidf is an errInvalid with a message safe to show the user.
type invalidError struct{ msg string }

func (e invalidError) Error() string   { return e.msg }
func (e invalidError) Is(t error) bool { return t == errInvalid }

func invalid(msg string) error { return invalidError{msg} }

// chStore implements every handler group's store on ClickHouse.
type chStore struct{ c Conn }

// U64 is a 64-bit id (bootstrap room, line id) that JSON carries as a
// string: JavaScript numbers lose precision above 2^53.
type U64 uint64

// MarshalJSON writes the id as a decimal string.
func (u U64) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatUint(uint64(u), 10) + `"`), nil
}

// String is the decimal form used in URLs and templates.
func (u U64) String() string { return strconv.FormatUint(uint64(u), 10) }

func toU64s(v []uint64) []U64 {
	out := make([]U64, len(v))
	for i, x := range v {
		out[i] = U64(x)
	}
	return out
}

func utc(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// UnmarshalJSON reads the decimal string (or a number).
func (u *U64) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseUint(strings.Trim(string(b), `"`), 10, 64)
	*u = U64(n)
	return err
}
