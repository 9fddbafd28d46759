package ingest_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"testing"
	"time"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/migrations"
)

func migrationsFS() fs.FS { return migrations.FS }

// downStore is a ClickHouse that never answers.
type downStore struct{}

var errRefused = errors.New("connection refused")

func (downStore) OpenInsert(context.Context, string, []string) (ingest.TableWriter, error) {
	return nil, errRefused
}
func (downStore) Ping(context.Context) error { return errRefused }
func (downStore) LatestSourceCheckpoint(context.Context, string) (ingest.Checkpoint, bool, error) {
	return ingest.Checkpoint{}, false, errRefused
}
func (downStore) FileCheckpointCandidates(context.Context, string, uint32, string) ([]ingest.Checkpoint, error) {
	return nil, errRefused
}
func (downStore) LegacySourceCheckpoints(context.Context, string, string) ([]ingest.LegacySource, error) {
	return nil, errRefused
}
func (downStore) SaveSourceCheckpoints(context.Context, []ingest.Checkpoint, time.Time, uint64) error {
	return errRefused
}
func (downStore) SaveFileCheckpoints(context.Context, []ingest.Checkpoint, time.Time, uint64) error {
	return errRefused
}
func (downStore) SaveNodeEndpoints(context.Context, []ingest.NodeEndpoints, time.Time) error {
	return errRefused
}
func (downStore) StepWatermark(context.Context, string) (uint64, error) { return 0, errRefused }
func (downStore) FileSpanSince(context.Context, uint64) (ingest.CorrelationSpan, uint64, error) {
	return ingest.CorrelationSpan{}, 0, errRefused
}
func (downStore) RecordStep(context.Context, string, ingest.CorrelationSpan, uint64, time.Time) error {
	return errRefused
}
func (downStore) StoredLineIDs(context.Context, []ingest.LineSpan) ([]uint64, error) {
	return nil, errRefused
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
