package chstore

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Conn is the protocol a Store's statements run over: what a
// clickhouse-go connection offers, and what another engine speaking the
// same SQL offers too (the embedded modern server of the tier tests,
// internal/chdbstore).
type Conn interface {
	Query(ctx context.Context, sql string, args ...any) (driver.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) driver.Row
	Select(ctx context.Context, dest any, sql string, args ...any) error
	Exec(ctx context.Context, sql string, args ...any) error
	PrepareBatch(ctx context.Context, insert string) (driver.Batch, error)
}

// Over returns a Store bound to database db whose statements run over c,
// so every adapter method (the analysis' loads and saves included) works
// on an engine that is not a clickhouse-go connection. The Store neither
// pings nor closes c (its owner does), knows no cluster and reports server
// version 0.
func Over(c Conn, db string) *Store {
	return &Store{conn: anConnAdapter{c: c}, db: db}
}

// anConnAdapter gives a Conn the shape of driver.Conn. Only the methods a
// Store calls are implemented; the embedded nil driver.Conn makes any
// other call fail loudly instead of silently doing nothing.
type anConnAdapter struct {
	driver.Conn
	c Conn
}

func (a anConnAdapter) Query(ctx context.Context, sql string, args ...any) (driver.Rows, error) {
	return a.c.Query(ctx, sql, args...)
}

func (a anConnAdapter) QueryRow(ctx context.Context, sql string, args ...any) driver.Row {
	return a.c.QueryRow(ctx, sql, args...)
}

func (a anConnAdapter) Select(ctx context.Context, dest any, sql string, args ...any) error {
	return a.c.Select(ctx, dest, sql, args...)
}

func (a anConnAdapter) Exec(ctx context.Context, sql string, args ...any) error {
	return a.c.Exec(ctx, sql, args...)
}

func (a anConnAdapter) PrepareBatch(ctx context.Context, insert string, _ ...driver.PrepareBatchOption) (driver.Batch, error) {
	return a.c.PrepareBatch(ctx, insert)
}

func (a anConnAdapter) Ping(context.Context) error { return nil }

func (a anConnAdapter) Close() error { return nil }
