package ingest_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/kvtrail/kvtrail/migrations"
)

func migrationsFS() fs.FS { return migrations.FS }

// downStore is a ClickHouse that never answers.
type downStore struct{}

func (downStore) PrepareBatch(context.Context, string) (driver.Batch, error) {
	return nil, errors.New("connection refused")
}
func (downStore) QueryRow(context.Context, string, ...any) driver.Row { return errRow{} }
func (downStore) Exec(context.Context, string, ...any) error          { return errors.New("connection refused") }

type errRow struct{}

func (errRow) Err() error           { return errors.New("connection refused") }
func (errRow) Scan(...any) error    { return errors.New("connection refused") }
func (errRow) ScanStruct(any) error { return errors.New("connection refused") }

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
