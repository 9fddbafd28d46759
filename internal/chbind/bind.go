// Package chbind turns a statement and its arguments into the SQL text the
// ClickHouse server receives. kvtrail's driver (clickhouse-go) binds
// arguments on the client for every server it talks to, 18.16 included
// (docs/clickhouse.md), so the bound text is exactly what a server
// executes. Tests record it to replay every statement on a modern engine,
// and the in-process modern engine (internal/chdbstore) sends it.
package chbind

import (
	"time"

	// The driver's own binder is reached below; the blank import makes
	// sure the package is linked in.
	_ "github.com/ClickHouse/clickhouse-go/v2"
	_ "unsafe" // for go:linkname
)

// driverBind is clickhouse-go's client-side binder (bind.go in the
// driver). It is used instead of a copy so that a statement is bound
// exactly as the driver binds it for the server: same quoting, same time
// formatting, same handling of ? inside string literals, GroupSet and
// named arguments. The driver's test suite pins its behaviour; TestBind
// here pins the shapes kvtrail uses.
//
//go:linkname driverBind github.com/ClickHouse/clickhouse-go/v2.bind
func driverBind(tz *time.Location, query string, args ...any) (string, error)

// Bind returns sql with args bound as the driver binds them for a server
// whose time zone is tz (kvtrail's servers run in UTC).
func Bind(tz *time.Location, sql string, args ...any) (string, error) {
	if len(args) == 0 {
		return sql, nil
	}
	return driverBind(tz, sql, args...)
}
