package web

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/kvtrail/kvtrail/domain"
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

// errNotFound is the store's "no such row"; like every error kind it is
// a domain.Error, and fail maps kinds to status codes through
// domain.HTTPStatus, the one mapping the CLI's exit codes share.
var errNotFound = domain.Errorf(domain.NotFound, "not found")

// invalid is an Invalid error whose message is safe to show the user.
func invalid(msg string) error { return domain.Errorf(domain.Invalid, "%s", msg) }

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
